//! Tests of the control-flow parsers, and what they share: running an imported graph (the
//! evaluator runs `mx.if` and `mx.loop`), and builders of small ONNX graphs.

use super::super::super::proto::tensor_proto::DataType;
use super::super::super::proto::{GraphProto, NodeProto, ValueInfoProto};
use super::super::super::testutil::*;
use mxc_dialects::{DType, Graph, OpKind, Tensor};

/// Runs `g` on `inputs` with the evaluator, which runs `mx.if` and `mx.loop` by running their
/// regions (and checks a loop's `iterations` against the count it ran).
pub fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    mxc_dialects::eval::run(g, inputs).unwrap_or_else(|e| panic!("running `{}`: {e}", g.name))
}

/// A subgraph of `nodes` with inputs and outputs as declared.
pub fn subgraph(
    name: &str,
    inputs: Vec<ValueInfoProto>,
    nodes: Vec<NodeProto>,
    outputs: Vec<ValueInfoProto>,
) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        input: inputs,
        node: nodes,
        output: outputs,
        ..Default::default()
    }
}

/// An output or input of a subgraph whose type is not declared.
pub fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

pub fn f32s(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f32s(shape.to_vec(), values)
}

/// `If` on `c` whose branches compute `then_op(x)` and `else_op(x)`.
fn if_node(then_op: &str, else_op: &str) -> NodeProto {
    let branch = |name: &str, op: &str| {
        let out = format!("{name}_out");
        let g = subgraph(
            name,
            vec![],
            vec![node(op, &["x"], &[&out], vec![])],
            vec![untyped(&out)],
        );
        graph_attr(name, g)
    };
    node(
        "If",
        &["c"],
        &["y"],
        vec![branch("then_branch", then_op), branch("else_branch", else_op)],
    )
}

fn if_model(cond: &[bool]) -> ModelBuilder {
    ModelBuilder::new(13)
        .input("x", DataType::Float, &[2])
        .init(bool_tensor("c", &[], cond))
        .node(if_node("Relu", "Neg"))
        .output("y")
}

#[test]
fn a_constant_condition_inlines_its_branch() {
    assert!(if_model(&[true]).text().contains("%0 = mx.relu %arg0"));
    assert!(if_model(&[false]).text().contains("%0 = mx.neg %arg0"));
}

#[test]
fn a_varying_condition_runs_one_of_two_regions() {
    let model = || {
        ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .input("c", DataType::Bool, &[1])
            .node(if_node("Abs", "Neg"))
            .output("y")
    };
    let text = model().text();
    assert!(
        text.contains("%0 = mx.reshape %arg1 {shape = []} : tensor<bool>"),
        "{text}"
    );
    assert!(
        text.contains("%1 = mx.if %0, %arg0 {else_branch = graph \"else_branch\" (%arg0: tensor<2xf32> \"x\") {"),
        "{text}"
    );
    assert!(
        text.contains("then_branch = graph \"then_branch\" (%arg0: tensor<2xf32> \"x\") {"),
        "{text}"
    );
    let g = model().import().unwrap();
    let x = f32s(&[2], &[-1., 2.]);
    let c = |b: bool| Tensor::from_i64s(DType::Bool, vec![1], &[b as i64]);
    assert_eq!(run(&g, &[x.clone(), c(true)])[0].to_f64_vec(), [1., 2.]);
    assert_eq!(run(&g, &[x, c(false)])[0].to_f64_vec(), [1., -2.]);
}

#[test]
fn both_branches_take_what_either_reads_and_copy_small_constants() {
    let branch = |name: &str, operand: &str| {
        let out = format!("{name}_out");
        let nodes = vec![node("Add", &["x", operand], &[&out], vec![])];
        graph_attr(name, subgraph(name, vec![], nodes, vec![untyped(&out)]))
    };
    let n = 4097;
    let big: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let model = || {
        ModelBuilder::new(13)
            .input("c", DataType::Bool, &[])
            .input("x", DataType::Float, &[n as i64])
            .init(f32_tensor("small", &[1], &[0.5]))
            .init(f32_tensor("big", &[n as i64], &big))
            .node(node(
                "If",
                &["c"],
                &["y"],
                vec![branch("then_branch", "small"), branch("else_branch", "big")],
            ))
            .output("y")
    };
    let g = model().import().unwrap();
    let op = g.ops.iter().find(|op| op.kind == OpKind::If).unwrap();
    // x and big are passed in (big is too large to copy), small is copied into the branch
    assert_eq!(op.operands[1..], [g.inputs[1].value, g.ops[0].results[0]]);
    for name in ["then_branch", "else_branch"] {
        let region = op.attrs.graph(name).unwrap();
        let inputs: Vec<&str> = region.inputs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(inputs, ["x", "big"], "{name}");
    }
    let then_text = mxc_dialects::text::print(op.attrs.graph("then_branch").unwrap());
    assert!(
        then_text.contains("mx.constant {value = dense<[0.5]> : tensor<1xf32>}"),
        "{then_text}"
    );
    let x = Tensor::from_f64s(DType::F32, vec![n], &vec![1.0; n]);
    let c = |b: bool| Tensor::from_i64s(DType::Bool, vec![], &[b as i64]);
    assert_eq!(run(&g, &[c(true), x.clone()])[0].get_f64(7), 1.5);
    assert_eq!(run(&g, &[c(false), x])[0].get_f64(7), 8.0);
}

#[test]
fn branches_must_give_the_same_types() {
    let branch = |name: &str, value: &str| graph_attr(name, subgraph(name, vec![], vec![], vec![untyped(value)]));
    let err = ModelBuilder::new(13)
        .input("c", DataType::Bool, &[])
        .input("x", DataType::Float, &[2])
        .input("z", DataType::Float, &[3])
        .node(node(
            "If",
            &["c"],
            &["y"],
            vec![branch("then_branch", "x"), branch("else_branch", "z")],
        ))
        .output("y")
        .error();
    assert_eq!(
        err,
        "node #0 (output \"y\") (If): the branches give different types: then (tensor<2xf32>), else \
         (tensor<3xf32>); results whose shapes depend on the branch taken are not supported (they need dynamic shapes)"
    );
}

#[test]
fn the_condition_must_be_one_bool() {
    for (dtype, dims, got) in [
        (DataType::Float, &[][..], "tensor<f32>"),
        (DataType::Bool, &[2][..], "tensor<2xbool>"),
    ] {
        let err = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .input("c", dtype, dims)
            .node(if_node("Relu", "Neg"))
            .output("y")
            .error();
        assert_eq!(
            err,
            format!("node #0 (output \"y\") (If): cond must be a bool tensor of one element, got {got}")
        );
    }
}

#[test]
fn a_branch_cannot_read_a_sequence_from_around_it() {
    let then_nodes = vec![
        node(
            "Constant",
            &[],
            &["zero"],
            vec![tensor_attr("value", i64_tensor("", &[], &[0]))],
        ),
        node("SequenceAt", &["s", "zero"], &["t"], vec![]),
    ];
    let then_branch = graph_attr(
        "then_branch",
        subgraph("then_branch", vec![], then_nodes, vec![untyped("t")]),
    );
    let else_branch = graph_attr(
        "else_branch",
        subgraph("else_branch", vec![], vec![], vec![untyped("x")]),
    );
    let err = ModelBuilder::new(13)
        .input("c", DataType::Bool, &[])
        .input("x", DataType::Float, &[2])
        .node(node("SequenceConstruct", &["x"], &["s"], vec![]))
        .node(node("If", &["c"], &["y"], vec![then_branch, else_branch]))
        .output("y")
        .error();
    assert_eq!(
        err,
        "node #1 (output \"y\") (If): the subgraph reads \"s\", a sequence, from the graph around it; only \
         tensors can be passed into a subgraph run at run time"
    );
}
