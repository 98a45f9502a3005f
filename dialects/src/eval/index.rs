//! Index arithmetic shared by the evaluators: mapping result positions to operand positions
//! under broadcasting, and building tensors by copying elements.

use crate::{strides_of, Tensor, TensorType};

/// For every element of a tensor of shape `out` (row-major), the offset of the element of a
/// tensor of shape `shape` that numpy broadcasting reads for it.
pub fn broadcast_offsets(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = strides_of(shape);
    let lead = out.len() - shape.len();
    let strides: Vec<usize> = (0..out.len())
        .map(|d| match d.checked_sub(lead) {
            Some(i) if shape[i] != 1 => own[i],
            _ => 0,
        })
        .collect();
    strided_offsets(out, &strides)
}

/// For every position of `shape` (row-major), `sum of coordinate * stride`: the offsets a
/// strided walk reads (a transpose, a broadcast), kept up to date as the position advances.
pub fn strided_offsets(shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut coords = vec![0; shape.len()];
    let mut offset = 0usize;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(offset);
        for d in (0..shape.len()).rev() {
            coords[d] += 1;
            offset += strides[d];
            if coords[d] < shape[d] {
                break;
            }
            offset -= strides[d] * shape[d];
            coords[d] = 0;
        }
    }
    out
}

/// Calls `f` with the coordinates of every position of `shape`, in row-major order.
pub fn map_positions<T>(shape: &[usize], mut f: impl FnMut(&[usize]) -> T) -> Vec<T> {
    let n: usize = shape.iter().product();
    let mut coords = vec![0; shape.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(f(&coords));
        for d in (0..shape.len()).rev() {
            coords[d] += 1;
            if coords[d] < shape[d] {
                break;
            }
            coords[d] = 0;
        }
    }
    out
}

/// A tensor of type `ty` whose element `i` is element `offsets[i]` of `src` (same dtype).
pub fn pick(src: &Tensor, offsets: &[usize], ty: &TensorType) -> Tensor {
    let bytes = src.bytes();
    // elements copied as arrays of their size (1, 2, 4 or 8 bytes), not a call per element
    let data = match src.dtype().size() {
        1 => gather::<1>(bytes, offsets),
        2 => gather::<2>(bytes, offsets),
        4 => gather::<4>(bytes, offsets),
        size => {
            assert_eq!(size, 8, "element types are 1, 2, 4 or 8 bytes");
            gather::<8>(bytes, offsets)
        }
    };
    Tensor::from_bytes(ty.clone(), data).expect("one element per position of the result")
}

/// The `N`-byte elements of `bytes` at `offsets` (in elements), in order.
fn gather<const N: usize>(bytes: &[u8], offsets: &[usize]) -> Vec<u8> {
    let mut data = Vec::with_capacity(offsets.len() * N);
    for &o in offsets {
        let element: [u8; N] = bytes[o * N..(o + 1) * N].try_into().expect("N bytes");
        data.extend_from_slice(&element);
    }
    data
}
