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
