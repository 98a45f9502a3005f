//! Parsing the textual form back into a verified graph; an op that does not type-check is an
//! error at its line.

use super::lexer::{lex, split_top_level, symbolic_tensor_type, Tok, Token};
use super::MAX_NESTING;
use crate::dim::{self, Symbol};
use crate::{verify, Attr, Attrs, DType, Graph, IrError, OpKind, Tensor, TensorType, ValueId};
use std::collections::{BTreeMap, HashMap};

/// Parses one graph (and its resources section) and verifies it.
pub fn parse(src: &str) -> Result<Graph, IrError> {
    let mut p = Parser {
        tokens: lex(src)?,
        pos: 0,
        values: HashMap::new(),
        pending: Vec::new(),
        depth: 0,
        regions: Vec::new(),
        symbols: BTreeMap::new(),
    };
    let mut g = p.graph()?;
    let resources = p.resources()?;
    p.expect_end()?;
    for r in p.pending {
        let bytes = resources.get(&r.name).ok_or_else(|| IrError::Parse {
            line: r.line,
            column: r.column,
            message: format!("resource `{}` is not defined", r.name),
        })?;
        let tensor = Tensor::from_bytes(r.ty.clone(), bytes.clone()).ok_or_else(|| IrError::Parse {
            line: r.line,
            column: r.column,
            message: format!(
                "resource `{}` has {} bytes, {} needs {}",
                r.name,
                bytes.len(),
                r.ty,
                r.ty.num_bytes()
            ),
        })?;
        let mut graph = &mut g;
        for (op, attr) in &r.path {
            match graph.ops[*op].attrs.0.get_mut(attr) {
                Some(Attr::Graph(region)) => graph = std::sync::Arc::make_mut(region),
                _ => unreachable!("a pending resource's path names the regions it was parsed in"),
            }
        }
        graph.ops[r.op].attrs.set(&r.attr, Attr::Tensor(tensor));
    }
    verify(&g)?;
    Ok(g)
}

/// A `dense_resource<name>` whose bytes come from the resources section.
struct PendingResource {
    /// The regions around the op, outermost first: (op index, attribute name) in each graph.
    path: Vec<(usize, String)>,
    op: usize,
    attr: String,
    name: String,
    ty: TensorType,
    line: usize,
    column: usize,
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    values: HashMap<String, ValueId>,
    pending: Vec<PendingResource>,
    /// How many graphs are open (the top graph and the bodies around the current op).
    depth: usize,
    /// The regions being parsed, outermost first: (op index, attribute name).
    regions: Vec<(usize, String)>,
    /// The symbols the outermost graph declares (`symbols<..>`), by name.
    symbols: BTreeMap<String, Symbol>,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    fn next(&mut self) -> Tok {
        let t = self.tokens[self.pos].tok.clone();
        if t != Tok::End {
            self.pos += 1;
        }
        t
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, IrError> {
        let t = &self.tokens[self.pos];
        Err(IrError::Parse {
            line: t.line,
            column: t.column,
            message: message.into(),
        })
    }

    fn found(&self) -> String {
        match self.peek() {
            Tok::End => "the end of the text".into(),
            Tok::Value(v) => format!("`%{v}`"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Type(t) => format!("`{t}`"),
            Tok::SymType(t) => format!("`tensor<{t}>`"),
            Tok::Angled(k, t) => format!("`{k}<{t}>`"),
            Tok::Int(i) => format!("`{i}`"),
            Tok::Float(f) => format!("`{f:?}`"),
            Tok::Punct(c) => format!("`{c}`"),
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), IrError> {
        if self.eat(c) {
            Ok(())
        } else {
            self.error(format!("expected `{c}`, found {}", self.found()))
        }
    }

    fn keyword(&mut self, word: &str) -> Result<(), IrError> {
        match self.peek() {
            Tok::Ident(w) if w == word => {
                self.pos += 1;
                Ok(())
            }
            _ => self.error(format!("expected `{word}`, found {}", self.found())),
        }
    }

    fn string(&mut self) -> Result<String, IrError> {
        match self.next() {
            Tok::Str(s) => Ok(s),
            _ => {
                self.pos -= 1;
                self.error(format!("expected a string, found {}", self.found()))
            }
        }
    }

    fn ty(&mut self) -> Result<TensorType, IrError> {
        match self.peek().clone() {
            Tok::Type(t) => {
                self.pos += 1;
                Ok(t)
            }
            Tok::SymType(inner) => {
                let t = symbolic_tensor_type(&inner, &self.symbols).or_else(|m| self.error(m))?;
                self.pos += 1;
                Ok(t)
            }
            _ => self.error(format!("expected a tensor type, found {}", self.found())),
        }
    }

    /// A constant's type: fixed sizes (a tensor's values are there at compile time).
    fn constant_type(&mut self) -> Result<TensorType, IrError> {
        let at = self.pos;
        let ty = self.ty()?;
        if ty.is_symbolic() {
            self.pos = at;
            return self.error(format!("a constant of {ty}: constants have fixed sizes"));
        }
        Ok(ty)
    }

    fn value_name(&mut self) -> Result<String, IrError> {
        match self.peek().clone() {
            Tok::Value(v) => {
                self.pos += 1;
                Ok(v)
            }
            _ => self.error(format!("expected a value like `%0`, found {}", self.found())),
        }
    }

    fn use_value(&mut self) -> Result<ValueId, IrError> {
        let name = self.value_name()?;
        match self.values.get(&name) {
            Some(v) => Ok(*v),
            None => {
                self.pos -= 1;
                self.error(format!("value `%{name}` is used before it is defined"))
            }
        }
    }

    fn define(&mut self, name: String, v: ValueId) -> Result<(), IrError> {
        if self.values.insert(name.clone(), v).is_some() {
            return self.error(format!("value `%{name}` is defined twice"));
        }
        Ok(())
    }

    /// A graph, one level deeper than the one around it (see [`MAX_NESTING`]).
    fn graph(&mut self) -> Result<Graph, IrError> {
        if self.depth >= MAX_NESTING {
            let t = &self.tokens[self.pos];
            return Err(IrError::TooDeep {
                line: t.line,
                column: t.column,
                limit: MAX_NESTING,
            });
        }
        self.depth += 1;
        let g = self.graph_here();
        self.depth -= 1;
        g
    }

    fn graph_here(&mut self) -> Result<Graph, IrError> {
        self.keyword("graph")?;
        let mut g = Graph::new(&self.string()?);
        if let Tok::Angled("symbols", inner) = self.peek().clone() {
            if self.depth > 1 {
                return self.error("symbols are declared by the outermost graph");
            }
            self.symbols = self.declared_symbols(&inner)?;
            self.pos += 1;
        }
        self.expect('(')?;
        while !self.eat(')') {
            if !g.inputs.is_empty() {
                self.expect(',')?;
            }
            let name = self.value_name()?;
            self.expect(':')?;
            let ty = self.ty()?;
            let port = self.string()?;
            let v = g.add_input(&port, ty);
            self.define(name, v)?;
        }
        self.expect('{')?;
        loop {
            if let Tok::Ident(w) = self.peek() {
                if w == "return" {
                    self.pos += 1;
                    break;
                }
            }
            self.op(&mut g)?;
        }
        while let Tok::Str(_) = self.peek() {
            let name = self.string()?;
            self.expect('=')?;
            let v = self.use_value()?;
            g.add_output(&name, v);
            if !self.eat(',') {
                break;
            }
        }
        self.expect('}')?;
        Ok(g)
    }

    fn op(&mut self, g: &mut Graph) -> Result<(), IrError> {
        let start = self.pos;
        let mut names = vec![self.value_name()?];
        while self.eat(',') {
            names.push(self.value_name()?);
        }
        self.expect('=')?;
        let kind = match self.next() {
            Tok::Ident(w) => match w.strip_prefix("mx.").and_then(OpKind::from_name) {
                Some(k) => k,
                None => {
                    self.pos -= 1;
                    return self.error(format!("unknown op `{w}`"));
                }
            },
            _ => {
                self.pos -= 1;
                return self.error(format!("expected an op name like `mx.add`, found {}", self.found()));
            }
        };
        let mut operands = Vec::new();
        if let Tok::Value(_) = self.peek() {
            operands.push(self.use_value()?);
            while self.eat(',') {
                operands.push(self.use_value()?);
            }
        }
        let attrs = if self.eat('{') {
            self.attrs(g.ops.len())?
        } else {
            Attrs::new()
        };
        self.expect(':')?;
        let mut types = vec![self.ty()?];
        while self.eat(',') {
            types.push(self.ty()?);
        }
        if types.len() != names.len() {
            return self.error(format!(
                "{} results are named but {} types are given",
                names.len(),
                types.len()
            ));
        }
        let body = match kind {
            OpKind::Fused | OpKind::Call => Some(std::sync::Arc::new(self.body()?)),
            _ => None,
        };
        let results = g.push_op(kind, operands, attrs, types);
        g.ops.last_mut().expect("just pushed").body = body;
        if let Err(message) = crate::verify::check_types(g, g.ops.last().expect("just pushed")) {
            self.pos = start;
            return self.error(format!("{kind}: {message}"));
        }
        for (name, v) in names.into_iter().zip(results) {
            self.define(name, v)?;
        }
        Ok(())
    }

    /// The body of an `mx.fused` op: a graph with its own value names, verified here so that
    /// an error names the body's op.
    fn body(&mut self) -> Result<Graph, IrError> {
        let outer = std::mem::take(&mut self.values);
        let pending = self.pending.len();
        let body = self.graph();
        self.values = outer;
        let body = body?;
        if self.pending.len() > pending {
            return self.error("a fused body holds only one-element constants, written inline");
        }
        verify(&body)?;
        Ok(body)
    }

    /// The symbols of `symbols<s[1..512]{128}, b[1..8]>`, each a name with its constraints.
    fn declared_symbols(&self, inner: &str) -> Result<BTreeMap<String, Symbol>, IrError> {
        let mut symbols = BTreeMap::new();
        for item in split_top_level(inner, ',') {
            let d = dim::parse(item.trim()).or_else(|e| self.error(format!("in symbols<{inner}>: {e}")))?;
            let Some(symbol) = d.as_symbol() else {
                return self.error(format!("in symbols<{inner}>: `{}` is not a symbol", item.trim()));
            };
            if symbols.insert(symbol.name.clone(), symbol.clone()).is_some() {
                return self.error(format!("symbol `{}` is declared twice", symbol.name));
            }
        }
        Ok(symbols)
    }

    /// The attribute dictionary after its `{`.
    fn attrs(&mut self, op: usize) -> Result<Attrs, IrError> {
        let mut attrs = Attrs::new();
        while !self.eat('}') {
            if !attrs.0.is_empty() {
                self.expect(',')?;
            }
            let name = match self.next() {
                Tok::Ident(w) => w,
                _ => {
                    self.pos -= 1;
                    return self.error(format!("expected an attribute name, found {}", self.found()));
                }
            };
            self.expect('=')?;
            let value = self.attr(op, &name)?;
            if attrs.get(&name).is_some() {
                return self.error(format!("attribute `{name}` is given twice"));
            }
            attrs.set(&name, value);
        }
        Ok(attrs)
    }

    fn attr(&mut self, op: usize, attr_name: &str) -> Result<Attr, IrError> {
        let (line, column) = (self.tokens[self.pos].line, self.tokens[self.pos].column);
        match self.next() {
            Tok::Int(i) => Ok(Attr::Int(self.int(i)?)),
            Tok::Float(f) => Ok(Attr::Float(f)),
            Tok::Str(s) => Ok(Attr::Str(s)),
            Tok::Angled("sizes", inner) if inner.trim().is_empty() => Ok(Attr::Sizes(Vec::new())),
            Tok::Angled("sizes", inner) => {
                let sizes = symbolic_tensor_type(&format!("{inner}xi64"), &self.symbols)
                    .map(|t| t.dims())
                    .or_else(|m| self.error(m))?;
                Ok(Attr::Sizes(sizes))
            }
            Tok::Punct('[') => {
                let items = self.numbers(']')?;
                if items.iter().any(|t| matches!(t, Tok::Float(_))) {
                    Ok(Attr::Floats(items.iter().map(as_f64).collect()))
                } else {
                    Ok(Attr::Ints(
                        items
                            .iter()
                            .map(|t| if let Tok::Int(i) = t { *i as i64 } else { 0 })
                            .collect(),
                    ))
                }
            }
            Tok::Ident(w) if w == "dense" => {
                self.expect('<')?;
                self.expect('[')?;
                let strings = matches!(self.peek(), Tok::Str(_));
                let (items, texts) = match strings {
                    true => (Vec::new(), self.strings(']')?),
                    false => (self.numbers(']')?, Vec::new()),
                };
                self.expect('>')?;
                self.expect(':')?;
                let ty = self.constant_type()?;
                let given = items.len() + texts.len();
                if given != ty.num_elements() {
                    return self.error(format!("{given} values given for {ty}"));
                }
                match (strings, ty.dtype == DType::Str) {
                    (true, true) => Ok(Attr::Tensor(Tensor::from_strings(ty.shape, texts))),
                    (false, false) => Ok(Attr::Tensor(dense(&ty, &items))),
                    _ if given == 0 && ty.dtype == DType::Str => {
                        Ok(Attr::Tensor(Tensor::from_strings(ty.shape, texts)))
                    }
                    (true, false) => self.error(format!("strings given for {ty}")),
                    (false, true) => self.error(format!("numbers given for {ty}")),
                }
            }
            Tok::Ident(w) if w == "dense_resource" => {
                self.expect('<')?;
                let name = match self.next() {
                    Tok::Ident(n) => n,
                    _ => return self.error("expected a resource name"),
                };
                self.expect('>')?;
                self.expect(':')?;
                let ty = self.constant_type()?;
                self.pending.push(PendingResource {
                    path: self.regions.clone(),
                    op,
                    attr: attr_name.to_string(),
                    name,
                    ty: ty.clone(),
                    line,
                    column,
                });
                Ok(Attr::Tensor(Tensor::zeros(ty)))
            }
            Tok::Ident(w) if w == "graph" => {
                self.pos -= 1;
                self.regions.push((op, attr_name.to_string()));
                let outer = std::mem::take(&mut self.values);
                let region = self.graph();
                self.values = outer;
                self.regions.pop();
                Ok(Attr::Graph(std::sync::Arc::new(region?)))
            }
            Tok::Ident(w) => match DType::from_name(&w) {
                Some(d) => Ok(Attr::DType(d)),
                None => {
                    self.pos -= 1;
                    self.error(format!("`{w}` is not an attribute value"))
                }
            },
            _ => {
                self.pos -= 1;
                self.error(format!("expected an attribute value, found {}", self.found()))
            }
        }
    }

    fn int(&self, i: i128) -> Result<i64, IrError> {
        i64::try_from(i).or_else(|_| self.error(format!("{i} does not fit in 64 bits")))
    }

    /// Comma-separated numbers up to `close`.
    fn numbers(&mut self, close: char) -> Result<Vec<Tok>, IrError> {
        let mut items = Vec::new();
        while !self.eat(close) {
            if !items.is_empty() {
                self.expect(',')?;
            }
            match self.next() {
                t @ (Tok::Int(_) | Tok::Float(_)) => items.push(t),
                _ => {
                    self.pos -= 1;
                    return self.error(format!("expected a number, found {}", self.found()));
                }
            }
        }
        Ok(items)
    }

    /// Quoted strings separated by commas, up to `close`.
    fn strings(&mut self, close: char) -> Result<Vec<String>, IrError> {
        let mut items = Vec::new();
        while !self.eat(close) {
            if !items.is_empty() {
                self.expect(',')?;
            }
            match self.next() {
                Tok::Str(s) => items.push(s),
                _ => {
                    self.pos -= 1;
                    return self.error(format!("expected a string, found {}", self.found()));
                }
            }
        }
        Ok(items)
    }

    fn resources(&mut self) -> Result<HashMap<String, Vec<u8>>, IrError> {
        let mut out = HashMap::new();
        if !matches!(self.peek(), Tok::Ident(w) if w == "resources") {
            return Ok(out);
        }
        self.pos += 1;
        self.expect('{')?;
        while !self.eat('}') {
            let name = match self.next() {
                Tok::Ident(n) => n,
                _ => {
                    self.pos -= 1;
                    return self.error(format!("expected a resource name, found {}", self.found()));
                }
            };
            self.expect('=')?;
            let hex = self.string()?;
            let bytes = hex.strip_prefix("0x").and_then(decode_hex);
            match bytes {
                Some(b) => out.insert(name, b),
                None => return self.error(format!("resource `{name}` is not `0x` followed by hex bytes")),
            };
        }
        Ok(out)
    }

    fn expect_end(&self) -> Result<(), IrError> {
        if *self.peek() == Tok::End {
            Ok(())
        } else {
            self.error(format!("expected the end of the text, found {}", self.found()))
        }
    }
}

fn as_f64(t: &Tok) -> f64 {
    match t {
        Tok::Int(i) => *i as f64,
        Tok::Float(f) => *f,
        _ => unreachable!("numbers() yields only numbers"),
    }
}

fn dense(ty: &TensorType, items: &[Tok]) -> Tensor {
    let shape = ty.shape.clone();
    if ty.dtype.is_float() {
        Tensor::from_f64s(ty.dtype, shape, &items.iter().map(as_f64).collect::<Vec<_>>())
    } else {
        let ints: Vec<i64> = items
            .iter()
            .map(|t| {
                if let Tok::Int(i) = t {
                    *i as i64
                } else {
                    as_f64(t) as i64
                }
            })
            .collect();
        Tensor::from_i64s(ty.dtype, shape, &ints)
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
