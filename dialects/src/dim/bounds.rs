//! What a dimension's symbols' ranges say about it: the least and greatest value it takes
//! (interval arithmetic over each term: exact for a sum of distinct symbols, wider where a
//! symbol appears twice), proofs of what an op requires of it (divisible by a number, at least
//! a size), each refusal naming the dimension with its symbols' ranges, and the sizes the cost
//! model evaluates it at.

use super::poly::{Atom, Poly};
use super::{Dim, DimError};
use std::collections::BTreeMap;

/// An interval of integers, wide enough for products of dimensions.
type Interval = (i128, i128);

impl Dim {
    /// The least and greatest value over its symbols' ranges.
    pub fn bounds(&self) -> (i64, i64) {
        self.bounds_of(&self.expr)
    }

    /// The bounds of an expression over this dimension's symbols.
    pub(super) fn bounds_of(&self, p: &Poly) -> (i64, i64) {
        let (lo, hi) = self.interval(p);
        let clamp = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        (clamp(lo), clamp(hi))
    }

    fn interval(&self, p: &Poly) -> Interval {
        p.terms().fold((0, 0), |(lo, hi), (monomial, c)| {
            let product = monomial.iter().fold((1, 1), |acc, a| times(acc, self.atom_interval(a)));
            let (a, b) = times(product, (c as i128, c as i128));
            (lo.saturating_add(a), hi.saturating_add(b))
        })
    }

    fn atom_interval(&self, a: &Atom) -> Interval {
        match a {
            Atom::Sym(name) => {
                let (lo, hi) = self.symbols[name].bounds();
                (lo as i128, hi as i128)
            }
            Atom::FloorDiv(p, k) => {
                let (lo, hi) = self.interval(p);
                (lo.div_euclid(*k as i128), hi.div_euclid(*k as i128))
            }
            Atom::Min(a, b) => {
                let (a, b) = (self.interval(a), self.interval(b));
                (a.0.min(b.0), a.1.min(b.1))
            }
            Atom::Max(a, b) => {
                let (a, b) = (self.interval(a), self.interval(b));
                (a.0.max(b.0), a.1.max(b.1))
            }
        }
    }

    /// Proves the dimension a multiple of `k` at every size in range (each term's coefficient
    /// is, or it is fixed and is), or says it is not proven: `a dimension must be divisible by
    /// 8 here, and s[1..512] is not`.
    pub fn require_divisible(&self, k: u64) -> Result<(), DimError> {
        let k = k.max(1) as i64;
        if self.expr.terms().all(|(_, c)| c % k == 0) {
            return Ok(());
        }
        Err(DimError::Unproven(format!(
            "a dimension must be divisible by {k} here, and {self} is not"
        )))
    }

    /// Proves the dimension at least `n` at every size in range, or says `what` it is must be
    /// and over which range it is not.
    pub fn require_at_least(&self, n: i64, what: &str) -> Result<(), DimError> {
        let (lo, hi) = self.bounds();
        match lo >= n {
            true => Ok(()),
            false => Err(DimError::Unproven(format!(
                "{what} must be at least {n}, and {self} ranges over [{lo}..{hi}]"
            ))),
        }
    }

    /// Where the cost model evaluates the dimension: each symbol at its first optimal size,
    /// or the middle of its range.
    pub fn cost_point(&self) -> BTreeMap<String, u64> {
        self.symbols
            .values()
            .map(|s| {
                let (lo, hi) = s.bounds();
                let at = s.optimals.first().copied().unwrap_or(lo + (hi - lo) / 2);
                (s.name.clone(), at)
            })
            .collect()
    }
}

/// The product of two intervals.
fn times((a, b): Interval, (c, d): Interval) -> Interval {
    let corners = [
        a.saturating_mul(c),
        a.saturating_mul(d),
        b.saturating_mul(c),
        b.saturating_mul(d),
    ];
    (
        corners.into_iter().min().unwrap_or(0),
        corners.into_iter().max().unwrap_or(0),
    )
}
