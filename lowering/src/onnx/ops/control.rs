//! Control flow that static shapes allow: an `If` whose condition is known at compile time
//! is replaced by the branch it takes, imported in place.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use mxc_dialects::ValueId;

pub fn register(r: &mut Registry) {
    r.add_all("If", if_op);
}

fn if_op(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let cond = ctx.const_input(0, "cond")?;
    if cond.len() != 1 {
        return Err(format!("cond must have one element, got shape {:?}", cond.shape()));
    }
    // both branches must be graphs; the one not taken is dropped
    let [then_branch, else_branch] = ["then_branch", "else_branch"].map(|name| {
        ctx.node
            .graph(name)?
            .ok_or_else(|| format!("missing attribute `{name}`"))
    });
    let (then_branch, else_branch) = (then_branch?, else_branch?);
    ctx.inline_subgraph(if cond.get_i64(0) != 0 { then_branch } else { else_branch })
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::{AttributeProto, GraphProto, TensorProto};
    use super::super::super::testutil::*;

    fn branch(name: &str, op: &str) -> AttributeProto {
        let g = GraphProto {
            name: Some(name.into()),
            node: vec![node(op, &["x"], &[&format!("{name}_out")], vec![])],
            output: vec![value_info(&format!("{name}_out"), DataType::Float, &[2])],
            ..Default::default()
        };
        graph_attr(name, g)
    }

    fn if_model(cond: bool) -> ModelBuilder {
        let cond = TensorProto {
            name: Some("c".into()),
            data_type: Some(DataType::Bool as i32),
            int32_data: vec![cond as i32],
            ..Default::default()
        };
        ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .init(cond)
            .node(node(
                "If",
                &["c"],
                &["y"],
                vec![branch("then_branch", "Relu"), branch("else_branch", "Neg")],
            ))
            .output("y")
    }

    #[test]
    fn a_constant_condition_inlines_its_branch() {
        assert!(if_model(true).text().contains("%0 = mx.relu %arg0"));
        assert!(if_model(false).text().contains("%0 = mx.neg %arg0"));
    }

    #[test]
    fn a_varying_condition_is_an_error() {
        let err = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .input("c", DataType::Bool, &[])
            .node(node(
                "If",
                &["c"],
                &["y"],
                vec![branch("then_branch", "Relu"), branch("else_branch", "Neg")],
            ))
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (If): input \"cond\" must be known at compile time"
        );
    }
}
