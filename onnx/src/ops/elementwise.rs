//! Element-wise arithmetic and math: `Add`, `Sub`, `Mul`, `Div`, `Pow`, `Mod` (of integers; of
//! floats in `math`),
//! the variadic `Max`, `Min`, `Sum`, `Mean`, and the unary functions (`Sqrt`, `Exp`, `Erf`,
//! `Relu`, the trigonometric functions, ...).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::axes;
use super::shape::reshape;
use mxc_dialects::{Attrs, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    for (op, parse) in [
        ("Add", add as super::super::registry::ParseFn),
        ("Sub", sub),
        ("Mul", mul),
        ("Div", div),
        ("Pow", pow),
        ("Max", max),
        ("Min", min),
        ("Sum", sum),
        ("Mean", mean),
        ("Mod", modulo),
        ("Sqrt", sqrt),
        ("Exp", exp),
        ("Log", log),
        ("Neg", neg),
        ("Abs", abs),
        ("Reciprocal", reciprocal),
        ("Floor", floor),
        ("Ceil", ceil),
        ("Erf", erf),
        ("Sigmoid", sigmoid),
        ("Tanh", tanh),
        ("Relu", relu),
        ("Sin", sin),
        ("Cos", cos),
        ("Tan", tan),
        ("Asin", asin),
        ("Acos", acos),
        ("Atan", atan),
    ] {
        r.add_all(op, parse);
    }
}

macro_rules! by_kind {
    ($helper:ident: $($f:ident => $kind:ident),* $(,)?) => {
        $(fn $f(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
            $helper(ctx, OpKind::$kind)
        })*
    };
}

by_kind!(binary: add => Add, sub => Sub, mul => Mul, div => Div, pow => Pow);
by_kind!(variadic: max => Max, min => Min, sum => Add);
by_kind!(unary: sqrt => Sqrt, exp => Exp, log => Log, neg => Neg, abs => Abs, reciprocal => Reciprocal,
    floor => Floor, ceil => Ceil, erf => Erf, sigmoid => Sigmoid, tanh => Tanh, relu => Relu, sin => Sin,
    cos => Cos, tan => Tan, asin => Asin, acos => Acos, atan => Atan);

/// The two operands of a binary op. Before opset 7, `broadcast = 1` with an `axis` aligns B's
/// dims with A's from that axis on; B is reshaped so that numpy broadcasting does the same.
pub fn binary_operands(ctx: &mut Ctx) -> Result<(ValueId, ValueId), String> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if ctx.opset >= 7 || ctx.node.int("broadcast", 0)? == 0 {
        return Ok((a, b));
    }
    let Some(axis) = ctx.node.opt_int("axis")? else {
        return Ok((a, b));
    };
    let rank = ctx.ty(a).rank();
    let mut shape = ctx.ty(b).shape.clone();
    let start = axes::axis(axis, rank)?;
    let trailing = rank
        .checked_sub(start + shape.len())
        .ok_or_else(|| format!("B of shape {shape:?} does not fit A's rank {rank} from axis {axis}"))?;
    shape.extend(std::iter::repeat_n(1, trailing));
    Ok((a, reshape(ctx, b, &shape)?))
}

fn binary(ctx: &mut Ctx, kind: OpKind) -> Result<Vec<ValueId>, String> {
    let (a, b) = binary_operands(ctx)?;
    Ok(vec![ctx.build1(kind, vec![a, b], Attrs::new())?])
}

/// Folds the inputs left to right with `kind`.
fn chain(ctx: &mut Ctx, kind: OpKind) -> Result<ValueId, String> {
    let inputs = ctx.all_inputs()?;
    let (&first, rest) = inputs.split_first().ok_or("needs at least one input")?;
    rest.iter()
        .try_fold(first, |acc, &x| ctx.build1(kind, vec![acc, x], Attrs::new()))
}

fn variadic(ctx: &mut Ctx, kind: OpKind) -> Result<Vec<ValueId>, String> {
    Ok(vec![chain(ctx, kind)?])
}

/// `Mean`: the sum divided by the number of inputs.
fn mean(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let total = chain(ctx, OpKind::Add)?;
    let n = ctx.scalar(ctx.ty(total).dtype, ctx.num_inputs() as f64);
    Ok(vec![ctx.build1(OpKind::Div, vec![total, n], Attrs::new())?])
}

/// `Mod` of integers, from the truncating division: `r = a - (a / b) * b` has the sign of `a`
/// (`fmod = 1`); with `fmod = 0` the result takes the sign of `b`, so a non-zero `r` whose
/// sign differs from `b`'s gets `b` added.
fn modulo(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.ty(ctx.input(0)?).dtype.is_float() {
        return super::math::float_modulo(ctx);
    }
    let (a, b) = binary_operands(ctx)?;
    let dtype = ctx.ty(a).dtype;
    if !dtype.is_int() {
        return Err(format!("Mod of {dtype} is not supported (only integers and floats)"));
    }
    let mut op = |kind: OpKind, operands: &[ValueId]| ctx.build1(kind, operands.to_vec(), Attrs::new());
    let q = op(OpKind::Div, &[a, b])?;
    let qb = op(OpKind::Mul, &[q, b])?;
    let r = op(OpKind::Sub, &[a, qb])?;
    if ctx.node.int("fmod", 0)? != 0 || dtype.is_unsigned_int() {
        return Ok(vec![r]);
    }
    let zero = ctx.scalar(dtype, 0.0);
    let mut op = |kind: OpKind, operands: &[ValueId]| ctx.build1(kind, operands.to_vec(), Attrs::new());
    let r_neg = op(OpKind::Less, &[r, zero])?;
    let b_neg = op(OpKind::Less, &[b, zero])?;
    let same_sign = op(OpKind::Equal, &[r_neg, b_neg])?;
    let r_zero = op(OpKind::Equal, &[r, zero])?;
    let keep = op(OpKind::Where, &[r_zero, r_zero, same_sign])?;
    let shifted = op(OpKind::Add, &[r, b])?;
    Ok(vec![op(OpKind::Where, &[keep, r, shifted])?])
}

fn unary(ctx: &mut Ctx, kind: OpKind) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![ctx.build1(kind, vec![x], Attrs::new())?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn variadic_ops_chain() {
        let text = ModelBuilder::new(13)
            .input("a", DataType::Float, &[2])
            .input("b", DataType::Float, &[2])
            .input("c", DataType::Float, &[1])
            .node(node("Mean", &["a", "b", "c"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(text.contains("%0 = mx.add %arg0, %arg1"), "{text}");
        assert!(text.contains("%1 = mx.add %0, %arg2"), "{text}");
        assert!(text.contains("dense<[3.0]> : tensor<f32>"), "{text}");
        assert!(text.contains("= mx.div %1, %2"), "{text}");
    }

    #[test]
    fn legacy_broadcast_aligns_at_the_axis() {
        let text = ModelBuilder::new(6)
            .input("a", DataType::Float, &[2, 3, 4])
            .input("b", DataType::Float, &[3])
            .node(node(
                "Add",
                &["a", "b"],
                &["y"],
                vec![int_attr("broadcast", 1), int_attr("axis", 1)],
            ))
            .output("y")
            .text();
        assert!(text.contains("mx.reshape %arg1 {shape = [3, 1]}"), "{text}");
        assert!(text.contains(": tensor<2x3x4xf32>"), "{text}");
    }

    #[test]
    fn ill_typed_ops_name_the_mx_rule() {
        let err = ModelBuilder::new(13)
            .input("a", DataType::Float, &[2])
            .input("b", DataType::Float, &[3])
            .node(node("Add", &["a", "b"], &["y"], vec![]))
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (Add): mx.add: shapes [2] and [3] do not broadcast"
        );
    }
}
