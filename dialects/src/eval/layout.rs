//! Evaluation of the data-movement ops: transpose, concat, slice, gather, expand and bitcast
//! (reshape, identity and cast need no index arithmetic and live in `mod.rs`).

use super::index::{broadcast_offsets, map_positions, pick, strided_offsets};
use crate::narrow::wrap_int;
use crate::{strides_of, DType, Tensor, TensorType};

/// The tile side of a transpose that moves the source's contiguous axis: 16 x 16 elements,
/// whose source rows and result rows stay in the cache while the tile is copied.
const TILE: usize = 16;

/// `x`'s bits as elements of `to`, as wide as `x`'s: bytes as they are, except that a narrow
/// element keeps its low bits, re-extended as `to` holds them, and a bool is a nonzero byte.
pub fn bitcast(x: &Tensor, to: DType) -> Tensor {
    let bytes = if to.size() == 1 {
        let low_bits = ((1u16 << to.bits()) - 1) as u8;
        x.bytes()
            .iter()
            .map(|&b| match to.narrow_int() {
                Some((bits, signed)) => wrap_int(b as i64, bits, signed) as u8,
                None if to == DType::Bool => (b != 0) as u8,
                None => b & low_bits,
            })
            .collect()
    } else {
        x.bytes().to_vec()
    };
    Tensor::from_bytes(TensorType::new(to, x.shape().to_vec()), bytes).expect("a type of the same width")
}

pub fn transpose(x: &Tensor, perm: &[usize], out: &TensorType) -> Tensor {
    let (shape, perm) = simplified(x.shape(), perm);
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        // only axes of size 1 move: the same bytes (a 1x1 filter to channels last)
        return x.reshaped(out.shape.clone());
    }
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let simple = TensorType::new(out.dtype, out_shape);
    transpose_simplified(&x.reshaped(shape), &perm, &simple).reshaped(out.shape.clone())
}

/// The same transpose over fewer axes: axes of size 1 dropped, and axes that stay next to
/// each other in order merged into one (`[M, C, 3, 3]` to `[M, 3, 3, C]` is `[M, C, 9]` to
/// `[M, 9, C]`).
fn simplified(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let kept: Vec<usize> = perm.iter().copied().filter(|&p| shape[p] != 1).collect();
    // runs of source axes that follow each other in the result, in result order
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for &p in &kept {
        match runs.last_mut() {
            Some(run)
                if run
                    .last()
                    .is_some_and(|&q| q + 1 == p || (p > q && (q + 1..p).all(|a| shape[a] == 1))) =>
            {
                run.push(p)
            }
            _ => runs.push(vec![p]),
        }
    }
    // source order of the runs gives the merged source shape; their result order the perm
    let mut by_source: Vec<usize> = (0..runs.len()).collect();
    by_source.sort_by_key(|&r| runs[r][0]);
    let merged: Vec<usize> = by_source
        .iter()
        .map(|&r| runs[r].iter().map(|&a| shape[a]).product())
        .collect();
    let mut perm = vec![0; runs.len()];
    for (source, &r) in by_source.iter().enumerate() {
        perm[r] = source;
    }
    (merged, perm)
}

fn transpose_simplified(x: &Tensor, perm: &[usize], out: &TensorType) -> Tensor {
    let strides = strides_of(x.shape());
    let moved: Vec<usize> = perm.iter().map(|&p| strides[p]).collect();
    let rank = out.shape.len();
    // the result axis that reads the source contiguously, when it is not the last one
    let contiguous = (0..rank.saturating_sub(1)).find(|&d| moved[d] == 1 && out.shape[d] > 1);
    match (contiguous, x.dtype().size()) {
        (Some(axis), 4) => tiled::<4>(x, &moved, axis, out),
        (Some(axis), 8) => tiled::<8>(x, &moved, axis, out),
        _ => pick(x, &strided_offsets(&out.shape, &moved), out),
    }
}

/// A transpose of `N`-byte elements whose result axis `axis` reads the source contiguously:
/// for each position of the other axes but the last, the plane of `axis` x the last axis in
/// tiles, so that neither the reads (along `axis`) nor the writes (along the last) stride
/// through memory element by element.
fn tiled<const N: usize>(x: &Tensor, moved: &[usize], axis: usize, out: &TensorType) -> Tensor {
    let shape = &out.shape;
    let last = shape.len() - 1;
    let out_strides = strides_of(shape);
    let (rows, cols) = (shape[axis], shape[last]);
    let src = x.bytes();
    let mut data = vec![0u8; out.num_bytes()];
    // the other axes, walked as one (their source and result offsets together)
    let outer: Vec<usize> = (0..last).filter(|&d| d != axis).collect();
    let outer_shape: Vec<usize> = outer.iter().map(|&d| shape[d]).collect();
    let sources = strided_offsets(&outer_shape, &outer.iter().map(|&d| moved[d]).collect::<Vec<_>>());
    let targets = strided_offsets(&outer_shape, &outer.iter().map(|&d| out_strides[d]).collect::<Vec<_>>());
    for (from, to) in sources.into_iter().zip(targets) {
        for r0 in (0..rows).step_by(TILE) {
            for c0 in (0..cols).step_by(TILE) {
                for r in r0..(r0 + TILE).min(rows) {
                    for c in c0..(c0 + TILE).min(cols) {
                        let (i, o) = (from + r + c * moved[last], to + r * out_strides[axis] + c);
                        let element: [u8; N] = src[i * N..(i + 1) * N].try_into().expect("N bytes");
                        data[o * N..(o + 1) * N].copy_from_slice(&element);
                    }
                }
            }
        }
    }
    Tensor::from_bytes(out.clone(), data).expect("the result's size")
}

/// `pack`: `out[.., p, k, j] = x[.., k, p * panel + j]`, zero past the last column.
pub fn pack(x: &Tensor, out: &TensorType) -> Tensor {
    let rank = x.shape().len();
    let (k, n) = (x.shape()[rank - 2], x.shape()[rank - 1]);
    let r = out.shape.len();
    let (panels, rows, width) = (out.shape[r - 3], out.shape[r - 2], out.shape[r - 1]);
    // `g` depths of a column side by side (`mx::linalg::depth_pairing`)
    let g = crate::mx::depth_pairing(out.dtype);
    let panel = width / g;
    let batches: usize = x.shape()[..rank - 2].iter().product();
    let size = out.dtype.size();
    let mut data = vec![0u8; out.num_bytes()];
    for batch in 0..batches {
        let (from_base, to_base) = (batch * k * n, batch * panels * rows * width);
        for p in 0..panels {
            let columns = panel.min(n - p * panel);
            for row in 0..k {
                let from = (from_base + row * n + p * panel) * size;
                let to = (to_base + (p * rows + row / g) * width + row % g) * size;
                let source = &x.bytes()[from..from + columns * size];
                match g {
                    1 => data[to..to + columns * size].copy_from_slice(source),
                    _ => {
                        for (c, element) in source.chunks_exact(size).enumerate() {
                            let at = to + c * g * size;
                            data[at..at + size].copy_from_slice(element);
                        }
                    }
                }
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

/// `indices` as positions in `0..extent`, negative ones counting from the end; one out of
/// range is an error naming `what` it indexes.
fn resolve_indices(indices: &Tensor, extent: usize, what: &str) -> Result<Vec<usize>, String> {
    let n = extent as i64;
    indices
        .to_i64_vec()
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + n } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| j < extent)
                .ok_or_else(|| format!("index {i} is out of range for {what}"))
        })
        .collect()
}

/// `out[a..., i..., b...] = data[a..., indices[i...], b...]`, negative indices counting from
/// the end of the axis.
pub fn gather(data: &Tensor, indices: &Tensor, axis: usize, out: &TensorType) -> Result<Tensor, String> {
    let extent = data.shape()[axis];
    let resolved = resolve_indices(indices, extent, &format!("axis {axis} of extent {extent}"))?;
    let outer: usize = data.shape()[..axis].iter().product();
    let inner: usize = data.shape()[axis + 1..].iter().product();
    let mut offsets = Vec::with_capacity(out.num_elements());
    for o in 0..outer {
        for &j in &resolved {
            let base = (o * extent + j) * inner;
            offsets.extend(base..base + inner);
        }
    }
    Ok(pick(data, &offsets, out))
}

/// `scatter`: `data` with each update combined into the flat position its index names, in
/// order (an index out of range is an error here, as `gather`'s is).
pub fn scatter(data: &Tensor, indices: &Tensor, updates: &Tensor, reduction: &str) -> Result<Tensor, String> {
    let n = data.len();
    let positions = resolve_indices(indices, n, &format!("{n} elements"))?;
    let (dtype, shape) = (data.dtype(), data.shape().to_vec());
    if dtype.is_float() {
        let mut v = data.to_f64_vec();
        for (&p, u) in positions.iter().zip(updates.to_f64_vec()) {
            v[p] = match reduction {
                "add" => v[p] + u,
                "mul" => v[p] * u,
                "max" => super::elementwise::float_max(v[p], u, true),
                "min" => super::elementwise::float_max(v[p], u, false),
                _ => u,
            };
        }
        return Ok(Tensor::from_f64s(dtype, shape, &v));
    }
    let mut v = data.to_i64_vec();
    for (&p, u) in positions.iter().zip(updates.to_i64_vec()) {
        v[p] = match reduction {
            "add" => v[p].wrapping_add(u),
            "mul" => v[p].wrapping_mul(u),
            "max" if dtype.is_unsigned_int() => (v[p] as u64).max(u as u64) as i64,
            "min" if dtype.is_unsigned_int() => (v[p] as u64).min(u as u64) as i64,
            "max" => v[p].max(u),
            "min" => v[p].min(u),
            _ => u,
        };
    }
    Ok(Tensor::from_i64s(dtype, shape, &v))
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

    /// Every permutation of shapes with axes of size 1 and runs that stay together (what
    /// `simplified` drops and merges), for 1-, 4- and 8-byte elements, against the
    /// definition `y[i] = x[perm^-1 i]` computed element by element.
    #[test]
    fn transposes_with_unit_axes_and_merged_runs_follow_the_definition() {
        fn permutations(n: usize) -> Vec<Vec<usize>> {
            match n {
                0 => vec![vec![]],
                _ => permutations(n - 1)
                    .into_iter()
                    .flat_map(|p| {
                        (0..n).map(move |at| {
                            let mut q = p.clone();
                            q.insert(at, n - 1);
                            q
                        })
                    })
                    .collect(),
            }
        }
        for shape in [
            vec![2, 1, 3, 4],
            vec![3, 2, 1, 1],
            vec![1, 5, 1, 3],
            vec![17, 1, 3, 18],
            vec![1, 1, 1, 1],
        ] {
            let n: usize = shape.iter().product();
            let strides = crate::strides_of(&shape);
            for dtype in [DType::I8, DType::F32, DType::I64] {
                let x = Tensor::from_i64s(
                    dtype,
                    shape.clone(),
                    &(0..n as i64).map(|v| v % 100).collect::<Vec<_>>(),
                );
                for perm in permutations(shape.len()) {
                    let y = run(
                        OpKind::Transpose,
                        &[&x],
                        list("perm", &perm.iter().map(|&p| p as i64).collect::<Vec<_>>()),
                    );
                    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
                    assert_eq!(y.shape(), out.as_slice());
                    let mut at = vec![0; shape.len()];
                    for i in 0..n {
                        let source: usize = (0..shape.len()).map(|d| at[d] * strides[perm[d]]).sum();
                        assert_eq!(
                            y.get_i64(i),
                            x.get_i64(source),
                            "{shape:?} {perm:?} {dtype} element {i}"
                        );
                        for d in (0..out.len()).rev() {
                            at[d] += 1;
                            if at[d] < out[d] {
                                break;
                            }
                            at[d] = 0;
                        }
                    }
                }
            }
        }
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
    fn transposes_larger_than_a_tile_move_every_element() {
        // [3, 20, 37]: the tiles of 16 x 16 leave partial ones on both axes
        let shape = [3, 20, 37];
        let values: Vec<f32> = (0..3 * 20 * 37).map(|i| i as f32).collect();
        let x = Tensor::from_f32s(shape.to_vec(), &values);
        for perm in [[2, 0, 1], [0, 2, 1], [1, 2, 0], [2, 1, 0]] {
            let y = run(OpKind::Transpose, &[&x], list("perm", &perm.map(|p| p as i64)));
            let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            assert_eq!(y.shape(), out.as_slice());
            for i in 0..y.len() {
                // the result's coordinates, and the source's they come from
                let c = [i / (out[1] * out[2]), i / out[2] % out[1], i % out[2]];
                let mut src = [0; 3];
                for (d, &p) in perm.iter().enumerate() {
                    src[p] = c[d];
                }
                let at = (src[0] * 20 + src[1]) * 37 + src[2];
                assert_eq!(y.get_f64(i), at as f64, "perm {perm:?}, element {i}");
            }
        }
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
