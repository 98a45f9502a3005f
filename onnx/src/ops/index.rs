//! Indexing by run-time indices: `GatherElements` and `GatherND` as one `mx.gather` from the
//! flattened data at a computed flat index (negative indices wrapped, the flat index built
//! from ramps and strides); `ScatterElements`, `Scatter`, `ScatterND` and `TensorScatter` as
//! one `mx.scatter` into the flattened data at flat positions computed the same way; and
//! `OneHot` as a comparison with a ramp along the new axis.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::shape_values::SizeValues;
use super::super::tensor::check_constant;
use super::axes;
use super::shape::{self, reshape};
use mxc_dialects::dim::Dim;
use mxc_dialects::mx::SCATTER_REDUCTIONS;
use mxc_dialects::{strides_of, Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("GatherElements", gather_elements);
    r.add_all("GatherND", gather_nd);
    r.add_all("OneHot", one_hot);
    r.add("", "Scatter", 9, 10, scatter_elements);
    r.add_all("ScatterElements", scatter_elements);
    r.add_all("ScatterND", scatter_nd);
    r.add_all("TensorScatter", tensor_scatter);
    r.add_all("ReverseSequence", reverse_sequence);
}

/// `data` seen as `rows` rows of shape `rest`, gathered at the rows `flat`.
fn gather_flat(ctx: &mut Ctx, data: ValueId, rows: usize, rest: &[usize], flat: ValueId) -> Result<ValueId, String> {
    let mut shape = vec![rows];
    shape.extend(rest);
    let flat_data = reshape(ctx, data, &shape)?;
    ctx.build1(
        OpKind::Gather,
        vec![flat_data, flat],
        Attrs::new().with("axis", Attr::Int(0)),
    )
}

/// `indices` as i64 with negative entries counted from the end of an axis of `extent`.
fn non_negative(ctx: &mut Ctx, indices: ValueId, extent: ValueId) -> Result<ValueId, String> {
    let i = ctx.cast(indices, DType::I64)?;
    ctx.wrap_negative(i, extent)
}

fn gather_elements(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (data, indices) = (ctx.input(0)?, ctx.input(1)?);
    let axis = axes::axis(ctx.node.int("axis", 0)?, ctx.ty(data).rank())?;
    Ok(vec![take_along_axis(ctx, data, indices, axis)?])
}

/// `out[p] = data[p with p[axis] replaced by indices[p]]` (numpy's `take_along_axis`): the
/// flat index is the ramp of each other axis times its stride in `data`, plus the index
/// times the stride of `axis`.
pub fn take_along_axis(ctx: &mut Ctx, data: ValueId, indices: ValueId, axis: usize) -> Result<ValueId, String> {
    let data_shape = ctx.ty(data).shape.clone();
    let index_shape = ctx.ty(indices).shape.clone();
    let rank = data_shape.len();
    if index_shape.len() != rank {
        return Err(format!("indices of rank {} for data of rank {rank}", index_shape.len()));
    }
    if let Some(d) = (0..rank).find(|&d| d != axis && index_shape[d] > data_shape[d]) {
        return Err(format!(
            "indices shape {index_shape:?} exceeds data shape {data_shape:?} on axis {d}"
        ));
    }
    let extent = ctx.scalar(DType::I64, data_shape[axis] as f64);
    let i = non_negative(ctx, indices, extent)?;
    let flat = flat_positions(ctx, &data_shape, &index_shape, i, axis)?;
    gather_flat(ctx, data, data_shape.iter().product(), &[], flat)
}

/// The flat positions in a tensor of `data_shape` of the positions of a tensor of `extents`
/// (the same rank) whose coordinate along `axis` is replaced by `along` (non-negative i64,
/// broadcasting to `extents`): `along` times the stride of `axis`, plus each other axis's
/// ramp times its stride.
fn flat_positions(
    ctx: &mut Ctx,
    data_shape: &[usize],
    extents: &[usize],
    along: ValueId,
    axis: usize,
) -> Result<ValueId, String> {
    let strides = strides_of(data_shape);
    let rank = data_shape.len();
    let stride = ctx.scalar(DType::I64, strides[axis] as f64);
    let mut flat = ctx.op(OpKind::Mul, &[along, stride])?;
    for d in (0..rank).filter(|&d| d != axis) {
        let mut shape = vec![1; rank];
        shape[d] = extents[d];
        check_constant(&TensorType::new(DType::I64, shape.clone()))?;
        let offsets: Vec<i64> = (0..extents[d]).map(|k| (k * strides[d]) as i64).collect();
        let ramp = ctx.constant(Tensor::from_i64s(DType::I64, shape, &offsets));
        flat = ctx.op(OpKind::Add, &[flat, ramp])?;
    }
    Ok(flat)
}

/// `out[b, m] = data[b, indices[b, m, 0..k], ...]` with `b` the `batch_dims` leading dims:
/// the data is seen as rows of its trailing dims, and each index tuple becomes the row
/// `b * (rows per batch) + sum_j indices[.., j] * stride_j`.
fn gather_nd(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (data, indices) = (ctx.input(0)?, ctx.input(1)?);
    let data_shape = ctx.ty(data).shape.clone();
    let batch = usize::try_from(ctx.node.int("batch_dims", 0)?).map_err(|_| "batch_dims must not be negative")?;
    if ctx.ty(data).is_symbolic() || ctx.ty(indices).is_symbolic() {
        return symbolic_gather_nd(ctx, data, indices, batch);
    }
    let rows = nd_rows(ctx, &data_shape, indices, batch)?;
    Ok(vec![gather_flat(ctx, data, rows.count, &rows.rest, rows.index)?])
}

/// `GatherND` over symbolic sizes, without batch dimensions: the row of the data seen as
/// `[rows, rest...]` each index tuple names, `sum_j index_j * stride_j` (negative entries
/// counted from the end), the extents and strides sizes computed at run time.
fn symbolic_gather_nd(ctx: &mut Ctx, data: ValueId, indices: ValueId, batch: usize) -> Result<Vec<ValueId>, String> {
    let dims = ctx.ty(data).dims();
    let index_dims = ctx.ty(indices).dims();
    let k = match index_dims.last().and_then(Dim::as_constant) {
        Some(k) if batch == 0 && (k as usize) <= dims.len() => k as usize,
        _ => {
            return Err(format!(
                "a GatherND over symbolic sizes with batch_dims {batch} and indices of {} is not supported \
                 (batch_dims 0 and a fixed tuple length are)",
                ctx.ty(indices)
            ))
        }
    };
    let indexed = &dims[..k];
    let strides: Vec<Dim> = (0..k)
        .map(|j| shape::product(&indexed[j + 1..]))
        .collect::<Result<_, _>>()?;
    let vector = |values: &[Dim]| SizeValues {
        scalar: false,
        ..SizeValues::of_dims(values)
    };
    let extents = ctx.sizes_at_run_time(&vector(indexed))?;
    let strides = ctx.sizes_at_run_time(&vector(&strides))?;
    let i = non_negative(ctx, indices, extents)?;
    let scaled = ctx.op(OpKind::Mul, &[i, strides])?;
    let index = ctx.reduce(OpKind::ReduceSum, scaled, &[index_dims.len() - 1], false)?;
    let mut flat = vec![shape::product(indexed)?];
    flat.extend_from_slice(&dims[k..]);
    let flat_data = shape::reshape_dims(ctx, data, &flat)?;
    Ok(vec![ctx.build1(
        OpKind::Gather,
        vec![flat_data, index],
        Attrs::new().with("axis", Attr::Int(0)),
    )?])
}

/// The rows of a tensor seen as `[count, rest...]` that ND index tuples name.
struct NdRows {
    /// i64, of the indices' shape without its last dim.
    index: ValueId,
    count: usize,
    rest: Vec<usize>,
}

/// The row each index tuple of `indices` (`[b..., m..., k]`) names in data of `data_shape`
/// (`[b..., d_0..d_k-1, rest...]`, the `batch` leading dims shared): `b * (rows per batch) +
/// sum_j index_j * stride_j`, negative entries counted from the end.
fn nd_rows(ctx: &mut Ctx, data_shape: &[usize], indices: ValueId, batch: usize) -> Result<NdRows, String> {
    let index_shape = ctx.ty(indices).shape.clone();
    let Some(&k) = index_shape.last() else {
        return Err("indices must have at least one dim".into());
    };
    if batch >= index_shape.len() || batch + k > data_shape.len() || data_shape[..batch] != index_shape[..batch] {
        return Err(format!(
            "indices shape {index_shape:?} does not index data shape {data_shape:?} with batch_dims {batch}"
        ));
    }
    let indexed = &data_shape[batch..batch + k];
    let rows_per_batch: usize = indexed.iter().product();
    let batches: usize = data_shape[..batch].iter().product();
    let rank = index_shape.len();
    let extents: Vec<i64> = indexed.iter().map(|&n| n as i64).collect();
    let extents = ctx.constant(Tensor::from_i64s(DType::I64, vec![k], &extents));
    let i = non_negative(ctx, indices, extents)?;
    let strides: Vec<i64> = strides_of(indexed).iter().map(|&s| s as i64).collect();
    let strides = ctx.constant(Tensor::from_i64s(DType::I64, vec![k], &strides));
    let scaled = ctx.op(OpKind::Mul, &[i, strides])?;
    let mut index = ctx.reduce(OpKind::ReduceSum, scaled, &[rank - 1], false)?;
    if batch > 0 {
        let starts: Vec<i64> = (0..batches).map(|b| (b * rows_per_batch) as i64).collect();
        let mut shape = index_shape[..batch].to_vec();
        shape.extend(vec![1; rank - 1 - batch]);
        let starts = ctx.constant(Tensor::from_i64s(DType::I64, shape, &starts));
        index = ctx.op(OpKind::Add, &[index, starts])?;
    }
    Ok(NdRows {
        index,
        count: batches * rows_per_batch,
        rest: data_shape[batch + k..].to_vec(),
    })
}

/// The node's `reduction` (absent before the opsets that added it: "none").
fn reduction(ctx: &Ctx) -> Result<String, String> {
    let r = ctx.node.string("reduction", "none")?;
    if !SCATTER_REDUCTIONS.contains(&r.as_str()) {
        return Err(format!("reduction {r:?} is not one of {SCATTER_REDUCTIONS:?}"));
    }
    Ok(r)
}

/// `data` with `updates` combined into the flat positions `positions` (both of one shape).
pub fn scatter_flat(
    ctx: &mut Ctx,
    data: ValueId,
    positions: ValueId,
    updates: ValueId,
    reduction: &str,
) -> Result<ValueId, String> {
    let shape = ctx.ty(data).shape.clone();
    let count = ctx.ty(positions).num_elements();
    if ctx.ty(updates).num_elements() != count {
        return Err(format!(
            "updates of shape {:?} for {count} positions",
            ctx.ty(updates).shape
        ));
    }
    let n = shape.iter().product();
    let flat_data = reshape(ctx, data, &[n])?;
    let positions = reshape(ctx, positions, &[count])?;
    let updates = reshape(ctx, updates, &[count])?;
    let scattered = ctx.build1(
        OpKind::Scatter,
        vec![flat_data, positions, updates],
        Attrs::new().with("reduction", Attr::Str(reduction.into())),
    )?;
    reshape(ctx, scattered, &shape)
}

/// `ScatterElements` (and `Scatter`, its name before opset 11): `updates[p]` combined into
/// `data[p with p[axis] replaced by indices[p]]`.
fn scatter_elements(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (data, indices, updates) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let data_shape = ctx.ty(data).shape.clone();
    let index_shape = ctx.ty(indices).shape.clone();
    let axis = axes::axis(ctx.node.int("axis", 0)?, data_shape.len())?;
    if index_shape.len() != data_shape.len() || ctx.ty(updates).shape != index_shape {
        return Err(format!(
            "indices {index_shape:?} and updates {:?} must have one shape, of data's rank {}",
            ctx.ty(updates).shape,
            data_shape.len()
        ));
    }
    let reduction = reduction(ctx)?;
    let extent = ctx.scalar(DType::I64, data_shape[axis] as f64);
    let i = non_negative(ctx, indices, extent)?;
    let positions = flat_positions(ctx, &data_shape, &index_shape, i, axis)?;
    Ok(vec![scatter_flat(ctx, data, positions, updates, &reduction)?])
}

/// `ScatterND`: each index tuple names a row of `data` (as `GatherND` reads it), which the
/// matching row of `updates` is combined into.
fn scatter_nd(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (data, indices, updates) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let data_shape = ctx.ty(data).shape.clone();
    let reduction = reduction(ctx)?;
    let rows = nd_rows(ctx, &data_shape, indices, 0)?;
    let width: usize = rows.rest.iter().product();
    let row_shape = ctx.ty(rows.index).shape.clone();
    let mut column = row_shape.clone();
    column.push(1);
    let starts = reshape(ctx, rows.index, &column)?;
    let w = ctx.scalar(DType::I64, width as f64);
    let starts = ctx.op(OpKind::Mul, &[starts, w])?;
    let ramp = ctx.ramp(width, column.len() - 1, column.len(), DType::I64)?;
    let positions = ctx.op(OpKind::Add, &[starts, ramp])?;
    Ok(vec![scatter_flat(ctx, data, positions, updates, &reduction)?])
}

/// `TensorScatter`: `update` written into the cache along `axis` from each batch entry's write
/// index (0 without `write_indices`), wrapping around the axis in "circular" mode.
fn tensor_scatter(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (cache, update) = (ctx.input(0)?, ctx.input(1)?);
    let cache_shape = ctx.ty(cache).shape.clone();
    let update_shape = ctx.ty(update).shape.clone();
    let rank = cache_shape.len();
    let axis = axes::axis(ctx.node.int("axis", -2)?, rank)?;
    let circular = match ctx.node.string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        other => return Err(format!("mode {other:?} is not \"linear\" or \"circular\"")),
    };
    let fits = update_shape.len() == rank
        && axis > 0
        && (0..rank).all(|d| d == axis || update_shape[d] == cache_shape[d])
        && update_shape[axis] <= cache_shape[axis];
    if !fits {
        return Err(format!(
            "update {update_shape:?} does not fit cache {cache_shape:?} along axis {axis}"
        ));
    }
    let mut along = ctx.ramp(update_shape[axis], axis, rank, DType::I64)?;
    if let Some(w) = ctx.opt_input(2) {
        let mut shape = vec![1; rank];
        shape[0] = cache_shape[0];
        let w = ctx.cast(w, DType::I64)?;
        let w = reshape(ctx, w, &shape)?;
        along = ctx.op(OpKind::Add, &[along, w])?;
    }
    if circular {
        let n = ctx.scalar(DType::I64, cache_shape[axis] as f64);
        let quotient = ctx.op(OpKind::Div, &[along, n])?;
        let whole = ctx.op(OpKind::Mul, &[quotient, n])?;
        along = ctx.op(OpKind::Sub, &[along, whole])?;
    }
    let positions = flat_positions(ctx, &cache_shape, &update_shape, along, axis)?;
    let full = ctx.build1(
        OpKind::Expand,
        vec![positions],
        Attrs::new().with("shape", axes::ints(&update_shape)),
    )?;
    Ok(vec![scatter_flat(ctx, cache, full, update, "none")?])
}

/// `ReverseSequence`: along `time_axis`, the first `sequence_lens[b]` entries of each batch
/// entry `b` reversed, the rest kept: a `take_along_axis` at `t < len ? len - 1 - t : t`.
fn reverse_sequence(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, lengths) = (ctx.input(0)?, ctx.input(1)?);
    let shape = ctx.ty(x).shape.clone();
    let rank = shape.len();
    let time = axes::axis(ctx.node.int("time_axis", 0)?, rank)?;
    let batch = axes::axis(ctx.node.int("batch_axis", 1)?, rank)?;
    if rank < 2 || time == batch || ctx.ty(lengths).shape != [shape[batch]] {
        return Err(format!(
            "sequence_lens {:?} with batch_axis {batch} and time_axis {time} do not fit input {shape:?}",
            ctx.ty(lengths).shape
        ));
    }
    let mut along_batch = vec![1; rank];
    along_batch[batch] = shape[batch];
    let lengths = ctx.cast(lengths, DType::I64)?;
    let lengths = reshape(ctx, lengths, &along_batch)?;
    let t = ctx.ramp(shape[time], time, rank, DType::I64)?;
    let inside = ctx.op(OpKind::Less, &[t, lengths])?;
    let one = ctx.scalar(DType::I64, 1.0);
    let end = ctx.op(OpKind::Sub, &[lengths, one])?;
    let mirrored = ctx.op(OpKind::Sub, &[end, t])?;
    let index = ctx.op(OpKind::Where, &[inside, mirrored, t])?;
    let index = ctx.build1(
        OpKind::Expand,
        vec![index],
        Attrs::new().with("shape", axes::ints(&shape)),
    )?;
    Ok(vec![take_along_axis(ctx, x, index, time)?])
}

/// `out = where(indices == ramp, on, off)` with the ramp `0..depth` along the new axis;
/// indices (of any numeric type, truncated) may count from the end.
fn one_hot(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (indices, values) = (ctx.input(0)?, ctx.input(2)?);
    let depth = ctx.const_number(1, "depth")?.get_f64(0);
    if !(depth >= 1.0 && depth.is_finite()) {
        return Err(format!("depth must be at least 1, got {depth}"));
    }
    let depth = depth as usize;
    let index_shape = ctx.ty(indices).shape.clone();
    let rank = index_shape.len() + 1;
    let axis = axes::axis(ctx.node.int("axis", -1)?, rank)?;
    if ctx.ty(values).num_elements() != 2 {
        return Err(format!(
            "values must hold two entries (off, on), got shape {:?}",
            ctx.ty(values).shape
        ));
    }
    let extent = ctx.scalar(DType::I64, depth as f64);
    let i = non_negative(ctx, indices, extent)?;
    let mut shape = index_shape.clone();
    shape.insert(axis, 1);
    let i = reshape(ctx, i, &shape)?;
    let ramp = ctx.ramp(depth, axis, rank, DType::I64)?;
    let hot = ctx.op(OpKind::Equal, &[i, ramp])?;
    let flat_values = reshape(ctx, values, &[2])?;
    let pick = |ctx: &mut Ctx, k: i64| {
        let at = ctx.constant(Tensor::from_i64s(DType::I64, vec![], &[k]));
        ctx.build1(
            OpKind::Gather,
            vec![flat_values, at],
            Attrs::new().with("axis", Attr::Int(0)),
        )
    };
    let (off, on) = (pick(ctx, 0)?, pick(ctx, 1)?);
    Ok(vec![ctx.op(OpKind::Where, &[hot, on, off])?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::{DType, Tensor};

    fn ints(shape: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_i64s(DType::I64, shape.to_vec(), v)
    }

    fn floats(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32s(shape.to_vec(), v)
    }

    #[test]
    fn gather_elements_reads_along_the_axis_with_negative_indices() {
        let g = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .input("i", DataType::Int64, &[2, 2])
            .node(node("GatherElements", &["x", "i"], &["y"], vec![int_attr("axis", 1)]))
            .output("y")
            .import()
            .unwrap();
        let x = floats(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let y = run(&g, &[x, ints(&[2, 2], &[2, 0, -1, 1])]).unwrap();
        assert_eq!(y[0].to_f64_vec(), [3., 1., 6., 5.]);
    }

    #[test]
    fn gather_nd_indexes_leading_dims_per_batch() {
        let g = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 2, 2])
            .input("i", DataType::Int64, &[2, 1])
            .node(node("GatherND", &["x", "i"], &["y"], vec![int_attr("batch_dims", 1)]))
            .output("y")
            .import()
            .unwrap();
        let x = floats(&[2, 2, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]);
        let y = run(&g, &[x, ints(&[2, 1], &[1, -2])]).unwrap();
        assert_eq!(y[0].shape(), [2, 2]);
        assert_eq!(y[0].to_f64_vec(), [2., 3., 4., 5.]);
    }

    #[test]
    fn one_hot_places_the_new_axis() {
        let g = ModelBuilder::new(11)
            .input("i", DataType::Int64, &[2])
            .init(i64_tensor("depth", &[], &[3]))
            .init(f32_tensor("values", &[2], &[0., 5.]))
            .node(node(
                "OneHot",
                &["i", "depth", "values"],
                &["y"],
                vec![int_attr("axis", 0)],
            ))
            .output("y")
            .import()
            .unwrap();
        let y = run(&g, &[ints(&[2], &[2, -3])]).unwrap();
        assert_eq!(y[0].shape(), [3, 2]);
        assert_eq!(y[0].to_f64_vec(), [0., 5., 0., 0., 5., 0.]);
    }

    #[test]
    fn gather_elements_checks_ranks() {
        let m = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .input("i", DataType::Int64, &[2])
            .node(node("GatherElements", &["x", "i"], &["y"], vec![]))
            .output("y");
        let err = m.error();
        assert!(err.contains("indices of rank 1 for data of rank 2"), "{err}");
    }

    fn scatter_nd(reduction: &str) -> ModelBuilder {
        ModelBuilder::new(18)
            .input("x", DataType::Float, &[3, 2])
            .input("i", DataType::Int64, &[3, 1])
            .input("u", DataType::Float, &[3, 2])
            .node(node(
                "ScatterND",
                &["x", "i", "u"],
                &["y"],
                vec![str_attr("reduction", reduction)],
            ))
            .output("y")
    }

    #[test]
    fn scatter_nd_adds_duplicate_rows_in_order() {
        let g = scatter_nd("add").import().unwrap();
        let x = floats(&[3, 2], &[1., 1., 1., 1., 1., 1.]);
        let u = floats(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let y = run(&g, &[x, ints(&[3, 1], &[0, -1, 0]), u]).unwrap();
        assert_eq!(y[0].to_f64_vec(), [7., 9., 1., 1., 4., 5.]);
        let err = scatter_nd("sub").error();
        assert!(err.contains("reduction \"sub\" is not one of"), "{err}");
    }
}
