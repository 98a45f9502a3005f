//! The textual IR: hand-written graphs print back exactly as written, and malformed text is
//! refused with its line and column.

use mxc_dialects::text::{parse, print};

fn round_trip(src: &str) {
    let g = parse(src).unwrap_or_else(|e| panic!("does not parse: {e}\n{src}"));
    assert_eq!(print(&g), src);
}

fn parse_error(src: &str) -> String {
    parse(src).expect_err("the text must be refused").to_string()
}

#[test]
fn elementwise_graph_round_trips() {
    round_trip(
        r#"graph "main" (%arg0: tensor<2x3xf32> "x", %arg1: tensor<3xf32> "bias") {
  %0 = mx.add %arg0, %arg1 : tensor<2x3xf32>
  %1 = mx.relu %0 : tensor<2x3xf32>
  %2 = mx.constant {value = dense<[0.5]> : tensor<f32>} : tensor<f32>
  %3 = mx.constant {value = dense<[-1.0]> : tensor<f32>} : tensor<f32>
  %4 = mx.clip %1, %3, %2 : tensor<2x3xf32>
  return "y" = %4, "pre" = %0
}
"#,
    );
}

#[test]
fn conv_graph_with_resources_round_trips() {
    let weights: String = (0..2 * 3 * 3).map(|i| format!("{:02x}000000", i)).collect();
    round_trip(&format!(
        r#"graph "net" (%arg0: tensor<1x1x5x5xf32> "image") {{
  %0 = mx.constant {{value = dense_resource<r0> : tensor<2x1x3x3xi32>}} : tensor<2x1x3x3xi32>
  %1 = mx.cast %0 {{to = f32}} : tensor<2x1x3x3xf32>
  %2 = mx.conv %arg0, %1 {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [2, 2]}} : tensor<1x2x3x3xf32>
  %3 = mx.constant {{value = dense<[1.0, 0.5, 2.0]> : tensor<3xf32>}} : tensor<3xf32>
  %4, %5, %6 = mx.layer_norm %2, %3 {{axis = 1, epsilon = 1e-5}} : tensor<1x2x3x3xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>
  return "features" = %4
}}
resources {{
  r0 = "0x{weights}"
}}
"#
    ));
}

#[test]
fn names_with_quotes_and_odd_characters_round_trip() {
    round_trip(
        r#"graph "g \"q\"" (%arg0: tensor<4xi64> "save_infer_model/scale_0.tmp_1") {
  %0 = mx.reshape %arg0 {shape = [2, 2]} : tensor<2x2xi64>
  return "out:0" = %0
}
"#,
    );
}

#[test]
fn wrong_result_type_is_refused_at_its_line() {
    let err = parse_error(
        r#"graph "g" (%arg0: tensor<2xf32> "x") {
  %0 = mx.relu %arg0 : tensor<3xf32>
  return "y" = %0
}
"#,
    );
    assert!(
        err.starts_with("line 2, column 3: mx.relu") && err.contains("tensor<3xf32>") && err.contains("tensor<2xf32>"),
        "{err}"
    );
}

#[test]
fn parse_errors_name_line_and_column() {
    let err = parse_error("graph \"g\" (%arg0: tensor<2xf32> \"x\") {\n  %0 = mx.frobnicate %arg0 : tensor<2xf32>\n  return \"y\" = %0\n}\n");
    assert!(
        err.starts_with("line 2, column 8") && err.contains("mx.frobnicate"),
        "{err}"
    );
    let err = parse_error(
        "graph \"g\" (%arg0: tensor<2xf32> \"x\") {\n  %0 = mx.relu %nope : tensor<2xf32>\n  return \"y\" = %0\n}\n",
    );
    assert!(err.starts_with("line 2, column 16") && err.contains("%nope"), "{err}");
    let err = parse_error("graph \"g\" (%arg0: tensor<2xq7> \"x\") {}");
    assert!(err.starts_with("line 1, column 19") && err.contains("q7"), "{err}");
}

#[test]
fn narrow_element_types_round_trip() {
    round_trip(
        r#"graph "narrow" (%arg0: tensor<3xf8e4m3fn> "x", %arg1: tensor<2xi4> "q") {
  %0 = mx.constant {value = dense<[448.0, NaN, -0.001953125]> : tensor<3xf8e4m3fn>} : tensor<3xf8e4m3fn>
  %1 = mx.add %arg0, %0 : tensor<3xf8e4m3fn>
  %2 = mx.cast %1 {to = f4e2m1fn} : tensor<3xf4e2m1fn>
  %3 = mx.constant {value = dense<[-8, 7]> : tensor<2xi4>} : tensor<2xi4>
  %4 = mx.cast %arg1 {to = u2} : tensor<2xu2>
  %5 = mx.constant {value = dense<[inf, -57344.0]> : tensor<2xf8e5m2>} : tensor<2xf8e5m2>
  %6 = mx.constant {value = dense<[0.25, 5.877472e-39]> : tensor<2xf8e8m0fnu>} : tensor<2xf8e8m0fnu>
  return "y" = %2, "z" = %4, "w" = %3, "v" = %5, "s" = %6
}
"#,
    );
}

#[test]
fn symbolic_types_round_trip_with_their_symbols_declared_once() {
    round_trip(
        r#"graph "block" symbols<b[1..8], s[1..512]{128, 512}> (%arg0: tensor<(b)x(s)x64xf32> "x", %arg1: tensor<64x32xf32> "w") {
  %0 = mx.matmul %arg0, %arg1 : tensor<(b)x(s)x32xf32>
  %1 = mx.reshape %0 {shape = sizes<(b * s)x32>} : tensor<(b * s)x32xf32>
  %2 = mx.slice %arg1 {ends = [64, 1], starts = [0, 0], steps = [1, 1]} : tensor<64x1xf32>
  %3 = mx.reshape %2 {shape = [2, 32]} : tensor<2x32xf32>
  %4 = mx.concat %3, %1 {axis = 0} : tensor<(b * s + 2)x32xf32>
  %5 = mx.reduce_max %4 {axes = [1], keepdims = 0} : tensor<(b * s + 2)xf32>
  return "y" = %5
}
"#,
    );
    // sizes over h and w: floor divisions print inside their own parentheses
    round_trip(
        r#"graph "stem" symbols<h[32..640]{320}, w[32..640]> (%arg0: tensor<1x3x(h)x(w)xf32> "image", %arg1: tensor<8x3x3x3xf32> "k") {
  %0 = mx.conv %arg0, %arg1 {dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [2, 2]} : tensor<1x8x((h + 1) / 2)x((w + 1) / 2)xf32>
  return "y" = %0
}
"#,
    );
}

#[test]
fn symbols_are_declared_and_used_consistently() {
    let undeclared = r#"graph "g" symbols<s[1..8]> (%arg0: tensor<(t)xf32> "x") {
  return "y" = %arg0
}
"#;
    assert_eq!(
        parse_error(undeclared),
        "line 1, column 36: in tensor<(t)xf32>: `t`, column 1: symbol `t` is not declared"
    );
    let constrained = r#"graph "g" symbols<s[1..8]> (%arg0: tensor<(s[1..4])xf32> "x") {
  return "y" = %arg0
}
"#;
    assert!(parse_error(constrained).contains("takes its constraints where it is declared"));
    // sizes past any memory are refused as too large, never computed in wrapping arithmetic
    let huge = r#"graph "g" symbols<s[1..4096]> (%arg0: tensor<(s * s * s * s * s * s * s)xf32> "x") {
  return "y" = %arg0
}
"#;
    assert!(parse_error(huge).contains("is too large"), "{}", parse_error(huge));
    let twice = r#"graph "g" symbols<s[1..8], s[1..4]> (%arg0: tensor<(s)xf32> "x") {
  return "y" = %arg0
}
"#;
    assert!(parse_error(twice).contains("symbol `s` is declared twice"));
    // a result type that holds at the cost point (s is 4 there) but not at every size
    let fixed_result = r#"graph "g" symbols<s[1..8]{4}> (%arg0: tensor<(s)xf32> "x") {
  %0 = mx.relu %arg0 : tensor<4xf32>
  return "y" = %0
}
"#;
    let err = parse_error(fixed_result);
    assert!(
        err.contains("result types (tensor<4xf32>) differ from the inferred (tensor<(s)xf32>)"),
        "{err}"
    );
}

#[test]
fn one_symbol_name_is_one_size_in_a_graph() {
    let mut g = mxc_dialects::Graph::new("g");
    let dim = |text: &str| mxc_dialects::dim::parse(text).unwrap();
    let ty = |d: &str| mxc_dialects::TensorType::of_dims(mxc_dialects::DType::F32, vec![dim(d)]);
    g.add_input("x", ty("s[1..8]"));
    g.add_input("y", ty("s[1..4]"));
    let err = mxc_dialects::verify(&g).unwrap_err().to_string();
    assert!(
        err.contains("symbol s is s[1..8] in one type and s[1..4] in another"),
        "{err}"
    );
}
