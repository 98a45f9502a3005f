//! Linear quantisation to and from the integer types and the 8- and 4-bit floats, exact to the
//! spec: `QuantizeLinear` (`round_half_even(x / scale) + zero_point`, saturated to the output
//! type; for the floats `cast(x / scale + zero_point)`, saturating as `Cast` does),
//! `DequantizeLinear` (`(x - zero_point) * scale`), per tensor, per axis or in blocks along
//! an axis; `DynamicQuantizeLinear` (u8 with the scale and zero point of the data's range);
//! and the integer products `MatMulInteger`, `ConvInteger`, `QLinearMatMul`, `QLinearConv`,
//! whose sums are computed in i32 for 8-bit integer products (as the spec has it), else in
//! f64, which holds every sum of products of 8- and 16-bit integers exactly.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::tensor::require_dtype;
use super::activation::limits;
use super::build::float_compute_type;
use super::cast::onnx_cast;
use super::conv::conv_attrs;
use super::math::round_half_even;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("QuantizeLinear", quantize_linear);
    r.add_all("DequantizeLinear", dequantize_linear);
    r.add_all("DynamicQuantizeLinear", dynamic_quantize_linear);
    r.add_all("MatMulInteger", matmul_integer);
    r.add_all("QLinearMatMul", qlinear_matmul);
    r.add_all("ConvInteger", conv_integer);
    r.add_all("QLinearConv", qlinear_conv);
}

/// The type integer products are summed in.
const EXACT: DType = DType::F64;

/// The lowest and highest values of an integer type.
/// (64-bit integers are left out: f64 arithmetic does not hold all of them.)
fn int_range(dtype: DType) -> Result<(f64, f64), String> {
    check_quantized_type(dtype)?;
    let (lo, hi) = limits(dtype, false);
    Ok((lo.get_f64(0), hi.get_f64(0)))
}

/// Quantised values are integers of up to 32 bits, or 8- and 4-bit floats.
fn check_quantized_type(dtype: DType) -> Result<(), String> {
    if (dtype.is_int() && dtype.size() <= 4) || dtype.is_narrow_float() {
        return Ok(());
    }
    Err(format!(
        "quantisation to {dtype} is not supported (only integer types up to 32 bits and the 8- and 4-bit floats)"
    ))
}

/// A scale or zero point made to broadcast against `x`: a single value as a scalar, a vector
/// along `axis` (per axis), or with `block_size`, blocks of that many entries of `axis`
/// sharing one value (a `gather` repeating each).
fn broadcast_param(ctx: &mut Ctx, p: ValueId, x_shape: &[usize], axis: i64, block: usize) -> Result<ValueId, String> {
    let shape = ctx.ty(p).shape.clone();
    if block == 0 && shape.iter().product::<usize>() == 1 {
        return reshape(ctx, p, &[]);
    }
    // the axis matters (and must be valid) only for the per-axis and blocked forms
    let axis = super::axes::axis(axis, x_shape.len())?;
    let n = x_shape[axis];
    if block > 0 {
        let blocks = n.div_ceil(block);
        let mut expected = x_shape.to_vec();
        expected[axis] = blocks;
        if shape != expected {
            return Err(format!(
                "a blocked parameter of shape {shape:?} does not fit input {x_shape:?} in blocks of {block}"
            ));
        }
        let index: Vec<i64> = (0..n).map(|i| (i / block) as i64).collect();
        let index = ctx.constant(Tensor::from_i64s(DType::I64, vec![n], &index));
        return ctx.build1(
            OpKind::Gather,
            vec![p, index],
            Attrs::new().with("axis", Attr::Int(axis as i64)),
        );
    }
    if shape != [n] {
        return Err(format!(
            "a parameter of shape {shape:?} is neither a single value nor one per entry of axis {axis} ({n})"
        ));
    }
    let mut along = vec![1; x_shape.len()];
    along[axis] = n;
    reshape(ctx, p, &along)
}

/// The axis and block size of the per-axis and blocked forms.
fn layout(ctx: &Ctx) -> Result<(i64, usize), String> {
    let axis = ctx.node.int("axis", 1)?;
    let block = ctx.node.int("block_size", 0)?;
    let block = usize::try_from(block).map_err(|_| format!("block_size {block} is negative"))?;
    Ok((axis, block))
}

/// The integer type of a node's output: the zero point's, else `output_dtype`, else u8.
fn output_type(ctx: &Ctx, zero_point: Option<ValueId>) -> Result<DType, String> {
    let asked = match ctx.node.int("output_dtype", 0)? {
        0 => None,
        code => Some(require_dtype(code as i32)?),
    };
    match (zero_point.map(|z| ctx.ty(z).dtype), asked) {
        (Some(z), Some(a)) if z != a => Err(format!("output_dtype {a} differs from the zero point's type {z}")),
        (Some(z), _) => Ok(z),
        (None, Some(a)) => Ok(a),
        (None, None) => Ok(DType::U8),
    }
}

/// `saturate(round_half_even(scaled) + zero_point)` in type `out`, from a float `scaled`.
fn to_integer(ctx: &mut Ctx, scaled: ValueId, zero_point: Option<ValueId>, out: DType) -> Result<ValueId, String> {
    let (lo, hi) = int_range(out)?;
    let wide = ctx.ty(scaled).dtype;
    let mut y = round_half_even(ctx, scaled)?;
    if let Some(z) = zero_point {
        let z = ctx.cast(z, wide)?;
        y = ctx.op(OpKind::Add, &[y, z])?;
    }
    let (lo, hi) = (ctx.scalar(wide, lo), ctx.scalar(wide, hi));
    let y = ctx.op(OpKind::Max, &[y, lo])?;
    let y = ctx.op(OpKind::Min, &[y, hi])?;
    ctx.cast(y, out)
}

fn quantize_linear(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    let zero_point = ctx.opt_input(2);
    let shape = ctx.ty(x).shape.clone();
    let (axis, block) = layout(ctx)?;
    let out = output_type(ctx, zero_point)?;
    check_quantized_type(out)?;
    // `saturate` concerns the 8-bit float outputs only
    let saturate = ctx.node.int("saturate", 1)? != 0;
    let wide = float_compute_type(ctx.ty(x).dtype);
    if let Some(precision) = ctx.node.opt_int("precision")?.filter(|&p| p != 0) {
        if require_dtype(precision as i32)? != wide {
            return Err(format!(
                "precision {precision} is not supported (only the input's float type)"
            ));
        }
    }
    let scale = broadcast_param(ctx, scale, &shape, axis, block)?;
    let zero_point = zero_point
        .map(|z| broadcast_param(ctx, z, &shape, axis, block))
        .transpose()?;
    let (xw, sw) = (ctx.cast(x, wide)?, ctx.cast(scale, wide)?);
    let scaled = ctx.op(OpKind::Div, &[xw, sw])?;
    if !out.is_narrow_float() {
        return Ok(vec![to_integer(ctx, scaled, zero_point, out)?]);
    }
    // to the small floats: `cast(x / scale + zero_point)`, rounded as the cast rounds
    let shifted = match zero_point {
        Some(z) => {
            let z = ctx.cast(z, wide)?;
            ctx.op(OpKind::Add, &[scaled, z])?
        }
        None => scaled,
    };
    Ok(vec![onnx_cast(ctx, shifted, out, saturate)?])
}

/// `(x - zero_point)` in type `wide` (a float, or i32 for the integer products).
fn centred(ctx: &mut Ctx, x: ValueId, zero_point: Option<ValueId>, wide: DType) -> Result<ValueId, String> {
    let xw = ctx.cast(x, wide)?;
    match zero_point {
        Some(z) => {
            let z = ctx.cast(z, wide)?;
            ctx.op(OpKind::Sub, &[xw, z])
        }
        None => Ok(xw),
    }
}

fn dequantize_linear(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    let zero_point = ctx.opt_input(2);
    let shape = ctx.ty(x).shape.clone();
    check_quantized_type(ctx.ty(x).dtype)?;
    let (axis, block) = layout(ctx)?;
    let out = match ctx.node.int("output_dtype", 0)? {
        0 => ctx.ty(scale).dtype,
        code => require_dtype(code as i32)?,
    };
    if !out.is_float() {
        return Err(format!(
            "the result would be {out}: a dequantisation gives a float type (output_dtype, else the scale's)"
        ));
    }
    let scale = broadcast_param(ctx, scale, &shape, axis, block)?;
    let zero_point = zero_point
        .map(|z| broadcast_param(ctx, z, &shape, axis, block))
        .transpose()?;
    let dtype = ctx.ty(x).dtype;
    if dtype.is_int() && ctx.ty(scale).dtype == out {
        // one op, which the rewrites see through (integer products) and fold on weights
        let zero_point = match zero_point {
            Some(z) => z,
            None => ctx.constant(Tensor::from_i64s(dtype, vec![], &[0])),
        };
        return Ok(vec![ctx.op(OpKind::DequantizeLinear, &[x, scale, zero_point])?]);
    }
    let wide = float_compute_type(out);
    let c = centred(ctx, x, zero_point, wide)?;
    let s = ctx.cast(scale, wide)?;
    let y = ctx.op(OpKind::Mul, &[c, s])?;
    Ok(vec![ctx.cast(y, out)?])
}

/// u8 quantisation over the range of `x` widened to include 0: the scale is
/// `(max - min) / 255`, the zero point `saturate(round(-min / scale))`.
fn dynamic_quantize_linear(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    if ty.dtype != DType::F32 {
        return Err(format!("input of {} is not supported (only f32)", ty.dtype));
    }
    let all: Vec<usize> = (0..ty.rank()).collect();
    let zero = ctx.scalar(DType::F32, 0.0);
    let top = ctx.reduce(OpKind::ReduceMax, x, &all, false)?;
    let top = ctx.op(OpKind::Max, &[top, zero])?;
    let negated = ctx.op(OpKind::Neg, &[x])?;
    let minus_bottom = ctx.reduce(OpKind::ReduceMax, negated, &all, false)?;
    let minus_bottom = ctx.op(OpKind::Max, &[minus_bottom, zero])?;
    let range = ctx.op(OpKind::Add, &[top, minus_bottom])?;
    let steps = ctx.scalar(DType::F32, 255.0);
    let scale = ctx.op(OpKind::Div, &[range, steps])?;
    let zero_at = ctx.op(OpKind::Div, &[minus_bottom, scale])?;
    let zero_point = to_integer(ctx, zero_at, None, DType::U8)?;
    let scaled = ctx.op(OpKind::Div, &[x, scale])?;
    let y = to_integer(ctx, scaled, Some(zero_point), DType::U8)?;
    Ok(vec![y, scale, zero_point])
}

/// A zero point of a matrix operand made to broadcast: a single value, or one per row of `a`
/// (`per_row`) or per column of `b`.
fn matrix_zero_point(ctx: &mut Ctx, z: ValueId, per_row: bool) -> Result<ValueId, String> {
    let n = ctx.ty(z).num_elements();
    if n == 1 {
        return reshape(ctx, z, &[]);
    }
    if per_row {
        reshape(ctx, z, &[n, 1])
    } else {
        reshape(ctx, z, &[n])
    }
}

/// `(a - a_zero) @ (b - b_zero)`: for 8-bit integers summed in i32, as ONNX's
/// `MatMulInteger` defines it (exact while the sum fits: any depth up to 33025), the form the
/// cpu target's rules (`integer.rules`) make an integer kernel of; for wider integers and the
/// 8-bit floats in f64, exactly.
fn integer_product(
    ctx: &mut Ctx,
    a: ValueId,
    a_zero: Option<ValueId>,
    b: ValueId,
    b_zero: Option<ValueId>,
) -> Result<ValueId, String> {
    for v in [a, b] {
        int_range(ctx.ty(v).dtype)?;
    }
    let a_zero = a_zero.map(|z| matrix_zero_point(ctx, z, true)).transpose()?;
    let b_zero = b_zero.map(|z| matrix_zero_point(ctx, z, false)).transpose()?;
    let wide = exact_type(ctx, &[a, b]);
    let a = centred(ctx, a, a_zero, wide)?;
    let b = centred(ctx, b, b_zero, wide)?;
    ctx.op(OpKind::MatMul, &[a, b])
}

/// The type an integer product of `operands` is summed in: i32 for 8-bit integers, else f64.
fn exact_type(ctx: &Ctx, operands: &[ValueId]) -> DType {
    match operands
        .iter()
        .all(|&v| ctx.ty(v).dtype.is_int() && ctx.ty(v).dtype.size() == 1)
    {
        true => DType::I32,
        false => EXACT,
    }
}

fn matmul_integer(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let product = integer_product(ctx, a, ctx.opt_input(2), b, ctx.opt_input(3))?;
    Ok(vec![ctx.cast(product, DType::I32)?])
}

/// `saturate(round(sum * a_scale * b_scale / y_scale) + y_zero)`: an exact integer sum
/// requantised to the output's type.
fn requantise(ctx: &mut Ctx, sum: ValueId, scales: [ValueId; 3], y_zero: ValueId) -> Result<ValueId, String> {
    let [a_scale, b_scale, y_scale] = scales.map(|s| ctx.cast(s, EXACT));
    let (a_scale, b_scale, y_scale) = (a_scale?, b_scale?, y_scale?);
    let product = ctx.op(OpKind::Mul, &[a_scale, b_scale])?;
    let multiplier = ctx.op(OpKind::Div, &[product, y_scale])?;
    let scaled = ctx.op(OpKind::Mul, &[sum, multiplier])?;
    let out = ctx.ty(y_zero).dtype;
    to_integer(ctx, scaled, Some(y_zero), out)
}

fn qlinear_matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let [a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero] = [0, 1, 2, 3, 4, 5, 6, 7].map(|i| ctx.input(i));
    let sum = integer_product(ctx, a?, Some(a_zero?), b?, Some(b_zero?))?;
    let sum = ctx.cast(sum, EXACT)?;
    let a_scale = matrix_zero_point(ctx, a_scale?, true)?;
    let b_scale = matrix_zero_point(ctx, b_scale?, false)?;
    let y_zero = reshape(ctx, y_zero?, &[])?;
    Ok(vec![requantise(ctx, sum, [a_scale, b_scale, y_scale?], y_zero)?])
}

/// `conv(x - x_zero, w - w_zero)` exactly: in i32 for 8-bit integers (the form
/// `integer.rules` makes an integer kernel of), else in f64; `w_zero` is a single value or one
/// per output channel.
fn exact_conv(
    ctx: &mut Ctx,
    x: ValueId,
    x_zero: Option<ValueId>,
    w: ValueId,
    w_zero: Option<ValueId>,
) -> Result<ValueId, String> {
    let (xs, ws) = (ctx.ty(x).shape.clone(), ctx.ty(w).shape.clone());
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(format!(
            "x must be N x C x spatial... and w of the same rank, got {xs:?} and {ws:?}"
        ));
    }
    int_range(ctx.ty(x).dtype)?;
    int_range(ctx.ty(w).dtype)?;
    let kernel = super::padding::kernel_shape(&ctx.node, Some(&ws[2..]))?;
    let attrs = conv_attrs(ctx, &xs[2..], &kernel)?;
    let x_zero = x_zero.map(|z| reshape(ctx, z, &[])).transpose()?;
    let w_zero = w_zero.map(|z| per_output_channel(ctx, z, ws.len())).transpose()?;
    let wide = exact_type(ctx, &[x, w]);
    let x = centred(ctx, x, x_zero, wide)?;
    let w = centred(ctx, w, w_zero, wide)?;
    ctx.build1(OpKind::Conv, vec![x, w], attrs)
}

/// A single value as a scalar, or one value per output channel shaped [M, 1, ...].
fn per_output_channel(ctx: &mut Ctx, v: ValueId, rank: usize) -> Result<ValueId, String> {
    let n = ctx.ty(v).num_elements();
    if n == 1 {
        return reshape(ctx, v, &[]);
    }
    let mut shape = vec![1; rank];
    shape[0] = n;
    reshape(ctx, v, &shape)
}

fn conv_integer(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let sum = exact_conv(ctx, x, ctx.opt_input(2), w, ctx.opt_input(3))?;
    Ok(vec![ctx.cast(sum, DType::I32)?])
}

fn qlinear_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let [x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero] = [0, 1, 2, 3, 4, 5, 6, 7].map(|i| ctx.input(i));
    let sum = exact_conv(ctx, x?, Some(x_zero?), w?, Some(w_zero?))?;
    let mut sum = ctx.cast(sum, EXACT)?;
    let rank = ctx.ty(sum).rank();
    if let Some(bias) = ctx.opt_input(8) {
        let bias = ctx.cast(bias, EXACT)?;
        let mut shape = vec![1; rank];
        shape[1] = ctx.ty(bias).num_elements();
        let bias = reshape(ctx, bias, &shape)?;
        sum = ctx.op(OpKind::Add, &[sum, bias])?;
    }
    let w_scale = w_scale?;
    let w_scale = match ctx.ty(w_scale).num_elements() {
        1 => reshape(ctx, w_scale, &[])?,
        m => {
            let mut shape = vec![1; rank];
            shape[1] = m;
            reshape(ctx, w_scale, &shape)?
        }
    };
    let x_scale = reshape(ctx, x_scale?, &[])?;
    let y_zero = reshape(ctx, y_zero?, &[])?;
    Ok(vec![requantise(ctx, sum, [x_scale, w_scale, y_scale?], y_zero)?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    #[test]
    fn quantisation_rounds_ties_to_even_and_saturates() {
        let g = ModelBuilder::new(21)
            .input("x", DataType::Float, &[5])
            .init(f32_tensor("s", &[], &[2.0]))
            .node(node("QuantizeLinear", &["x", "s"], &["y"], vec![]))
            .output("y")
            .import()
            .unwrap();
        let x = Tensor::from_f32s(vec![5], &[1.0, 3.0, 5.0, -4.0, 1000.0]);
        assert_eq!(run(&g, &[x]).unwrap()[0].to_f64_vec(), [0.0, 2.0, 2.0, 0.0, 255.0]);
    }

    #[test]
    fn dequantisation_to_a_type_that_is_not_a_float_is_refused() {
        for out in [DataType::String, DataType::Int32] {
            let err = ModelBuilder::new(21)
                .input("x", DataType::Uint8, &[5])
                .init(f32_tensor("s", &[], &[2.0]))
                .node(node(
                    "DequantizeLinear",
                    &["x", "s"],
                    &["y"],
                    vec![int_attr("output_dtype", out as i64)],
                ))
                .output("y")
                .import()
                .unwrap_err()
                .to_string();
            assert!(err.contains("a dequantisation gives a float type"), "{err}");
        }
    }

    #[test]
    fn quantisation_to_a_float8_type_is_a_saturating_cast_and_to_i64_is_refused() {
        let model = |out: i64, saturate: i64| {
            ModelBuilder::new(21)
                .input("x", DataType::Float, &[5])
                .init(f32_tensor("s", &[], &[2.0]))
                .node(node(
                    "QuantizeLinear",
                    &["x", "s"],
                    &["y"],
                    vec![int_attr("output_dtype", out), int_attr("saturate", saturate)],
                ))
                .output("y")
        };
        let text = model(DataType::Float8e4m3fn as i64, 1).text();
        assert!(text.contains("mx.clip"), "{text}");
        assert!(text.contains("{to = f8e4m3fn} : tensor<5xf8e4m3fn>"), "{text}");
        let text = model(DataType::Float8e4m3fn as i64, 0).text();
        assert!(!text.contains("mx.clip"), "{text}");
        let err = model(DataType::Int64 as i64, 1).error();
        assert!(err.contains("quantisation to i64 is not supported"), "{err}");
    }
}
