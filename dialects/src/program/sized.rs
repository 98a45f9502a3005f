//! Programs over symbolic sizes: one plan whose buffer types, kernels' parallel ranges and
//! argument sizes are expressions over the program's symbols (`Program::symbols`). A run binds
//! the symbols from its inputs' shapes and runs the plan at those sizes (`Program::at_sizes`:
//! every type, range and byte count evaluated, so the plan is checked and its memory placed as
//! a fixed program's); size-generic kernels take the symbols' values as one more argument.

use super::{KernelSignature, PlanError, Program};
use crate::dim::{Dim, InputDims, Sizes, Symbol};
use crate::TensorType;

/// What a kernel over symbolic types takes, as expressions over the program's symbols: the
/// trip count of its parallel loop and the bytes of each buffer it takes. Its `range` and
/// `arg_bytes` are these at the sizes a plan is evaluated at.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSizes {
    pub range: Dim,
    pub arg_bytes: Vec<Dim>,
}

impl KernelSizes {
    /// The bytes of a buffer of type `ty`, as a dimension (`None` for a sub-byte element
    /// type, whose bytes are not a product of its dimensions).
    pub fn bytes_of(ty: &TensorType) -> Option<Dim> {
        if ty.dtype.bits() < 8 {
            return None;
        }
        let mut bytes = Dim::constant(ty.dtype.size() as u64);
        for d in ty.dims() {
            bytes = bytes.mul(&d).ok()?;
        }
        Some(bytes)
    }
}

impl Program {
    /// Whether the program runs over symbolic sizes.
    pub fn is_sized(&self) -> bool {
        !self.symbols.is_empty()
    }

    /// Its inputs' dimensions, which bind the symbols at a run.
    pub fn input_dims(&self) -> Result<InputDims, PlanError> {
        let inputs = (self.inputs.iter())
            .map(|b| (b.name.clone(), self.buffers[b.buffer].ty.dims()))
            .collect();
        InputDims::new(inputs).map_err(|e| PlanError(e.to_string()))
    }

    /// Checks what a run over symbolic sizes relies on besides the plan at any sizes: every
    /// symbol is a whole dimension of some input, or a multiple of one (so the inputs bind
    /// it), and every kernel
    /// that takes sizes says each argument's.
    pub(crate) fn validate_sizes(&self) -> Result<(), PlanError> {
        let dims = self.input_dims()?;
        for s in &self.symbols {
            let bound = (dims.inputs().iter()).any(|(_, d)| {
                d.iter()
                    .any(|d| d.as_scaled_symbol().is_some_and(|(x, _)| x.name == s.name))
            });
            if !bound {
                return Err(PlanError(format!(
                    "symbol {} is no input's whole dimension: no run could say its size",
                    s.name
                )));
            }
        }
        for k in &self.kernels {
            if let Some(sizes) = &k.sizes {
                if sizes.arg_bytes.len() != k.arg_bytes.len() {
                    return Err(PlanError(format!(
                        "kernel `{}` takes {} arguments, and its sizes say {}",
                        k.symbol,
                        k.arg_bytes.len(),
                        sizes.arg_bytes.len()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Each symbol at the largest size of its range.
    pub fn largest_sizes(&self) -> Sizes {
        self.symbols.iter().map(|s| (s.name.clone(), s.bounds().1)).collect()
    }

    /// The plan at `sizes` (every symbol given, in its range): a plan of fixed sizes (no
    /// symbols), each sized kernel's range and argument bytes evaluated, each step's range its
    /// kernel's. The kernels keep their `sizes`: they still take the symbols' values.
    pub fn at_sizes(&self, sizes: &Sizes) -> Result<Program, PlanError> {
        let eval = |d: &Dim| d.eval(sizes).map_err(|e| PlanError(e.to_string()));
        let mut p = self.clone();
        p.symbols = Vec::new();
        for b in &mut p.buffers {
            if let Some(dims) = &b.ty.symbolic {
                let shape = dims
                    .iter()
                    .map(|d| eval(d).map(|n| n as usize))
                    .collect::<Result<_, _>>()?;
                b.ty = TensorType::new(b.ty.dtype, shape);
            }
        }
        for k in &mut p.kernels {
            if let Some(s) = &k.sizes {
                k.range = eval(&s.range)?;
                k.arg_bytes = s.arg_bytes.iter().map(eval).collect::<Result<_, _>>()?;
            }
        }
        for step in &mut p.steps {
            if let Some(k) = p.kernels.iter().find(|k| k.symbol == step.symbol && k.sizes.is_some()) {
                // the estimates (the work splitting across threads weighs, the arithmetic `mxc
                // perf` divides by) scale with the range
                let scale = |n: u64| {
                    let scaled = n as u128 * k.range as u128 / step.range.max(1) as u128;
                    u64::try_from(scaled).unwrap_or(u64::MAX)
                };
                (step.work, step.flops) = (scale(step.work), scale(step.flops));
                step.range = k.range;
            }
        }
        Ok(p)
    }

    /// The values the sizes argument of its size-generic kernels holds at `sizes`, in the
    /// order of `symbols`.
    pub fn size_values(&self, sizes: &Sizes) -> Vec<i64> {
        (self.symbols.iter())
            .map(|s| sizes.get(&s.name).map_or(0, |&n| n as i64))
            .collect()
    }
}

impl KernelSignature {
    /// Whether the kernel takes the symbols' values.
    pub fn takes_sizes(&self) -> bool {
        self.sizes.is_some()
    }
}

/// The symbols in the order the sizes argument holds them: by name.
pub fn symbols_in_order(symbols: impl IntoIterator<Item = Symbol>) -> Vec<Symbol> {
    let mut symbols: Vec<Symbol> = symbols.into_iter().collect();
    symbols.sort_by(|a, b| a.name.cmp(&b.name));
    symbols.dedup_by(|a, b| a.name == b.name);
    symbols
}
