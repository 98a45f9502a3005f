//! The parser of rule files:
//!
//! ```text
//! file  := rule*
//! rule  := "rule" NAME ":" pat "=>" pat ("if" expr)?
//! pat   := ?VAR | "(" OP (pat | ATTR "=" expr)* ")" | "(" "result" INT pat ")"
//!        | FUNC "(" (expr ("," expr)*)? ")"
//! expr  := and ("||" and)*          and := unary ("&&" unary)*
//! unary := "!" unary | atom (CMP atom)?
//! atom  := INT | FLOAT | STRING | "[" (lit ("," lit)*)? "]" | DTYPE | true | false
//!        | ?VAR | root | FUNC "(" (expr ("," expr)*)? ")" | "(" expr ")"
//! ```
//!
//! Nesting is limited to [`MAX_NESTING`] levels, so that neither the parser nor any later walk
//! of the tree can exhaust the stack, whatever the input.

use super::ast::{BinOp, Expr, Lit, OpPat, Pat, RuleDef};
use super::error::{Located, Pos};
use super::lexer::{lex, Tok};
use mxc_dialects::{DType, OpKind};

/// How deeply rule text may nest. One level is opened by each pattern `(op ...)`, each
/// parenthesised expression, each function call's `(...)`, each `!`, each comparison's right
/// side and each `&&` or `||` of a chain, and lasts until that construct ends. Text nesting
/// deeper is refused while it is parsed ([`RuleError::TooDeep`](super::RuleError::TooDeep)).
///
/// The parser recurses a few frames per level, and the syntax tree it builds is at most a few
/// times deeper than the levels counted (a level's first operand can add a call, a
/// comparison, a `&&` and a `||` above it; chains are built nested to the right, so a long
/// chain is as deep as its levels). Every later recursive walk (checker, compiler,
/// evaluation, `rules check`, dropping the tree) therefore needs a stack bounded by this
/// limit; the tests run the worst shapes at the limit on a small stack.
pub const MAX_NESTING: usize = 256;

/// Parses the rules of `text` (syntax only; `check` validates them).
pub fn parse_file(text: &str) -> Result<Vec<RuleDef>, Located> {
    let mut p = Parser {
        toks: lex(text)?,
        at: 0,
        end: end_pos(text),
        depth: 0,
    };
    let mut rules = Vec::new();
    while p.peek().is_some() {
        rules.push(p.rule()?);
    }
    Ok(rules)
}

/// Parses one pattern (tests write their input and expected expressions in rule syntax).
#[cfg(test)]
pub fn parse_pattern(text: &str) -> Result<Pat, Located> {
    let mut p = Parser {
        toks: lex(text)?,
        at: 0,
        end: end_pos(text),
        depth: 0,
    };
    let pat = p.pat()?;
    match p.peek() {
        None => Ok(pat),
        Some(t) => Err(Located::new(
            p.pos(),
            format!("unexpected {} after the pattern", t.describe()),
        )),
    }
}

fn end_pos(text: &str) -> Pos {
    let line = text.lines().count().max(1);
    let column = text.lines().last().map_or(0, |l| l.chars().count()) + 1;
    Pos { line, column }
}

struct Parser {
    toks: Vec<(Tok, Pos)>,
    at: usize,
    end: Pos,
    /// The levels now open (see [`MAX_NESTING`]).
    depth: usize,
}

impl Parser {
    /// Opens one level of nesting at `pos`, refused past [`MAX_NESTING`].
    fn enter(&mut self, pos: Pos) -> Result<(), Located> {
        if self.depth >= MAX_NESTING {
            return Err(Located::too_deep(pos, MAX_NESTING));
        }
        self.depth += 1;
        Ok(())
    }

    /// Runs `f` one level deeper, opened at `pos`.
    fn nested<T>(&mut self, pos: Pos, f: impl FnOnce(&mut Parser) -> Result<T, Located>) -> Result<T, Located> {
        self.enter(pos)?;
        let out = f(self);
        self.depth -= 1;
        out
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn peek2(&self) -> Option<&Tok> {
        self.toks.get(self.at + 1).map(|(t, _)| t)
    }

    fn pos(&self) -> Pos {
        self.toks.get(self.at).map_or(self.end, |(_, p)| *p)
    }

    fn next(&mut self) -> Option<(Tok, Pos)> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn unexpected(&self, wanted: &str) -> Located {
        let found = self.peek().map_or("the end of the file".to_string(), Tok::describe);
        Located::new(self.pos(), format!("expected {wanted}, found {found}"))
    }

    fn expect(&mut self, tok: Tok) -> Result<Pos, Located> {
        if self.peek() == Some(&tok) {
            Ok(self.next().expect("peeked").1)
        } else {
            Err(self.unexpected(&tok.describe()))
        }
    }

    fn ident(&mut self, wanted: &str) -> Result<(String, Pos), Located> {
        match self.peek() {
            Some(Tok::Ident(_)) => match self.next() {
                Some((Tok::Ident(s), pos)) => Ok((s, pos)),
                _ => unreachable!("peeked an identifier"),
            },
            _ => Err(self.unexpected(wanted)),
        }
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s == word)
    }

    fn rule(&mut self) -> Result<RuleDef, Located> {
        if !self.keyword("rule") {
            return Err(self.unexpected("`rule`"));
        }
        self.next();
        let (name, pos) = self.ident("a rule name")?;
        self.expect(Tok::Colon)?;
        let lhs = self.pat()?;
        self.expect(Tok::Arrow)?;
        let rhs = self.pat()?;
        let cond = if self.keyword("if") {
            self.next();
            Some(self.expr()?)
        } else {
            None
        };
        if self.peek().is_some() && !self.keyword("rule") {
            let wanted = if cond.is_some() {
                "`&&`, `||` or the next `rule`"
            } else {
                "`if` or the next `rule`"
            };
            return Err(self.unexpected(wanted));
        }
        Ok(RuleDef {
            name,
            pos,
            lhs,
            rhs,
            cond,
        })
    }

    fn pat(&mut self) -> Result<Pat, Located> {
        if let (Some(Tok::Ident(_)), Some(Tok::LParen)) = (self.peek(), self.peek2()) {
            return Ok(Pat::Const(self.atom()?));
        }
        match self.next() {
            Some((Tok::Var(v), pos)) => Ok(Pat::Var(v, pos)),
            Some((Tok::LParen, open)) => self.nested(open, Parser::op_pat),
            _ => {
                self.at -= 1;
                Err(self.unexpected("a pattern (`?var` or `(op ...)`)"))
            }
        }
    }

    /// The rest of `(op ...)` or `(result N ...)`, after `(`.
    fn op_pat(&mut self) -> Result<Pat, Located> {
        let (name, pos) = self.ident("an op name")?;
        if name == "result" {
            return self.result(pos);
        }
        let kind = OpKind::from_name(&name).ok_or_else(|| Located::new(pos, format!("unknown op `{name}`")))?;
        let mut op = OpPat {
            kind,
            pos,
            operands: Vec::new(),
            attrs: Vec::new(),
        };
        loop {
            match (self.peek(), self.peek2()) {
                (Some(Tok::RParen), _) => {
                    self.next();
                    return Ok(Pat::Op(op));
                }
                (Some(Tok::Ident(_)), Some(Tok::Assign)) => {
                    let (attr, apos) = self.ident("an attribute name")?;
                    self.next();
                    op.attrs.push((attr, apos, self.expr()?));
                }
                (Some(Tok::Var(_) | Tok::LParen), _) | (Some(Tok::Ident(_)), Some(Tok::LParen)) => {
                    op.operands.push(self.pat()?)
                }
                _ => return Err(self.unexpected("an operand, `name=value` or `)`")),
            }
        }
    }

    /// The rest of `(result N pat)`, after `result`.
    fn result(&mut self, pos: Pos) -> Result<Pat, Located> {
        let n = match self.peek() {
            Some(Tok::Int(n)) => {
                let n = *n;
                let npos = self.pos();
                self.next();
                u32::try_from(n).map_err(|_| Located::new(npos, "a result number is 0 or more"))?
            }
            _ => return Err(self.unexpected("a result number")),
        };
        let inner = self.pat()?;
        self.expect(Tok::RParen)?;
        Ok(Pat::Result(n, Box::new(inner), pos))
    }

    fn expr(&mut self) -> Result<Expr, Located> {
        self.chain(Tok::Or, BinOp::Or, Parser::and)
    }

    fn and(&mut self) -> Result<Expr, Located> {
        self.chain(Tok::And, BinOp::And, Parser::unary)
    }

    /// `item (tok item)*`, nested to the right: `a && b && c` is `a && (b && c)`, the same
    /// value (`&&` and `||` are associative and still evaluated left to right). Each operator
    /// opens a level that lasts to the end of the chain, so the tree is no deeper than the
    /// levels counted.
    fn chain(&mut self, tok: Tok, op: BinOp, item: fn(&mut Parser) -> Result<Expr, Located>) -> Result<Expr, Located> {
        let mut items = vec![item(self)?];
        let mut ops = Vec::new();
        let open = self.depth;
        while self.peek() == Some(&tok) {
            let pos = self.next().expect("peeked").1;
            let next = self.enter(pos).and_then(|()| item(self));
            match next {
                Ok(e) => items.push(e),
                Err(e) => {
                    self.depth = open;
                    return Err(e);
                }
            }
            ops.push(pos);
        }
        self.depth = open;
        let mut rhs = items.pop().expect("a chain has an item");
        while let (Some(pos), Some(lhs)) = (ops.pop(), items.pop()) {
            rhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), pos);
        }
        Ok(rhs)
    }

    fn unary(&mut self) -> Result<Expr, Located> {
        if self.peek() == Some(&Tok::Not) {
            let pos = self.next().expect("peeked").1;
            let inner = self.nested(pos, Parser::unary)?;
            return Ok(Expr::Not(Box::new(inner), pos));
        }
        let lhs = self.atom()?;
        let op = match self.peek() {
            Some(Tok::Eq) => BinOp::Eq,
            Some(Tok::Ne) => BinOp::Ne,
            Some(Tok::Lt) => BinOp::Lt,
            Some(Tok::Le) => BinOp::Le,
            Some(Tok::Gt) => BinOp::Gt,
            Some(Tok::Ge) => BinOp::Ge,
            _ => return Ok(lhs),
        };
        let pos = self.next().expect("peeked").1;
        let rhs = self.nested(pos, Parser::atom)?;
        Ok(Expr::Bin(op, Box::new(lhs), Box::new(rhs), pos))
    }

    fn atom(&mut self) -> Result<Expr, Located> {
        let pos = self.pos();
        match self.next() {
            Some((Tok::Int(v), _)) => Ok(Expr::Lit(Lit::Int(v), pos)),
            Some((Tok::Float(v), _)) => Ok(Expr::Lit(Lit::Float(v), pos)),
            Some((Tok::Str(s), _)) => Ok(Expr::Lit(Lit::Str(s), pos)),
            Some((Tok::Var(v), _)) => Ok(Expr::Var(v, pos)),
            Some((Tok::LBracket, _)) => self.list(pos),
            Some((Tok::LParen, _)) => self.nested(pos, |p| {
                let e = p.expr()?;
                p.expect(Tok::RParen)?;
                Ok(e)
            }),
            Some((Tok::Ident(name), _)) => {
                if self.peek() == Some(&Tok::LParen) {
                    self.next();
                    let args = self.nested(pos, Parser::args)?;
                    return Ok(Expr::Call(name, args, pos));
                }
                match name.as_str() {
                    "root" => Ok(Expr::Root(pos)),
                    "true" => Ok(Expr::Lit(Lit::Bool(true), pos)),
                    "false" => Ok(Expr::Lit(Lit::Bool(false), pos)),
                    _ => match DType::from_name(&name) {
                        Some(d) => Ok(Expr::Lit(Lit::DType(d), pos)),
                        None => Err(Located::new(
                            pos,
                            format!("unknown name `{name}` (expected a value, `?var`, `root` or a function call)"),
                        )),
                    },
                }
            }
            _ => {
                self.at -= 1;
                Err(self.unexpected("a value"))
            }
        }
    }

    /// The arguments of a call up to its `)`, after its `(`.
    fn args(&mut self) -> Result<Vec<Expr>, Located> {
        let mut args = Vec::new();
        while self.peek() != Some(&Tok::RParen) {
            if !args.is_empty() {
                self.expect(Tok::Comma)?;
            }
            args.push(self.expr()?);
        }
        self.next();
        Ok(args)
    }

    /// `[1, 0]` or `[1.0, 2.5]` (integers in a list with a float become floats).
    fn list(&mut self, pos: Pos) -> Result<Expr, Located> {
        let mut items = Vec::new();
        while self.peek() != Some(&Tok::RBracket) {
            if !items.is_empty() {
                self.expect(Tok::Comma)?;
            }
            match self.next() {
                Some((Tok::Int(v), _)) => items.push(Lit::Int(v)),
                Some((Tok::Float(v), _)) => items.push(Lit::Float(v)),
                _ => {
                    self.at -= 1;
                    return Err(self.unexpected("a number or `]`"));
                }
            }
        }
        self.next();
        let lit = if items.iter().any(|l| matches!(l, Lit::Float(_))) {
            Lit::Floats(
                items
                    .iter()
                    .map(|l| match l {
                        Lit::Int(v) => *v as f64,
                        Lit::Float(v) => *v,
                        _ => unreachable!("lists hold numbers"),
                    })
                    .collect(),
            )
        } else {
            Lit::Ints(
                items
                    .iter()
                    .map(|l| match l {
                        Lit::Int(v) => *v,
                        _ => unreachable!("lists of integers"),
                    })
                    .collect(),
            )
        };
        Ok(Expr::Lit(lit, pos))
    }
}
