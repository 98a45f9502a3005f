//! The built-in `fusion` rules on graphs written as text: a written-out softmax and the
//! written-out forms of the tanh GELU become one op each (input IR → expected IR), and chains
//! that are not one of them stay as they are (softmax without the maximum subtracted, a
//! reduction over two axes, a constant that is not the one the op uses). The rules' soundness on
//! generated instances is `mxc rules check`'s (`tests/suite/rules_check.rs`).

use super::with_builtin;
use mxc_dialects::text::{parse, print};

/// `input` after the `fusion` rules, printed.
fn fused(input: &str) -> String {
    let g = parse(input).unwrap_or_else(|e| panic!("{e}\n{input}"));
    print(&with_builtin(&g, "fusion"))
}

/// Asserts that the `fusion` rules turn `input` into `expected`.
fn becomes(input: &str, expected: &str) {
    assert_eq!(fused(input), expected, "from:\n{input}");
}

/// Asserts that the `fusion` rules leave `input` as it is.
fn stays(input: &str) {
    becomes(input, input);
}

/// `exp(x - max(x)) / sum(exp(x - max(x)))` over `axes` of an f32 `x` of `shape`, or without
/// the maximum when `max` is false.
fn softmax_chain(shape: &str, reduced: &str, axes: &str, max: bool) -> String {
    let x = format!("tensor<{shape}xf32>");
    let r = format!("tensor<{reduced}xf32>");
    let head = format!("graph \"softmax\" (%arg0: {x} \"x\") {{\n");
    let body = if max {
        format!(
            "  %0 = mx.reduce_max %arg0 {{axes = {axes}, keepdims = 1}} : {r}
  %1 = mx.sub %arg0, %0 : {x}
  %2 = mx.exp %1 : {x}
  %3 = mx.reduce_sum %2 {{axes = {axes}, keepdims = 1}} : {r}
  %4 = mx.div %2, %3 : {x}
  return \"y\" = %4
"
        )
    } else {
        format!(
            "  %0 = mx.exp %arg0 : {x}
  %1 = mx.reduce_sum %0 {{axes = {axes}, keepdims = 1}} : {r}
  %2 = mx.div %0, %1 : {x}
  return \"y\" = %2
"
        )
    };
    format!("{head}{body}}}\n")
}

#[test]
fn a_softmax_written_out_becomes_one_op_along_its_axis() {
    for (axes, reduced, axis) in [("[2]", "2x3x1", 2), ("[1]", "2x1x4", 1), ("[0]", "1x3x4", 0)] {
        becomes(
            &softmax_chain("2x3x4", reduced, axes, true),
            &format!(
                "graph \"softmax\" (%arg0: tensor<2x3x4xf32> \"x\") {{
  %0 = mx.softmax %arg0 {{axis = {axis}}} : tensor<2x3x4xf32>
  return \"y\" = %0
}}
"
            ),
        );
    }
}

#[test]
fn softmax_chains_that_are_not_one_op_stay() {
    // without the maximum: NaN where exp overflows, so not the same numbers as `softmax`
    stays(&softmax_chain("2x3x4", "2x3x1", "[2]", false));
    // over two axes: the flattened softmax of opsets before 13, not one `softmax`
    stays(&softmax_chain("2x3x4", "2x1x1", "[1, 2]", true));
}

/// A one-element f32 constant `%name` holding `v` (as the text writes an f32).
fn scalar(name: &str, v: &str) -> String {
    format!("  %{name} = mx.constant {{value = dense<[{v}]> : tensor<f32>}} : tensor<f32>\n")
}

/// A graph of x: f32[2, 3] whose body is `ops` (each line `%name = mx.op ...`, typed f32[2, 3])
/// after the constants half, one, three, c and k, returning `%y`.
fn gelu_graph(k: &str, ops: &[&str]) -> String {
    let mut text = String::from("graph \"gelu\" (%arg0: tensor<2x3xf32> \"x\") {\n");
    for (name, v) in [
        ("half", "0.5"),
        ("one", "1.0"),
        ("three", "3.0"),
        ("c", "0.044715"),
        ("k", k),
    ] {
        text += &scalar(name, v);
    }
    for op in ops {
        text += &format!("  {op} : tensor<2x3xf32>\n");
    }
    text + "  return \"y\" = %y\n}\n"
}

const GELU_TANH: &str = "graph \"gelu\" (%arg0: tensor<2x3xf32> \"x\") {
  %0 = mx.gelu %arg0 {approximate = \"tanh\"} : tensor<2x3xf32>
  return \"y\" = %0
}
";

/// sqrt(2 / pi) rounded to f32, and the f32 square root of 2 / pi rounded to f32 (ONNX's
/// function body and PyTorch's dynamo exporter), one unit in the last place below.
const K: &str = "0.7978846";
const K_SQRT_F32: &str = "0.7978845";

/// The tail every form shares: `tanh(k * (x + c * cube))` is `%t`, from the cube `%cube`.
const TANH_OF_CUBE: [&str; 4] = [
    "%ccube = mx.mul %c, %cube",
    "%sum = mx.add %arg0, %ccube",
    "%inner = mx.mul %k, %sum",
    "%t = mx.tanh %inner",
];

/// The ops of one written-out form: the cube, `TANH_OF_CUBE`, then the product with `x`.
fn form(cube: &[&'static str], head: &[&'static str]) -> Vec<&'static str> {
    cube.iter().chain(&TANH_OF_CUBE).chain(head).copied().collect()
}

/// ONNX's function body: (0.5 * x) * (1 + tanh(k * (x + c * pow(x, 3))))
fn onnx_form() -> Vec<&'static str> {
    form(
        &["%cube = mx.pow %arg0, %three"],
        &[
            "%p = mx.add %one, %t",
            "%hx = mx.mul %half, %arg0",
            "%y = mx.mul %hx, %p",
        ],
    )
}

#[test]
fn the_written_out_tanh_gelus_become_one_op() {
    // PyTorch's TorchScript exporter: 0.5 * (x * (1 + tanh(k * (x + c * (x * (x * x))))))
    let torchscript = form(
        &["%sq = mx.mul %arg0, %arg0", "%cube = mx.mul %arg0, %sq"],
        &[
            "%p = mx.add %one, %t",
            "%xp = mx.mul %arg0, %p",
            "%y = mx.mul %half, %xp",
        ],
    );
    becomes(&gelu_graph(K, &torchscript), GELU_TANH);
    // ONNX's function body, with either k
    becomes(&gelu_graph(K, &onnx_form()), GELU_TANH);
    becomes(&gelu_graph(K_SQRT_F32, &onnx_form()), GELU_TANH);
    // PyTorch's dynamo exporter: x * (0.5 * (tanh(k * (x + c * pow(x, 3))) + 1))
    let dynamo = form(
        &["%cube = mx.pow %arg0, %three"],
        &[
            "%p = mx.add %t, %one",
            "%hp = mx.mul %half, %p",
            "%y = mx.mul %arg0, %hp",
        ],
    );
    becomes(&gelu_graph(K_SQRT_F32, &dynamo), GELU_TANH);
    // GPT-2's gelu_new, traced: (x * 0.5) * (tanh((x + pow(x, 3) * c) * k) + 1)
    let gpt2 = [
        "%cube = mx.pow %arg0, %three",
        "%ccube = mx.mul %cube, %c",
        "%sum = mx.add %arg0, %ccube",
        "%inner = mx.mul %sum, %k",
        "%t = mx.tanh %inner",
        "%p = mx.add %t, %one",
        "%hx = mx.mul %arg0, %half",
        "%y = mx.mul %hx, %p",
    ];
    becomes(&gelu_graph(K, &gpt2), GELU_TANH);
}

#[test]
fn tanh_gelus_with_other_constants_stay() {
    // sqrt(2 / pi) to 5 digits: another function, not the op's
    let other_k = fused(&gelu_graph("0.79788", &onnx_form()));
    assert!(other_k.contains("mx.tanh") && !other_k.contains("mx.gelu"), "{other_k}");
    // a square, not a cube
    let square = fused(&gelu_graph(K, &onnx_form()).replace("dense<[3.0]>", "dense<[2.0]>"));
    assert!(square.contains("mx.pow") && !square.contains("mx.gelu"), "{square}");
}

#[test]
fn the_written_out_erf_gelu_is_the_exact_op() {
    let input = "graph \"gelu\" (%arg0: tensor<2x3xf32> \"x\") {
  %0 = mx.constant {value = dense<[1.4142135]> : tensor<f32>} : tensor<f32>
  %1 = mx.constant {value = dense<[1.0]> : tensor<f32>} : tensor<f32>
  %2 = mx.constant {value = dense<[0.5]> : tensor<f32>} : tensor<f32>
  %3 = mx.div %arg0, %0 : tensor<2x3xf32>
  %4 = mx.erf %3 : tensor<2x3xf32>
  %5 = mx.add %4, %1 : tensor<2x3xf32>
  %6 = mx.mul %arg0, %5 : tensor<2x3xf32>
  %7 = mx.mul %6, %2 : tensor<2x3xf32>
  return \"y\" = %7
}
";
    becomes(
        input,
        "graph \"gelu\" (%arg0: tensor<2x3xf32> \"x\") {
  %0 = mx.gelu %arg0 {approximate = \"none\"} : tensor<2x3xf32>
  return \"y\" = %0
}
",
    );
}
