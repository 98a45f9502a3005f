//! The `mx` dialect's type rules: for every op, the result types its operands and attributes
//! give, or why they are invalid. Attributes are in the normalised form the importer produces
//! (axes non-negative, pads explicit, shapes fully resolved); each family's file says which.

pub mod attention;
pub mod call;
pub mod control;
mod elementwise;
pub mod fused;
mod layout;
mod linalg;
pub use linalg::depth_pairing;
mod nn;
mod reduce;
pub mod strings;
mod symbolic;
pub mod winograd;

pub use elementwise::broadcast_shapes;
pub use layout::SCATTER_REDUCTIONS;
pub use symbolic::channels_last;

use crate::{Attrs, OpKind, TensorType};

/// The result types of `kind` applied to operands of types `operands` with `attrs`; a result
/// whose size overflows (`TensorType::check_size`, at its largest sizes) is refused. Where an
/// operand or a size attribute is symbolic, the fixed-size rule checks the op at the cost
/// point and `symbolic::results` gives the result dimensions at every size.
pub fn infer(kind: OpKind, operands: &[TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
    let symbolic = operands.iter().any(TensorType::is_symbolic) || attrs.has_symbolic_sizes();
    let mut results = match infer_unchecked(kind, operands, attrs) {
        Err(e) if symbolic => {
            return Err(format!(
                "{e} (the sizes at the cost point, {})",
                symbolic::cost_point(operands, attrs)
            ))
        }
        r => r?,
    };
    if symbolic {
        results = symbolic::results(kind, operands, attrs, results)?;
    }
    for t in &results {
        t.check_size().map_err(|e| format!("the result {e}"))?;
    }
    Ok(results)
}

fn infer_unchecked(kind: OpKind, operands: &[TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
    let (min, max) = kind.arity();
    if operands.len() < min || operands.len() > max {
        return Err(if min == max {
            format!("takes {min} operands, got {}", operands.len())
        } else {
            format!("takes {min} to {max} operands, got {}", operands.len())
        });
    }
    let names: Vec<&str> = attrs.0.keys().map(String::as_str).collect();
    if names != kind.attr_names() {
        return Err(format!("has attributes {names:?}, expected {:?}", kind.attr_names()));
    }
    if !strings::applies_to_strings(kind) && operands.iter().any(|t| t.dtype == crate::DType::Str) {
        return Err("does not apply to strings".into());
    }
    use OpKind::*;
    let one = |t: TensorType| Ok(vec![t]);
    match kind {
        Constant => one(attrs.tensor("value")?.ty.clone()),
        Identity => one(operands[0].clone()),
        Cast => one(operands[0].with_dtype(attrs.dtype("to")?)),
        BitCast => layout::bitcast(&operands[0], attrs).map(|t| vec![t]),
        Add | Sub | Mul | Div | Max | Min => elementwise::arithmetic(operands).map(|t| vec![t]),
        Pow => elementwise::pow(operands).map(|t| vec![t]),
        BitAnd | BitOr | BitXor | ShiftLeft | ShiftRight => elementwise::bitwise(operands).map(|t| vec![t]),
        Equal | Less | Greater => elementwise::compare(operands).map(|t| vec![t]),
        Where => elementwise::select(operands).map(|t| vec![t]),
        Not => elementwise::logical_not(&operands[0]).map(|t| vec![t]),
        Sqrt | Exp | Log | Erf | Sigmoid | Tanh | Reciprocal | Floor | Ceil | Round | Sin | Cos | Tan | Asin | Acos
        | Atan => elementwise::float_unary(&operands[0]).map(|t| vec![t]),
        Gelu => elementwise::gelu(&operands[0], attrs).map(|t| vec![t]),
        Neg | Abs | Relu => elementwise::numeric_unary(&operands[0]).map(|t| vec![t]),
        LeakyRelu => {
            attrs.float("alpha")?;
            elementwise::float_unary(&operands[0]).map(|t| vec![t])
        }
        Clip => elementwise::clip(operands).map(|t| vec![t]),
        DequantizeLinear => elementwise::dequantize_linear(operands).map(|t| vec![t]),
        Softmax => nn::softmax(&operands[0], attrs).map(|t| vec![t]),
        Conv => nn::conv(operands, attrs).map(|t| vec![t]),
        ConvTranspose => nn::conv_transpose(operands, attrs).map(|t| vec![t]),
        ConvNhwc => nn::conv_nhwc(operands, attrs).map(|t| vec![t]),
        ConvNhwcPacked => nn::conv_nhwc_packed(operands, attrs).map(|t| vec![t]),
        ConvNhwcIntegerPacked => nn::conv_nhwc_integer_packed(operands, attrs).map(|t| vec![t]),
        ConvNhwcIntegerDepthwise => nn::conv_nhwc_integer_depthwise(operands, attrs).map(|t| vec![t]),
        MaxPool | AveragePool => nn::pool(&operands[0], attrs, kind == MaxPool).map(|t| vec![t]),
        MaxPoolNhwc | AveragePoolNhwc => nn::pool_nhwc(&operands[0], attrs, kind == MaxPoolNhwc).map(|t| vec![t]),
        GlobalAveragePool => nn::global_pool(&operands[0]).map(|t| vec![t]),
        BatchNorm => nn::batch_norm(operands, attrs).map(|t| vec![t]),
        LayerNorm => nn::layer_norm(operands, attrs),
        Gemm => linalg::gemm(operands, attrs).map(|t| vec![t]),
        MatMul => linalg::matmul(operands).map(|t| vec![t]),
        MatMulPacked => linalg::matmul_packed(operands, attrs).map(|t| vec![t]),
        MatMulIntegerPacked => linalg::matmul_integer_packed(operands, attrs).map(|t| vec![t]),
        Pack => linalg::pack(&operands[0], attrs).map(|t| vec![t]),
        WinogradInput => winograd::input(&operands[0], &attrs.dims("pads")?).map(|t| vec![t]),
        WinogradWeights => winograd::weights(&operands[0]).map(|t| vec![t]),
        WinogradOutput => winograd::output(&operands[0], &attrs.dims("shape")?).map(|t| vec![t]),
        Attention => attention::infer(operands, attrs).map(|t| vec![t]),
        Reshape => layout::reshape(&operands[0], attrs).map(|t| vec![t]),
        Transpose => layout::transpose(&operands[0], attrs).map(|t| vec![t]),
        Concat => layout::concat(operands, attrs).map(|t| vec![t]),
        Slice => layout::slice(&operands[0], attrs).map(|t| vec![t]),
        Gather => layout::gather(operands, attrs).map(|t| vec![t]),
        Scatter => layout::scatter(operands, attrs).map(|t| vec![t]),
        Expand => layout::expand(&operands[0], attrs).map(|t| vec![t]),
        ReduceMean | ReduceSum | ReduceMax => reduce::reduce(&operands[0], attrs).map(|t| vec![t]),
        Fused => Err("takes its result types from its body (see `mx::fused::infer`)".into()),
        Call => Err("takes its result types from its body (see `mx::call::infer`)".into()),
        If => control::if_types(operands, attrs),
        Loop => control::loop_types(operands, attrs),
        StringConcat => strings::concat(operands).map(|t| vec![t]),
        StringCase => strings::case(&operands[0], attrs).map(|t| vec![t]),
        RegexFullMatch => strings::regex_full_match(&operands[0], attrs).map(|t| vec![t]),
    }
}

/// Checks that `axis` is a valid non-negative axis of a rank-`rank` tensor.
pub(crate) fn check_axis(axis: i64, rank: usize, what: &str) -> Result<usize, String> {
    if axis < 0 || axis as usize >= rank {
        Err(format!("{what} {axis} is out of range for rank {rank}"))
    } else {
        Ok(axis as usize)
    }
}

pub(crate) fn same_dtype(a: &TensorType, b: &TensorType, what: &str) -> Result<(), String> {
    if a.dtype == b.dtype {
        Ok(())
    } else {
        Err(format!("{what}: element types differ ({} vs {})", a.dtype, b.dtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attr, DType};

    fn f32s(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    fn shape_attr(shape: &[i64]) -> Attrs {
        Attrs::new().with("shape", Attr::Ints(shape.to_vec()))
    }

    #[test]
    fn results_whose_size_overflows_are_refused() {
        let err = infer(OpKind::Expand, &[f32s(&[1, 4])], &shape_attr(&[1 << 62, 4])).unwrap_err();
        assert_eq!(
            err,
            "the result shape [4611686018427387904, 4] of f32 is too large: its size overflows"
        );
        // the product of this shape wraps to the element count of `x` (0)
        let err = infer(OpKind::Reshape, &[f32s(&[0])], &shape_attr(&[1 << 62, 1 << 62, 0])).unwrap_err();
        assert!(err.starts_with("cannot reshape [0]"), "{err}");
        let concat = Attrs::new().with("axis", Attr::Int(0));
        let err = infer(OpKind::Concat, &[f32s(&[1 << 60]), f32s(&[1 << 60])], &concat).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        let conv_t = Attrs::new()
            .with("dilations", Attr::Ints(vec![1]))
            .with("group", Attr::Int(1))
            .with("output_padding", Attr::Ints(vec![0]))
            .with("pads", Attr::Ints(vec![0, 0]))
            .with("strides", Attr::Ints(vec![1 << 62]));
        let err = infer(OpKind::ConvTranspose, &[f32s(&[1, 1, 5]), f32s(&[1, 1, 3])], &conv_t).unwrap_err();
        assert_eq!(err, "the output extent of spatial axis 0 overflows");
    }
}
