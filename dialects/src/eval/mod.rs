//! Constant evaluation of `mx` ops on known tensors, used to fold shape arithmetic at import
//! time. It follows the op definitions exactly (the ones the loop-level lowering implements):
//!
//! - float arithmetic is computed in f64 and rounded once to the element type, which gives the
//!   correctly rounded result of `+ - * /`, `sqrt` and `reciprocal` in f16, bf16, f32 and f64;
//! - integer arithmetic wraps around in the element type; integer division truncates toward
//!   zero, and a zero divisor gives 0;
//! - `max`/`min` of floats propagate NaN and order -0 below +0;
//! - reductions accumulate in the compute type (f32 for f16, bf16 and f32; f64; the integer
//!   type itself), starting from 0 (or the lowest value, for `reduce_max`), in increasing
//!   index order;
//! - `gather` accepts negative indices (counting from the end), and an index out of range is
//!   an error.
//!
//! Transcendental functions (`exp`, `log`, `erf`, `pow`, ...) and the neural-network ops are
//! not evaluated here: their results depend on the math library the target uses.

mod control;
mod elementwise;
mod index;
pub mod layout;
mod reduce;
mod strings;

use crate::tensor::store_float;
use crate::{mx, Attrs, Graph, Op, OpKind, Tensor, TensorType, Trait, ValueId};

/// Computes an op the evaluator does not, for `run_with`: `None` where it does not either.
pub type Fallback<'a> = dyn Fn(&Op, &[&Tensor]) -> Option<Vec<Tensor>> + 'a;

/// Runs graph `g` on `inputs` (one per graph input, in order), op by op with `eval` (control
/// ops by running their regions): its outputs, or an error naming the first op that is not
/// evaluable here or fails.
pub fn run(g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    run_with(g, inputs, &|_, _| None)
}

/// `run`, with `fallback` computing the ops `eval` does not (where it returns `Some`), in
/// regions too.
pub fn run_with(g: &Graph, inputs: &[Tensor], fallback: &Fallback) -> Result<Vec<Tensor>, String> {
    if inputs.len() != g.inputs.len() {
        return Err(format!(
            "{} inputs given for {} graph inputs",
            inputs.len(),
            g.inputs.len()
        ));
    }
    let mut values: Vec<Option<Tensor>> = vec![None; g.num_values()];
    for (port, t) in g.inputs.iter().zip(inputs) {
        values[port.value.index()] = Some(t.clone());
    }
    let value =
        |values: &[Option<Tensor>], v: ValueId| values[v.index()].clone().ok_or("a value used before it is made");
    for op in &g.ops {
        let args = op
            .operands
            .iter()
            .map(|&v| value(&values, v))
            .collect::<Result<Vec<Tensor>, _>>()?;
        let region = |region: &Graph, inputs: &[Tensor]| run_with(region, inputs, fallback);
        let results = match op.kind {
            OpKind::Constant => vec![op.attrs.tensor("value")?.clone()],
            OpKind::If => control::run_if(op, &args, &region)?,
            OpKind::Loop => {
                let types: Vec<TensorType> = op.results.iter().map(|r| g.ty(*r).clone()).collect();
                control::run_loop(op, &args, &types, &region)?
            }
            kind => {
                let refs: Vec<&Tensor> = args.iter().collect();
                match eval(kind, &refs, &op.attrs) {
                    Some(results) => results?,
                    None => fallback(op, &refs).ok_or(format!("`{kind}` is not evaluated here"))?,
                }
            }
        };
        for (r, t) in op.results.iter().zip(results) {
            values[r.index()] = Some(t);
        }
    }
    g.outputs
        .iter()
        .map(|p| value(&values, p.value).map_err(String::from))
        .collect()
}

/// Evaluates `kind` on `operands`: `None` when the op is not evaluable here, an error when the
/// operands and attributes do not type-check (or a gather index is out of range).
pub fn eval(kind: OpKind, operands: &[&Tensor], attrs: &Attrs) -> Option<Result<Vec<Tensor>, String>> {
    // a tensor has fixed sizes: an op of symbolic sizes (a slice to a symbolic length) has none
    if !kind.has(Trait::Evaluable) || attrs.has_symbolic_sizes() {
        return None;
    }
    let types: Vec<TensorType> = operands.iter().map(|t| t.ty.clone()).collect();
    let on_strings = operands.iter().any(|t| t.dtype() == crate::DType::Str);
    let result = mx::infer(kind, &types, attrs).and_then(|tys| {
        let result = match on_strings {
            true => strings::eval_on_strings(kind, operands, attrs, &tys[0]),
            false => eval_typed(kind, operands, attrs, &tys[0]),
        };
        result.map(|t| vec![t])
    });
    Some(result)
}

/// Evaluates an op whose operands are known to type-check and whose result type is `out`.
fn eval_typed(kind: OpKind, ops: &[&Tensor], attrs: &Attrs, out: &TensorType) -> Result<Tensor, String> {
    use OpKind::*;
    match kind {
        Identity => Ok(ops[0].clone()),
        Cast => Ok(ops[0].cast(out.dtype)),
        BitCast => Ok(layout::bitcast(ops[0], out.dtype)),
        Reshape => Ok(ops[0].reshaped(out.shape.clone())),
        Transpose => Ok(layout::transpose(ops[0], &attrs.dims("perm")?, out)),
        Concat => layout::concat(ops, attrs.int("axis")? as usize, out),
        Slice => Ok(layout::slice(ops[0], attrs.ints("starts")?, attrs.ints("steps")?, out)),
        Gather => layout::gather(ops[0], ops[1], attrs.int("axis")? as usize, out),
        Scatter => layout::scatter(ops[0], ops[1], ops[2], attrs.str("reduction")?),
        Expand => Ok(layout::expand(ops[0], out)),
        Pack => Ok(layout::pack(ops[0], out)),
        WinogradWeights => Ok(winograd_weights(ops[0], out)),
        Add | Sub | Mul | Div | Max | Min | BitAnd | BitOr | BitXor | ShiftLeft | ShiftRight => {
            Ok(elementwise::arithmetic(kind, ops[0], ops[1], out))
        }
        Equal | Less | Greater => Ok(elementwise::compare(kind, ops[0], ops[1], out)),
        Where => Ok(elementwise::select(ops[0], ops[1], ops[2], out)),
        DequantizeLinear => Ok(elementwise::dequantize_linear(ops[0], ops[1], ops[2], out)),
        Not | Neg | Abs | Relu | Sqrt | Reciprocal | Floor | Ceil | Round | Sin | Cos | Tan | Asin | Acos | Atan => {
            Ok(elementwise::unary(kind, ops[0]))
        }
        ReduceSum | ReduceMean | ReduceMax => Ok(reduce::reduce(kind, ops[0], attrs.ints("axes")?, out)),
        _ => Err(format!("{kind} is not evaluable")),
    }
}

/// `winograd_weights`: `U[6a + b, c, m] = (G g G^T)[a, b]` for each 3x3 filter `g = w[m, :, :, c]`,
/// in f64, rounded once.
fn winograd_weights(w: &Tensor, out: &TensorType) -> Tensor {
    use mx::winograd::{G, PATCH, POINTS};
    let (m, c) = (w.shape()[0], w.shape()[3]);
    let w = w.to_f64_vec();
    let size = out.dtype.size();
    let mut u = vec![0u8; POINTS * c * m * size];
    // channels outer, filters inner: each of the 36 planes of U is written in order
    for (ci, mi) in (0..c).flat_map(|ci| (0..m).map(move |mi| (ci, mi))) {
        let g = |i: usize, j: usize| w[((mi * 3 + i) * 3 + j) * c + ci];
        // G g, then (G g) G^T
        let mut gg = [[0.0; 3]; PATCH];
        for (a, row) in gg.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = (0..3).map(|i| G[a][i] * g(i, j)).sum();
            }
        }
        for (a, row) in gg.iter().enumerate() {
            for (b, g_row) in G.iter().enumerate() {
                let sum: f64 = (0..3).map(|j| row[j] * g_row[j]).sum();
                let at = ((a * PATCH + b) * c + ci) * m + mi;
                store_float(out.dtype, sum, &mut u[at * size..]);
            }
        }
    }
    Tensor::from_bytes(out.clone(), u).expect("the result's size")
}
