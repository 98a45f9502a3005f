//! `CausalConvWithState` (opset 27), a causal depthwise 1D convolution that carries its last
//! `k - 1` input positions from one call to the next, decomposed as its definition describes:
//! the carried state (`past_state`, zeros without it) is put in front of the input, an
//! `mx.conv` with one group per channel and no padding runs over the joined sequence, and the
//! last `k - 1` positions of that sequence are the new state. The `silu` activation (alias
//! `swish`) is `x * sigmoid(x)`, computed in f32 for 16-bit types as the reference does.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::axes::ints;
use super::build::float_compute_type;
use super::layout::{concat_values, slice_value, DimSlice};
use mxc_dialects::{Attr, Attrs, DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "CausalConvWithState", 27, LATEST, causal_conv);
}

/// The optional inputs by position.
const BIAS: usize = 2;
const PAST_STATE: usize = 3;

/// The outputs: `output` and `present_state`.
fn causal_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let silu = match ctx.node.string("activation", "none")?.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        a => return Err(format!("activation \"{a}\" is not supported (none, silu or swish)")),
    };
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let (batch, channels) = input_dims(ctx, x)?;
    let carried = kernel_size(ctx, w, x)? - 1;
    let state = match ctx.opt_input(PAST_STATE) {
        Some(past) => checked_state(ctx, past, x, [batch, channels, carried])?,
        None => zeros(ctx, ctx.ty(x).dtype, &[batch, channels, carried])?,
    };
    // a kernel of one position carries nothing: the state is empty and joins nothing
    let joined = match carried {
        0 => x,
        _ => concat_values(ctx, vec![state, x], 2)?,
    };
    let mut operands = vec![joined, w];
    operands.extend(ctx.opt_input(BIAS));
    let attrs = Attrs::new()
        .with("dilations", ints(&[1]))
        .with("group", Attr::Int(channels as i64))
        .with("pads", ints(&[0, 0]))
        .with("strides", ints(&[1]));
    let y = ctx.build1(OpKind::Conv, operands, attrs)?;
    let y = if silu { silu_of(ctx, y)? } else { y };
    let end = ctx.ty(joined).shape[2] as i64;
    let last = DimSlice {
        start: end - carried as i64,
        end,
        step: 1,
    };
    let present = slice_value(ctx, joined, &[(2, last)])?;
    Ok(vec![y, present])
}

/// The batch size and channels of `input` (`[batch, channels, length]` of a float type).
fn input_dims(ctx: &Ctx, x: ValueId) -> Result<(usize, usize), String> {
    match (&ctx.ty(x).shape[..], ctx.ty(x).dtype) {
        (&[batch, channels, _], d) if d.is_float() => Ok((batch, channels)),
        _ => Err(format!(
            "input must be [batch, channels, length] of a float type, got {}",
            ctx.ty(x)
        )),
    }
}

/// The kernel size `k` of `weight`, which must be `[channels, 1, k]` with `k >= 1`, of the
/// input's type.
fn kernel_size(ctx: &Ctx, w: ValueId, x: ValueId) -> Result<usize, String> {
    let (wt, xt) = (ctx.ty(w), ctx.ty(x));
    match wt.shape[..] {
        [c, 1, k] if c == xt.shape[1] && k >= 1 && wt.dtype == xt.dtype => Ok(k),
        _ => Err(format!(
            "weight must be [channels, 1, k] with k >= 1 and the input's element type, got {wt} for input {xt}"
        )),
    }
}

/// `past_state`, checked to be `[batch, channels, k - 1]` of the input's type.
fn checked_state(ctx: &Ctx, past: ValueId, x: ValueId, shape: [usize; 3]) -> Result<ValueId, String> {
    let t = ctx.ty(past);
    if t.shape != shape || t.dtype != ctx.ty(x).dtype {
        return Err(format!(
            "past_state must be {shape:?} of the input's element type {}, got {t}",
            ctx.ty(x).dtype
        ));
    }
    Ok(past)
}

/// A tensor of zeros: a scalar expanded (folded to a constant when small).
fn zeros(ctx: &mut Ctx, dtype: DType, shape: &[usize]) -> Result<ValueId, String> {
    let zero = ctx.scalar(dtype, 0.0);
    ctx.build1(OpKind::Expand, vec![zero], Attrs::new().with("shape", ints(shape)))
}

/// `x * sigmoid(x)`, in f32 when `x` has a narrower float type.
fn silu_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let dtype = ctx.ty(x).dtype;
    let wide = ctx.cast(x, float_compute_type(dtype))?;
    let gate = ctx.op(OpKind::Sigmoid, &[wide])?;
    let y = ctx.op(OpKind::Mul, &[wide, gate])?;
    ctx.cast(y, dtype)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;

    /// A CausalConvWithState node over input `[2, 3, 5]` with a kernel of `k` and `inputs`
    /// (`x`, `w`, and optionally `b` `[3]` and `past` `[2, 3, k - 1]`).
    fn model(k: i64, inputs: &[&str], attrs: Vec<AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(27)
            .input("x", DataType::Float16, &[2, 3, 5])
            .input("w", DataType::Float16, &[3, 1, k])
            .input("b", DataType::Float16, &[3])
            .input("past", DataType::Float16, &[2, 3, k - 1])
            .node(node("CausalConvWithState", inputs, &["y", "state"], attrs))
            .output("y")
            .output("state")
    }

    #[test]
    fn the_state_is_joined_in_front_of_a_depthwise_convolution() {
        let text = model(4, &["x", "w", "b", "past"], vec![]).text();
        for want in [
            "mx.concat %arg3, %arg0 {axis = 2}",
            "group = 3",
            "pads = [0, 0]",
            // the last 3 of the 8 joined positions
            "{ends = [2, 3, 8], starts = [0, 0, 5], steps = [1, 1, 1]}",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(!text.contains("mx.sigmoid"), "{text}");
    }

    #[test]
    fn without_a_past_state_zeros_are_carried_in() {
        let text = model(4, &["x", "w"], vec![str_attr("activation", "swish")]).text();
        assert!(text.contains("tensor<2x3x3xf16>"), "the zero state: {text}");
        // silu in f32, as the reference computes it
        for want in ["mx.concat", "mx.sigmoid", "tensor<2x3x5xf32>"] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }

    #[test]
    fn a_kernel_of_one_position_carries_an_empty_state() {
        let text = model(1, &["x", "w"], vec![]).text();
        assert!(!text.contains("mx.concat"), "{text}");
        assert!(text.contains("tensor<2x3x0xf16>"), "{text}");
    }

    #[test]
    fn unsupported_attribute_values_and_shapes_are_refused() {
        let err = model(4, &["x", "w"], vec![str_attr("activation", "gelu")]).error();
        assert!(
            err.ends_with("activation \"gelu\" is not supported (none, silu or swish)"),
            "{err}"
        );
        let err = ModelBuilder::new(27)
            .input("x", DataType::Float, &[1, 2, 4])
            .input("w", DataType::Float, &[2, 2, 3])
            .node(node("CausalConvWithState", &["x", "w"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(err.contains("weight must be [channels, 1, k]"), "{err}");
        let err = ModelBuilder::new(27)
            .input("x", DataType::Float, &[1, 2, 4])
            .input("w", DataType::Float, &[2, 1, 3])
            .input("past", DataType::Float, &[1, 2, 3])
            .node(node("CausalConvWithState", &["x", "w", "", "past"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            err.ends_with("past_state must be [1, 2, 2] of the input's element type f32, got tensor<1x2x3xf32>"),
            "{err}"
        );
    }
}
