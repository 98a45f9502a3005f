//! `attention`: scaled dot-product attention as one op, what `rewrite/rules/attention.rules`
//! makes of the chain exporters write (`matmul(softmax(q · kᵀ + mask), v)`), so that a target
//! can run it as one kernel that never writes the seq x seq scores to memory.
//!
//! Operands `q`, `k`, `v` and an optional additive `mask`; per batch `b`, head `h` and query
//! row `s`:
//!
//! ```text
//! score[j] = scale * (q[b, h, s, :] · k[b, h, j, :]) + mask[b, h, s, j]
//! p        = softmax(score)                      (over the keys j)
//! out[b, h, s, :] = sum over j of p[j] * v[b, h, j, :]
//! ```
//!
//! Attributes:
//! - `layout`: `"bhsd"`, the tensors are `[batch, heads, sequence, depth]`, or `"bshd"`,
//!   `[batch, sequence, heads, depth]` (the product's columns split into heads, as the
//!   projections write them, so no transpose is needed on either side); the result has `q`'s
//!   layout with `v`'s depth;
//! - `scale`: the factor on the dot products;
//! - `zero_nan_rows`: 1 where the chain zeroes the probabilities that are NaN (PyTorch's
//!   `scaled_dot_product_attention` export: `where(isnan(p), 0, p)`). A softmax row is NaN as
//!   a whole or not at all (every key masked to -inf, or a NaN or +inf score), so with 1 such a
//!   row's output is `sum of 0 * v[j]`; with 0 it is NaN, as the plain chain gives.
//!
//! The mask is indexed `[batch, heads, query, key]` in either layout and broadcasts to that
//! shape (numpy rules, rank up to 4).

use super::broadcast_shapes;
use crate::{Attrs, TensorType};

/// Where the sequence and head axes are in a layout: `(heads, sequence)`.
pub fn axes(layout: &str) -> Result<(usize, usize), String> {
    match layout {
        "bhsd" => Ok((1, 2)),
        "bshd" => Ok((2, 1)),
        other => Err(format!("layout must be \"bhsd\" or \"bshd\", got {other:?}")),
    }
}

/// The dimensions of an attention: batch, heads, query rows, keys, depth of q and k, depth of
/// v, and where its layout puts the sequence (1 or 2; the heads are on the other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub batch: usize,
    pub heads: usize,
    pub queries: usize,
    pub keys: usize,
    pub depth: usize,
    pub value_depth: usize,
    pub seq_axis: usize,
}

impl Dims {
    /// The shape of a `[batch, heads, rows, depth]` tensor in the layout.
    pub fn shape(&self, rows: usize, depth: usize) -> Vec<usize> {
        self.place(self.batch, self.heads, rows, depth)
    }

    /// `[b, h, row, depth]` in the layout's order (indices or sizes alike).
    pub fn place<T>(&self, b: T, h: T, row: T, depth: T) -> Vec<T> {
        match self.seq_axis {
            1 => vec![b, row, h, depth],
            _ => vec![b, h, row, depth],
        }
    }
}

/// Checks the operands against each other and gives the dimensions.
pub fn dims(ops: &[TensorType], layout: &str) -> Result<Dims, String> {
    let (heads_axis, seq_axis) = axes(layout)?;
    let (q, k, v) = (&ops[0], &ops[1], &ops[2]);
    for (name, t) in [("q", q), ("k", k), ("v", v)] {
        if t.rank() != 4 {
            return Err(format!("{name} must have rank 4, got shape {:?}", t.shape));
        }
        if t.dtype != q.dtype {
            return Err(format!("{name} is {}, q is {}", t.dtype, q.dtype));
        }
    }
    if !q.dtype.is_float() {
        return Err(format!("takes floats, got {}", q.dtype));
    }
    let dims = Dims {
        batch: q.shape[0],
        heads: q.shape[heads_axis],
        queries: q.shape[seq_axis],
        keys: k.shape[seq_axis],
        depth: q.shape[3],
        value_depth: v.shape[3],
        seq_axis,
    };
    if k.shape != dims.shape(dims.keys, dims.depth) {
        return Err(format!(
            "k must be {:?} ({layout}) for q of shape {:?}, got {:?}",
            dims.shape(dims.keys, dims.depth),
            q.shape,
            k.shape
        ));
    }
    if v.shape != dims.shape(dims.keys, dims.value_depth) {
        return Err(format!(
            "v must have k's batch, heads and keys ({layout}), got {:?} for k of shape {:?}",
            v.shape, k.shape
        ));
    }
    Ok(dims)
}

/// The result type: `q`'s layout with `v`'s depth.
pub fn infer(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let layout = attrs.str("layout")?;
    let d = dims(ops, layout)?;
    attrs.float("scale")?;
    if !matches!(attrs.int("zero_nan_rows")?, 0 | 1) {
        return Err(format!(
            "zero_nan_rows must be 0 or 1, got {}",
            attrs.int("zero_nan_rows")?
        ));
    }
    if let Some(mask) = ops.get(3) {
        let scores = [d.batch, d.heads, d.queries, d.keys];
        if mask.dtype != ops[0].dtype {
            return Err(format!("the mask is {}, q is {}", mask.dtype, ops[0].dtype));
        }
        if mask.rank() > 4 || broadcast_shapes(&mask.shape, &scores)? != scores {
            return Err(format!(
                "the mask {:?} must broadcast to the scores [batch, heads, query, key] {scores:?}",
                mask.shape
            ));
        }
    }
    Ok(ops[0].with_shape(d.shape(d.queries, d.value_depth)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attr, DType};

    fn t(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    fn attrs(layout: &str) -> Attrs {
        Attrs::new()
            .with("layout", Attr::Str(layout.into()))
            .with("scale", Attr::Float(0.125))
            .with("zero_nan_rows", Attr::Int(0))
    }

    #[test]
    fn the_result_has_the_queries_layout_and_the_values_depth() {
        let bhsd = [t(&[2, 4, 7, 16]), t(&[2, 4, 9, 16]), t(&[2, 4, 9, 8]), t(&[1, 1, 7, 9])];
        assert_eq!(infer(&bhsd, &attrs("bhsd")).unwrap().shape, [2, 4, 7, 8]);
        let bshd = [t(&[2, 7, 4, 16]), t(&[2, 9, 4, 16]), t(&[2, 9, 4, 8]), t(&[9])];
        assert_eq!(infer(&bshd, &attrs("bshd")).unwrap().shape, [2, 7, 4, 8]);
        assert_eq!(infer(&bshd[..3], &attrs("bshd")).unwrap().shape, [2, 7, 4, 8]);
    }

    #[test]
    fn mismatched_operands_are_refused_by_name() {
        let keys_differ = [t(&[1, 4, 7, 16]), t(&[1, 4, 9, 16]), t(&[1, 4, 8, 16])];
        let err = infer(&keys_differ, &attrs("bhsd")).unwrap_err();
        assert!(err.starts_with("v must have k's batch"), "{err}");
        let depth_differs = [t(&[1, 4, 7, 16]), t(&[1, 4, 9, 8]), t(&[1, 4, 9, 8])];
        assert!(infer(&depth_differs, &attrs("bhsd"))
            .unwrap_err()
            .starts_with("k must be"));
        let big_mask = [
            t(&[1, 4, 7, 16]),
            t(&[1, 4, 9, 16]),
            t(&[1, 4, 9, 16]),
            t(&[2, 1, 7, 9]),
        ];
        assert!(infer(&big_mask, &attrs("bhsd")).unwrap_err().contains("must broadcast"));
        let err = infer(&keys_differ[..], &attrs("sbhd")).unwrap_err();
        assert_eq!(err, "layout must be \"bhsd\" or \"bshd\", got \"sbhd\"");
    }
}
