//! The unrolled graphs' structure and the refusals. (The values are checked by the node
//! suite: `gemm`, `tanh` and `sigmoid` are not evaluated at import.)

use super::super::super::node::NodeView;
use super::super::super::proto::attribute_proto::AttributeType;
use super::super::super::proto::tensor_proto::DataType;
use super::super::super::proto::AttributeProto;
use super::super::super::testutil::*;
use super::activations::{self, Activation};

const BATCH: i64 = 2;
const INPUT: i64 = 4;
const HIDDEN: i64 = 3;

fn gates(op: &str) -> i64 {
    match op {
        "RNN" => 1,
        "GRU" => 3,
        _ => 4,
    }
}

/// A model of one `op` node over X `[seq, BATCH, INPUT]` (`[BATCH, seq, INPUT]` with `layout`
/// 1), W and R, plus the optional `inputs` named in their positions from B on (`""` for one
/// left out), each a graph input of the shape the op expects.
fn layer(op: &str, seq: i64, inputs: &[&str], attrs: Vec<AttributeProto>, outputs: &[&str]) -> ModelBuilder {
    let d = if attrs.iter().any(|a| a.s() == b"bidirectional") {
        2
    } else {
        1
    };
    let batch_first = attrs.iter().any(|a| a.name() == "layout" && a.i() == 1);
    let rows = gates(op) * HIDDEN;
    let x = if batch_first {
        [BATCH, seq, INPUT]
    } else {
        [seq, BATCH, INPUT]
    };
    let state = if batch_first {
        [BATCH, d, HIDDEN]
    } else {
        [d, BATCH, HIDDEN]
    };
    let mut model = ModelBuilder::new(22)
        .input("X", DataType::Float, &x)
        .input("W", DataType::Float, &[d, rows, INPUT])
        .input("R", DataType::Float, &[d, rows, HIDDEN]);
    for &name in inputs {
        model = match name {
            "B" => model.input(name, DataType::Float, &[d, 2 * rows]),
            "sequence_lens" => model.input(name, DataType::Int32, &[BATCH]),
            "initial_h" | "initial_c" => model.input(name, DataType::Float, &state),
            "P" => model.input(name, DataType::Float, &[d, 3 * HIDDEN]),
            _ => model,
        };
    }
    let names: Vec<&str> = ["X", "W", "R"].iter().chain(inputs).copied().collect();
    let mut model = model.node(node(op, &names, outputs, attrs));
    for output in outputs.iter().filter(|o| !o.is_empty()) {
        model = model.output(output);
    }
    model
}

fn strings_attr(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Strings as i32),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

fn count(text: &str, op: &str) -> usize {
    text.matches(&format!("= {op} ")).count()
}

#[test]
fn each_step_is_one_recurrence_product_after_one_input_projection() {
    let text = layer("RNN", 3, &["B"], vec![], &["Y", "Y_h"]).text();
    assert_eq!(count(&text, "mx.gemm"), 1 + 3, "{text}");
    assert_eq!(count(&text, "mx.tanh"), 3, "{text}");
    assert!(text.contains(": tensor<3x1x2x3xf32>\n"), "{text}");
    let text = layer("GRU", 3, &[], vec![], &["Y"]).text();
    assert_eq!(count(&text, "mx.gemm"), 1 + 2 * 3, "{text}");
    let linear = vec![int_attr("linear_before_reset", 1)];
    let text = layer("GRU", 3, &[], linear, &["Y"]).text();
    assert_eq!(count(&text, "mx.gemm"), 1 + 3, "{text}");
}

#[test]
fn batch_first_bidirectional_outputs_are_batch_major() {
    let attrs = vec![str_attr("direction", "bidirectional"), int_attr("layout", 1)];
    let inputs = ["B", "", "initial_h", "initial_c", "P"];
    let text = layer("LSTM", 5, &inputs, attrs, &["Y", "Y_h", "Y_c"]).text();
    assert_eq!(count(&text, "mx.gemm"), 2 * (1 + 5), "{text}");
    // X goes in, and Y, Y_h and Y_c come out, through a transpose.
    assert_eq!(count(&text, "mx.transpose"), 4, "{text}");
    for ty in ["2x5x2x3", "2x2x3"] {
        assert!(text.contains(&format!(": tensor<{ty}xf32>\n")), "{ty}: {text}");
    }
}

#[test]
fn only_the_outputs_asked_for_are_built() {
    let text = layer("LSTM", 3, &[], vec![], &["", "", "Y_c"]).text();
    assert!(!text.contains("mx.concat"), "{text}");
    assert!(text.contains("return \"Y_c\""), "{text}");
}

#[test]
fn steps_past_a_sequence_length_keep_the_state() {
    // Known only at run time: every step compares its index with the lengths.
    let text = layer("RNN", 3, &["", "sequence_lens"], vec![], &["", "Y_h"]).text();
    assert_eq!((count(&text, "mx.less"), count(&text, "mx.where")), (3, 3), "{text}");
    // Known: only the steps some sequence does not reach are masked, the masks constants.
    let lengths = |values: &[i64]| {
        ModelBuilder::new(22)
            .input("X", DataType::Float, &[3, BATCH, INPUT])
            .input("W", DataType::Float, &[1, HIDDEN, INPUT])
            .input("R", DataType::Float, &[1, HIDDEN, HIDDEN])
            .init(i64_tensor("lens", &[BATCH], values))
            .node(node("RNN", &["X", "W", "R", "", "lens"], &["Y", "Y_h"], vec![]))
            .output("Y")
            .output("Y_h")
            .text()
    };
    let text = lengths(&[3, 1]);
    assert_eq!(
        (count(&text, "mx.less"), count(&text, "mx.where")),
        (0, 2 * 2),
        "{text}"
    );
    assert!(text.contains("dense<[1, 0]> : tensor<2x1xbool>"), "{text}");
    assert_eq!(count(&lengths(&[3, 3]), "mx.where"), 0);
    let err = ModelBuilder::new(22)
        .input("X", DataType::Float, &[3, BATCH, INPUT])
        .input("W", DataType::Float, &[1, HIDDEN, INPUT])
        .input("R", DataType::Float, &[1, HIDDEN, HIDDEN])
        .init(i64_tensor("lens", &[BATCH], &[3, 4]))
        .node(node("RNN", &["X", "W", "R", "", "lens"], &["Y"], vec![]))
        .output("Y")
        .error();
    assert!(err.ends_with("sequence_lens [3, 4] has 4, outside 0..=3"), "{err}");
}

#[test]
fn activation_parameters_go_in_order_to_the_activations_that_take_them() {
    let proto = node(
        "LSTM",
        &[],
        &[],
        vec![
            strings_attr("activations", &["LeakyRelu", "tanh", "HardSigmoid"]),
            floats_attr("activation_alpha", &[0.5]),
        ],
    );
    let parsed = activations::parse(&NodeView::new(&proto), &["Sigmoid", "Tanh", "Tanh"], 1).unwrap();
    let hard_sigmoid = Activation::HardSigmoid { alpha: 0.2, beta: 0.5 };
    assert_eq!(
        parsed,
        [Activation::LeakyRelu { alpha: 0.5 }, Activation::Tanh, hard_sigmoid]
    );
}

#[test]
fn unsupported_attribute_values_are_refused_by_name() {
    let refused = |op: &str, seq: i64, attrs: Vec<AttributeProto>| layer(op, seq, &[], attrs, &["Y"]).error();
    let cases = [
        (
            refused("GRU", 2, vec![strings_attr("activations", &["Sigmoid", "Swish"])]),
            "unsupported activation function \"Swish\"",
        ),
        (
            refused("RNN", 2, vec![strings_attr("activations", &["ScaledTanh"])]),
            "activation ScaledTanh needs a value in `activation_alpha`",
        ),
        (
            refused("RNN", 2, vec![floats_attr("activation_alpha", &[0.1])]),
            "`activation_alpha` has 1 values but the activations take 0",
        ),
        (
            refused(
                "RNN",
                2,
                vec![
                    str_attr("direction", "bidirectional"),
                    strings_attr("activations", &["Tanh"]),
                ],
            ),
            "`activations` must name 2 functions (1 per direction), got [\"Tanh\"]",
        ),
        (
            refused("LSTM", 2, vec![str_attr("direction", "sideways")]),
            "unsupported direction \"sideways\"",
        ),
        (
            refused("LSTM", 2, vec![int_attr("layout", 2)]),
            "unsupported layout 2 (0 or 1)",
        ),
        (
            refused("LSTM", 1025, vec![]),
            "a sequence of 1025 steps is not supported (unrolled at import: 1 to 1024 steps)",
        ),
        (
            refused("RNN", 2, vec![int_attr("hidden_size", 5)]),
            "W must have shape [1, 5, 4], got [1, 3, 4]",
        ),
        (
            refused("GRU", 2, vec![int_attr("output_gate", 1)]),
            "attribute `output_gate` is not supported (the parser does not read it)",
        ),
    ];
    for (err, expected) in cases {
        assert!(err.ends_with(expected), "{err}");
    }
}
