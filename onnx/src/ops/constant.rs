//! Constants: `Constant`, `ConstantOfShape`, `EyeLike` and a constant `Range` become
//! `mx.constant`; and the inference-time identities `Identity` and `Dropout` (training-mode
//! `Dropout` draws its mask in `random.rs`).

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::shape_values::SizeValues;
use super::super::tensor::{check_constant, require_numeric_dtype};
use super::random;
use mxc_dialects::dim::Dim;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Constant", constant);
    r.add_all("ConstantOfShape", constant_of_shape);
    r.add_all("EyeLike", eye_like);
    r.add_all("Range", range);
    r.add_all("Identity", identity);
    r.add_all("Dropout", dropout);
}

fn constant(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let n = &ctx.node;
    let value = if let Some(t) = ctx.tensor_attr("value")? {
        t
    } else if let Some(f) = n.opt_float("value_float")? {
        Tensor::from_f64s(DType::F32, vec![], &[f as f64])
    } else if let Some(fs) = n.opt_floats("value_floats")? {
        Tensor::from_f64s(
            DType::F32,
            vec![fs.len()],
            &fs.iter().map(|&f| f as f64).collect::<Vec<_>>(),
        )
    } else if let Some(i) = n.opt_int("value_int")? {
        Tensor::from_i64s(DType::I64, vec![], &[i])
    } else if let Some(is) = n.opt_ints("value_ints")? {
        Tensor::from_i64s(DType::I64, vec![is.len()], &is)
    } else if let Some(other) = ["sparse_value", "value_string", "value_strings"]
        .into_iter()
        .find(|a| n.has(a))
    {
        return Err(format!("attribute `{other}` is not supported"));
    } else {
        return Err("no value attribute".into());
    };
    Ok(vec![ctx.constant(value)])
}

/// A tensor of `ty` with every element equal to the single element of `value`.
fn filled(ty: TensorType, value: &Tensor) -> Result<Tensor, String> {
    if value.len() != 1 {
        return Err(format!(
            "the fill value must have one element, got shape {:?}",
            value.shape()
        ));
    }
    check_constant(&ty)?;
    let data = value.bytes().repeat(ty.num_elements());
    Tensor::from_bytes(ty, data).ok_or_else(|| "fill value of the wrong size".into())
}

fn constant_of_shape(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if let Some(sizes) = ctx.sizes_input(0).filter(SizeValues::is_symbolic) {
        return symbolic_constant_of_shape(ctx, &sizes.sizes("a fill's shape")?);
    }
    let dims = ctx.const_input(0, "input")?.to_i64_vec();
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("shape {dims:?} has a negative entry")))
        .collect::<Result<Vec<usize>, String>>()?;
    let value = ctx
        .tensor_attr("value")?
        .unwrap_or_else(|| Tensor::from_f32s(vec![1], &[0.0]));
    let t = filled(TensorType::new(value.dtype(), shape), &value)?;
    Ok(vec![ctx.constant(t)])
}

/// `ConstantOfShape` of a shape computed from symbolic sizes: the value expanded to it.
fn symbolic_constant_of_shape(ctx: &mut Ctx, dims: &[Dim]) -> Result<Vec<ValueId>, String> {
    let value = ctx
        .tensor_attr("value")?
        .unwrap_or_else(|| Tensor::from_f32s(vec![1], &[0.0]));
    let one = filled(TensorType::new(value.dtype(), vec![1; dims.len()]), &value)?;
    let one = ctx.constant(one);
    Ok(vec![expand_to(ctx, one, dims)?])
}

/// `x` broadcast to `dims` (an `mx.expand` to sizes).
pub fn expand_to(ctx: &mut Ctx, x: ValueId, dims: &[Dim]) -> Result<ValueId, String> {
    let shape = match dims.iter().all(|d| d.as_constant().is_some()) {
        true => Attr::Ints(dims.iter().map(|d| d.as_constant().unwrap_or(0) as i64).collect()),
        false => Attr::Sizes(dims.to_vec()),
    };
    ctx.build1(OpKind::Expand, vec![x], Attrs::new().with("shape", shape))
}

fn eye_like(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let dtype = match ctx.node.opt_int("dtype")? {
        Some(code) => require_numeric_dtype(code as i32)?,
        None => ty.dtype,
    };
    let [rows, cols] = ty.shape[..] else {
        return Err(format!("input must be a matrix, got shape {:?}", ty.shape));
    };
    check_constant(&ty.with_dtype(dtype))?;
    let k = ctx.node.int("k", 0)?;
    let values: Vec<i64> = (0..rows * cols)
        .map(|i| ((i % cols) as i64 - (i / cols) as i64 == k) as i64)
        .collect();
    Ok(vec![ctx.constant(Tensor::from_i64s(dtype, vec![rows, cols], &values))])
}

/// The most elements a `Range` may have (it becomes a constant).
const RANGE_LIMIT: usize = 1 << 24;

/// A `Range` whose limit is a size computed from symbolic ones, from a constant integer start
/// `s >= 0` by a constant step `d > 0`: the range to the limit's largest value, a constant,
/// sliced to its first `ceil((limit - s) / d)` elements.
fn symbolic_range(ctx: &mut Ctx, limit: &Dim) -> Result<Vec<ValueId>, String> {
    let (start, delta) = (ctx.const_number(0, "start")?, ctx.const_number(2, "delta")?);
    let dtype = start.dtype();
    let (s, d) = (start.get_i64(0), delta.get_i64(0));
    if !dtype.is_int() || s < 0 || d <= 0 {
        return Err(format!(
            "a range to a symbolic limit from {} by {} is not supported (integers from 0 or more, by a positive step, are)",
            start.get_f64(0),
            delta.get_f64(0)
        ));
    }
    let count = limit
        .add(&Dim::constant(d as u64 - 1))
        .and_then(|n| n.sub(&Dim::constant(s as u64)))
        .and_then(|n| n.floor_div(d as u64))
        .map_err(|e| format!("the length of a range to {limit}: {e}"))?;
    let largest = count.bounds().1.max(0) as usize;
    if largest > RANGE_LIMIT {
        return Err(format!("a range of up to {largest} elements is too large"));
    }
    let values: Vec<i64> = (0..largest as i64).map(|i| s + i * d).collect();
    let ramp = ctx.constant(Tensor::from_i64s(dtype, vec![largest], &values));
    let attrs = Attrs::new()
        .with("starts", Attr::Ints(vec![0]))
        .with("ends", Attr::Sizes(vec![count]))
        .with("steps", Attr::Ints(vec![1]));
    Ok(vec![ctx.build1(OpKind::Slice, vec![ramp], attrs)?])
}

fn range(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if let Some(limit) = ctx.sizes_input(1).filter(SizeValues::is_symbolic) {
        let limit = limit.sizes("a range's limit")?;
        return symbolic_range(ctx, &limit[0]);
    }
    let start = ctx.const_input(0, "start")?;
    let limit = ctx.const_input(1, "limit")?;
    let delta = ctx.const_input(2, "delta")?;
    if [&start, &limit, &delta].iter().any(|t| t.len() != 1) {
        return Err("start, limit and delta must be scalars".into());
    }
    let dtype = start.dtype();
    // opset 27's `stash_type`: the type a half-precision range is computed in (1, float, the
    // default; the values here come from f64, rounded once to the element type)
    let stash = ctx.node.int("stash_type", 1)?;
    if matches!(dtype, DType::F16 | DType::BF16) && stash != 1 {
        return Err(format!(
            "stash_type {stash} is not supported (a {dtype} range is computed in float: stash_type 1)"
        ));
    }
    let count = |n: f64| {
        if n > RANGE_LIMIT as f64 {
            Err(format!("a range of {n} elements is too large"))
        } else {
            Ok(n.max(0.0) as usize)
        }
    };
    let t = if dtype.is_float() {
        let (s, l, d) = (start.get_f64(0), limit.get_f64(0), delta.get_f64(0));
        if d == 0.0 {
            return Err("delta is zero".into());
        }
        let n = count(((l - s) / d).ceil())?;
        let values: Vec<f64> = (0..n).map(|i| s + i as f64 * d).collect();
        Tensor::from_f64s(dtype, vec![values.len()], &values)
    } else {
        let (s, l, d) = (
            start.get_i64(0) as i128,
            limit.get_i64(0) as i128,
            delta.get_i64(0) as i128,
        );
        if d == 0 {
            return Err("delta is zero".into());
        }
        let n = count(((l - s) as f64 / d as f64).ceil())?;
        let values: Vec<i64> = (0..n as i128).map(|i| (s + i * d) as i64).collect();
        Tensor::from_i64s(dtype, vec![n], &values)
    };
    Ok(vec![ctx.constant(t)])
}

/// The input unchanged, a sequence or optional too (opset 14 on).
fn identity(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let value = ctx.value_input(0).ok_or("missing input #0")?;
    ctx.set_output(0, value);
    Ok(vec![])
}

/// Dropout at inference: the input unchanged, and a mask of all ones (bool from opset 7,
/// the input's type before). Training mode (an input from opset 12, which must then be known
/// at compile time, as must the ratio) with a ratio other than 0 draws the mask
/// (`random::training_dropout`); before opset 7, `is_test` is ignored, as inference runtimes
/// do.
fn dropout(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    // before opset 12 the ratio is an attribute and dropout never in training mode (`is_test`
    // before 7 is ignored, as inference runtimes do)
    ctx.node.without_effect(&["ratio", "is_test"]);
    if ctx.opset >= 12
        && ctx
            .opt_const_number(2, "training_mode")?
            .is_some_and(|t| t.get_i64(0) != 0)
    {
        let ratio = ctx.opt_const_number(1, "ratio")?.map_or(0.5, |t| t.get_f64(0));
        if ratio != 0.0 {
            return random::training_dropout(ctx, x, ratio);
        }
    }
    // `seed` draws only the training mode's mask
    ctx.node.without_effect(&["seed"]);
    let mut outputs = vec![x];
    if ctx.wants_output(1) {
        let ty = ctx.ty(x).clone();
        let mask_dtype = if ctx.opset >= 7 { DType::Bool } else { ty.dtype };
        let one = Tensor::from_f64s(mask_dtype, vec![], &[1.0]);
        let mask = filled(ty.with_dtype(mask_dtype), &one)?;
        outputs.push(ctx.constant(mask));
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::TensorProto;
    use super::super::super::testutil::*;

    #[test]
    fn constants_of_every_attribute_form() {
        let text = ModelBuilder::new(13)
            .node(node("Constant", &[], &["a"], vec![ints_attr("value_ints", &[1, 2])]))
            .node(node(
                "Constant",
                &[],
                &["b"],
                vec![tensor_attr("value", f32_tensor("", &[1], &[0.5]))],
            ))
            .node(node(
                "ConstantOfShape",
                &["a"],
                &["c"],
                vec![tensor_attr("value", i64_tensor("", &[1], &[7]))],
            ))
            .output("a")
            .output("b")
            .output("c")
            .text();
        assert!(text.contains("dense<[1, 2]> : tensor<2xi64>"), "{text}");
        assert!(text.contains("dense<[0.5]> : tensor<1xf32>"), "{text}");
        assert!(text.contains("dense<[7, 7]> : tensor<1x2xi64>"), "{text}");
        let err = ModelBuilder::new(13)
            .node(node("Constant", &[], &["a"], vec![str_attr("value_string", "hi")]))
            .output("a")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"a\") (Constant): attribute `value_string` is not supported"
        );
    }

    #[test]
    fn range_and_cast_fold() {
        let text = ModelBuilder::new(13)
            .init(i64_tensor("start", &[], &[10]))
            .init(i64_tensor("limit", &[], &[4]))
            .init(i64_tensor("delta", &[], &[-3]))
            .node(node("Range", &["start", "limit", "delta"], &["r"], vec![]))
            .node(node(
                "Cast",
                &["r"],
                &["y"],
                vec![int_attr("to", DataType::Float as i64)],
            ))
            .output("y")
            .text();
        assert!(
            text.contains("mx.constant {value = dense<[10.0, 7.0]> : tensor<2xf32>}"),
            "{text}"
        );
        assert!(!text.contains("mx.cast"), "{text}");
    }

    #[test]
    fn a_half_precision_range_computed_in_its_own_type_is_refused() {
        // 0, 4 and 1 as float16 bits
        let half = |name: &str, bits: i32| TensorProto {
            name: Some(name.into()),
            data_type: Some(DataType::Float16 as i32),
            int32_data: vec![bits],
            ..Default::default()
        };
        let range = |stash: i64| {
            ModelBuilder::new(27)
                .init(half("start", 0))
                .init(half("limit", 0x4400))
                .init(half("delta", 0x3c00))
                .node(node(
                    "Range",
                    &["start", "limit", "delta"],
                    &["r"],
                    vec![int_attr("stash_type", stash)],
                ))
                .output("r")
        };
        assert!(range(1).text().contains("dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf16>"));
        let err = range(10).error();
        assert!(err.contains("(Range): stash_type 10 is not supported"), "{err}");
    }

    #[test]
    fn dropout_is_an_identity_with_a_full_mask() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .node(node("Dropout", &["x"], &["y", "mask"], vec![]))
            .output("y")
            .output("mask")
            .text();
        assert!(text.contains("dense<[1, 1]> : tensor<2xbool>"), "{text}");
        assert!(text.contains("mx.identity %arg0"), "{text}");
    }
}
