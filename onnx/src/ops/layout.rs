//! Data-movement ops: `Transpose`, `Concat`, `Slice`, `Gather`, `Split` and `Tile`, with
//! their ONNX conventions (negative axes, clamped slice bounds, default permutations)
//! resolved to the explicit mx attributes.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::shape_values::SizeValues;
use super::super::tensor::check_size;
use super::axes;
use mxc_dialects::dim::infer::Target;
use mxc_dialects::dim::Dim;
use mxc_dialects::{Attr, Attrs, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Transpose", transpose);
    r.add_all("Concat", concat);
    r.add("", "Slice", 1, 9, slice_attributes);
    r.add("", "Slice", 10, LATEST, slice_inputs);
    r.add_all("Gather", gather);
    r.add_all("Split", split);
    r.add_all("Tile", tile);
}

fn transpose(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).rank();
    let perm = ctx
        .node
        .opt_ints("perm")?
        .unwrap_or_else(|| (0..rank as i64).rev().collect());
    Ok(vec![ctx.build1(
        OpKind::Transpose,
        vec![x],
        Attrs::new().with("perm", Attr::Ints(perm)),
    )?])
}

/// `mx.concat` of `values` along `axis` (a single value is returned as it is).
pub fn concat_values(ctx: &mut Ctx, values: Vec<ValueId>, axis: usize) -> Result<ValueId, String> {
    if values.len() == 1 {
        return Ok(values[0]);
    }
    ctx.build1(
        OpKind::Concat,
        values,
        Attrs::new().with("axis", Attr::Int(axis as i64)),
    )
}

fn concat(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let inputs = ctx.all_inputs()?;
    let first = *inputs.first().ok_or("needs at least one input")?;
    let default = if ctx.opset < 4 { Some(1) } else { None };
    let a = ctx
        .node
        .opt_int("axis")?
        .or(default)
        .ok_or("missing attribute `axis`")?;
    let axis = axes::axis(a, ctx.ty(first).rank())?;
    let total = inputs.iter().try_fold(0usize, |n, &v| {
        ctx.ty(v).shape.get(axis).and_then(|&d| n.checked_add(d))
    });
    let mut shape = ctx.ty(first).shape.clone();
    shape[axis] = total.ok_or("the inputs do not fit together")?;
    check_size(&shape)?;
    Ok(vec![concat_values(ctx, inputs, axis)?])
}

/// One dimension of a normalised slice: `start + i * step` for `i` in `0..extent`.
#[derive(Debug, PartialEq)]
pub struct DimSlice {
    pub start: i64,
    pub end: i64,
    pub step: i64,
}

/// The ONNX slice bounds of one axis of extent `dim`, made non-negative and clamped: with a
/// positive step, start and end lie in `0..=dim`; with a negative step, start lies in
/// `0..=dim-1` and end in `-1..=dim-1` (-1 meaning "down to and including 0").
pub fn normalise_bounds(start: i64, end: i64, step: i64, dim: usize) -> Result<DimSlice, String> {
    if step == 0 {
        return Err("a slice step is zero".into());
    }
    let n = dim as i64;
    if n == 0 {
        return Ok(DimSlice { start: 0, end: 0, step });
    }
    let wrap = |i: i64| if i < 0 { i.saturating_add(n) } else { i };
    let (start, end) = (wrap(start), wrap(end));
    let (start, end) = if step > 0 {
        (start.clamp(0, n), end.clamp(0, n))
    } else {
        (start.clamp(0, n - 1), end.clamp(-1, n - 1))
    };
    Ok(DimSlice { start, end, step })
}

/// An `mx.slice` of `x` taking `bounds` on the listed axes and whole dims elsewhere.
pub fn slice_value(ctx: &mut Ctx, x: ValueId, bounds: &[(usize, DimSlice)]) -> Result<ValueId, String> {
    if ctx.ty(x).is_symbolic() {
        return slice_fixed_axes(ctx, x, bounds);
    }
    let shape = ctx.ty(x).shape.clone();
    let mut starts = vec![0; shape.len()];
    let mut ends: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let mut steps = vec![1; shape.len()];
    for (axis, b) in bounds {
        starts[*axis] = b.start;
        ends[*axis] = b.end;
        steps[*axis] = b.step;
    }
    let attrs = Attrs::new()
        .with("starts", Attr::Ints(starts))
        .with("ends", Attr::Ints(ends))
        .with("steps", Attr::Ints(steps));
    ctx.build1(OpKind::Slice, vec![x], attrs)
}

/// `slice_value` of a value of symbolic dimensions, along axes of fixed extents (`bounds`,
/// step 1): the other axes whole, to their symbolic ends.
fn slice_fixed_axes(ctx: &mut Ctx, x: ValueId, bounds: &[(usize, DimSlice)]) -> Result<ValueId, String> {
    let dims = ctx.ty(x).dims();
    let mut starts = vec![Dim::constant(0); dims.len()];
    let mut ends = dims.clone();
    for (axis, b) in bounds {
        let fixed = dims[*axis].as_constant().is_some();
        let (Ok(start), Ok(end)) = (u64::try_from(b.start), u64::try_from(b.end)) else {
            return Err(format!(
                "axis {axis}: a slice from {} to {} over symbolic sizes",
                b.start, b.end
            ));
        };
        if !fixed || b.step != 1 {
            return Err(format!(
                "axis {axis} ({}) in steps of {}: over symbolic sizes, a fixed axis is sliced in steps of 1",
                dims[*axis], b.step
            ));
        }
        (starts[*axis], ends[*axis]) = (Dim::constant(start), Dim::constant(end));
    }
    let attrs = Attrs::new()
        .with("starts", Attr::Sizes(starts))
        .with("ends", Attr::Sizes(ends))
        .with("steps", Attr::Ints(vec![1; dims.len()]));
    ctx.build1(OpKind::Slice, vec![x], attrs)
}

/// Slice bounds as sizes, a negative one counting from the end.
fn targets(list: &[i64]) -> Vec<Target> {
    list.iter()
        .map(|&b| match b >= 0 {
            true => Target::Size(Dim::constant(b as u64)),
            false => Target::Negative(b),
        })
        .collect()
}

/// A slice over symbolic sizes (of a symbolic input, or with bounds computed from symbolic
/// sizes), step 1: each bound clamped to its axis (a negative one counted from the end, refused
/// where that could pass the axis's start), an `mx.slice` whose starts and ends are sizes.
fn symbolic_slice(
    ctx: &mut Ctx,
    starts: Vec<Target>,
    ends: Vec<Target>,
    axes_list: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dims = ctx.ty(x).dims();
    let n = starts.len();
    let axes_list = axes_list.unwrap_or_else(|| (0..n as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes_list.len() != n || steps.len() != n {
        return Err("starts, ends, axes and steps have different lengths".into());
    }
    axes::axes(&axes_list, dims.len())?;
    let (mut first, mut last) = (vec![Dim::constant(0); dims.len()], dims.clone());
    for i in 0..n {
        let axis = axes::axis(axes_list[i], dims.len())?;
        if steps[i] != 1 {
            return Err(format!(
                "a slice over symbolic sizes with step {} is not supported yet",
                steps[i]
            ));
        }
        let bound = |b: &Target| -> Result<Dim, String> {
            let d = &dims[axis];
            match b {
                Target::Size(at) => at.minimum(d),
                Target::Negative(k) => d.sub(&Dim::constant(k.unsigned_abs())),
            }
            .map_err(|e| format!("a bound of axis {axis}: {e}"))
        };
        (first[axis], last[axis]) = (bound(&starts[i])?, bound(&ends[i])?);
        // a symbol clamped to a fixed extent: the model reads no more of it than that
        if let (Target::Size(at), Some(most)) = (&ends[i], dims[axis].as_constant()) {
            if let Some(s) = at.as_symbol().filter(|s| s.bounds().1 > most) {
                let limit = crate::SizeLimit {
                    symbol: s.name.clone(),
                    most,
                    node: format!("\"{}\"", ctx.node.proto.name()),
                };
                ctx.note_limit(limit);
            }
        }
    }
    let sizes = |dims: Vec<Dim>| match dims.iter().all(|d| d.as_constant().is_some()) {
        true => Attr::Ints(dims.iter().map(|d| d.as_constant().unwrap_or(0) as i64).collect()),
        false => Attr::Sizes(dims),
    };
    let attrs = Attrs::new()
        .with("starts", sizes(first))
        .with("ends", sizes(last))
        .with("steps", Attr::Ints(vec![1; dims.len()]));
    Ok(vec![ctx.build1(OpKind::Slice, vec![x], attrs)?])
}

/// Slice before opset 10: `starts`, `ends` and the optional `axes` are attributes.
fn slice_attributes(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let starts = ctx.node.opt_ints("starts")?.ok_or("missing attribute `starts`")?;
    let ends = ctx.node.opt_ints("ends")?.ok_or("missing attribute `ends`")?;
    let axes_list = ctx.node.opt_ints("axes")?;
    slice(ctx, starts, ends, axes_list, None)
}

/// Slice from opset 10: `starts`, `ends`, `axes` and `steps` are inputs known at compile time
/// (the starts and ends may be shapes computed from symbolic sizes).
fn slice_inputs(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let list = |t: Option<Tensor>| t.map(|t| t.to_i64_vec());
    let (first, last) = (ctx.sizes_input(1), ctx.sizes_input(2));
    if first.is_some() || last.is_some() {
        let bounds = |sized: Option<SizeValues>, i: usize, name: &str| -> Result<Vec<Target>, String> {
            match sized {
                Some(s) => Ok(s.elements),
                None => Ok(targets(&ctx.const_input(i, name)?.to_i64_vec())),
            }
        };
        let (starts, ends) = (bounds(first, 1, "starts")?, bounds(last, 2, "ends")?);
        let axes_list = list(ctx.opt_const_input(3, "axes")?);
        let steps = list(ctx.opt_const_input(4, "steps")?);
        return symbolic_slice(ctx, starts, ends, axes_list, steps);
    }
    let starts = ctx.const_input(1, "starts")?.to_i64_vec();
    let ends = ctx.const_input(2, "ends")?.to_i64_vec();
    let axes_list = list(ctx.opt_const_input(3, "axes")?);
    let steps = list(ctx.opt_const_input(4, "steps")?);
    slice(ctx, starts, ends, axes_list, steps)
}

/// Slices input 0: axes default to the first ones, steps to 1.
fn slice(
    ctx: &mut Ctx,
    starts: Vec<i64>,
    ends: Vec<i64>,
    axes_list: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    if ctx.ty(x).is_symbolic() {
        return symbolic_slice(ctx, targets(&starts), targets(&ends), axes_list, steps);
    }
    let shape = ctx.ty(x).shape.clone();
    let axes_list = axes_list.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes_list.len() != starts.len() || steps.len() != starts.len() {
        return Err(format!(
            "starts, ends, axes and steps have different lengths ({}, {}, {}, {})",
            starts.len(),
            ends.len(),
            axes_list.len(),
            steps.len()
        ));
    }
    axes::axes(&axes_list, shape.len())?; // checks range and repeats
    let mut bounds = Vec::with_capacity(starts.len());
    for i in 0..starts.len() {
        let axis = axes::axis(axes_list[i], shape.len())?;
        bounds.push((axis, normalise_bounds(starts[i], ends[i], steps[i], shape[axis])?));
    }
    Ok(vec![slice_value(ctx, x, &bounds)?])
}

fn gather(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (data, mut indices) = (ctx.input(0)?, ctx.input(1)?);
    let shape = ctx.ty(data).shape.clone();
    let axis = axes::axis(ctx.node.int("axis", 0)?, shape.len())?;
    // Constant indices are made non-negative here, so that mx.gather only ever sees indices
    // in range.
    if let Some(t) = ctx.graph().constant_value(indices).cloned() {
        let extent = shape[axis] as i64;
        // along a symbolic axis an index means one element at every size only below its least
        let dim = &ctx.ty(data).dims()[axis];
        let least = dim.bounds().0;
        if let Some(i) = t
            .to_i64_vec()
            .into_iter()
            .find(|&i| dim.as_constant().is_none() && !(0..least).contains(&i))
        {
            return Err(format!(
                "index {i} of axis {axis} of the symbolic extent {dim}: only indices below its least size {least} are supported"
            ));
        }
        let fixed = t
            .to_i64_vec()
            .into_iter()
            .map(|i| {
                let j = if i < 0 { i + extent } else { i };
                if (0..extent).contains(&j) {
                    Ok(j)
                } else {
                    Err(format!("index {i} is out of range for axis {axis} of extent {extent}"))
                }
            })
            .collect::<Result<Vec<i64>, String>>()?;
        indices = ctx.constant(Tensor::from_i64s(t.dtype(), t.shape().to_vec(), &fixed));
    }
    Ok(vec![ctx.build1(
        OpKind::Gather,
        vec![data, indices],
        Attrs::new().with("axis", Attr::Int(axis as i64)),
    )?])
}

fn split(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let axis = axes::axis(ctx.node.int("axis", 0)?, shape.len())?;
    let extent = shape[axis];
    if ctx.ty(x).is_symbolic() && ctx.ty(x).fixed_dim(axis).is_none() {
        return Err(format!(
            "splitting axis {axis}, of symbolic extent {}, is not supported",
            ctx.ty(x).dims()[axis]
        ));
    }
    let given = if ctx.opset >= 13 || ctx.num_inputs() > 1 {
        ctx.opt_const_input(1, "split")?.map(|t| t.to_i64_vec())
    } else {
        ctx.node.opt_ints("split")?
    };
    let parts: Vec<usize> = match given {
        Some(list) => list
            .iter()
            .map(|&p| usize::try_from(p).map_err(|_| format!("split {list:?} has a negative part")))
            .collect::<Result<_, _>>()?,
        None => {
            let n = ctx.node.proto.output.len();
            if let Some(k) = ctx.node.opt_int("num_outputs")?.filter(|&k| k != n as i64) {
                return Err(format!("num_outputs is {k} but the node has {n} outputs"));
            }
            if n == 0 {
                return Err("splits into no outputs".into());
            }
            // equal parts, the last one smaller when the extent does not divide (opset 18)
            let part = extent.div_ceil(n);
            if ctx.opset < 18 && !extent.is_multiple_of(n) {
                return Err(format!(
                    "axis {axis} of extent {extent} does not split into {n} equal parts"
                ));
            }
            (0..n).map(|i| part.min(extent.saturating_sub(i * part))).collect()
        }
    };
    if parts.iter().try_fold(0usize, |n, &p| n.checked_add(p)) != Some(extent) {
        return Err(format!(
            "parts {parts:?} do not add up to the extent {extent} of axis {axis}"
        ));
    }
    let mut start = 0;
    let mut outputs = Vec::with_capacity(parts.len());
    for p in parts {
        let b = DimSlice {
            start: start as i64,
            end: (start + p) as i64,
            step: 1,
        };
        outputs.push(slice_value(ctx, x, &[(axis, b)])?);
        start += p;
    }
    Ok(outputs)
}

/// The most copies `Tile` makes along one axis (the operands of one `mx.concat`).
const MAX_REPEATS: i64 = 4096;

fn tile(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut x = ctx.input(0)?;
    let repeats = ctx.const_input(1, "repeats")?.to_i64_vec();
    if repeats.len() != ctx.ty(x).rank() {
        return Err(format!(
            "repeats {repeats:?} must have one entry per axis of the input ({})",
            ctx.ty(x).rank()
        ));
    }
    let mut tiled = ctx.ty(x).shape.clone();
    for (d, &r) in tiled.iter_mut().zip(&repeats) {
        *d = d.saturating_mul(usize::try_from(r).map_err(|_| format!("repeats {repeats:?} has a negative entry"))?);
    }
    check_size(&tiled)?;
    if let Some(r) = repeats.iter().find(|&&r| r > MAX_REPEATS) {
        return Err(format!("{r} repeats are more than the {MAX_REPEATS} supported"));
    }
    for (axis, &r) in repeats.iter().enumerate() {
        let r = r as usize;
        if r != 1 {
            x = ctx.build1(
                OpKind::Concat,
                vec![x; r.max(1)],
                Attrs::new().with("axis", Attr::Int(axis as i64)),
            )?;
            if r == 0 {
                let b = DimSlice {
                    start: 0,
                    end: 0,
                    step: 1,
                };
                x = slice_value(ctx, x, &[(axis, b)])?;
            }
        }
    }
    Ok(vec![x])
}

#[cfg(test)]
mod tests {
    use super::{normalise_bounds, DimSlice};

    fn b(start: i64, end: i64, step: i64) -> Result<DimSlice, String> {
        Ok(DimSlice { start, end, step })
    }

    #[test]
    fn slice_bounds_are_wrapped_and_clamped() {
        assert_eq!(normalise_bounds(0, 3, 1, 10), b(0, 3, 1));
        assert_eq!(normalise_bounds(-3, -1, 1, 10), b(7, 9, 1));
        assert_eq!(normalise_bounds(1, i64::MAX, 1, 10), b(1, 10, 1));
        assert_eq!(normalise_bounds(-100, 100, 2, 10), b(0, 10, 2));
        assert_eq!(normalise_bounds(20, 1000, 1, 10), b(10, 10, 1));
        assert_eq!(normalise_bounds(-1, i64::MIN, -1, 10), b(9, -1, -1));
        assert_eq!(normalise_bounds(20, -20, -3, 10), b(9, -1, -3));
        assert_eq!(normalise_bounds(5, 5, -1, 10), b(5, 5, -1));
        assert_eq!(normalise_bounds(0, 1, 1, 0), b(0, 0, 1));
        assert_eq!(normalise_bounds(-1, -2, -1, 0), b(0, 0, -1));
        assert!(normalise_bounds(0, 1, 0, 5).is_err());
    }
}

#[cfg(test)]
mod import_tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    /// The attributes of the single slice `Slice` (opset 13) makes of a [4, 5] input.
    fn slice13(starts: &[i64], ends: &[i64], axes: Option<&[i64]>, steps: Option<&[i64]>) -> String {
        let n = starts.len() as i64;
        let mut m = ModelBuilder::new(13)
            .input("x", DataType::Float, &[4, 5])
            .init(i64_tensor("starts", &[n], starts))
            .init(i64_tensor("ends", &[n], ends));
        let mut inputs = vec!["x", "starts", "ends"];
        if let Some(a) = axes {
            m = m.init(i64_tensor("axes", &[n], a));
            inputs.push("axes");
        }
        if let Some(s) = steps {
            if axes.is_none() {
                inputs.push("");
            }
            m = m.init(i64_tensor("steps", &[n], s));
            inputs.push("steps");
        }
        let text = m.node(node("Slice", &inputs, &["y"], vec![])).output("y").text();
        let line = text
            .lines()
            .find(|l| l.contains("mx.slice"))
            .unwrap_or_else(|| panic!("{text}"));
        line.split_once('{').map_or("", |(_, rest)| rest).to_string()
    }

    #[test]
    fn slices_normalise_to_every_dim() {
        assert_eq!(
            slice13(&[1], &[3], None, None),
            "ends = [3, 5], starts = [1, 0], steps = [1, 1]} : tensor<2x5xf32>"
        );
        assert_eq!(
            slice13(&[-2], &[i64::MAX], Some(&[-1]), None),
            "ends = [4, 5], starts = [0, 3], steps = [1, 1]} : tensor<4x2xf32>"
        );
        assert_eq!(
            slice13(&[-1], &[i64::MIN], Some(&[1]), Some(&[-2])),
            "ends = [4, -1], starts = [0, 4], steps = [1, -2]} : tensor<4x3xf32>"
        );
        assert_eq!(
            slice13(&[10, 0], &[20, 5], None, Some(&[1, 3])),
            "ends = [4, 5], starts = [4, 0], steps = [1, 3]} : tensor<0x2xf32>"
        );
        assert_eq!(
            slice13(&[3, 1], &[0, -100], Some(&[0, 1]), Some(&[-1, -1])),
            "ends = [0, -1], starts = [3, 1], steps = [-1, -1]} : tensor<3x2xf32>"
        );
    }

    #[test]
    fn opset_1_slices_take_attributes() {
        let text = ModelBuilder::new(9)
            .input("x", DataType::Float, &[4, 5])
            .node(node(
                "Slice",
                &["x"],
                &["y"],
                vec![
                    ints_attr("starts", &[1]),
                    ints_attr("ends", &[-1]),
                    ints_attr("axes", &[1]),
                ],
            ))
            .output("y")
            .text();
        assert!(
            text.contains("{ends = [4, 4], starts = [0, 1], steps = [1, 1]} : tensor<4x3xf32>"),
            "{text}"
        );
    }

    #[test]
    fn bad_slices_are_errors() {
        let err = ModelBuilder::new(13)
            .input("x", DataType::Float, &[4])
            .init(i64_tensor("s", &[1], &[0]))
            .init(i64_tensor("a", &[2], &[0, 0]))
            .node(node("Slice", &["x", "s", "s", "a"], &["y"], vec![]))
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (Slice): starts, ends, axes and steps have different lengths (1, 1, 2, 1)"
        );
    }

    #[test]
    fn gather_makes_constant_indices_non_negative() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[3, 4])
            .init(i64_tensor("i", &[2], &[-1, 0]))
            .node(node("Gather", &["x", "i"], &["y"], vec![int_attr("axis", -1)]))
            .output("y")
            .text();
        assert!(text.contains("dense<[3, 0]> : tensor<2xi64>"), "{text}");
        assert!(
            text.contains("mx.gather %arg0, %0 {axis = 1} : tensor<3x2xf32>"),
            "{text}"
        );
    }

    #[test]
    fn split_and_tile() {
        let text = ModelBuilder::new(18)
            .input("x", DataType::Float, &[5, 2])
            .node(node("Split", &["x"], &["a", "b"], vec![int_attr("num_outputs", 2)]))
            .output("a")
            .output("b")
            .text();
        assert!(
            text.contains("{ends = [3, 2], starts = [0, 0], steps = [1, 1]} : tensor<3x2xf32>"),
            "{text}"
        );
        assert!(
            text.contains("{ends = [5, 2], starts = [3, 0], steps = [1, 1]} : tensor<2x2xf32>"),
            "{text}"
        );
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[1, 2])
            .init(i64_tensor("r", &[2], &[3, 1]))
            .node(node("Tile", &["x", "r"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(
            text.contains("mx.concat %arg0, %arg0, %arg0 {axis = 0} : tensor<3x2xf32>"),
            "{text}"
        );
    }

    #[test]
    fn transpose_defaults_to_reversing() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3, 4])
            .node(node("Transpose", &["x"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(
            text.contains("mx.transpose %arg0 {perm = [2, 1, 0]} : tensor<4x3x2xf32>"),
            "{text}"
        );
    }
}
