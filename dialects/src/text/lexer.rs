//! Tokens of the textual form, each with the line and column it starts at.

use crate::dim::{self, Dim, Symbol};
use crate::{DType, IrError, TensorType};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Value(String),
    Str(String),
    Ident(String),
    Type(TensorType),
    /// A tensor type with symbolic dimensions, as written inside `tensor<..>`: the parser reads
    /// it against the graph's declared symbols.
    SymType(String),
    /// `sizes<..>` (symbolic sizes of an attribute) or `symbols<..>` (a graph's declared
    /// symbols): the keyword and the text inside the brackets.
    Angled(&'static str, String),
    Int(i128),
    Float(f64),
    Punct(char),
    End,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
    pub column: usize,
}

pub fn lex(src: &str) -> Result<Vec<Token>, IrError> {
    let chars: Vec<char> = src.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line, mut col) = (0, 1, 1);
    let err = |line, column, message: String| IrError::Parse { line, column, message };
    while i < chars.len() {
        let c = chars[i];
        let (start_line, start_col) = (line, col);
        let start = i;
        let advance_to = |j: usize, line: &mut usize, col: &mut usize| {
            for &ch in &chars[start..j] {
                if ch == '\n' {
                    *line += 1;
                    *col = 1;
                } else {
                    *col += 1;
                }
            }
        };
        let word_end = |from: usize| {
            let mut j = from;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_' || chars[j] == '.') {
                j += 1;
            }
            j
        };
        let (tok, end) = if c.is_whitespace() {
            (None, i + 1)
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            let mut j = i;
            while j < chars.len() && chars[j] != '\n' {
                j += 1;
            }
            (None, j)
        } else if c == '%' {
            let j = word_end(i + 1);
            if j == i + 1 {
                return Err(err(line, col, "expected a value name after `%`".into()));
            }
            (Some(Tok::Value(chars[i + 1..j].iter().collect())), j)
        } else if c == '"' {
            let (s, j) = string(&chars, i).map_err(|m| err(line, col, m))?;
            (Some(Tok::Str(s)), j)
        } else if c.is_ascii_digit()
            || ((c == '-' || c == '+') && chars.get(i + 1).is_some_and(|d| d.is_ascii_alphanumeric()))
        {
            let j = word_end(i + 1);
            let mut j = j;
            // exponent sign: 1e-12
            while j < chars.len()
                && (chars[j] == '-' || chars[j] == '+')
                && matches!(chars[j - 1], 'e' | 'E')
                && chars[i..j].iter().any(|c| c.is_ascii_digit())
            {
                j = word_end(j + 1);
            }
            let text: String = chars[i..j].iter().collect();
            (
                Some(number(&text).ok_or_else(|| err(line, col, format!("`{text}` is not a number")))?),
                j,
            )
        } else if c.is_ascii_alphabetic() || c == '_' {
            let j = word_end(i);
            let word: String = chars[i..j].iter().collect();
            let angled = ["tensor", "sizes", "symbols"].into_iter().find(|&k| k == word);
            if let (Some(keyword), Some('<')) = (angled, chars.get(j)) {
                let close = chars[j..]
                    .iter()
                    .position(|&c| c == '>')
                    .map(|p| p + j)
                    .ok_or_else(|| err(line, col, format!("unclosed `{keyword}<`")))?;
                let inner: String = chars[j + 1..close].iter().collect();
                let tok = match keyword {
                    "tensor" if inner.contains('(') => Tok::SymType(inner),
                    "tensor" => Tok::Type(tensor_type(&inner).map_err(|m| err(line, col, m))?),
                    _ => Tok::Angled(keyword, inner),
                };
                (Some(tok), close + 1)
            } else if word == "inf" || word == "NaN" {
                (Some(number(&word).expect("inf and NaN parse")), j)
            } else {
                (Some(Tok::Ident(word)), j)
            }
        } else if "(){}[]<>,:=".contains(c) {
            (Some(Tok::Punct(c)), i + 1)
        } else {
            return Err(err(line, col, format!("unexpected character `{c}`")));
        };
        advance_to(end, &mut line, &mut col);
        if let Some(tok) = tok {
            tokens.push(Token {
                tok,
                line: start_line,
                column: start_col,
            });
        }
        i = end;
    }
    tokens.push(Token {
        tok: Tok::End,
        line,
        column: col,
    });
    Ok(tokens)
}

fn number(text: &str) -> Option<Tok> {
    let is_float = text.contains(['.', 'e', 'E']) || text.ends_with("inf") || text.ends_with("NaN");
    if is_float && !text.starts_with("0x") {
        text.parse::<f64>().ok().map(Tok::Float)
    } else {
        text.parse::<i128>().ok().map(Tok::Int)
    }
}

fn string(chars: &[char], open: usize) -> Result<(String, usize), String> {
    let mut s = String::new();
    let mut j = open + 1;
    loop {
        match chars.get(j) {
            None | Some('\n') => return Err("unterminated string".into()),
            Some('"') => return Ok((s, j + 1)),
            Some('\\') => {
                match chars.get(j + 1) {
                    Some('"') => s.push('"'),
                    Some('\\') => s.push('\\'),
                    Some('u') if chars.get(j + 2) == Some(&'{') => {
                        let close = chars[j..].iter().position(|&c| c == '}').ok_or("unclosed `\\u{`")? + j;
                        let hex: String = chars[j + 3..close].iter().collect();
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or("bad `\\u{..}` escape")?;
                        s.push(c);
                        j = close - 1;
                    }
                    _ => return Err("unknown escape in string".into()),
                }
                j += 2;
            }
            Some(&c) => {
                s.push(c);
                j += 1;
            }
        }
    }
}

/// `1x(s)x768xf32`: a tensor type whose symbolic dimensions (in parentheses, bare names) are
/// over the symbols `declared`.
pub fn symbolic_tensor_type(inner: &str, declared: &BTreeMap<String, Symbol>) -> Result<TensorType, String> {
    let mut parts = split_top_level(inner, 'x');
    let dtype = parts.pop().expect("split yields one part");
    let dtype = DType::from_name(dtype).ok_or_else(|| format!("unknown element type `{dtype}` in tensor<{inner}>"))?;
    let dims = parts
        .iter()
        .map(|d| match d.strip_prefix('(').and_then(|d| d.strip_suffix(')')) {
            Some(expr) => dim::parse_declared(expr, declared).map_err(|e| format!("in tensor<{inner}>: {e}")),
            None => d
                .parse::<u64>()
                .map(Dim::constant)
                .map_err(|_| format!("bad dimension `{d}` in tensor<{inner}>")),
        })
        .collect::<Result<Vec<Dim>, _>>()?;
    let t = TensorType::of_dims(dtype, dims);
    t.check_size().map_err(|e| format!("tensor<{inner}>: {e}"))?;
    Ok(t)
}

/// `text` split at each `sep` outside parentheses, brackets and braces.
pub fn split_top_level(text: &str, sep: char) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `1x3x224x224xf32` (or just `f32` for a scalar).
fn tensor_type(inner: &str) -> Result<TensorType, String> {
    let parts: Vec<&str> = inner.split('x').collect();
    let (dtype, dims) = parts.split_last().expect("split yields one part");
    let dtype = DType::from_name(dtype).ok_or_else(|| format!("unknown element type `{dtype}` in tensor<{inner}>"))?;
    let shape = dims
        .iter()
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| format!("bad dimension `{d}` in tensor<{inner}>"))
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let fits = shape
        .iter()
        .try_fold(dtype.size(), |bytes, &d| bytes.checked_mul(d))
        .is_some_and(|b| b <= isize::MAX as usize);
    if !fits {
        return Err(format!("tensor<{inner}> is too large"));
    }
    Ok(TensorType::new(dtype, shape))
}
