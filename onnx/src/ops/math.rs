//! Element-wise math built from mx ops: `Sign`, `Round` (half to even), `Shrink`, the
//! hyperbolic functions and their inverses from `exp`, `log` and `sqrt`, and `Mod` of floats
//! (`fmod`, from a truncated quotient).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::build::float_compute_type;
use super::elementwise::binary_operands;
use mxc_dialects::{DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Sign", sign);
    r.add_all("Round", round);
    r.add_all("Shrink", shrink);
    r.add_all("Sinh", |ctx| unary(ctx, sinh));
    r.add_all("Cosh", |ctx| unary(ctx, cosh));
    r.add_all("Asinh", |ctx| unary(ctx, asinh));
    r.add_all("Acosh", |ctx| unary(ctx, acosh));
    r.add_all("Atanh", |ctx| unary(ctx, atanh));
}

fn unary(ctx: &mut Ctx, f: fn(&mut Ctx, ValueId) -> Result<ValueId, String>) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    if !ctx.ty(x).dtype.is_float() {
        return Err(format!("{} tensors are not supported (only floats)", ctx.ty(x).dtype));
    }
    Ok(vec![f(ctx, x)?])
}

/// A scalar of `v`'s element type.
fn k(ctx: &mut Ctx, v: ValueId, value: f64) -> ValueId {
    ctx.scalar(ctx.ty(v).dtype, value)
}

/// 1, -1 or 0 by the sign of `x` (NaN stays NaN).
fn sign(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dtype = ctx.ty(x).dtype;
    if dtype == DType::Bool {
        return Err("the sign of a bool tensor is not defined".into());
    }
    let (zero, one) = (k(ctx, x, 0.0), k(ctx, x, 1.0));
    let positive = ctx.op(OpKind::Greater, &[x, zero])?;
    let mut y = ctx.op(OpKind::Where, &[positive, one, zero])?;
    if !dtype.is_unsigned_int() {
        let minus_one = k(ctx, x, -1.0);
        let negative = ctx.op(OpKind::Less, &[x, zero])?;
        y = ctx.op(OpKind::Where, &[negative, minus_one, y])?;
    }
    if dtype.is_float() {
        let ordered = ctx.op(OpKind::Equal, &[x, x])?;
        y = ctx.op(OpKind::Where, &[ordered, y, x])?;
    }
    Ok(vec![y])
}

/// `x` rounded to the nearest integer, ties to the even one (`mx.round`); infinities and NaN
/// pass through.
pub fn round_half_even(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    ctx.op(OpKind::Round, &[x])
}

fn round(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    unary(ctx, round_half_even)
}

/// `x + bias` below `-lambd`, `x - bias` above `lambd`, 0 between.
fn shrink(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let bias = ctx.node.float("bias", 0.0)? as f64;
    let lambd = ctx.node.float("lambd", 0.5)? as f64;
    let (low, high, zero) = (k(ctx, x, -lambd), k(ctx, x, lambd), k(ctx, x, 0.0));
    let (plus, minus) = (k(ctx, x, bias), k(ctx, x, -bias));
    let raised = ctx.op(OpKind::Add, &[x, plus])?;
    let lowered = ctx.op(OpKind::Add, &[x, minus])?;
    let below = ctx.op(OpKind::Less, &[x, low])?;
    let above = ctx.op(OpKind::Greater, &[x, high])?;
    let y = ctx.op(OpKind::Where, &[above, lowered, zero])?;
    Ok(vec![ctx.op(OpKind::Where, &[below, raised, y])?])
}

/// `exp(x)` and `exp(-x)`.
fn exponentials(ctx: &mut Ctx, x: ValueId) -> Result<(ValueId, ValueId), String> {
    let up = ctx.op(OpKind::Exp, &[x])?;
    let negated = ctx.op(OpKind::Neg, &[x])?;
    let down = ctx.op(OpKind::Exp, &[negated])?;
    Ok((up, down))
}

fn sinh(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let (up, down) = exponentials(ctx, x)?;
    let difference = ctx.op(OpKind::Sub, &[up, down])?;
    let half = k(ctx, x, 0.5);
    ctx.op(OpKind::Mul, &[difference, half])
}

fn cosh(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let (up, down) = exponentials(ctx, x)?;
    let sum = ctx.op(OpKind::Add, &[up, down])?;
    let half = k(ctx, x, 0.5);
    ctx.op(OpKind::Mul, &[sum, half])
}

/// `log(x + sqrt(x^2 + c))`.
fn log_of_hypotenuse(ctx: &mut Ctx, x: ValueId, c: f64) -> Result<ValueId, String> {
    let square = ctx.op(OpKind::Mul, &[x, x])?;
    let c = k(ctx, x, c);
    let shifted = ctx.op(OpKind::Add, &[square, c])?;
    let root = ctx.op(OpKind::Sqrt, &[shifted])?;
    let sum = ctx.op(OpKind::Add, &[x, root])?;
    ctx.op(OpKind::Log, &[sum])
}

/// `sign(x) * log(|x| + sqrt(x^2 + 1))`: odd, so negative inputs do not cancel.
fn asinh(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let magnitude = ctx.op(OpKind::Abs, &[x])?;
    let y = log_of_hypotenuse(ctx, magnitude, 1.0)?;
    let zero = k(ctx, x, 0.0);
    let negative = ctx.op(OpKind::Less, &[x, zero])?;
    let negated = ctx.op(OpKind::Neg, &[y])?;
    ctx.op(OpKind::Where, &[negative, negated, y])
}

fn acosh(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    log_of_hypotenuse(ctx, x, -1.0)
}

/// `0.5 * log((1 + x) / (1 - x))`.
fn atanh(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let one = k(ctx, x, 1.0);
    let above = ctx.op(OpKind::Add, &[one, x])?;
    let below = ctx.op(OpKind::Sub, &[one, x])?;
    let ratio = ctx.op(OpKind::Div, &[above, below])?;
    let log = ctx.op(OpKind::Log, &[ratio])?;
    let half = k(ctx, x, 0.5);
    ctx.op(OpKind::Mul, &[log, half])
}

/// `Mod` of floats (`fmod` = 1, as the spec requires): `a - trunc(a / b) * b`, with the sign
/// of `a`; half-precision operands are computed in f32.
pub fn float_modulo(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.node.int("fmod", 0)? != 1 {
        return Err("Mod of floats needs fmod = 1".into());
    }
    let (a, b) = binary_operands(ctx)?;
    let dtype = ctx.ty(a).dtype;
    let wide = float_compute_type(dtype);
    let (a, b) = (ctx.cast(a, wide)?, ctx.cast(b, wide)?);
    let quotient = ctx.op(OpKind::Div, &[a, b])?;
    let zero = ctx.scalar(wide, 0.0);
    let negative = ctx.op(OpKind::Less, &[quotient, zero])?;
    let up = ctx.op(OpKind::Ceil, &[quotient])?;
    let down = ctx.op(OpKind::Floor, &[quotient])?;
    let truncated = ctx.op(OpKind::Where, &[negative, up, down])?;
    let whole = ctx.op(OpKind::Mul, &[truncated, b])?;
    let r = ctx.op(OpKind::Sub, &[a, whole])?;
    Ok(vec![ctx.cast(r, dtype)?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    fn apply(op: &str, x: &[f32]) -> Vec<f64> {
        let g = ModelBuilder::new(22)
            .input("x", DataType::Float, &[x.len() as i64])
            .node(node(op, &["x"], &["y"], vec![]))
            .output("y")
            .import()
            .unwrap();
        run(&g, &[Tensor::from_f32s(vec![x.len()], x)]).unwrap()[0].to_f64_vec()
    }

    #[test]
    fn round_takes_ties_to_even() {
        let x = [0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 8388609.0, f32::INFINITY];
        let expected = [0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0, 8388609.0, f64::INFINITY];
        assert_eq!(apply("Round", &x), expected);
    }

    #[test]
    fn sign_keeps_nan_and_shrink_zeroes_the_middle() {
        let y = apply("Sign", &[-3.0, 0.0, 2.0, f32::NAN]);
        assert_eq!(y[..3], [-1.0, 0.0, 1.0]);
        assert!(y[3].is_nan());
        assert_eq!(apply("Shrink", &[-1.0, -0.25, 0.25, 1.0]), [-1.0, 0.0, 0.0, 1.0]);
    }
}
