//! Symbolic import (issue 37): a model's inputs given symbolic dimensions import as symbolic mx
//! types (`mxc read --shape x=n[1..8]x3xhxw`), through the ops whose parsers handle sizes as
//! dimensions; the symbolic graph at any sizes in range is the graph imported at those sizes
//! (`specialise::at_sizes`), and a node whose parser would compute with the sizes at the cost
//! point is refused by name.

use crate::common::{float_value, int64_initializer, ints, model_bytes, mxc, node, stderr, tensor_value, text};
use mxc_dialects::dim::{self, Dim};
use mxc_dialects::specialise::at_sizes;
use mxc_dialects::text::print;
use mxc_dialects::{DType, Tensor};
use mxc_onnx::{import_file, proto, ImportOptions};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

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

/// What `mxc read MODEL` with `extra` arguments prints, which must succeed.
fn read(model: &Path, extra: &[&str]) -> String {
    let mut args = vec!["read", model.to_str().unwrap()];
    args.extend(extra);
    let out = mxc(&args);
    assert!(out.status.success(), "mxc {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The model imported with its inputs' dimensions given in the `dim` notation, by input:
/// `("x", "b[1..4]{1}, s[1..512]{128}, 16")`.
fn import_symbolic(model: &Path, inputs: &[(&str, &str)]) -> mxc_dialects::Graph {
    let dims = |text: &str| -> Vec<Dim> { text.split(',').map(|d| dim::parse(d.trim()).unwrap()).collect() };
    let options = ImportOptions {
        symbolic_shapes: inputs
            .iter()
            .map(|(name, text)| (name.to_string(), dims(text)))
            .collect(),
        ..ImportOptions::default()
    };
    import_file(model, &options).unwrap()
}

/// The model imported at fixed shapes, by input.
fn import_fixed(model: &Path, inputs: &[(&str, Vec<usize>)]) -> mxc_dialects::Graph {
    let options = ImportOptions {
        input_shapes: inputs
            .iter()
            .map(|(name, shape)| (name.to_string(), shape.clone()))
            .collect(),
        ..ImportOptions::default()
    };
    import_file(model, &options).unwrap()
}

#[test]
fn a_convnet_imports_over_symbolic_batch_height_and_width() {
    let dir = tempfile::tempdir().unwrap();
    let model = convnet(dir.path());
    let ir = read(&model, &["--shape", "image=n[1..8]{1},3,h[8..64]{16},w[8..64]{16}"]);
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
    let ir = read(
        &model,
        &[
            "--target",
            "cpu",
            "--shape",
            "image=n[1..8]{1},3,h[8..64]{16},w[8..64]{16}",
        ],
    );
    assert!(
        ir.contains("mx.conv_nhwc_packed") && ir.contains("tensor<(n)x(h)x(w)x4xf32>"),
        "{ir}"
    );
}

#[test]
fn the_symbolic_import_at_given_sizes_is_the_import_at_those_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let model = convnet(dir.path());
    let graph = import_symbolic(&model, &[("image", "n[1..8]{1}, 3, h[8..64]{16}, w[8..64]{16}")]);
    for (n, h, w) in [(1, 8, 8), (3, 17, 9), (8, 64, 33), (2, 16, 16)] {
        let sizes = BTreeMap::from([("n".to_string(), n), ("h".to_string(), h), ("w".to_string(), w)]);
        let imported = import_fixed(&model, &[("image", vec![n as usize, 3, h as usize, w as usize])]);
        assert_eq!(
            print(&at_sizes(&graph, &sizes).unwrap()),
            print(&imported),
            "at {sizes:?}"
        );
    }
}

/// A model of `nodes` from the f32 input `x` of dimensions `x_dims` to the output `y`, written
/// to `dir` as NAME.onnx.
fn model_of(
    dir: &Path,
    name: &str,
    nodes: Vec<proto::NodeProto>,
    initializer: Vec<proto::TensorProto>,
    x_dims: &[&str],
) -> PathBuf {
    let graph = proto::GraphProto {
        name: Some(name.into()),
        node: nodes,
        initializer,
        input: vec![float_value("x", x_dims)],
        output: vec![proto::ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let model = dir.join(format!("{name}.onnx"));
    std::fs::write(&model, model_bytes(graph)).unwrap();
    model
}

#[test]
fn nodes_whose_parsers_would_fix_the_sizes_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let refusal = |name: &str, nodes: Vec<proto::NodeProto>, initializer: Vec<proto::TensorProto>| {
        let model = model_of(dir.path(), name, nodes, initializer, &["n", "4"]);
        let out = mxc(&["read", model.to_str().unwrap(), "--shape", "x=n[1..8],4"]);
        assert_eq!(out.status.code(), Some(1));
        stderr(&out).trim().to_string()
    };
    // a parser that would compute with the sizes at the cost point
    let tile = vec![node("Tile", &["x", "reps"], "y", vec![])];
    assert_eq!(
        refusal("tile", tile, vec![int64_initializer("reps", &[2, 1])]),
        "error: node #0 (output \"y\") (Tile): reads a value of symbolic dimensions (tensor<(n)x4xf32>); \
         importing Tile over symbolic sizes is not supported yet"
    );
    // a split of the symbolic axis; of the fixed one it imports
    let split = |axis: i64| {
        vec![proto::NodeProto {
            op_type: Some("Split".into()),
            input: vec!["x".into()],
            output: vec!["y".into(), "z".into()],
            attribute: vec![int("axis", axis)],
            ..Default::default()
        }]
    };
    assert_eq!(
        refusal("split", split(0), vec![]),
        "error: node #0 (output \"y\") (Split): splitting axis 0, of symbolic extent n[1..8], is not supported"
    );
    let fine = dir.path().join("split.onnx");
    let graph = proto::GraphProto {
        name: Some("split".into()),
        node: split(1),
        input: vec![float_value("x", &["n", "4"])],
        output: ["y", "z"].map(|name| float_value(name, &["n", "2"])).to_vec(),
        ..Default::default()
    };
    std::fs::write(&fine, model_bytes(graph)).unwrap();
    let read = import_symbolic(&fine, &[("x", "n[1..8], 4")]);
    assert_eq!(
        read.ops
            .iter()
            .filter(|op| op.kind == mxc_dialects::OpKind::Slice)
            .count(),
        2
    );
}

#[test]
fn resizes_and_transposed_convolutions_over_symbolic_images_import_where_their_sizes_follow() {
    let dir = tempfile::tempdir().unwrap();
    let read = |name: &str, node: proto::NodeProto, initializer: Vec<proto::TensorProto>| {
        let model = model_of(dir.path(), name, vec![node], initializer, &["1", "2", "h", "w"]);
        mxc(&["read", model.to_str().unwrap(), "--shape", "x=1x2xh[1..64]xw[1..64]"])
    };
    let scales = |values: &[f32]| {
        let mut t = weight("scales", &[4]);
        t.float_data = values.to_vec();
        vec![t]
    };
    // nearest by whole scales: each element repeated, sizes at run time
    let up = node("Resize", &["x", "", "scales"], "y", vec![text("mode", "nearest")]);
    let out = read("nearest", up, scales(&[1.0, 1.0, 2.0, 3.0]));
    assert!(out.status.success(), "{}", stderr(&out));
    let text_form = String::from_utf8_lossy(&out.stdout);
    assert!(text_form.contains("tensor<1x2x(h * 2)x(w * 3)xf32>"), "{text_form}");
    assert!(text_form.contains("mx.expand"), "{text_form}");
    // what reads positions a table lists per size, or rounds other than to floor(y / s), is refused
    let refused = |name: &str, attrs: Vec<proto::AttributeProto>, values: &[f32]| {
        let out = read(name, node("Resize", &["x", "", "scales"], "y", attrs), scales(values));
        assert_eq!(out.status.code(), Some(1));
        stderr(&out).trim().to_string()
    };
    let prefix =
        "error: node #0 (output \"y\") (Resize): over symbolic sizes, Resize is a nearest upsampling by whole scales: ";
    assert_eq!(
        refused("half", vec![], &[1.0, 1.0, 0.5, 1.0]),
        format!("{prefix}axis 2 has the scale 0.5")
    );
    assert_eq!(
        refused(
            "corners",
            vec![text("coordinate_transformation_mode", "align_corners")],
            &[1.0, 1.0, 2.0, 2.0]
        ),
        format!("{prefix}coordinate_transformation_mode \"align_corners\" maps positions by the axis's size")
    );
    assert_eq!(
        refused(
            "asymmetric",
            vec![text("coordinate_transformation_mode", "asymmetric")],
            &[1.0, 1.0, 3.0, 3.0]
        ),
        format!(
            "{prefix}under nearest_mode \"round_prefer_floor\" and coordinate_transformation_mode \"asymmetric\", \
             output position y of axis 2 does not always read input floor(y / 3)"
        )
    );
    // a transposed convolution with explicit pads imports; one whose pads follow the sizes not
    let convt = |attrs| node("ConvTranspose", &["x", "wt"], "y", attrs);
    let out = read(
        "convt",
        convt(vec![ints("strides", &[2, 2])]),
        vec![weight("wt", &[2, 3, 2, 2])],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tensor<1x3x(h * 2)x(w * 2)xf32>"));
    let out = read(
        "convt_shape",
        convt(vec![ints("strides", &[2, 2]), ints("output_shape", &[8, 8])]),
        vec![weight("wt", &[2, 3, 2, 2])],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("over symbolic sizes, the pads are explicit: output_shape sets them from the input's sizes"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn shapes_computed_from_symbolic_sizes_make_fills_ranges_and_run_time_values() {
    let dir = tempfile::tempdir().unwrap();
    // ConstantOfShape of x's shape, a Range to its length, and that length used beside values
    // only the run knows
    let graph = proto::GraphProto {
        name: Some("shapes".into()),
        node: vec![
            node("Shape", &["x"], "s", vec![]),
            node("ConstantOfShape", &["s"], "filled", vec![]),
            node("Gather", &["s", "zero"], "n", vec![]),
            node("Range", &["start", "n", "step"], "r", vec![]),
            node("Mul", &["r", "n"], "scaled", vec![]),
        ],
        initializer: vec![
            int64_initializer("zero", &[0]),
            int64_initializer("start", &[0]),
            int64_initializer("step", &[1]),
        ],
        input: vec![float_value("x", &["n", "4"])],
        output: vec![
            proto::ValueInfoProto {
                name: Some("filled".into()),
                ..Default::default()
            },
            proto::ValueInfoProto {
                name: Some("scaled".into()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let model = dir.path().join("shapes.onnx");
    std::fs::write(&model, model_bytes(graph)).unwrap();
    let ir = read(&model, &["--shape", "x=n[1..8],4"]);
    for expected in [
        "{shape = sizes<(n)x4>} : tensor<(n)x4xf32>",
        "mx.slice",
        "{ends = sizes<(n)>, starts = [0], steps = [1]} : tensor<(n)xi64>",
        "mx.reduce_sum",
    ] {
        assert!(ir.contains(expected), "{expected}\n{ir}");
    }
    // and the graph at a size computes what the model does there
    let g = import_symbolic(&model, &[("x", "n[1..8], 4")]);
    let fixed = at_sizes(&g, &BTreeMap::from([("n".to_string(), 3)])).unwrap();
    let x = Tensor::from_f32s(vec![3, 4], &[0.0; 12]);
    let out = mxc_dialects::eval::run(&fixed, &[x]).unwrap();
    assert_eq!(out[0].shape(), [3, 4]);
    assert_eq!(out[1].to_i64_vec(), [0, 3, 6]);
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
    read(&model, &["--shape", "x=1,1,9,8"]);
}

fn int(name: &str, value: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        i: Some(value),
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
            int64_initializer("heads", &[0, 0, 2, 8]),
            int64_initializer("flat", &[0, 0, -1]),
            int64_initializer("mask_axes", &[1, 2]),
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
    let ir = read(&model, &["--shape", "x=b[1..4]{1},s[1..512]{128},16"]);
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
    // given no shapes, the model's dim_params are symbols in the default range
    let ir = read(&model, &[]);
    assert!(
        ir.starts_with(
            r#"graph "block" symbols<b, s> (%arg0: tensor<(b)x(s)x16xf32> "x", %arg1: tensor<(b)x(s)xf32> "mask")"#
        ),
        "{ir}"
    );
    let graph = import_symbolic(
        &model,
        &[
            ("x", "b[1..4]{1}, s[1..512]{128}, 16"),
            ("mask", "b[1..4]{1}, s[1..512]{128}"),
        ],
    );
    for (b, s) in [(1, 7), (2, 64), (1, 300), (4, 512)] {
        let sizes = BTreeMap::from([("b".to_string(), b), ("s".to_string(), s)]);
        let imported = import_fixed(
            &model,
            &[
                ("x", vec![b as usize, s as usize, 16]),
                ("mask", vec![b as usize, s as usize]),
            ],
        );
        assert_eq!(
            print(&at_sizes(&graph, &sizes).unwrap()),
            print(&imported),
            "at {sizes:?}"
        );
    }
}

/// The repo's encoder (`.cache/models/encoder`: two BERT layers as TorchScript exports them,
/// their head splits and position ids computed from `Shape`) with its inputs' batch and
/// sequence made the `dim_param`s `batch` and `seq`.
fn dynamic_encoder(dir: &Path) -> PathBuf {
    use prost::Message;
    let bytes = std::fs::read(crate::common::cache_dir("models/encoder").join("model.onnx")).unwrap();
    let mut model = proto::ModelProto::decode(&bytes[..]).unwrap();
    let graph = model.graph.as_mut().unwrap();
    for value in graph.input.iter_mut().chain(graph.output.iter_mut()) {
        if let Some(proto::type_proto::Value::TensorType(t)) = value.r#type.as_mut().and_then(|t| t.value.as_mut()) {
            let dims = &mut t.shape.as_mut().unwrap().dim;
            for (d, name) in dims.iter_mut().zip(["batch", "seq"]) {
                d.value = Some(proto::tensor_shape_proto::dimension::Value::DimParam(name.into()));
            }
        }
    }
    let path = dir.join("encoder.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn a_transformer_encoder_imports_over_symbolic_batch_and_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let model = dynamic_encoder(dir.path());
    let shape = "input_ids=batch[1..4]{1},seq[1..512]{128}";
    let ir = read(&model, &["--shape", shape]);
    for expected in [
        // position ids: a slice of the model's 512 to the sequence's length
        "{ends = sizes<1x(seq)>, starts = [0, 0], steps = [1, 1]} : tensor<1x(seq)xi64>",
        // the heads split by a target computed from Shape
        "{shape = sizes<(batch)x(seq)x4x16>} : tensor<(batch)x(seq)x4x16xf32>",
        ": tensor<(batch)x4x(seq)x(seq)xf32>",
    ] {
        assert!(ir.contains(expected), "{expected}\n{ir}");
    }
    // the cpu target's rules make one attention op of each layer's chain, as at fixed sizes
    let ir = read(&model, &["--target", "cpu", "--shape", shape]);
    assert_eq!(ir.matches("mx.attention").count(), 2, "{ir}");
    // by default the sequence may be longer than the 512 positions the model holds: refused,
    // saying where the sizes came from and what to give
    let out = mxc(&["read", model.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("do not broadcast (the sizes at the cost point, batch=2048, seq=2048)"),
        "{err}"
    );
    assert!(
        err.contains("imported as symbols in [1..4096]; give the inputs' shapes with --shape"),
        "{err}"
    );
    assert!(ir.contains("tensor<(batch)x(seq)x4x16xf32>"), "{ir}");
    let graph = import_symbolic(
        &model,
        &[
            ("input_ids", "batch[1..4]{1}, seq[1..512]{128}"),
            ("attention_mask", "batch[1..4]{1}, seq[1..512]{128}"),
        ],
    );
    // at the issue's sizes (none an optimal), the symbolic graph made fixed computes what the
    // model imported at those sizes does (which folds the position ids' slice into a constant)
    for (b, s) in [(1, 7), (2, 64), (1, 300), (1, 512)] {
        let sizes = BTreeMap::from([("batch".to_string(), b), ("seq".to_string(), s)]);
        let shape = vec![b as usize, s as usize];
        let ids: Vec<i64> = (0..b * s).map(|i| ((i * 37 + 11) % 100) as i64).collect();
        let mask: Vec<i64> = (0..b * s).map(|i| i64::from(i % s < s - s / 4)).collect();
        let inputs = HashMap::from([
            (
                "input_ids".to_string(),
                Tensor::from_i64s(DType::I64, shape.clone(), &ids),
            ),
            (
                "attention_mask".to_string(),
                Tensor::from_i64s(DType::I64, shape.clone(), &mask),
            ),
        ]);
        let symbolic_at = run_on_ref(&at_sizes(&graph, &sizes).unwrap(), &inputs);
        let fixed = import_fixed(
            &model,
            &[("input_ids", shape.clone()), ("attention_mask", shape.clone())],
        );
        let imported_at = run_on_ref(&fixed, &inputs);
        assert_eq!(symbolic_at.ty, imported_at.ty, "at {sizes:?}");
        let largest = (0..symbolic_at.len())
            .map(|i| (symbolic_at.get_f64(i) - imported_at.get_f64(i)).abs())
            .fold(0.0, f64::max);
        assert!(largest <= 1e-6, "at {sizes:?}: outputs differ by {largest}");
    }
}

/// The one output of `graph` compiled for `ref` and run on `inputs`.
fn run_on_ref(graph: &mxc_dialects::Graph, inputs: &HashMap<String, Tensor>) -> Tensor {
    let compiled =
        mxc_codegen::compile(graph, mxc_codegen::Target::Ref, &mxc_codegen::CompileOptions::default()).unwrap();
    let exe = mxc_kernels::Executable::load(compiled.program, &compiled.library).unwrap();
    exe.run(inputs).unwrap().remove(0).1
}

#[test]
fn gather_nd_over_symbolic_data_indexes_rows_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let graph = proto::GraphProto {
        name: Some("gather_nd".into()),
        node: vec![node("GatherND", &["x", "i"], "y", vec![])],
        input: vec![
            float_value("x", &["n", "4"]),
            tensor_value("i", proto::tensor_proto::DataType::Int64, &["3", "2"]),
        ],
        output: vec![proto::ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let model = dir.path().join("gather_nd.onnx");
    std::fs::write(&model, model_bytes(graph)).unwrap();
    let g = import_symbolic(&model, &[("x", "n[1..8], 4")]);
    let x = Tensor::from_f32s(vec![3, 4], &(0..12).map(|v| v as f32).collect::<Vec<_>>());
    // rows 2 and -3 (the first), columns 1, 3 and -1 (the last)
    let i = Tensor::from_i64s(DType::I64, vec![3, 2], &[2, 1, -3, 3, 1, -1]);
    let fixed = at_sizes(&g, &BTreeMap::from([("n".to_string(), 3)])).unwrap();
    let symbolic = mxc_dialects::eval::run(&fixed, &[x.clone(), i.clone()]).unwrap();
    let imported = import_fixed(&model, &[("x", vec![3, 4])]);
    let expected = mxc_dialects::eval::run(&imported, &[x, i]).unwrap();
    assert_eq!(symbolic[0].to_f64_vec(), [9.0, 3.0, 7.0]);
    assert_eq!(symbolic[0].to_f64_vec(), expected[0].to_f64_vec());
}
