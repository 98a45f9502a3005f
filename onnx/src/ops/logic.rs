//! Comparisons and boolean logic: `Equal`, `Less`, `Greater`, `LessOrEqual`,
//! `GreaterOrEqual`, `Not`, `And`, `Or`, `Xor`, `Where`, `IsNaN` and `IsInf`. The ops mx lacks
//! are built from `where` on bools and from `equal`, which is exact: `a <= b` is
//! `where(a < b, true, a == b)`, `a and b` is `where(a, b, false)`, `a or b` is
//! `where(a, true, b)`, `a xor b` is `where(a, not b, b)`; `isnan(x)` is `not(x == x)` (only NaN
//! differs from itself) and `isinf(x)` compares with the infinities it detects.

use super::super::ctx::Ctx;
use super::super::registry::{ParseFn, Registry};
use super::elementwise::binary_operands;
use mxc_dialects::{Attrs, DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    for (op, parse) in [
        ("Equal", equal as ParseFn),
        ("Less", less),
        ("Greater", greater),
        ("LessOrEqual", less_or_equal),
        ("GreaterOrEqual", greater_or_equal),
        ("Not", not),
        ("And", and),
        ("Or", or),
        ("Xor", xor),
        ("Where", select),
        ("IsNaN", is_nan),
        ("IsInf", is_inf),
    ] {
        r.add_all(op, parse);
    }
}

fn build(ctx: &mut Ctx, kind: OpKind, operands: Vec<ValueId>) -> Result<ValueId, String> {
    ctx.build1(kind, operands, Attrs::new())
}

fn compare(ctx: &mut Ctx, kind: OpKind) -> Result<Vec<ValueId>, String> {
    let (a, b) = binary_operands(ctx)?;
    Ok(vec![build(ctx, kind, vec![a, b])?])
}

fn equal(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    compare(ctx, OpKind::Equal)
}

fn less(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    compare(ctx, OpKind::Less)
}

fn greater(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    compare(ctx, OpKind::Greater)
}

/// `strict(a, b)` or `a == b`.
fn or_equal(ctx: &mut Ctx, strict: OpKind) -> Result<Vec<ValueId>, String> {
    let (a, b) = binary_operands(ctx)?;
    let s = build(ctx, strict, vec![a, b])?;
    let e = build(ctx, OpKind::Equal, vec![a, b])?;
    let t = ctx.scalar(DType::Bool, 1.0);
    Ok(vec![build(ctx, OpKind::Where, vec![s, t, e])?])
}

fn less_or_equal(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    or_equal(ctx, OpKind::Less)
}

fn greater_or_equal(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    or_equal(ctx, OpKind::Greater)
}

fn not(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![build(ctx, OpKind::Not, vec![x])?])
}

fn and(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (a, b) = binary_operands(ctx)?;
    let f = ctx.scalar(DType::Bool, 0.0);
    Ok(vec![build(ctx, OpKind::Where, vec![a, b, f])?])
}

fn or(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (a, b) = binary_operands(ctx)?;
    let t = ctx.scalar(DType::Bool, 1.0);
    Ok(vec![build(ctx, OpKind::Where, vec![a, t, b])?])
}

fn xor(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (a, b) = binary_operands(ctx)?;
    let not_b = build(ctx, OpKind::Not, vec![b])?;
    Ok(vec![build(ctx, OpKind::Where, vec![a, not_b, b])?])
}

fn select(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (c, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    Ok(vec![build(ctx, OpKind::Where, vec![c, x, y])?])
}

fn is_nan(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let same = build(ctx, OpKind::Equal, vec![x, x])?;
    Ok(vec![build(ctx, OpKind::Not, vec![same])?])
}

fn is_inf(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dtype = ctx.graph().ty(x).dtype;
    let positive = ctx.node.int("detect_positive", 1)? != 0;
    let negative = ctx.node.int("detect_negative", 1)? != 0;
    let is = |ctx: &mut Ctx, inf: f64| {
        let c = ctx.scalar(dtype, inf);
        build(ctx, OpKind::Equal, vec![x, c])
    };
    let result = match (positive, negative) {
        (true, true) => {
            let pos = is(ctx, f64::INFINITY)?;
            let neg = is(ctx, f64::NEG_INFINITY)?;
            let t = ctx.scalar(DType::Bool, 1.0);
            build(ctx, OpKind::Where, vec![pos, t, neg])?
        }
        (true, false) => is(ctx, f64::INFINITY)?,
        (false, true) => is(ctx, f64::NEG_INFINITY)?,
        // detects nothing: false everywhere (x < x never holds, NaN included)
        (false, false) => build(ctx, OpKind::Less, vec![x, x])?,
    };
    Ok(vec![result])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn missing_comparisons_and_logic_are_selects() {
        let text = ModelBuilder::new(16)
            .input("a", DataType::Float, &[2])
            .input("b", DataType::Float, &[2])
            .node(node("LessOrEqual", &["a", "b"], &["le"], vec![]))
            .node(node("Xor", &["le", "le"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(text.contains("%0 = mx.less %arg0, %arg1"), "{text}");
        assert!(text.contains("%1 = mx.equal %arg0, %arg1"), "{text}");
        assert!(text.contains("= mx.where %0, %2, %1"), "{text}");
        assert!(text.contains("mx.not %3"), "{text}");
    }
}
