//! Reads a dimension in the notation `Dim` prints: sums and differences of products,
//! floor divisions by a constant (`/`), `min(a, b)`, `max(a, b)`, parentheses, numbers and
//! symbols, a symbol's constraints and optimals right after its name (`n[1..8][2..6]{2, 4}`;
//! a later bare `n` in the same expression is the same symbol). An error gives the column.

use super::{Dim, DimError, Symbol};
use std::collections::BTreeMap;

/// Parses `text` into a dimension, refusing one that can be negative in range.
pub fn parse(text: &str) -> Result<Dim, DimError> {
    parse_in(text, None)
}

/// Parses `text`, an expression over the symbols `declared` (by name) written bare: each name
/// takes the declared symbol's constraints, and a name not declared, or one given constraints
/// here, is refused (the mx text declares a graph's symbols once, its types use them bare).
pub fn parse_declared(text: &str, declared: &BTreeMap<String, Symbol>) -> Result<Dim, DimError> {
    parse_in(text, Some(declared))
}

fn parse_in(text: &str, declared: Option<&BTreeMap<String, Symbol>>) -> Result<Dim, DimError> {
    let mut p = Parser { text, at: 0, declared };
    let d = p.sum()?;
    p.skip_spaces();
    if p.at < text.len() {
        return Err(p.error("expected `+`, `-`, `*`, `/` or the end"));
    }
    let (lo, hi) = d.bounds();
    if lo < 0 {
        return Err(p.error_at(0, &format!("it ranges over [{lo}..{hi}]: a size cannot be negative")));
    }
    Ok(d)
}

struct Parser<'a> {
    text: &'a str,
    /// The byte offset of the next character.
    at: usize,
    /// The symbols a bare name stands for, where the text uses declared symbols.
    declared: Option<&'a BTreeMap<String, Symbol>>,
}

impl<'a> Parser<'a> {
    fn error(&self, message: &str) -> DimError {
        self.error_at(self.at, message)
    }

    fn error_at(&self, at: usize, message: &str) -> DimError {
        DimError::Parse {
            text: self.text.to_string(),
            column: at + 1,
            message: message.to_string(),
        }
    }

    fn skip_spaces(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    /// The next character after spaces, not taken.
    fn peek(&mut self) -> Option<char> {
        self.skip_spaces();
        self.text[self.at..].chars().next()
    }

    /// Takes `c` if it comes next.
    fn eat(&mut self, c: char) -> bool {
        let next = self.peek() == Some(c);
        if next {
            self.at += c.len_utf8();
        }
        next
    }

    fn expect(&mut self, c: char) -> Result<(), DimError> {
        match self.eat(c) {
            true => Ok(()),
            false => Err(self.error(&format!("expected `{c}`"))),
        }
    }

    /// What combining two parts said, at the part's column.
    fn at(&self, at: usize, r: Result<Dim, DimError>) -> Result<Dim, DimError> {
        r.map_err(|e| match e {
            DimError::Parse { .. } => e,
            other => self.error_at(at, &other.to_string()),
        })
    }

    fn sum(&mut self) -> Result<Dim, DimError> {
        let mut d = self.product()?;
        loop {
            let at = self.at;
            let sign = match self.peek() {
                Some('+') => 1,
                Some('-') => -1,
                _ => return Ok(d),
            };
            self.at += 1;
            let rhs = self.product()?;
            let r = d.combine(&rhs, |a, b| a.add(&b.scale(sign)?));
            d = self.at(at, r)?;
        }
    }

    fn product(&mut self) -> Result<Dim, DimError> {
        let mut d = self.factor()?;
        loop {
            let at = self.at;
            if self.eat('*') {
                let rhs = self.factor()?;
                d = self.at(at, d.mul(&rhs))?;
            } else if self.eat('/') {
                let rhs = self.factor()?;
                let k = rhs
                    .as_constant()
                    .ok_or_else(|| self.error_at(at, "only a number divides a size"))?;
                d = self.at(at, d.floor_div(k))?;
            } else {
                return Ok(d);
            }
        }
    }

    fn factor(&mut self) -> Result<Dim, DimError> {
        let at = self.at;
        match self.peek() {
            Some('(') => {
                self.at += 1;
                let d = self.sum()?;
                self.expect(')')?;
                Ok(d)
            }
            Some('-') => {
                self.at += 1;
                let d = self.factor()?;
                let expr = d
                    .expr
                    .scale(-1)
                    .ok_or_else(|| self.error_at(at, "the number overflows"))?;
                Ok(Dim {
                    expr,
                    symbols: d.symbols,
                })
            }
            Some(c) if c.is_ascii_digit() => Ok(Dim::constant(self.number()?)),
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let name = self.word();
                if matches!(name, "min" | "max") && self.eat('(') {
                    let a = self.sum()?;
                    self.expect(',')?;
                    let b = self.sum()?;
                    self.expect(')')?;
                    let r = if name == "min" { a.minimum(&b) } else { a.maximum(&b) };
                    return self.at(at, r);
                }
                self.symbol(name, at)
            }
            _ => Err(self.error("expected a number, a symbol, `(`, `min(` or `max(`")),
        }
    }

    /// A symbol named `name` (already read, at `at`) with the constraints and optimals after it.
    fn symbol(&mut self, name: &str, at: usize) -> Result<Dim, DimError> {
        if let Some(declared) = self.declared {
            if matches!(self.peek(), Some('[' | '{')) {
                return Err(self.error("a declared symbol takes its constraints where it is declared"));
            }
            let symbol = declared
                .get(name)
                .ok_or_else(|| self.error_at(at, &format!("symbol `{name}` is not declared")))?;
            return Ok(Dim::symbol(symbol.clone()));
        }
        let mut ranges = Vec::new();
        while self.eat('[') {
            let lo = self.number()?;
            if !self.text[self.at..].starts_with("..") {
                return Err(self.error("expected `..` between a range's ends"));
            }
            self.at += 2;
            let hi = self.number()?;
            self.expect(']')?;
            ranges.push((lo, hi));
        }
        let mut optimals = Vec::new();
        if self.eat('{') {
            loop {
                optimals.push(self.number()?);
                if !self.eat(',') {
                    break;
                }
            }
            self.expect('}')?;
        }
        let symbol = Symbol::new(name, ranges, optimals).map_err(|e| self.error_at(at, &e.to_string()))?;
        Ok(Dim::symbol(symbol))
    }

    fn word(&mut self) -> &'a str {
        let rest: &'a str = &self.text[self.at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.at += len;
        &rest[..len]
    }

    fn number(&mut self) -> Result<u64, DimError> {
        self.skip_spaces();
        let rest = &self.text[self.at..];
        let len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if len == 0 {
            return Err(self.error("expected a number"));
        }
        let n = rest[..len]
            .parse()
            .map_err(|_| self.error("a number too large for a size"))?;
        self.at += len;
        Ok(n)
    }
}
