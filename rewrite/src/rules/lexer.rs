//! Splits rule text into tokens, each with its line and column. `#` starts a comment that
//! runs to the end of the line.

use super::error::{Located, Pos};

/// One token of the rule language.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A name: keyword, op, attribute, function, dtype or rule name (`mul-one`, `leaky_relu`).
    Ident(String),
    /// A pattern variable without its `?`.
    Var(String),
    Int(i64),
    Float(f64),
    /// A string in double quotes (no escapes), without its quotes.
    Str(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Colon,
    Arrow,
    Assign,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Not,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Var(s) => format!("`?{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v) => format!("`{v:?}`"),
            Tok::Str(s) => format!("`\"{s}\"`"),
            other => {
                let s = match other {
                    Tok::LParen => "(",
                    Tok::RParen => ")",
                    Tok::LBracket => "[",
                    Tok::RBracket => "]",
                    Tok::Comma => ",",
                    Tok::Colon => ":",
                    Tok::Arrow => "=>",
                    Tok::Assign => "=",
                    Tok::Eq => "==",
                    Tok::Ne => "!=",
                    Tok::Lt => "<",
                    Tok::Le => "<=",
                    Tok::Gt => ">",
                    Tok::Ge => ">=",
                    Tok::And => "&&",
                    Tok::Or => "||",
                    _ => "!",
                };
                format!("`{s}`")
            }
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

/// The tokens of `text` with their positions.
pub fn lex(text: &str) -> Result<Vec<(Tok, Pos)>, Located> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0, 1, 1);
    while i < chars.len() {
        let c = chars[i];
        let pos = Pos { line, column: col };
        let start = i;
        if c == '\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let next = chars.get(i + 1).copied();
        let tok = if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit())) {
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                // an exponent may carry a sign: 1e-5
                let exp_sign = matches!(chars[i], 'e' | 'E') && matches!(chars.get(i + 1), Some('-' | '+'));
                i += if exp_sign { 2 } else { 1 };
            }
            let s: String = chars[start..i].iter().collect();
            if let Ok(v) = s.parse::<i64>() {
                Tok::Int(v)
            } else if let Ok(v) = s.parse::<f64>() {
                Tok::Float(v)
            } else {
                return Err(Located::new(pos, format!("bad number `{s}`")));
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && is_name_char(chars[i]) {
                i += 1;
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                i += 1;
            }
            if chars.get(i) != Some(&'"') {
                return Err(Located::new(pos, "a string must end with `\"` on the same line"));
            }
            i += 1;
            Tok::Str(chars[start + 1..i - 1].iter().collect())
        } else if c == '?' {
            i += 1;
            while i < chars.len() && is_name_char(chars[i]) {
                i += 1;
            }
            if i == start + 1 {
                return Err(Located::new(pos, "`?` must be followed by a variable name"));
            }
            Tok::Var(chars[start + 1..i].iter().collect())
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let (tok, len) = match (two.as_str(), c) {
                ("=>", _) => (Tok::Arrow, 2),
                ("==", _) => (Tok::Eq, 2),
                ("!=", _) => (Tok::Ne, 2),
                ("<=", _) => (Tok::Le, 2),
                (">=", _) => (Tok::Ge, 2),
                ("&&", _) => (Tok::And, 2),
                ("||", _) => (Tok::Or, 2),
                (_, '(') => (Tok::LParen, 1),
                (_, ')') => (Tok::RParen, 1),
                (_, '[') => (Tok::LBracket, 1),
                (_, ']') => (Tok::RBracket, 1),
                (_, ',') => (Tok::Comma, 1),
                (_, ':') => (Tok::Colon, 1),
                (_, '=') => (Tok::Assign, 1),
                (_, '<') => (Tok::Lt, 1),
                (_, '>') => (Tok::Gt, 1),
                (_, '!') => (Tok::Not, 1),
                _ => return Err(Located::new(pos, format!("unexpected character `{c}`"))),
            };
            i += len;
            tok
        };
        col += i - start;
        out.push((tok, pos));
    }
    Ok(out)
}
