//! Activations: `LeakyRelu`, `Clip`, `Softmax` and `Gelu` (both forms) map to their mx ops;
//! `LogSoftmax`, `HardSigmoid`, `HardSwish`, `Softplus`, `Softsign`, `Elu`, `Selu`, `Celu`, `ThresholdedRelu`,
//! `PRelu`, `Mish` and `Swish` are built from mx ops following their ONNX definitions.

use super::super::ctx::Ctx;
use super::super::registry::{ParseFn, Registry, LATEST};
use super::axes;
use super::shape::{product, reshape, reshape_dims};
use mxc_dialects::narrow::Specials;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    for (op, parse) in [
        ("LeakyRelu", leaky_relu as ParseFn),
        ("Gelu", gelu),
        ("HardSigmoid", hard_sigmoid),
        ("HardSwish", hard_swish),
        ("Softplus", softplus),
        ("Softsign", softsign),
        ("Elu", elu),
        ("Selu", selu),
        ("Celu", celu),
        ("ThresholdedRelu", thresholded_relu),
        ("PRelu", prelu),
        ("Mish", mish),
        ("Swish", swish),
    ] {
        r.add_all(op, parse);
    }
    r.add("", "Clip", 1, 10, clip_attributes);
    r.add("", "Clip", 11, LATEST, clip_inputs);
    r.add("", "Softmax", 1, 12, |ctx| along_axis(ctx, true, softmax));
    r.add("", "Softmax", 13, LATEST, |ctx| along_axis(ctx, false, softmax));
    r.add("", "LogSoftmax", 1, 12, |ctx| along_axis(ctx, true, log_softmax));
    r.add("", "LogSoftmax", 13, LATEST, |ctx| along_axis(ctx, false, log_softmax));
}

/// A small expression builder over one input `x`: ops with no attributes, and scalars of x's
/// element type.
struct Expr<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    dtype: DType,
}

impl<'c, 'a> Expr<'c, 'a> {
    fn new(ctx: &'c mut Ctx<'a>, x: ValueId) -> Self {
        let dtype = ctx.ty(x).dtype;
        Expr { ctx, dtype }
    }

    fn k(&mut self, value: f64) -> ValueId {
        self.ctx.scalar(self.dtype, value)
    }

    fn op(&mut self, kind: OpKind, operands: &[ValueId]) -> Result<ValueId, String> {
        self.ctx.build1(kind, operands.to_vec(), Attrs::new())
    }

    /// `a * x + b` for scalars `a` and `b` (a factor of 1 and a term of 0 are left out).
    fn affine(&mut self, a: f64, x: ValueId, b: f64) -> Result<ValueId, String> {
        let mut y = x;
        if a != 1.0 {
            let a = self.k(a);
            y = self.op(OpKind::Mul, &[a, y])?;
        }
        if b != 0.0 {
            let b = self.k(b);
            y = self.op(OpKind::Add, &[y, b])?;
        }
        Ok(y)
    }

    /// `clip(x, lo, hi)` for scalars.
    fn clamp(&mut self, x: ValueId, lo: f64, hi: f64) -> Result<ValueId, String> {
        let (lo, hi) = (self.k(lo), self.k(hi));
        self.op(OpKind::Clip, &[x, lo, hi])
    }

    /// `log(exp(x) + 1)`.
    fn softplus(&mut self, x: ValueId) -> Result<ValueId, String> {
        let e = self.op(OpKind::Exp, &[x])?;
        let one = self.k(1.0);
        let s = self.op(OpKind::Add, &[e, one])?;
        self.op(OpKind::Log, &[s])
    }
}

fn leaky_relu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.node.float("alpha", 0.01)? as f64;
    Ok(vec![ctx.build1(
        OpKind::LeakyRelu,
        vec![x],
        Attrs::new().with("alpha", Attr::Float(alpha)),
    )?])
}

/// The lowest and highest values of `dtype` (±infinity for floats that have it when `infinite`).
pub fn limits(dtype: DType, infinite: bool) -> (Tensor, Tensor) {
    let (lo, hi): (i64, i64) = match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN, i64::MAX),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, -1), // the bit pattern of u64::MAX
        DType::Bool => (0, 1),
        DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
            let (bits, signed) = dtype.narrow_int().expect("a narrow integer");
            match signed {
                true => (-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
                false => (0, (1 << bits) - 1),
            }
        }
        DType::F8E8M0FNU => {
            // powers of two, no sign
            let t = |v: f64| Tensor::from_f64s(dtype, vec![], &[v]);
            return (t(2f64.powi(-127)), t(2f64.powi(127)));
        }
        _ => {
            let max = match dtype {
                // E5M2's infinity (the other narrow floats have none)
                _ if infinite && dtype.minifloat().is_none_or(|f| f.specials == Specials::Ieee) => f64::INFINITY,
                DType::F16 => 65504.0,
                DType::BF16 => 3.3895313892515355e38,
                DType::F32 => f32::MAX as f64,
                d => d.minifloat().map_or(f64::MAX, |f| f.max() as f64),
            };
            let t = |v: f64| Tensor::from_f64s(dtype, vec![], &[v]);
            return (t(-max), t(max));
        }
    };
    (
        Tensor::from_i64s(dtype, vec![], &[lo]),
        Tensor::from_i64s(dtype, vec![], &[hi]),
    )
}

/// Clip before opset 11: bounds are attributes, missing ones the type's limits.
fn clip_attributes(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dtype = ctx.ty(x).dtype;
    let (lowest, highest) = limits(dtype, false);
    let bound = |v: Option<f32>, default: Tensor| v.map_or(default, |v| Tensor::from_f64s(dtype, vec![], &[v as f64]));
    let lo = bound(ctx.node.opt_float("min")?, lowest);
    let hi = bound(ctx.node.opt_float("max")?, highest);
    let (lo, hi) = (ctx.constant(lo), ctx.constant(hi));
    Ok(vec![ctx.build1(OpKind::Clip, vec![x, lo, hi], Attrs::new())?])
}

/// Clip from opset 11: bounds are optional scalar inputs, missing ones ±infinity (the type's
/// limits for integers).
fn clip_inputs(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let (lowest, highest) = limits(ctx.ty(x).dtype, true);
    let lo = match ctx.opt_input(1) {
        Some(v) => v,
        None => ctx.constant(lowest),
    };
    let hi = match ctx.opt_input(2) {
        Some(v) => v,
        None => ctx.constant(highest),
    };
    Ok(vec![ctx.build1(OpKind::Clip, vec![x, lo, hi], Attrs::new())?])
}

/// A normalisation along one axis (`along(ctx, v, axis)`), applied the ONNX way: before opset
/// 13 (`legacy`) the input is seen as a matrix (the dims before `axis` by the dims from it
/// on) and each row is normalised; from 13 it is normalised along `axis`.
fn along_axis(
    ctx: &mut Ctx,
    legacy: bool,
    along: fn(&mut Ctx, ValueId, usize) -> Result<ValueId, String>,
) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dims = ctx.ty(x).dims();
    let axis = axes::axis(ctx.node.int("axis", if legacy { 1 } else { -1 })?, dims.len())?;
    if !legacy || axis + 1 == dims.len() {
        return Ok(vec![along(ctx, x, axis)?]);
    }
    let (outer, inner) = dims.split_at(axis);
    let flat = reshape_dims(ctx, x, &[product(outer)?, product(inner)?])?;
    let y = along(ctx, flat, 1)?;
    Ok(vec![reshape_dims(ctx, y, &dims)?])
}

fn softmax(ctx: &mut Ctx, x: ValueId, axis: usize) -> Result<ValueId, String> {
    ctx.build1(
        OpKind::Softmax,
        vec![x],
        Attrs::new().with("axis", Attr::Int(axis as i64)),
    )
}

/// `d - log(sum(exp(d)))` along the axis, with `d = x - max(x)` (the stable form).
pub fn log_softmax(ctx: &mut Ctx, x: ValueId, axis: usize) -> Result<ValueId, String> {
    let over = Attrs::new()
        .with("axes", Attr::Ints(vec![axis as i64]))
        .with("keepdims", Attr::Int(1));
    let m = ctx.build1(OpKind::ReduceMax, vec![x], over.clone())?;
    let mut e = Expr::new(ctx, x);
    let d = e.op(OpKind::Sub, &[x, m])?;
    let ex = e.op(OpKind::Exp, &[d])?;
    let s = e.ctx.build1(OpKind::ReduceSum, vec![ex], over)?;
    let l = e.op(OpKind::Log, &[s])?;
    e.op(OpKind::Sub, &[d, l])
}

/// `mx.gelu` with the same `approximate`: "none", `x * 0.5 * (1 + erf(x / sqrt(2)))`, or
/// "tanh", `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
fn gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let approximate = ctx.node.string("approximate", "none")?;
    if !matches!(approximate.as_str(), "none" | "tanh") {
        return Err(format!("unknown approximation \"{approximate}\""));
    }
    Ok(vec![ctx.build1(
        OpKind::Gelu,
        vec![x],
        Attrs::new().with("approximate", Attr::Str(approximate)),
    )?])
}

fn hard_sigmoid(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let (alpha, beta) = (
        ctx.node.float("alpha", 0.2)? as f64,
        ctx.node.float("beta", 0.5)? as f64,
    );
    Ok(vec![hard_sigmoid_of(ctx, x, alpha, beta)?])
}

/// `clip(alpha * x + beta, 0, 1)`.
pub fn hard_sigmoid_of(ctx: &mut Ctx, x: ValueId, alpha: f64, beta: f64) -> Result<ValueId, String> {
    let mut e = Expr::new(ctx, x);
    let a = e.affine(alpha, x, beta)?;
    e.clamp(a, 0.0, 1.0)
}

/// `a * x + b` for scalars `a` and `b`.
pub fn affine(ctx: &mut Ctx, a: f64, x: ValueId, b: f64) -> Result<ValueId, String> {
    Expr::new(ctx, x).affine(a, x, b)
}

/// `x * clip(x / 6 + 1/2, 0, 1)`.
fn hard_swish(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let mut e = Expr::new(ctx, x);
    let a = e.affine(1.0 / 6.0, x, 0.5)?;
    let s = e.clamp(a, 0.0, 1.0)?;
    Ok(vec![e.op(OpKind::Mul, &[x, s])?])
}

fn softplus(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![softplus_of(ctx, x)?])
}

/// `log(exp(x) + 1)`.
pub fn softplus_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    Expr::new(ctx, x).softplus(x)
}

fn softsign(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![softsign_of(ctx, x)?])
}

/// `x / (1 + |x|)`.
pub fn softsign_of(ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
    let mut e = Expr::new(ctx, x);
    let a = e.op(OpKind::Abs, &[x])?;
    let d = e.affine(1.0, a, 1.0)?;
    e.op(OpKind::Div, &[x, d])
}

fn elu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.node.float("alpha", 1.0)? as f64;
    Ok(vec![elu_of(ctx, x, alpha)?])
}

/// `alpha * (exp(x) - 1)` where `x < 0`, else `x`.
pub fn elu_of(ctx: &mut Ctx, x: ValueId, alpha: f64) -> Result<ValueId, String> {
    let mut e = Expr::new(ctx, x);
    let ex = e.op(OpKind::Exp, &[x])?;
    let em1 = e.affine(1.0, ex, -1.0)?;
    let neg = e.affine(alpha, em1, 0.0)?;
    let zero = e.k(0.0);
    let c = e.op(OpKind::Less, &[x, zero])?;
    e.op(OpKind::Where, &[c, neg, x])
}

/// `gamma * x` where `x > 0`, else `gamma * (alpha * exp(x) - alpha)`.
fn selu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.node.float("alpha", 1.673_263_2)? as f64;
    let gamma = ctx.node.float("gamma", 1.050_701)? as f64;
    let mut e = Expr::new(ctx, x);
    let ex = e.op(OpKind::Exp, &[x])?;
    let neg = e.affine(alpha, ex, -alpha)?;
    let zero = e.k(0.0);
    let c = e.op(OpKind::Greater, &[x, zero])?;
    let y = e.op(OpKind::Where, &[c, x, neg])?;
    Ok(vec![e.affine(gamma, y, 0.0)?])
}

/// `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
fn celu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.node.float("alpha", 1.0)? as f64;
    let mut e = Expr::new(ctx, x);
    let zero = e.k(0.0);
    let pos = e.op(OpKind::Max, &[zero, x])?;
    let scaled = e.affine(1.0 / alpha, x, 0.0)?;
    let ex = e.op(OpKind::Exp, &[scaled])?;
    let em1 = e.affine(1.0, ex, -1.0)?;
    let a = e.affine(alpha, em1, 0.0)?;
    let neg = e.op(OpKind::Min, &[zero, a])?;
    Ok(vec![e.op(OpKind::Add, &[pos, neg])?])
}

fn thresholded_relu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.node.float("alpha", 1.0)? as f64;
    Ok(vec![thresholded_relu_of(ctx, x, alpha)?])
}

/// `x` where `x > alpha`, else 0.
pub fn thresholded_relu_of(ctx: &mut Ctx, x: ValueId, alpha: f64) -> Result<ValueId, String> {
    let mut e = Expr::new(ctx, x);
    let t = e.k(alpha);
    let c = e.op(OpKind::Greater, &[x, t])?;
    let zero = e.k(0.0);
    e.op(OpKind::Where, &[c, x, zero])
}

/// `slope * x` where `x < 0`, else `x`.
fn prelu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, mut slope) = (ctx.input(0)?, ctx.input(1)?);
    let x_shape = ctx.ty(x).shape.clone();
    if ctx.opset < 7 && ctx.ty(slope).shape.len() == 1 && x_shape.len() >= 2 && ctx.ty(slope).shape[0] == x_shape[1] {
        // before opset 7 a slope per channel lies along axis 1
        let mut along = vec![1; x_shape.len() - 1];
        along[0] = x_shape[1];
        slope = reshape(ctx, slope, &along)?;
    }
    let mut e = Expr::new(ctx, x);
    let zero = e.k(0.0);
    let c = e.op(OpKind::Less, &[x, zero])?;
    let sx = e.op(OpKind::Mul, &[slope, x])?;
    Ok(vec![e.op(OpKind::Where, &[c, sx, x])?])
}

/// `x * sigmoid(alpha * x)`.
fn swish(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.node.float("alpha", 1.0)? as f64;
    let mut e = Expr::new(ctx, x);
    let ax = e.affine(alpha, x, 0.0)?;
    let s = e.op(OpKind::Sigmoid, &[ax])?;
    Ok(vec![e.op(OpKind::Mul, &[x, s])?])
}

/// `x * tanh(softplus(x))`.
fn mish(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let mut e = Expr::new(ctx, x);
    let sp = e.softplus(x)?;
    let t = e.op(OpKind::Tanh, &[sp])?;
    Ok(vec![e.op(OpKind::Mul, &[x, t])?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    fn softmax(opset: i64, attrs: Vec<super::super::super::proto::AttributeProto>) -> String {
        ModelBuilder::new(opset)
            .input("x", DataType::Float, &[2, 3, 4])
            .node(node("Softmax", &["x"], &["y"], attrs))
            .output("y")
            .text()
    }

    #[test]
    fn softmax_before_13_normalises_the_flattened_tail() {
        let expected = "graph \"test\" (%arg0: tensor<2x3x4xf32> \"x\") {
  %0 = mx.reshape %arg0 {shape = [2, 12]} : tensor<2x12xf32>
  %1 = mx.softmax %0 {axis = 1} : tensor<2x12xf32>
  %2 = mx.reshape %1 {shape = [2, 3, 4]} : tensor<2x3x4xf32>
  return \"y\" = %2
}
";
        assert_eq!(softmax(11, vec![]), expected);
        assert!(softmax(11, vec![int_attr("axis", -1)]).contains("mx.softmax %arg0 {axis = 2}"));
    }

    #[test]
    fn softmax_from_13_normalises_one_axis() {
        assert!(softmax(13, vec![]).contains("%0 = mx.softmax %arg0 {axis = 2} : tensor<2x3x4xf32>"));
        assert!(softmax(13, vec![int_attr("axis", 1)]).contains("%0 = mx.softmax %arg0 {axis = 1} : tensor<2x3x4xf32>"));
    }

    #[test]
    fn clip_bounds_default_to_the_limits() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .init(f32_tensor("lo", &[], &[-1.0]))
            .node(node("Clip", &["x", "lo"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(text.contains("dense<[inf]> : tensor<f32>"), "{text}");
        let text = ModelBuilder::new(13)
            .input("x", DataType::Int32, &[2])
            .node(node("Clip", &["x"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(text.contains("dense<[-2147483648]> : tensor<i32>"), "{text}");
        assert!(text.contains("dense<[2147483647]> : tensor<i32>"), "{text}");
        let mut max = int_attr("max", 0);
        max.i = None;
        max.f = Some(6.0);
        max.r#type = Some(super::super::super::proto::attribute_proto::AttributeType::Float as i32);
        let text = ModelBuilder::new(6)
            .input("x", DataType::Float, &[2])
            .node(node("Clip", &["x"], &["y"], vec![max]))
            .output("y")
            .text();
        assert!(text.contains("dense<[6.0]>"), "{text}");
        assert!(text.contains("dense<[-3.4028235e38]>"), "{text}");
    }

    fn gelu(attrs: Vec<super::super::super::proto::AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(20)
            .input("x", DataType::Float, &[2])
            .node(node("Gelu", &["x"], &["y"], attrs))
            .output("y")
    }

    /// The op lines of a printed graph.
    fn body(text: &str) -> Vec<&str> {
        text.lines().filter(|l| l.contains(" = mx.")).map(str::trim).collect()
    }

    #[test]
    fn gelu_is_one_op_in_either_form() {
        let exact = gelu(vec![]).text();
        assert_eq!(
            body(&exact),
            ["%0 = mx.gelu %arg0 {approximate = \"none\"} : tensor<2xf32>"],
            "{exact}"
        );
        assert_eq!(body(&gelu(vec![str_attr("approximate", "none")]).text()), body(&exact));
        let tanh = gelu(vec![str_attr("approximate", "tanh")]).text();
        assert_eq!(
            body(&tanh),
            ["%0 = mx.gelu %arg0 {approximate = \"tanh\"} : tensor<2xf32>"],
            "{tanh}"
        );
        let err = gelu(vec![str_attr("approximate", "fast")]).error();
        assert_eq!(err, "node #0 (output \"y\") (Gelu): unknown approximation \"fast\"");
    }
}
