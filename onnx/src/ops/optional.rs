//! ONNX optionals, whose emptiness is known at import (`value::OnnxValue::Optional`):
//! `Optional` wraps a value or makes an empty one of a type, `OptionalHasElement` is a
//! constant, `OptionalGetElement` the value held (an empty optional is refused).

use super::super::ctx::Ctx;
use super::super::importer::OnnxValue;
use super::super::proto::type_proto::Value as TypeValue;
use super::super::registry::{Registry, LATEST};
use mxc_dialects::{DType, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "Optional", 15, LATEST, optional);
    r.add("", "OptionalHasElement", 15, LATEST, has_element);
    r.add("", "OptionalGetElement", 15, LATEST, get_element);
}

fn optional(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let value = match ctx.value_input(0) {
        Some(v @ (OnnxValue::Tensor(_) | OnnxValue::Sequence(_))) => OnnxValue::Optional {
            of_sequence: matches!(v, OnnxValue::Sequence(_)),
            value: Some(Box::new(v)),
        },
        Some(other) => {
            return Err(format!(
                "the input is {}: optionals of optionals are not supported",
                other.kind()
            ))
        }
        None => {
            let ty = ctx
                .node
                .opt_type("type")?
                .ok_or("an empty optional needs the attribute `type`")?;
            let of_sequence = match &ty.value {
                Some(TypeValue::TensorType(_)) => false,
                Some(TypeValue::SequenceType(_)) => true,
                _ => return Err("attribute `type`: only optionals of tensors and sequences are supported".into()),
            };
            OnnxValue::Optional {
                of_sequence,
                value: None,
            }
        }
    };
    // the type of a wrapped value is the value's own
    ctx.node.without_effect(&["type"]);
    ctx.set_output(0, value);
    Ok(vec![])
}

/// Input 0 as an optional's content: `Some(value)` or `None` when empty. From opset 18 a
/// tensor or sequence counts as an optional holding it, and an input left out as an empty one.
fn content(ctx: &Ctx) -> Result<Option<OnnxValue>, String> {
    match ctx.value_input(0) {
        Some(OnnxValue::Optional { value, .. }) => Ok(value.map(|v| *v)),
        Some(v) if ctx.opset >= 18 => Ok(Some(v)),
        None if ctx.opset >= 18 => Ok(None),
        Some(v) => Err(format!(
            "the input is {} (opset 18 takes tensors and sequences here; this model's opset is {})",
            v.kind(),
            ctx.opset
        )),
        None => Err("missing input #0".into()),
    }
}

fn has_element(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let has = content(ctx)?.is_some();
    Ok(vec![ctx.scalar(DType::Bool, has as u8 as f64)])
}

fn get_element(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let value = content(ctx)?.ok_or("the optional is empty")?;
    ctx.set_output(0, value);
    Ok(vec![])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::{node, ModelBuilder};

    #[test]
    fn an_optional_tensor_is_unwrapped_at_import() {
        let text = ModelBuilder::new(18)
            .input("x", DataType::Float, &[2])
            .node(node("Optional", &["x"], &["o"], vec![]))
            .node(node("OptionalHasElement", &["o"], &["has"], vec![]))
            .node(node("OptionalGetElement", &["o"], &["y"], vec![]))
            .node(node("Identity", &["o"], &["p"], vec![]))
            .node(node("OptionalGetElement", &["p"], &["z"], vec![]))
            .node(node("OptionalHasElement", &["", ""], &["none"], vec![]))
            .output("has")
            .output("y")
            .output("z")
            .output("none")
            .text();
        assert!(text.contains("dense<[1]> : tensor<bool>"), "{text}");
        assert!(text.contains("dense<[0]> : tensor<bool>"), "{text}");
        assert_eq!(text.matches("mx.identity %arg0").count(), 2, "{text}");
    }

    #[test]
    fn reading_an_empty_optional_is_refused() {
        let err = ModelBuilder::new(15)
            .input("x", DataType::Float, &[2])
            .node(node("OptionalGetElement", &["x"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            err.contains("the input is a tensor (opset 18 takes tensors and sequences here; this model's opset is 15)"),
            "{err}"
        );
        let err = ModelBuilder::new(18)
            .node(node("OptionalGetElement", &[""], &["y"], vec![]))
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (OptionalGetElement): the optional is empty"
        );
    }
}
