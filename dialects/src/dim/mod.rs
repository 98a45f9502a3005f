//! Symbolic dimensions: a dimension that is a constant or an expression over named symbols,
//! each symbol with the ranges it must lie in and the sizes to optimise for, in the notation
//! MIGraphX prints and parses: `n[1..8]{2, 4}` (a symbol, a range, optimals), `n[1..20][2..10]{4}`
//! (two constraints: both hold), `n{2, 4}` (optimals only), `n[1..8] * 3 + 1`. An expression
//! is self-contained: the first use of each symbol in it carries the symbol's constraints.
//!
//! Expressions are kept in one canonical form (`poly.rs`: a sum of integer multiples of
//! products of atoms, an atom a symbol or a floor division, minimum or maximum that does not
//! simplify), so equal expressions compare equal and print alike. `bounds.rs` gives the range
//! an expression takes over its symbols' ranges and proves (or refuses, saying why) what an
//! op requires of a dimension; `infer.rs` gives ops' result dimensions (broadcasting, products,
//! windows, reshapes, concatenation, slices); `parse.rs` reads the notation. Names from ONNX
//! are made identifiers by `symbol_name` and `unnamed_axis`.

mod bounds;
pub mod infer;
mod inputs;
mod parse;
mod poly;
#[cfg(test)]
mod tests;

use poly::{Atom, Poly};
use std::collections::BTreeMap;
use std::fmt;

pub use inputs::{show, show_sizes, InputDims, Sizes, MAX_SPECIALISATIONS};
pub use parse::{parse, parse_declared};

/// Where a symbol without a range of its own may lie: `[1..DEFAULT_MAX]`.
pub const DEFAULT_MAX: u64 = 4096;

/// Errors of parsing, combining and checking dimensions: each says which expression and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DimError {
    #[error("`{text}`, column {column}: {message}")]
    Parse {
        text: String,
        column: usize,
        message: String,
    },
    #[error("symbol {name}: {message}")]
    Symbol { name: String, message: String },
    #[error("{0}")]
    Unproven(String),
    #[error("{0}")]
    Value(String),
}

/// A named size: the ranges it must lie in (all of them: an empty list is `[1..DEFAULT_MAX]`)
/// and the sizes worth specialising for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Symbol {
    pub name: String,
    /// Inclusive `(min, max)` constraints, in the order they were given.
    pub ranges: Vec<(u64, u64)>,
    /// Ascending, without repeats, each inside the ranges.
    pub optimals: Vec<u64>,
}

impl Symbol {
    /// A symbol with constraints `ranges` and `optimals`, checked: each range non-empty, the
    /// ranges overlapping, each optimal inside them.
    pub fn new(name: &str, ranges: Vec<(u64, u64)>, optimals: Vec<u64>) -> Result<Symbol, DimError> {
        let fail = |message: String| DimError::Symbol {
            name: name.to_string(),
            message,
        };
        if !is_identifier(name) {
            return Err(fail(
                "a symbol's name is a letter or `_` then letters, digits or `_`".into(),
            ));
        }
        if let Some((lo, hi)) = ranges.iter().find(|(lo, hi)| lo > hi) {
            return Err(fail(format!("the range [{lo}..{hi}] is empty")));
        }
        let mut symbol = Symbol {
            name: name.to_string(),
            ranges,
            optimals,
        };
        let (lo, hi) = symbol.bounds();
        if lo > hi {
            return Err(fail(format!("its ranges {} leave no size", symbol.constraints())));
        }
        symbol.optimals.sort_unstable();
        symbol.optimals.dedup();
        if let Some(o) = symbol.optimals.iter().find(|&&o| o < lo || o > hi) {
            return Err(fail(format!("the optimal size {o} is outside [{lo}..{hi}]")));
        }
        Ok(symbol)
    }

    /// The smallest and largest size every constraint allows.
    pub fn bounds(&self) -> (u64, u64) {
        match self.ranges.is_empty() {
            true => (1, DEFAULT_MAX),
            false => self
                .ranges
                .iter()
                .fold((0, u64::MAX), |(lo, hi), &(a, b)| (lo.max(a), hi.min(b))),
        }
    }

    /// The symbol as its constraints and optimals print after its name: `[1..8]{2, 4}`.
    fn constraints(&self) -> String {
        let mut out: String = self.ranges.iter().map(|(lo, hi)| format!("[{lo}..{hi}]")).collect();
        if !self.optimals.is_empty() {
            let optimals: Vec<String> = self.optimals.iter().map(u64::to_string).collect();
            out.push_str(&format!("{{{}}}", optimals.join(", ")));
        }
        out
    }

    /// The symbol that holds what both uses of a name say: every constraint of each, and the
    /// optimals of either that both allow.
    fn merged(&self, other: &Symbol) -> Result<Symbol, DimError> {
        let mut ranges = self.ranges.clone();
        ranges.extend(other.ranges.iter().filter(|r| !self.ranges.contains(r)));
        let mut optimals = self.optimals.clone();
        optimals.extend(&other.optimals);
        let probe = Symbol::new(&self.name, ranges.clone(), Vec::new())?;
        let (lo, hi) = probe.bounds();
        optimals.retain(|o| (lo..=hi).contains(o));
        Symbol::new(&self.name, ranges, optimals)
    }
}

/// What computes a dimension's expression (`Dim::build`): code that evaluates it at run time
/// from its symbols' values writes each operation as it is asked for.
pub trait Builder {
    type Value;
    fn constant(&mut self, c: i64) -> Self::Value;
    fn symbol(&mut self, name: &str) -> Self::Value;
    fn add(&mut self, a: &Self::Value, b: &Self::Value) -> Self::Value;
    fn mul(&mut self, a: &Self::Value, b: &Self::Value) -> Self::Value;
    /// `floor(a / k)` for `k > 1` (`a` may be negative inside a larger expression).
    fn floor_div(&mut self, a: &Self::Value, k: i64) -> Self::Value;
    /// The smaller (`least`) or the larger of the two.
    fn extremum(&mut self, a: &Self::Value, b: &Self::Value, least: bool) -> Self::Value;
}

/// A dimension: a canonical expression and the symbols it uses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dim {
    expr: Poly,
    symbols: BTreeMap<String, Symbol>,
}

impl Dim {
    /// A fixed size.
    /// A fixed size (one past `i64::MAX` is `i64::MAX`: no memory holds either).
    pub fn constant(n: u64) -> Dim {
        Dim {
            expr: Poly::constant(i64::try_from(n).unwrap_or(i64::MAX)),
            symbols: BTreeMap::new(),
        }
    }

    /// The symbol `symbol` as a dimension.
    pub fn symbol(symbol: Symbol) -> Dim {
        Dim {
            expr: Poly::atom(Atom::Sym(symbol.name.clone())),
            symbols: BTreeMap::from([(symbol.name.clone(), symbol)]),
        }
    }

    /// Its size, when it is fixed.
    pub fn as_constant(&self) -> Option<u64> {
        self.expr.as_constant().and_then(|c| u64::try_from(c).ok())
    }

    /// The symbol it is, when it is one symbol alone.
    pub fn as_symbol(&self) -> Option<&Symbol> {
        let (name, s) = self.symbols.first_key_value()?;
        (self.symbols.len() == 1 && self.expr == Poly::atom(Atom::Sym(name.clone()))).then_some(s)
    }

    /// The symbol it is a multiple of, and the multiple, when it is one symbol times a positive
    /// number (`h * 32`; `h` alone is `h * 1`).
    pub fn as_scaled_symbol(&self) -> Option<(&Symbol, u64)> {
        let (name, s) = self.symbols.first_key_value()?;
        let mut terms = self.expr.terms();
        let (monomial, k) = terms.next()?;
        let alone = terms.next().is_none() && self.symbols.len() == 1 && monomial == [Atom::Sym(name.clone())];
        (alone && k > 0).then_some((s, k as u64))
    }

    /// The same expression with each symbol's constraints as `symbols` has them.
    fn with_symbols(mut self, symbols: &BTreeMap<String, Symbol>) -> Dim {
        for (name, s) in self.symbols.iter_mut() {
            if let Some(known) = symbols.get(name) {
                s.clone_from(known);
            }
        }
        self
    }

    /// The expression with bare symbol names (`n * 3 + 1`): how the mx text writes a
    /// dimension of a graph that declares its symbols.
    pub fn expression(&self) -> String {
        self.expr.render(&mut |n: &str| n.to_string())
    }

    /// Its size where each symbol is at its cost point (`cost_point`); `u64::MAX` where it is
    /// no size there (too large for one: a type of it is refused as too large).
    pub fn at_cost_point(&self) -> u64 {
        self.eval(&self.cost_point()).unwrap_or(u64::MAX)
    }

    /// The expression as `b` builds it.
    pub fn build<B: Builder>(&self, b: &mut B) -> B::Value {
        self.expr.build(b)
    }

    /// The symbols it uses, by name.
    pub fn symbols(&self) -> impl Iterator<Item = &Symbol> {
        self.symbols.values()
    }

    /// `self` and `other` over the union of their symbols (a name both use: `Symbol::merged`).
    /// `f` of the two expressions over the union of their symbols; an arithmetic overflow
    /// (`f` gives `None`) is an error naming both.
    fn combine(&self, other: &Dim, f: impl FnOnce(&Poly, &Poly) -> Option<Poly>) -> Result<Dim, DimError> {
        let mut symbols = self.symbols.clone();
        for (name, s) in &other.symbols {
            let merged = match symbols.get(name) {
                Some(mine) => mine.merged(s)?,
                None => s.clone(),
            };
            symbols.insert(name.clone(), merged);
        }
        let expr = f(&self.expr, &other.expr)
            .ok_or_else(|| DimError::Value(format!("a size made of {self} and {other} overflows")))?;
        Ok(Dim { expr, symbols }.pruned())
    }

    /// The dimension with only the symbols its expression still uses (`n * m - m * n` uses none).
    fn pruned(mut self) -> Dim {
        let used = self.expr.symbol_names();
        self.symbols.retain(|name, _| used.contains(name));
        self
    }

    pub fn add(&self, other: &Dim) -> Result<Dim, DimError> {
        self.combine(other, Poly::add)
    }

    /// `self - other`, refused where it could be negative.
    pub fn sub(&self, other: &Dim) -> Result<Dim, DimError> {
        let d = self.combine(other, |a, b| a.add(&b.scale(-1)?))?;
        d.require_at_least(0, "a difference of sizes")?;
        Ok(d)
    }

    pub fn mul(&self, other: &Dim) -> Result<Dim, DimError> {
        self.combine(other, Poly::mul)
    }

    /// `floor(self / k)`.
    pub fn floor_div(&self, k: u64) -> Result<Dim, DimError> {
        let divisor = i64::try_from(k).ok().filter(|&k| k > 0);
        let expr = divisor
            .and_then(|k| self.expr.floor_div(k))
            .ok_or_else(|| DimError::Value(format!("{self} divided by {k}")))?;
        Ok(Dim {
            expr,
            symbols: self.symbols.clone(),
        }
        .pruned())
    }

    /// The smaller of the two.
    pub fn minimum(&self, other: &Dim) -> Result<Dim, DimError> {
        self.extremum(other, true)
    }

    /// The larger of the two.
    pub fn maximum(&self, other: &Dim) -> Result<Dim, DimError> {
        self.extremum(other, false)
    }

    /// The smaller (`least`) or the larger of the two: one of them where the ranges decide it.
    fn extremum(&self, other: &Dim, least: bool) -> Result<Dim, DimError> {
        let mut d = self.combine(other, |a, b| {
            let (a, b) = (Box::new(a.clone()), Box::new(b.clone()));
            Some(Poly::atom(if least { Atom::Min(a, b) } else { Atom::Max(a, b) }))
        })?;
        d.expr = d.simplified_extremum(self, other, least);
        Ok(d.pruned())
    }

    /// `min(a, b)` (or the maximum) as one of them where the ranges decide it, else as it is.
    fn simplified_extremum(&self, a: &Dim, b: &Dim, least: bool) -> Poly {
        let (a_lo, a_hi) = self.bounds_of(&a.expr);
        let (b_lo, b_hi) = self.bounds_of(&b.expr);
        match (least, a_hi <= b_lo, b_hi <= a_lo) {
            (true, true, _) | (false, _, true) => a.expr.clone(),
            (true, _, true) | (false, true, _) => b.expr.clone(),
            _ => self.expr.clone(),
        }
    }

    /// Its value where each symbol has the size `values` gives, each checked against its
    /// ranges: an error names the symbol, its range and the value.
    pub fn eval(&self, values: &BTreeMap<String, u64>) -> Result<u64, DimError> {
        for s in self.symbols.values() {
            let v = *values
                .get(&s.name)
                .ok_or_else(|| DimError::Value(format!("no size is given for {}", s.name)))?;
            let (lo, hi) = s.bounds();
            if v < lo || v > hi {
                return Err(DimError::Value(format!(
                    "{} is {v}, outside its range [{lo}..{hi}]",
                    s.name
                )));
            }
        }
        let v = self.expr.eval(&|name| i64::try_from(values[name]).unwrap_or(i64::MAX));
        u64::try_from(v).map_err(|_| DimError::Value(format!("{self} is {v} there")))
    }
}

impl fmt::Display for Dim {
    /// The expression with each symbol's constraints at its first use: `n[1..8] * 3 + 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = std::collections::BTreeSet::new();
        let name = |n: &str| -> String {
            match first.insert(n.to_string()) {
                true => format!("{n}{}", self.symbols[n].constraints()),
                false => n.to_string(),
            }
        };
        f.write_str(&self.expr.render(&mut { name }))
    }
}

/// Whether `s` is a letter or `_` followed by letters, digits or `_`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A symbol name from an ONNX `dim_param`: each character an identifier cannot hold becomes
/// `_`, and a leading digit gets `_` before it (`batch.size` → `batch_size`, `2d` → `_2d`).
pub fn symbol_name(dim_param: &str) -> String {
    let mut name: String = dim_param
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}

/// The symbol name of an unnamed dynamic axis `axis` of input `input`: `_<input>_d<axis>`
/// (input `0`, axis 0: `_0_d0`).
pub fn unnamed_axis(input: &str, axis: usize) -> String {
    symbol_name(&format!("_{input}_d{axis}"))
}
