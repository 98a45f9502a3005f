//! Type rules of the data-movement ops.
//!
//! Normalised attributes: `reshape` and `expand` carry the full result `shape`; `transpose`
//! a permutation `perm`; `concat` and `gather` a non-negative `axis`; `slice` carries
//! `starts`, `ends` and `steps` for every dimension, already clamped, so that element `i`
//! of dimension `d` reads index `starts[d] + i * steps[d]` (an `end` of -1 means "down to 0"
//! for a negative step); over symbolic sizes `starts` and `ends` may be sizes
//! (`Attr::Sizes`, positive steps: `mx::symbolic` proves them in order and inside the axis). `gather` indices may be negative, counting from the end of the axis;
//! `scatter` carries its `reduction`; `bitcast` the element type `to` of the same width.

use super::{broadcast_shapes, check_axis, same_dtype};
use crate::{Attrs, DType, TensorType};

pub fn reshape(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let shape = attrs.dims("shape")?;
    if x.with_shape(shape.clone()).checked_num_elements() != Some(x.num_elements()) {
        return Err(format!(
            "cannot reshape {:?} ({} elements) to {shape:?}",
            x.shape,
            x.num_elements()
        ));
    }
    Ok(x.with_shape(shape))
}

pub fn transpose(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let perm = attrs.dims("perm")?;
    let mut seen = vec![false; x.rank()];
    if perm.len() != x.rank()
        || perm
            .iter()
            .any(|&p| p >= x.rank() || std::mem::replace(&mut seen[p], true))
    {
        return Err(format!("perm {perm:?} is not a permutation of the {} axes", x.rank()));
    }
    Ok(x.with_shape(perm.iter().map(|&p| x.shape[p]).collect()))
}

pub fn concat(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let first = &ops[0];
    let axis = check_axis(attrs.int("axis")?, first.rank(), "axis")?;
    let mut shape = first.shape.clone();
    for t in &ops[1..] {
        same_dtype(first, t, "operands")?;
        let agrees = t.rank() == first.rank() && (0..t.rank()).all(|d| d == axis || t.shape[d] == first.shape[d]);
        if !agrees {
            return Err(format!(
                "operand shapes {:?} and {:?} differ off axis {axis}",
                first.shape, t.shape
            ));
        }
        shape[axis] = shape[axis]
            .checked_add(t.shape[axis])
            .ok_or("concatenated extent overflows")?;
    }
    Ok(first.with_shape(shape))
}

/// Number of elements a normalised slice of one dimension takes.
pub fn slice_extent(start: i64, end: i64, step: i64) -> usize {
    if step > 0 && end > start {
        ((end - start + step - 1) / step) as usize
    } else if step < 0 && end < start {
        ((start - end + (-step) - 1) / -step) as usize
    } else {
        0
    }
}

pub fn slice(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let (starts, ends, steps) = (attrs.int_list("starts")?, attrs.int_list("ends")?, attrs.ints("steps")?);
    if starts.len() != x.rank() || ends.len() != x.rank() || steps.len() != x.rank() {
        return Err(format!("starts, ends and steps must have {} entries", x.rank()));
    }
    let mut shape = Vec::with_capacity(x.rank());
    for d in 0..x.rank() {
        let (s, e, st, n) = (starts[d], ends[d], steps[d], x.shape[d] as i64);
        if st == 0 {
            return Err(format!("step of axis {d} is zero"));
        }
        let extent = slice_extent(s, e, st);
        let in_range = |i: i64| (0..n).contains(&i);
        if extent > 0 && !(in_range(s) && in_range(s + (extent as i64 - 1) * st)) {
            return Err(format!("slice {s}:{e}:{st} leaves axis {d} of extent {n}"));
        }
        shape.push(extent);
    }
    Ok(x.with_shape(shape))
}

pub fn gather(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (data, indices) = (&ops[0], &ops[1]);
    let axis = check_axis(attrs.int("axis")?, data.rank(), "axis")?;
    if !indices.dtype.is_int() {
        return Err(format!("indices must be integers, got {}", indices.dtype));
    }
    let mut shape = data.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&data.shape[axis + 1..]);
    Ok(data.with_shape(shape))
}

/// The ways `scatter` combines an update with the value it lands on.
pub const SCATTER_REDUCTIONS: [&str; 5] = ["none", "add", "mul", "max", "min"];

/// `scatter(data, indices, updates)`: a copy of `data` with `updates[j]` written at flat
/// position `indices[j]` of it (negative positions count from the end, others out of range
/// are clamped), in order of `j`, combined with what is there by `reduction`.
pub fn scatter(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (data, indices, updates) = (&ops[0], &ops[1], &ops[2]);
    let reduction = attrs.str("reduction")?;
    if !SCATTER_REDUCTIONS.contains(&reduction) {
        return Err(format!(
            "reduction must be one of {SCATTER_REDUCTIONS:?}, got {reduction:?}"
        ));
    }
    if !indices.dtype.is_int() || indices.rank() != 1 {
        return Err(format!("indices must be a vector of integers, got {indices}"));
    }
    if updates.shape != indices.shape {
        return Err(format!(
            "updates {:?} must have the shape of indices {:?}",
            updates.shape, indices.shape
        ));
    }
    same_dtype(data, updates, "data and updates")?;
    if data.dtype == DType::Bool && reduction != "none" {
        return Err(format!("reduction {reduction:?} of bool tensors"));
    }
    Ok(data.clone())
}

pub fn expand(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let shape = attrs.dims("shape")?;
    if broadcast_shapes(&x.shape, &shape)? != shape {
        return Err(format!("{:?} does not expand to {shape:?}", x.shape));
    }
    Ok(x.with_shape(shape))
}

/// `bitcast`: the same bits as elements of type `to`, which must be as wide (`DType::bits`).
pub fn bitcast(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let to = attrs.dtype("to")?;
    if to.bits() != x.dtype.bits() {
        return Err(format!(
            "cannot reinterpret {} ({} bits) as {to} ({} bits)",
            x.dtype,
            x.dtype.bits(),
            to.bits()
        ));
    }
    Ok(x.with_dtype(to))
}
