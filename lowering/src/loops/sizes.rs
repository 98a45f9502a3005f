//! Sizes known only at run time. A kernel whose operand or result types have symbolic
//! dimensions (`n[1..512]`) takes the values of the program's symbols as one more argument,
//! `%sizes: memref<Kxi64>` (the program's symbols in name order, `SizeArgs`), and computes
//! each dimension it needs from them once, at its entry: an `Extent` is a loop bound or a
//! buffer dimension that is a number when the kernel is written, or such a value. Its buffers
//! arrive as pointers (MLIR's bare-pointer convention needs static types) and are viewed with
//! their run-time shapes (`memref<?x768xf32>`) before anything reads them.

use super::emit::{Emitter, Ty, V};
use mxc_dialects::dim::{Builder, Dim};
use std::collections::BTreeMap;

/// The kernel parameter holding the symbols' values.
pub const SIZES_PARAM: &str = "%sizes";

/// Where each of a program's symbols is in the sizes argument every size-generic kernel takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SizeArgs {
    position: BTreeMap<String, usize>,
}

impl SizeArgs {
    /// The symbols in the order the runtime passes their values.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> SizeArgs {
        let mut names: Vec<&str> = names.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        SizeArgs {
            position: names.iter().enumerate().map(|(i, n)| (n.to_string(), i)).collect(),
        }
    }

    fn len(&self) -> usize {
        self.position.len()
    }

    /// The MLIR type of the sizes parameter.
    pub fn memref(&self) -> String {
        format!("memref<{}xi64>", self.len().max(1))
    }
}

/// A loop's trip count or a buffer's dimension.
#[derive(Clone, Debug, PartialEq)]
pub enum Extent {
    Fixed(usize),
    /// Computed at the kernel's entry from the sizes argument: `value` holds `dim`.
    Run {
        value: V,
        dim: Dim,
    },
}

impl From<usize> for Extent {
    fn from(n: usize) -> Extent {
        Extent::Fixed(n)
    }
}

impl Extent {
    pub fn fixed(&self) -> Option<usize> {
        match self {
            Extent::Fixed(n) => Some(*n),
            Extent::Run { .. } => None,
        }
    }

    /// Its size where the cost model looks: the work estimate's trip count.
    pub fn at_cost_point(&self) -> usize {
        match self {
            Extent::Fixed(n) => *n,
            Extent::Run { dim, .. } => usize::try_from(dim.at_cost_point()).unwrap_or(usize::MAX),
        }
    }

    /// Its least size over the symbols' ranges.
    pub fn least(&self) -> usize {
        match self {
            Extent::Fixed(n) => *n,
            Extent::Run { dim, .. } => usize::try_from(dim.bounds().0.max(0)).unwrap_or(0),
        }
    }

    /// The dimension it is, for the plan (a fixed extent is a constant).
    pub fn dim(&self) -> Dim {
        match self {
            Extent::Fixed(n) => Dim::constant(*n as u64),
            Extent::Run { dim, .. } => dim.clone(),
        }
    }

    /// How an operand list of sizes writes it (`memref.reinterpret_cast`'s): the size, or
    /// the value's name.
    pub fn operand(&self) -> String {
        match self {
            Extent::Fixed(n) => n.to_string(),
            Extent::Run { value, .. } => value.name.clone(),
        }
    }

    /// How a memref type writes it: the size, or `?`.
    pub fn memref_text(&self) -> String {
        match self {
            Extent::Fixed(n) => n.to_string(),
            Extent::Run { .. } => "?".into(),
        }
    }
}

impl Emitter {
    /// The extent of dimension `dim`: its size when fixed, else its value computed at the entry.
    pub fn extent(&mut self, dim: &Dim) -> Extent {
        match dim.as_constant() {
            Some(n) => Extent::Fixed(n as usize),
            None => Extent::Run {
                value: dim.build(&mut AtEntry(self)),
                dim: dim.clone(),
            },
        }
    }

    /// The `index` value of an extent.
    pub fn extent_value(&mut self, n: &Extent) -> V {
        match n {
            Extent::Fixed(n) => self.idx(*n as i64),
            Extent::Run { value, .. } => value.clone(),
        }
    }

    /// The last index along an extent (0 for an empty one), computed at the entry.
    pub fn extent_last(&mut self, n: &Extent) -> V {
        match n {
            Extent::Fixed(n) => self.idx((*n as i64 - 1).max(0)),
            Extent::Run { value, .. } => {
                let one = self.idx(1);
                self.hoisted_op(&format!("arith.subi {value}, {one} : index"), Ty::Index, 1)
            }
        }
    }

    /// An extent as a number of type `ty` (a count to divide by).
    pub fn extent_as_number(&mut self, n: &Extent, ty: Ty) -> V {
        match n {
            Extent::Fixed(n) => self.num(ty, *n as f64),
            Extent::Run { value, .. } => {
                let wide = Ty::Int { bits: 64, signed: true };
                let count = self.hoisted_op(&format!("arith.index_cast {value} : index to i64"), wide, 1);
                let count = V { known: None, ..count };
                self.convert(&count, ty)
            }
        }
    }

    /// The product of extents (computed at the entry where one is a run-time value).
    pub fn extent_product(&mut self, extents: &[Extent]) -> Extent {
        let mut fixed = 1usize;
        let mut run: Option<(V, Dim)> = None;
        for x in extents {
            match x {
                Extent::Fixed(n) => fixed = fixed.saturating_mul(*n),
                Extent::Run { value, dim } => {
                    run = Some(match run {
                        None => (value.clone(), dim.clone()),
                        Some((v, d)) => {
                            let product = AtEntry(self).mul(&v, value);
                            (
                                product,
                                d.mul(dim).expect("a product of a type's dimensions was checked"),
                            )
                        }
                    })
                }
            }
        }
        match run {
            None => Extent::Fixed(fixed),
            Some((value, dim)) if fixed == 1 => Extent::Run { value, dim },
            Some((value, dim)) => {
                let k = self.idx(fixed as i64);
                Extent::Run {
                    value: AtEntry(self).mul(&value, &k),
                    dim: dim
                        .mul(&Dim::constant(fixed as u64))
                        .expect("a product of a type's dimensions was checked"),
                }
            }
        }
    }

    /// `sum(value * extent) + constant` over `index` values (`Emitter::lin` where every
    /// extent is fixed).
    pub fn lin_over(&mut self, terms: &[(&V, &Extent)], constant: i64) -> V {
        let fixed: Vec<(&V, i64)> = (terms.iter())
            .filter_map(|(v, n)| n.fixed().map(|k| (*v, k as i64)))
            .collect();
        let mut sum = self.lin(&fixed, constant);
        for (v, n) in terms {
            if let Extent::Run { value, .. } = n {
                let term = self.op("t", Ty::Index, &format!("arith.muli {v}, {value} : index"));
                sum = self.lin(&[(&sum, 1), (&term, 1)], 0);
            }
        }
        sum
    }

    /// `n + k` of an extent, for a `k` (a pad, or less a window's reach) that its op's type
    /// rule proved leaves a size at every size.
    pub fn extent_offset(&mut self, n: &Extent, k: i64) -> Extent {
        let proved = "a type's dimension offset as its op's rule proved is a size";
        match n {
            Extent::Fixed(n) => Extent::Fixed(usize::try_from(*n as i64 + k).expect(proved)),
            Extent::Run { value, dim } => {
                let k_value = self.idx(k);
                let offset = Dim::constant(k.unsigned_abs());
                let dim = match k >= 0 {
                    true => dim.add(&offset),
                    false => dim.sub(&offset),
                };
                Extent::Run {
                    value: AtEntry(self).add(value, &k_value),
                    dim: dim.expect(proved),
                }
            }
        }
    }

    /// `ceil(n / k)` of an extent, for a positive `k`.
    pub fn extent_chunks(&mut self, n: &Extent, k: usize) -> Extent {
        match n {
            Extent::Fixed(n) => Extent::Fixed(n.div_ceil(k)),
            Extent::Run { value, dim } => {
                let k_less_one = self.idx(k as i64 - 1);
                let mut b = AtEntry(self);
                let padded = b.add(value, &k_less_one);
                Extent::Run {
                    value: b.floor_div(&padded, k as i64),
                    dim: dim
                        .add(&Dim::constant(k as u64 - 1))
                        .and_then(|d| d.floor_div(k as u64))
                        .expect("a type's dimension plus a lane count is a size"),
                }
            }
        }
    }

    /// The value of symbol `name`, read from the sizes argument once.
    fn symbol_value(&mut self, name: &str) -> V {
        let position = self
            .sizes
            .position
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("symbol {name} is not among the kernel's sizes"));
        let at = self.idx(position as i64);
        let memref = self.sizes.memref();
        let raw = self.hoisted_op(
            &format!("memref.load {SIZES_PARAM}[{at}] : {memref}"),
            Ty::Int { bits: 64, signed: true },
            1,
        );
        self.hoisted_op(&format!("arith.index_cast {raw} : i64 to index"), Ty::Index, 1)
    }
}

/// Writes a dimension's arithmetic at the kernel's entry, where every later use can see it.
struct AtEntry<'e>(&'e mut Emitter);

impl AtEntry<'_> {
    fn index_op(&mut self, rhs: String) -> V {
        self.0.hoisted_op(&rhs, Ty::Index, 1)
    }
}

impl Builder for AtEntry<'_> {
    type Value = V;

    fn constant(&mut self, c: i64) -> V {
        self.0.idx(c)
    }

    fn symbol(&mut self, name: &str) -> V {
        self.0.symbol_value(name)
    }

    fn add(&mut self, a: &V, b: &V) -> V {
        self.index_op(format!("arith.addi {a}, {b} : index"))
    }

    fn mul(&mut self, a: &V, b: &V) -> V {
        self.index_op(format!("arith.muli {a}, {b} : index"))
    }

    fn floor_div(&mut self, a: &V, k: i64) -> V {
        let k = self.0.idx(k);
        self.index_op(format!("arith.floordivsi {a}, {k} : index"))
    }

    fn extremum(&mut self, a: &V, b: &V, least: bool) -> V {
        let op = if least { "minsi" } else { "maxsi" };
        self.index_op(format!("arith.{op} {a}, {b} : index"))
    }
}
