//! Symbolic import (issue 37): a model's inputs given symbolic dimensions import as symbolic mx
//! types (`mxc read --shape x=n[1..8]x3xhxw`), through the ops whose parsers handle sizes as
//! dimensions; the symbolic graph at any sizes in range is the graph imported at those sizes
//! (`specialise::at_sizes`), and a node whose parser would compute with the sizes at the cost
//! point is refused by name.

use crate::common::{float_value, model_bytes, mxc, node, stderr};
use mxc_dialects::dim::{self, Dim};
use mxc_dialects::specialise::at_sizes;
use mxc_dialects::text::print;
use mxc_onnx::{import_file, proto, ImportOptions};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

fn ints(name: &str, values: &[i64]) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

fn text(name: &str, value: &str) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::String as i32),
        s: Some(value.as_bytes().to_vec()),
        ..Default::default()
    }
}

fn weight(name: &str, dims: &[i64]) -> proto::TensorProto {
    let n: i64 = dims.iter().product();
    proto::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(proto::tensor_proto::DataType::Float as i32),
        float_data: (0..n).map(|i| ((i * 7) % 11) as f32 * 0.0625 - 0.25).collect(),
        ..Default::default()
    }
}

/// image f32[n, 3, h, w] → conv 3x3 (pads 1), batch norm, relu, a residual conv, max pool
/// 2x2 stride 2, global average pool, flatten, gemm to 5 classes, softmax.
fn convnet(dir: &Path) -> PathBuf {
    let graph = proto::GraphProto {
        name: Some("convnet".into()),
        node: vec![
            node("Conv", &["image", "w1", "b1"], "c1", vec![ints("pads", &[1, 1, 1, 1])]),
            node("BatchNormalization", &["c1", "s", "bias", "mean", "var"], "bn", vec![]),
            node("Relu", &["bn"], "r1", vec![]),
            node("Conv", &["r1", "w2"], "c2", vec![ints("pads", &[1, 1, 1, 1])]),
            node("Add", &["c2", "r1"], "sum", vec![]),
            node(
                "MaxPool",
                &["sum"],
                "p",
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
            node("GlobalAveragePool", &["p"], "g", vec![]),
            node("Flatten", &["g"], "f", vec![]),
            node("Gemm", &["f", "wf", "bf"], "logits", vec![]),
            node("Softmax", &["logits"], "probs", vec![]),
        ],
        initializer: vec![
            weight("w1", &[4, 3, 3, 3]),
            weight("b1", &[4]),
            weight("s", &[4]),
            weight("bias", &[4]),
            weight("mean", &[4]),
            weight("var", &[4]),
            weight("w2", &[4, 4, 3, 3]),
            weight("wf", &[4, 5]),
            weight("bf", &[5]),
        ],
        input: vec![float_value("image", &["n", "3", "h", "w"])],
        output: vec![float_value("probs", &["n", "5"])],
        ..Default::default()
    };
    let path = dir.join("convnet.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path
}

fn dims(text: &str) -> Vec<Dim> {
    text.split(',').map(|d| dim::parse(d.trim()).unwrap()).collect()
}

#[test]
fn a_convnet_imports_over_symbolic_batch_height_and_width() {
    let dir = tempfile::tempdir().unwrap();
    let model = convnet(dir.path());
    let out = mxc(&[
        "read",
        model.to_str().unwrap(),
        "--shape",
        "image=n[1..8]{1},3,h[8..64]{16},w[8..64]{16}",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ir = String::from_utf8(out.stdout).unwrap();
    assert!(
        ir.starts_with(r#"graph "convnet" symbols<h[8..64]{16}, n[1..8]{1}, w[8..64]{16}> (%arg0: tensor<(n)x3x(h)x(w)xf32> "image")"#),
        "{ir}"
    );
    for expected in [
        "mx.conv %arg0, %0, %1 {dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]} : tensor<(n)x4x(h)x(w)xf32>",
        ": tensor<(n)x4x(h / 2)x(w / 2)xf32>",
        "mx.reshape %",
        "{shape = sizes<(n)x4>} : tensor<(n)x4xf32>",
        "mx.softmax %",
    ] {
        assert!(ir.contains(expected), "{expected}\n{ir}");
    }
    // the cpu target's rewrites (layout, packing, fusion) run over the symbols
    let out = mxc(&[
        "read",
        model.to_str().unwrap(),
        "--target",
        "cpu",
        "--shape",
        "image=n[1..8]{1},3,h[8..64]{16},w[8..64]{16}",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ir = String::from_utf8(out.stdout).unwrap();
    assert!(
        ir.contains("mx.conv_nhwc_packed") && ir.contains("tensor<(n)x(h)x(w)x4xf32>"),
        "{ir}"
    );
}

#[test]
fn the_symbolic_import_at_given_sizes_is_the_import_at_those_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let model = convnet(dir.path());
    let symbolic = ImportOptions {
        symbolic_shapes: HashMap::from([("image".to_string(), dims("n[1..8]{1}, 3, h[8..64]{16}, w[8..64]{16}"))]),
        ..ImportOptions::default()
    };
    let graph = import_file(&model, &symbolic).unwrap();
    for (n, h, w) in [(1, 8, 8), (3, 17, 9), (8, 64, 33), (2, 16, 16)] {
        let sizes = BTreeMap::from([("n".to_string(), n), ("h".to_string(), h), ("w".to_string(), w)]);
        let fixed = ImportOptions {
            input_shapes: HashMap::from([("image".to_string(), vec![n as usize, 3, h as usize, w as usize])]),
            ..ImportOptions::default()
        };
        let imported = import_file(&model, &fixed).unwrap();
        assert_eq!(
            print(&at_sizes(&graph, &sizes).unwrap()),
            print(&imported),
            "at {sizes:?}"
        );
    }
}

#[test]
fn nodes_whose_parsers_would_fix_the_sizes_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let graph = proto::GraphProto {
        name: Some("shape_of".into()),
        node: vec![node("Shape", &["x"], "s", vec![])],
        input: vec![float_value("x", &["n", "4"])],
        output: vec![proto::ValueInfoProto {
            name: Some("s".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let shape_model = dir.path().join("shape.onnx");
    std::fs::write(&shape_model, model_bytes(graph)).unwrap();
    let out = mxc(&["read", shape_model.to_str().unwrap(), "--shape", "x=n[1..8],4"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: node #0 (output \"s\") (Shape): reads a value of symbolic dimensions (tensor<(n)x4xf32>); \
         importing Shape over symbolic sizes is not supported yet"
    );
}

#[test]
fn same_padding_over_a_stride_is_refused_over_a_symbolic_extent() {
    let dir = tempfile::tempdir().unwrap();
    let graph = proto::GraphProto {
        name: Some("strided".into()),
        node: vec![node(
            "Conv",
            &["x", "w"],
            "y",
            vec![text("auto_pad", "SAME_UPPER"), ints("strides", &[2, 2])],
        )],
        initializer: vec![weight("w", &[2, 1, 3, 3])],
        input: vec![float_value("x", &["1", "1", "h", "8"])],
        output: vec![float_value("y", &["1", "2", "?", "4"])],
        ..Default::default()
    };
    let model = dir.path().join("strided.onnx");
    std::fs::write(&model, model_bytes(graph)).unwrap();
    let out = mxc(&["read", model.to_str().unwrap(), "--shape", "x=1,1,h[4..32],8"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            "auto_pad SAME_UPPER with stride 2 over the symbolic extent h[4..32]: its pads depend on the size"
        ),
        "{err}"
    );
    // at a fixed height the same model imports
    let out = mxc(&["read", model.to_str().unwrap(), "--shape", "x=1,1,9,8"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn int(name: &str, value: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

fn int64s(name: &str, values: &[i64]) -> proto::TensorProto {
    proto::TensorProto {
        name: Some(name.into()),
        dims: vec![values.len() as i64],
        data_type: Some(proto::tensor_proto::DataType::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// x f32[b, s, 16] and mask f32[b, s] → layer norm, one attention of 2 heads of 8 whose head
/// split and merge are `Reshape`s to `[0, 0, 2, 8]` and `[0, 0, -1]`, the mask unsqueezed to
/// `[b, 1, 1, s]`, then the mean over the sequence.
fn encoder_block(dir: &Path) -> PathBuf {
    let graph = proto::GraphProto {
        name: Some("block".into()),
        node: vec![
            node("LayerNormalization", &["x", "gamma", "beta"], "n", vec![]),
            node("MatMul", &["n", "wq"], "q", vec![]),
            node("Reshape", &["q", "heads"], "qh", vec![]),
            node("Transpose", &["qh"], "qt", vec![ints("perm", &[0, 2, 1, 3])]),
            node("Transpose", &["qh"], "kt", vec![ints("perm", &[0, 2, 3, 1])]),
            node("MatMul", &["qt", "kt"], "scores", vec![]),
            node("Unsqueeze", &["mask", "mask_axes"], "m4", vec![]),
            node("Sub", &["one", "m4"], "inverted", vec![]),
            node("Mul", &["inverted", "big"], "bias", vec![]),
            node("Add", &["scores", "bias"], "masked", vec![]),
            node("Softmax", &["masked"], "p", vec![]),
            node("MatMul", &["p", "qt"], "ctx", vec![]),
            node("Transpose", &["ctx"], "merged", vec![ints("perm", &[0, 2, 1, 3])]),
            node("Reshape", &["merged", "flat"], "y", vec![]),
            node(
                "ReduceMean",
                &["y"],
                "pooled",
                vec![ints("axes", &[1]), int("keepdims", 0)],
            ),
        ],
        initializer: vec![
            weight("gamma", &[16]),
            weight("beta", &[16]),
            weight("wq", &[16, 16]),
            int64s("heads", &[0, 0, 2, 8]),
            int64s("flat", &[0, 0, -1]),
            int64s("mask_axes", &[1, 2]),
            weight("one", &[1]),
            weight("big", &[1]),
        ],
        input: vec![float_value("x", &["b", "s", "16"]), float_value("mask", &["b", "s"])],
        output: vec![float_value("y", &["b", "s", "16"]), float_value("pooled", &["b", "16"])],
        ..Default::default()
    };
    let path = dir.join("block.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path
}

#[test]
fn an_attention_block_imports_over_a_symbolic_batch_and_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let model = encoder_block(dir.path());
    let out = mxc(&[
        "read",
        model.to_str().unwrap(),
        "--shape",
        "x=b[1..4]{1},s[1..512]{128},16",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ir = String::from_utf8(out.stdout).unwrap();
    // the mask shares b and s with x through the model's dim_params
    assert!(ir.contains(r#"%arg1: tensor<(b)x(s)xf32> "mask""#), "{ir}");
    for expected in [
        "{shape = sizes<(b)x(s)x2x8>} : tensor<(b)x(s)x2x8xf32>",
        ": tensor<(b)x2x(s)x(s)xf32>",
        "{shape = sizes<(b)x1x1x(s)>} : tensor<(b)x1x1x(s)xf32>",
        "{shape = sizes<(b)x(s)x16>} : tensor<(b)x(s)x16xf32>",
        "mx.reduce_mean",
    ] {
        assert!(ir.contains(expected), "{expected}\n{ir}");
    }
    let symbolic = ImportOptions {
        symbolic_shapes: HashMap::from([
            ("x".to_string(), dims("b[1..4]{1}, s[1..512]{128}, 16")),
            ("mask".to_string(), dims("b[1..4]{1}, s[1..512]{128}")),
        ]),
        ..ImportOptions::default()
    };
    let graph = import_file(&model, &symbolic).unwrap();
    for (b, s) in [(1, 7), (2, 64), (1, 300), (4, 512)] {
        let sizes = BTreeMap::from([("b".to_string(), b), ("s".to_string(), s)]);
        let fixed = ImportOptions {
            input_shapes: HashMap::from([
                ("x".to_string(), vec![b as usize, s as usize, 16]),
                ("mask".to_string(), vec![b as usize, s as usize]),
            ]),
            ..ImportOptions::default()
        };
        let imported = import_file(&model, &fixed).unwrap();
        assert_eq!(
            print(&at_sizes(&graph, &sizes).unwrap()),
            print(&imported),
            "at {sizes:?}"
        );
    }
}
