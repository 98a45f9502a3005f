//! The canonical form of a dimension expression: a sum of integer multiples of monomials, a
//! monomial a sorted product of atoms (the empty product is the constant term), no zero
//! coefficient. Sums and products expand into it, so `(n + 1) * 2` and `2 * n + 2` are one
//! value; a floor division by a constant takes out of its atom each term's multiple of the
//! divisor (`(4n + 6) / 4` is `n + 1`, `(3n + 1) / 2` is `n + ((n + 1) / 2)`).

use std::collections::{BTreeMap, BTreeSet};

/// A factor that does not expand.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    Sym(String),
    /// `floor(p / k)`, `k > 1`, `p` holding no term `k` divides.
    FloorDiv(Box<Poly>, i64),
    Min(Box<Poly>, Box<Poly>),
    Max(Box<Poly>, Box<Poly>),
}

/// A sum of `coefficient x monomial`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Poly(BTreeMap<Vec<Atom>, i64>);

impl Poly {
    pub fn constant(c: i64) -> Poly {
        Poly::term(Vec::new(), c)
    }

    pub fn atom(a: Atom) -> Poly {
        Poly::term(vec![a], 1)
    }

    /// `c` times the product of `monomial`'s atoms (sorted).
    pub fn term(monomial: Vec<Atom>, c: i64) -> Poly {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(monomial, c);
        }
        Poly(terms)
    }

    /// Its value when it has no atom.
    pub fn as_constant(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// Each monomial with its coefficient, the constant term first.
    pub fn terms(&self) -> impl Iterator<Item = (&[Atom], i64)> {
        self.0.iter().map(|(m, &c)| (m.as_slice(), c))
    }

    /// The sum; `None` where a coefficient overflows (the arithmetic of this type is checked:
    /// `None` becomes an error naming the sizes).
    pub fn add(&self, other: &Poly) -> Option<Poly> {
        let mut terms = self.0.clone();
        for (m, c) in &other.0 {
            let sum = terms.get(m).copied().unwrap_or(0).checked_add(*c)?;
            match sum {
                0 => terms.remove(m),
                _ => terms.insert(m.clone(), sum),
            };
        }
        Some(Poly(terms))
    }

    pub fn scale(&self, k: i64) -> Option<Poly> {
        match k {
            0 => Some(Poly::default()),
            _ => self
                .0
                .iter()
                .map(|(m, c)| Some((m.clone(), c.checked_mul(k)?)))
                .collect::<Option<_>>()
                .map(Poly),
        }
    }

    pub fn mul(&self, other: &Poly) -> Option<Poly> {
        let mut out = Poly::default();
        for (a, ca) in &self.0 {
            for (b, cb) in &other.0 {
                let mut m: Vec<Atom> = a.iter().chain(b).cloned().collect();
                m.sort();
                out = out.add(&Poly::term(m, ca.checked_mul(*cb)?))?;
            }
        }
        Some(out)
    }

    /// `floor(self / k)` for `k > 0`: each term's multiple of `k` comes out
    /// (`floor((k q + r) / k) = q + floor(r / k)` for integers), and what is left over stays in
    /// a `FloorDiv` atom unless it is a constant.
    pub fn floor_div(&self, k: i64) -> Option<Poly> {
        if k == 1 {
            return Some(self.clone());
        }
        let mut quotient = Poly::default();
        let mut rest = Poly::default();
        for (m, &c) in &self.0 {
            quotient = quotient.add(&Poly::term(m.clone(), c.div_euclid(k)))?;
            rest = rest.add(&Poly::term(m.clone(), c.rem_euclid(k)))?;
        }
        let tail = match rest.as_constant() {
            Some(r) => Poly::constant(r.div_euclid(k)),
            None => Poly::atom(Atom::FloorDiv(Box::new(rest), k)),
        };
        quotient.add(&tail)
    }

    /// The expression built by `b` from its constants, symbols and operations (how code that
    /// computes it at run time writes it).
    pub fn build<B: super::Builder>(&self, b: &mut B) -> B::Value {
        let mut sum: Option<B::Value> = None;
        for (m, &c) in &self.0 {
            let mut product: Option<B::Value> = None;
            for atom in m {
                let v = atom.build(b);
                product = Some(match product {
                    None => v,
                    Some(p) => b.mul(&p, &v),
                });
            }
            let term = match product {
                None => b.constant(c),
                Some(p) if c == 1 => p,
                Some(p) => {
                    let k = b.constant(c);
                    b.mul(&p, &k)
                }
            };
            sum = Some(match sum {
                None => term,
                Some(s) => b.add(&s, &term),
            });
        }
        sum.unwrap_or_else(|| b.constant(0))
    }

    /// The names of the symbols it uses.
    pub fn symbol_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for atom in self.0.keys().flatten() {
            match atom {
                Atom::Sym(s) => {
                    names.insert(s.clone());
                }
                Atom::FloorDiv(p, _) => names.extend(p.symbol_names()),
                Atom::Min(a, b) | Atom::Max(a, b) => {
                    names.extend(a.symbol_names());
                    names.extend(b.symbol_names());
                }
            }
        }
        names
    }

    /// Its value where each symbol is `value(name)`, in i128 with saturating arithmetic (a
    /// value past the i64 range stays past it, never wraps into it).
    pub fn eval(&self, value: &dyn Fn(&str) -> i64) -> i128 {
        self.0
            .iter()
            .map(|(m, c)| {
                let product = m.iter().fold(1i128, |p, a| p.saturating_mul(a.eval(value)));
                product.saturating_mul(*c as i128)
            })
            .fold(0i128, i128::saturating_add)
    }

    /// The text of the expression: non-constant terms, then the constant; `name` writes each
    /// use of a symbol.
    pub fn render(&self, name: &mut dyn FnMut(&str) -> String) -> String {
        let mut out = String::new();
        let constant = self.0.get(&Vec::new()).copied();
        let terms = self.0.iter().filter(|(m, _)| !m.is_empty());
        for (i, (m, &c)) in terms.enumerate() {
            let factors: Vec<String> = m.iter().map(|a| a.render(name)).collect();
            let mut text = factors.join(" * ");
            if c.abs() != 1 {
                text.push_str(&format!(" * {}", c.abs()));
            }
            out.push_str(match (i, c < 0) {
                (0, false) => "",
                (0, true) => "-",
                (_, false) => " + ",
                (_, true) => " - ",
            });
            out.push_str(&text);
        }
        match constant {
            Some(c) if out.is_empty() => c.to_string(),
            Some(c) if c < 0 => format!("{out} - {}", -c),
            Some(c) => format!("{out} + {c}"),
            None if out.is_empty() => "0".to_string(),
            None => out,
        }
    }

    /// `render`, in parentheses when it is more than one term.
    fn render_operand(&self, name: &mut dyn FnMut(&str) -> String) -> String {
        let text = self.render(name);
        match self.0.len() > 1 || self.0.values().any(|&c| c < 0) {
            true => format!("({text})"),
            false => text,
        }
    }
}

impl Atom {
    fn build<B: super::Builder>(&self, b: &mut B) -> B::Value {
        match self {
            Atom::Sym(name) => b.symbol(name),
            Atom::FloorDiv(p, k) => {
                let v = p.build(b);
                b.floor_div(&v, *k)
            }
            Atom::Min(x, y) | Atom::Max(x, y) => {
                let (x, y) = (x.build(b), y.build(b));
                b.extremum(&x, &y, matches!(self, Atom::Min(..)))
            }
        }
    }

    fn eval(&self, value: &dyn Fn(&str) -> i64) -> i128 {
        match self {
            Atom::Sym(s) => value(s) as i128,
            Atom::FloorDiv(p, k) => p.eval(value).div_euclid(*k as i128),
            Atom::Min(a, b) => a.eval(value).min(b.eval(value)),
            Atom::Max(a, b) => a.eval(value).max(b.eval(value)),
        }
    }

    /// A division in parentheses, so that it stays one factor when read back.
    fn render(&self, name: &mut dyn FnMut(&str) -> String) -> String {
        match self {
            Atom::Sym(s) => name(s),
            Atom::FloorDiv(p, k) => format!("({} / {k})", p.render_operand(name)),
            Atom::Min(a, b) => format!("min({}, {})", a.render(name), b.render(name)),
            Atom::Max(a, b) => format!("max({}, {})", a.render(name), b.render(name)),
        }
    }
}
