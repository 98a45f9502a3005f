//! `Pad`: constant padding as a `concat` with blocks of the pad value (negative pads crop with
//! a `slice`); `edge`, `reflect` and `wrap` as a `gather` along each padded axis with the
//! index each output position reads. `CenterCropPad` is a centred constant pad (negative
//! amounts crop).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::tensor::check_constant;
use super::axes;
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Pad", pad);
    r.add_all("CenterCropPad", center_crop_pad);
}

/// The padding of one axis (negative amounts crop).
struct AxisPads {
    axis: usize,
    begin: i64,
    end: i64,
}

/// The pads of every padded axis.
fn pads(ctx: &Ctx, rank: usize) -> Result<Vec<AxisPads>, String> {
    let (list, axes_list) = if ctx.opset < 11 {
        let name = if ctx.opset < 2 { "paddings" } else { "pads" };
        (
            ctx.node.opt_ints(name)?.ok_or(format!("missing attribute `{name}`"))?,
            None,
        )
    } else {
        let axes_list = ctx.opt_const_input(3, "axes")?.map(|t| t.to_i64_vec());
        (ctx.const_input(1, "pads")?.to_i64_vec(), axes_list)
    };
    let axes_list = match axes_list {
        Some(a) => axes::axes(&a, rank).map(|_| a)?,
        None => (0..rank as i64).collect(),
    };
    if list.len() != 2 * axes_list.len() {
        return Err(format!("pads {list:?} must have {} entries", 2 * axes_list.len()));
    }
    let n = axes_list.len();
    (0..n)
        .map(|i| {
            Ok(AxisPads {
                axis: axes::axis(axes_list[i], rank)?,
                begin: list[i],
                end: list[i + n],
            })
        })
        .collect()
}

fn pad(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut x = ctx.input(0)?;
    let per_axis = pads(ctx, ctx.ty(x).rank())?;
    let mode = ctx.node.string("mode", "constant")?;
    let value = match mode.as_str() {
        "constant" => Some(pad_value(ctx, x)?),
        "edge" | "reflect" | "wrap" => None,
        other => return Err(format!("unknown mode \"{other}\"")),
    };
    for AxisPads { axis, begin, end } in per_axis {
        let n = ctx.ty(x).shape[axis] as i64;
        let out = n
            .checked_add(begin)
            .and_then(|m| m.checked_add(end))
            .filter(|&m| m >= 0);
        let out = out.ok_or_else(|| format!("pads {begin} and {end} remove more than axis {axis} of extent {n}"))?;
        if begin == 0 && end == 0 {
            continue;
        }
        x = match value {
            Some(v) => constant_pad(ctx, x, v, axis, begin, end)?,
            None => gather_pad(ctx, x, &mode, axis, begin, out)?,
        };
    }
    Ok(vec![x])
}

/// Each listed axis cropped or padded with zeros to the extent `shape` gives it, centred:
/// the first `(difference) / 2` (rounded down) positions are removed or added at the start.
fn center_crop_pad(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let targets = ctx.const_input(1, "shape")?.to_i64_vec();
    let list = match ctx.node.opt_ints("axes")? {
        Some(list) => list,
        None => (0..ty.rank() as i64).collect(),
    };
    if list.len() != targets.len() {
        return Err(format!("shape {targets:?} has not one entry per axis of {list:?}"));
    }
    let zero = ctx.zero(ty.dtype);
    for (&a, &target) in list.iter().zip(&targets) {
        let axis = axes::axis(a, ty.rank())?;
        if target < 0 {
            return Err(format!("shape {targets:?} has a negative extent"));
        }
        let difference = target - ty.shape[axis] as i64;
        let begin = if difference >= 0 {
            difference / 2
        } else {
            -(-difference / 2)
        };
        if difference != 0 {
            x = constant_pad(ctx, x, zero, axis, begin, difference - begin)?;
        }
    }
    Ok(vec![x])
}

/// The pad value as a scalar of x's type: the `constant_value` input (the `value` attribute
/// before opset 11), 0 when absent.
fn pad_value(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let dtype = ctx.ty(x).dtype;
    if ctx.opset < 11 {
        if dtype == DType::Str {
            return Err(format!("Pad {} takes numbers (strings from opset 11)", ctx.opset));
        }
        let v = ctx.node.float("value", 0.0)? as f64;
        return Ok(ctx.scalar(dtype, v));
    }
    match ctx.opt_input(2) {
        Some(v) if ctx.ty(v).num_elements() == 1 => reshape(ctx, v, &[]),
        Some(v) => Err(format!(
            "constant_value must be a scalar, got shape {:?}",
            ctx.ty(v).shape
        )),
        None => Ok(ctx.zero(dtype)),
    }
}

pub fn constant_pad(
    ctx: &mut Ctx,
    x: ValueId,
    value: ValueId,
    axis: usize,
    begin: i64,
    end: i64,
) -> Result<ValueId, String> {
    let n = ctx.ty(x).shape[axis] as i64;
    let mut x = x;
    if begin < 0 || end < 0 {
        let b = DimSlice {
            start: (-begin).max(0),
            end: n - (-end).max(0),
            step: 1,
        };
        x = slice_value(ctx, x, &[(axis, b)])?;
    }
    let mut parts = Vec::with_capacity(3);
    for (amount, is_begin) in [(begin, true), (end, false)] {
        if amount <= 0 {
            continue;
        }
        let mut shape = ctx.ty(x).shape.clone();
        shape[axis] = amount as usize;
        let ones = vec![1; shape.len()];
        let v = reshape(ctx, value, &ones)?;
        let block = ctx.build1(OpKind::Expand, vec![v], Attrs::new().with("shape", axes::ints(&shape)))?;
        parts.push((is_begin, block));
    }
    let mut values: Vec<ValueId> = parts.iter().filter(|p| p.0).map(|p| p.1).collect();
    values.push(x);
    values.extend(parts.iter().filter(|p| !p.0).map(|p| p.1));
    concat_values(ctx, values, axis)
}

/// The input index output position `p` of a padded axis reads, for `mode`.
pub fn source_index(mode: &str, p: i64, begin: i64, n: i64) -> i64 {
    let j = p - begin;
    match mode {
        "edge" => j.clamp(0, n - 1),
        "wrap" => j.rem_euclid(n),
        // reflect: mirrored on the first and last values, with period 2(n - 1)
        _ if n == 1 => 0,
        _ => {
            let period = 2 * (n - 1);
            let k = j.rem_euclid(period);
            if k >= n {
                period - k
            } else {
                k
            }
        }
    }
}

fn gather_pad(ctx: &mut Ctx, x: ValueId, mode: &str, axis: usize, begin: i64, out: i64) -> Result<ValueId, String> {
    let n = ctx.ty(x).shape[axis] as i64;
    if n == 0 {
        return Err(format!("cannot pad the empty axis {axis} in mode \"{mode}\""));
    }
    check_constant(&TensorType::new(DType::I64, vec![out as usize]))?;
    let indices: Vec<i64> = (0..out).map(|p| source_index(mode, p, begin, n)).collect();
    let indices = ctx.constant(Tensor::from_i64s(DType::I64, vec![indices.len()], &indices));
    ctx.build1(
        OpKind::Gather,
        vec![x, indices],
        Attrs::new().with("axis", Attr::Int(axis as i64)),
    )
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use super::source_index;

    #[test]
    fn padded_positions_read_like_numpy() {
        let row = |mode: &str, begin: i64, out: i64, n: i64| {
            (0..out).map(|p| source_index(mode, p, begin, n)).collect::<Vec<_>>()
        };
        assert_eq!(row("edge", 2, 7, 3), vec![0, 0, 0, 1, 2, 2, 2]);
        assert_eq!(row("wrap", 2, 7, 3), vec![1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(row("reflect", 2, 7, 3), vec![2, 1, 0, 1, 2, 1, 0]);
        assert_eq!(row("reflect", 2, 4, 2), vec![0, 1, 0, 1]);
        assert_eq!(row("edge", -1, 2, 3), vec![1, 2]);
    }

    #[test]
    fn constant_pads_concat_blocks_of_the_value() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .init(i64_tensor("pads", &[4], &[0, 1, -1, 2]))
            .init(f32_tensor("v", &[], &[1.5]))
            .node(node("Pad", &["x", "pads", "v"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(
            text.contains("mx.slice %arg0 {ends = [1, 3], starts = [0, 0], steps = [1, 1]} : tensor<1x3xf32>"),
            "{text}"
        );
        assert!(text.contains("dense<[1.5]> : tensor<1x1xf32>"), "{text}");
        assert!(text.contains("{axis = 1} : tensor<1x6xf32>"), "{text}");
    }
}
