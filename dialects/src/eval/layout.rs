//! Evaluation of the data-movement ops: transpose, concat, slice, gather and expand
//! (reshape, identity and cast need no index arithmetic and live in `mod.rs`).

use super::index::{broadcast_offsets, map_positions, pick, strided_offsets};
use crate::{strides_of, Tensor, TensorType};

pub fn transpose(x: &Tensor, perm: &[usize], out: &TensorType) -> Tensor {
    let strides = strides_of(x.shape());
    let moved: Vec<usize> = perm.iter().map(|&p| strides[p]).collect();
    pick(x, &strided_offsets(&out.shape, &moved), out)
}

/// `pack`: `out[.., p, k, j] = x[.., k, p * panel + j]`, zero past the last column.
pub fn pack(x: &Tensor, out: &TensorType) -> Tensor {
    let rank = x.shape().len();
    let (k, n) = (x.shape()[rank - 2], x.shape()[rank - 1]);
    let r = out.shape.len();
    let (panels, panel) = (out.shape[r - 3], out.shape[r - 1]);
    let batches: usize = x.shape()[..rank - 2].iter().product();
    let size = out.dtype.size();
    let mut data = vec![0u8; out.num_bytes()];
    for batch in 0..batches {
        let (from_base, to_base) = (batch * k * n, batch * panels * k * panel);
        for p in 0..panels {
            let columns = panel.min(n - p * panel);
            for row in 0..k {
                let from = (from_base + row * n + p * panel) * size;
                let to = (to_base + (p * k + row) * panel) * size;
                data[to..to + columns * size].copy_from_slice(&x.bytes()[from..from + columns * size]);
            }
        }
    }
    Tensor::from_bytes(out.clone(), data).expect("the packed size is the type's")
}

pub fn concat(ops: &[&Tensor], axis: usize, out: &TensorType) -> Result<Tensor, String> {
    // Every operand is a sequence of `outer` blocks, each `extent * inner` elements long.
    let outer: usize = out.shape[..axis].iter().product();
    let inner: usize = out.shape[axis + 1..].iter().product();
    let size = out.dtype.size();
    let mut data = Vec::with_capacity(out.num_bytes());
    for o in 0..outer {
        for t in ops {
            let block = t.shape()[axis] * inner * size;
            data.extend_from_slice(&t.bytes()[o * block..(o + 1) * block]);
        }
    }
    Tensor::from_bytes(out.clone(), data).ok_or_else(|| "concat produced the wrong number of elements".to_string())
}

/// Element `i` of dimension `d` reads index `starts[d] + i * steps[d]`.
pub fn slice(x: &Tensor, starts: &[i64], steps: &[i64], out: &TensorType) -> Tensor {
    let strides = strides_of(x.shape());
    let offsets = map_positions(&out.shape, |c| {
        c.iter()
            .enumerate()
            .map(|(d, &i)| (starts[d] + i as i64 * steps[d]) as usize * strides[d])
            .sum()
    });
    pick(x, &offsets, out)
}

/// `out[a..., i..., b...] = data[a..., indices[i...], b...]`, negative indices counting from
/// the end of the axis.
pub fn gather(data: &Tensor, indices: &Tensor, axis: usize, out: &TensorType) -> Result<Tensor, String> {
    let extent = data.shape()[axis] as i64;
    let resolved: Vec<usize> = indices
        .to_i64_vec()
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + extent } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| (j as i64) < extent)
                .ok_or_else(|| format!("index {i} is out of range for axis {axis} of extent {extent}"))
        })
        .collect::<Result<_, _>>()?;
    let outer: usize = data.shape()[..axis].iter().product();
    let inner: usize = data.shape()[axis + 1..].iter().product();
    let mut offsets = Vec::with_capacity(out.num_elements());
    for o in 0..outer {
        for &j in &resolved {
            let base = (o * extent as usize + j) * inner;
            offsets.extend(base..base + inner);
        }
    }
    Ok(pick(data, &offsets, out))
}

pub fn expand(x: &Tensor, out: &TensorType) -> Tensor {
    pick(x, &broadcast_offsets(x.shape(), &out.shape), out)
}

#[cfg(test)]
mod tests {
    use crate::eval::eval;
    use crate::{Attr, Attrs, DType, OpKind, Tensor};

    fn ints(shape: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_i64s(DType::I64, shape.to_vec(), v)
    }

    fn run(kind: OpKind, ops: &[&Tensor], attrs: Attrs) -> Tensor {
        eval(kind, ops, &attrs)
            .expect("evaluable")
            .expect("evaluates")
            .remove(0)
    }

    fn list(name: &str, v: &[i64]) -> Attrs {
        Attrs::new().with(name, Attr::Ints(v.to_vec()))
    }

    #[test]
    fn reshape_keeps_the_order() {
        let y = run(
            OpKind::Reshape,
            &[&ints(&[2, 3], &[1, 2, 3, 4, 5, 6])],
            list("shape", &[3, 2]),
        );
        assert_eq!(y, ints(&[3, 2], &[1, 2, 3, 4, 5, 6]));
    }

    #[test]
    fn identity_and_cast() {
        let x = ints(&[3], &[-1, 0, 2]);
        assert_eq!(run(OpKind::Identity, &[&x], Attrs::new()), x);
        let y = run(OpKind::Cast, &[&x], Attrs::new().with("to", Attr::DType(DType::F32)));
        assert_eq!(y, Tensor::from_f32s(vec![3], &[-1.0, 0.0, 2.0]));
    }

    #[test]
    fn transpose_permutes_axes() {
        let x = ints(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            run(OpKind::Transpose, &[&x], list("perm", &[1, 0])),
            ints(&[3, 2], &[1, 4, 2, 5, 3, 6])
        );
        let x = ints(&[1, 2, 2], &[1, 2, 3, 4]);
        assert_eq!(
            run(OpKind::Transpose, &[&x], list("perm", &[2, 0, 1])),
            ints(&[2, 1, 2], &[1, 3, 2, 4])
        );
    }

    #[test]
    fn concat_joins_along_the_axis() {
        let (a, b) = (ints(&[2, 1], &[1, 2]), ints(&[2, 2], &[3, 4, 5, 6]));
        let y = run(OpKind::Concat, &[&a, &b], Attrs::new().with("axis", Attr::Int(1)));
        assert_eq!(y, ints(&[2, 3], &[1, 3, 4, 2, 5, 6]));
        let y = run(
            OpKind::Concat,
            &[&ints(&[1], &[7]), &ints(&[2], &[8, 9])],
            Attrs::new().with("axis", Attr::Int(0)),
        );
        assert_eq!(y, ints(&[3], &[7, 8, 9]));
    }

    #[test]
    fn slice_reads_start_plus_step() {
        let x = ints(&[2, 4], &[0, 1, 2, 3, 4, 5, 6, 7]);
        let attrs = list("starts", &[1, 3])
            .with("ends", Attr::Ints(vec![2, -1]))
            .with("steps", Attr::Ints(vec![1, -2]));
        assert_eq!(run(OpKind::Slice, &[&x], attrs), ints(&[1, 2], &[7, 5]));
        let attrs = list("starts", &[0, 1])
            .with("ends", Attr::Ints(vec![2, 1]))
            .with("steps", Attr::Ints(vec![1, 1]));
        assert_eq!(run(OpKind::Slice, &[&x], attrs), ints(&[2, 0], &[]));
    }

    #[test]
    fn gather_picks_along_the_axis_with_negative_indices() {
        let x = ints(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let i = ints(&[2], &[2, -3]);
        let y = run(OpKind::Gather, &[&x, &i], Attrs::new().with("axis", Attr::Int(1)));
        assert_eq!(y, ints(&[2, 2], &[3, 1, 6, 4]));
        let scalar = Tensor::from_i64s(DType::I32, vec![], &[1]);
        let y = run(OpKind::Gather, &[&x, &scalar], Attrs::new().with("axis", Attr::Int(0)));
        assert_eq!(y, ints(&[3], &[4, 5, 6]));
        let bad = eval(
            OpKind::Gather,
            &[&x, &ints(&[1], &[3])],
            &Attrs::new().with("axis", Attr::Int(1)),
        );
        assert!(bad.expect("evaluable").is_err());
    }

    #[test]
    fn expand_broadcasts() {
        let x = ints(&[2, 1], &[1, 2]);
        assert_eq!(
            run(OpKind::Expand, &[&x], list("shape", &[2, 3])),
            ints(&[2, 3], &[1, 1, 1, 2, 2, 2])
        );
    }
}
