//! `Cast` and `CastLike`, with ONNX's rules for the narrow float types. mx's store rounds to
//! nearest even without saturating (`mxc_dialects::narrow`), so a saturating conversion (the
//! default) to the 8-bit floats that have infinity or NaN codes (E4M3FN, E4M3FNUZ, E5M2,
//! E5M2FNUZ) is a clip to the type's largest value, NaN kept, before the cast. Conversions to
//! E8M0 take the default rounding only: up, saturating. `BitCast` keeps the bits
//! (`mx.bitcast`).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::tensor::require_dtype;
use mxc_dialects::narrow::Specials;
use mxc_dialects::{Attr, Attrs, DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Cast", cast);
    r.add_all("CastLike", cast_like);
    r.add_all("BitCast", bitcast);
}

fn bitcast(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let code = ctx.node.opt_int("to")?.ok_or("missing attribute `to`")?;
    let dtype = require_dtype(code as i32)?;
    if ctx.ty(x).dtype == dtype {
        return Ok(vec![x]);
    }
    Ok(vec![ctx.build1(
        OpKind::BitCast,
        vec![x],
        Attrs::new().with("to", Attr::DType(dtype)),
    )?])
}

fn cast(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let code = ctx.node.opt_int("to")?.ok_or("missing attribute `to`")?;
    let dtype = require_dtype(code as i32)?;
    let saturate = conversion_rules(ctx, dtype)?;
    Ok(vec![onnx_cast(ctx, x, dtype, saturate)?])
}

fn cast_like(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, like) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.ty(like).dtype;
    let saturate = conversion_rules(ctx, dtype)?;
    Ok(vec![onnx_cast(ctx, x, dtype, saturate)?])
}

/// The node's `saturate` (opset 19; conversions before it saturate as its default does),
/// after checking `round_mode` (opset 24), which concerns E8M0 only.
fn conversion_rules(ctx: &Ctx, dtype: DType) -> Result<bool, String> {
    let saturate = ctx.node.int("saturate", 1)? != 0;
    let round_mode = ctx.node.string("round_mode", "up")?;
    if !matches!(round_mode.as_str(), "up" | "down" | "nearest") {
        return Err(format!("round_mode {round_mode:?} is not one of up, down, nearest"));
    }
    if dtype == DType::F8E8M0FNU && (!saturate || round_mode != "up") {
        return Err(format!(
            "a cast to FLOAT8E8M0 with saturate = {} and round_mode {round_mode:?} is not supported \
             (only the default: rounding up, saturating)",
            saturate as i64
        ));
    }
    Ok(saturate)
}

/// `x` converted to `dtype` as ONNX `Cast` does, saturating to `dtype`'s range where
/// `saturate` applies (see the module comment).
pub fn onnx_cast(ctx: &mut Ctx, x: ValueId, dtype: DType, saturate: bool) -> Result<ValueId, String> {
    let from = ctx.ty(x).dtype;
    if (from == DType::Str) != (dtype == DType::Str) {
        return Err(format!(
            "a cast from {from} to {dtype} is not supported (numbers are not formatted or parsed)"
        ));
    }
    let max = match dtype.minifloat() {
        Some(format) if saturate && format.specials != Specials::Finite && from != dtype => format.max(),
        _ => return ctx.cast(x, dtype),
    };
    // clipped in the source's float type, or in f32 for integers and other narrow floats
    let x = if from.is_float() && !from.is_narrow_float() {
        x
    } else {
        ctx.cast(x, DType::F32)?
    };
    let wide = ctx.ty(x).dtype;
    let (lo, hi) = (ctx.scalar(wide, -max as f64), ctx.scalar(wide, max as f64));
    let clipped = ctx.op(OpKind::Clip, &[x, lo, hi])?;
    ctx.cast(clipped, dtype)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::{int_attr, node, str_attr, ModelBuilder};

    fn cast(to: DataType, attrs: Vec<super::super::super::proto::AttributeProto>) -> ModelBuilder {
        let mut attrs = attrs;
        attrs.push(int_attr("to", to as i64));
        ModelBuilder::new(25)
            .input("x", DataType::Float16, &[4])
            .node(node("Cast", &["x"], &["y"], attrs))
            .output("y")
    }

    #[test]
    fn a_saturating_cast_to_float8_clips_in_the_source_type_first() {
        let text = cast(DataType::Float8e5m2, vec![]).text();
        assert!(text.contains("dense<[57344.0]> : tensor<f16>"), "{text}");
        assert!(text.contains("mx.clip"), "{text}");
        let text = cast(DataType::Float8e5m2, vec![int_attr("saturate", 0)]).text();
        assert!(!text.contains("mx.clip"), "{text}");
        // E2M1 has no infinity or NaN: its store saturates by itself
        let text = cast(DataType::Float4e2m1, vec![]).text();
        assert!(
            !text.contains("mx.clip") && text.contains("tensor<4xf4e2m1fn>"),
            "{text}"
        );
        // saturate concerns the float8 types only
        let text = cast(DataType::Int4, vec![int_attr("saturate", 1)]).text();
        assert!(!text.contains("mx.clip") && text.contains("tensor<4xi4>"), "{text}");
    }

    #[test]
    fn bitcast_keeps_the_width_and_refuses_another() {
        let bitcast = |from: DataType, to: DataType| {
            ModelBuilder::new(26)
                .input("x", from, &[3])
                .node(node("BitCast", &["x"], &["y"], vec![int_attr("to", to as i64)]))
                .output("y")
        };
        let text = bitcast(DataType::Float, DataType::Int32).text();
        assert!(text.contains("mx.bitcast %arg0 {to = i32} : tensor<3xi32>"), "{text}");
        let err = bitcast(DataType::Float, DataType::Int64).error();
        assert!(
            err.contains("cannot reinterpret f32 (32 bits) as i64 (64 bits)"),
            "{err}"
        );
    }

    #[test]
    fn e8m0_rounding_other_than_the_default_is_refused_by_name() {
        assert!(cast(DataType::Float8e8m0, vec![str_attr("round_mode", "up")])
            .import()
            .is_ok());
        let err = cast(DataType::Float8e8m0, vec![str_attr("round_mode", "nearest")]).error();
        assert!(
            err.contains("a cast to FLOAT8E8M0 with saturate = 1 and round_mode \"nearest\" is not supported"),
            "{err}"
        );
        let err = cast(DataType::Float, vec![str_attr("round_mode", "sideways")]).error();
        assert!(
            err.contains("round_mode \"sideways\" is not one of up, down, nearest"),
            "{err}"
        );
    }
}
