//! Ops recognised by the built-in `fusion` rules, end to end: the repo's encoder writes four of
//! its five layer normalisations out (`ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
//! Add`); on cpu each becomes one `mx.layer_norm`, 8 ops and kernels fewer per chain. Its two
//! GELUs are written out too (`Div, Erf, Add, Mul, Mul`), and each becomes one `mx.gelu`, 4
//! fewer. That the rewritten program still matches onnxruntime and `ref` is checked in
//! `models.rs`. A small model built here writes out a softmax over a middle axis and a tanh
//! GELU the way PyTorch's exporter does; on cpu they become `mx.softmax` and
//! `mx.gelu {approximate = "tanh"}` and compute what `ref` and the definitions compute.

use crate::common::{
    cache_dir, float_value, kernel_count, mismatch, model_bytes, mxc, mxc_run_to, node, op_names, read_for_target,
    stderr,
};
use mxc_dialects::Tensor;
use mxc_onnx::proto;

#[test]
fn encoder_layer_norms_written_out_become_one_op_each() {
    let model = cache_dir("models/encoder").join("model.onnx");
    let model = model.to_str().unwrap();
    let (imported, rewritten) = (read_for_target(model, "ref", &[]), read_for_target(model, "cpu", &[]));
    let (before, after) = (op_names(&imported), op_names(&rewritten));
    let count = |ops: &[&str], name: &str| ops.iter().filter(|o| **o == name).count();
    // one LayerNormalization in the ONNX file, four written out
    assert_eq!(count(&before, "layer_norm"), 1);
    assert_eq!(count(&before, "reduce_mean"), 8);
    assert_eq!(count(&after, "layer_norm"), 5, "{rewritten}");
    for gone in ["reduce_mean", "pow", "sqrt"] {
        assert_eq!(count(&after, gone), 0, "{gone} left in:\n{rewritten}");
    }
    // both GELUs written out as x * 0.5 * (1 + erf(x / sqrt(2)))
    assert_eq!(count(&before, "erf"), 2);
    assert_eq!(count(&before, "gelu"), 0);
    assert_eq!(count(&after, "gelu"), 2, "{rewritten}");
    assert_eq!(count(&after, "erf"), 0, "erf left in:\n{rewritten}");

    let dir = tempfile::tempdir().unwrap();
    let mxr = dir.path().join("encoder.mxr");
    let out = mxc(&["compile", model, "-o", mxr.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // 110 ops without the recognition rules: 4 chains of 9 ops become 4 ops (78), 2 chains of
    // 5 ops become 2 ops (70), and 2 attentions of 9 ops become 2 ops (54, see attention.rs)
    assert_eq!(op_names(&rewritten).len(), 54, "{rewritten}");
    let summary = format!("{} kernels for cpu (111 ops imported)", kernel_count(&rewritten));
    assert!(stderr(&out).contains(&summary), "{}", stderr(&out));
}

fn int_attr(name: &str, ints: &[i64]) -> proto::AttributeProto {
    use proto::attribute_proto::AttributeType;
    let (r#type, i) = match ints {
        [v] if name == "keepdims" => (AttributeType::Int, Some(*v)),
        _ => (AttributeType::Ints, None),
    };
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(r#type as i32),
        i,
        ints: if i.is_some() { vec![] } else { ints.to_vec() },
        ..Default::default()
    }
}

/// A rank-0 f32 initializer.
fn scalar(name: &str, v: f32) -> proto::TensorProto {
    proto::TensorProto {
        name: Some(name.into()),
        data_type: Some(proto::tensor_proto::DataType::Float as i32),
        float_data: vec![v],
        ..Default::default()
    }
}

/// The vector added to x before the GELU.
const B: [f32; 3] = [0.25, -0.5, 1.0];

/// x: f32[2, 5, 3] → `probs`, the softmax of x over axis 1 written out as ONNX's function
/// body of Softmax (opset 17: ReduceMax's axes an attribute, ReduceSum's an input), and
/// `act`, the tanh GELU of `v = x + b` (`b` a vector of 3) written out as PyTorch's
/// TorchScript exporter writes it: 0.5 * (v * (1 + tanh(k * (v + c * (v * (v * v)))))).
fn written_out_model() -> Vec<u8> {
    let axes = proto::TensorProto {
        name: Some("axes".into()),
        dims: vec![1],
        data_type: Some(proto::tensor_proto::DataType::Int64 as i32),
        int64_data: vec![1],
        ..Default::default()
    };
    let keep = || int_attr("keepdims", &[1]);
    let nodes = vec![
        node("ReduceMax", &["x"], "max", vec![int_attr("axes", &[1]), keep()]),
        node("Sub", &["x", "max"], "shifted", vec![]),
        node("Exp", &["shifted"], "e", vec![]),
        node("ReduceSum", &["e", "axes"], "sum", vec![keep()]),
        node("Div", &["e", "sum"], "probs", vec![]),
        node("Add", &["x", "b"], "v", vec![]),
        node("Mul", &["v", "v"], "square", vec![]),
        node("Mul", &["v", "square"], "cube", vec![]),
        node("Mul", &["c", "cube"], "c_cube", vec![]),
        node("Add", &["v", "c_cube"], "inner", vec![]),
        node("Mul", &["k", "inner"], "scaled", vec![]),
        node("Tanh", &["scaled"], "t", vec![]),
        node("Add", &["one", "t"], "one_plus", vec![]),
        node("Mul", &["v", "one_plus"], "x_one_plus", vec![]),
        node("Mul", &["half", "x_one_plus"], "act", vec![]),
    ];
    let graph = proto::GraphProto {
        name: Some("written_out".into()),
        node: nodes,
        initializer: vec![
            axes,
            proto::TensorProto {
                name: Some("b".into()),
                dims: vec![3],
                data_type: Some(proto::tensor_proto::DataType::Float as i32),
                float_data: B.to_vec(),
                ..Default::default()
            },
            scalar("c", 0.044715),
            scalar("k", (2.0 / std::f64::consts::PI).sqrt() as f32),
            scalar("one", 1.0),
            scalar("half", 0.5),
        ],
        input: vec![float_value("x", &["2", "5", "3"])],
        output: vec![
            float_value("probs", &["2", "5", "3"]),
            float_value("act", &["2", "5", "3"]),
        ],
        ..Default::default()
    };
    model_bytes(graph)
}

/// Runs `model` on `target` with `x` and returns the outputs `probs` and `act`.
fn run(model: &str, x: &str, target: &str, dir: &std::path::Path) -> [Tensor; 2] {
    let out_dir = dir.join(target);
    mxc_run_to(model, target, &format!("x={x}"), &out_dir);
    ["probs", "act"].map(|name| mxc_kernels::npy::read(&out_dir.join(mxc_kernels::npy::file_name_for(name))).unwrap())
}

#[test]
fn a_written_out_softmax_and_tanh_gelu_become_one_op_each() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("written_out.onnx");
    std::fs::write(&model, written_out_model()).unwrap();
    let model = model.to_str().unwrap();

    let (imported, rewritten) = (read_for_target(model, "ref", &[]), read_for_target(model, "cpu", &[]));
    let (before, after) = (op_names(&imported), op_names(&rewritten));
    for op in ["reduce_max", "exp", "reduce_sum", "div", "tanh"] {
        assert!(before.contains(&op), "{op} missing from:\n{imported}");
        assert!(!after.contains(&op), "{op} left in:\n{rewritten}");
    }
    assert_eq!(
        after.iter().filter(|op| **op == "softmax" || **op == "gelu").count(),
        2,
        "{rewritten}"
    );
    assert!(rewritten.contains("mx.softmax %arg0 {axis = 1}"), "{rewritten}");
    assert!(rewritten.contains("{approximate = \"tanh\"}"), "{rewritten}");
    // x + b and the GELU are one fused kernel
    assert!(rewritten.contains("mx.fused"), "{rewritten}");

    // 30 values from -8 to 8 in a scrambled order
    let xs: Vec<f32> = (0..30).map(|i| ((i * 7) % 30) as f32 * 16.0 / 29.0 - 8.0).collect();
    let x = Tensor::from_f32s(vec![2, 5, 3], &xs);
    let x_file = dir.path().join("x.npy");
    mxc_kernels::npy::write(&x_file, &x).unwrap();
    let x_file = x_file.to_str().unwrap();
    let [ref_probs, ref_act] = run(model, x_file, "ref", dir.path());
    let [cpu_probs, cpu_act] = run(model, x_file, "cpu", dir.path());

    // the definitions, in f64
    let softmax: Vec<f64> = (0..30)
        .map(|i| {
            let (b, j) = (i / 15, i % 3);
            let row: Vec<f64> = (0..5).map(|r| xs[b * 15 + r * 3 + j] as f64).collect();
            let max = row.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
            (xs[i] as f64 - max).exp() / sum
        })
        .collect();
    let gelu: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let v = (x + B[i % 3]) as f64;
            0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
        })
        .collect();
    let expected = |v: &[f64]| Tensor::from_f64s(mxc_dialects::DType::F32, vec![2, 5, 3], v);
    for (name, got, want) in [
        ("probs on ref", &ref_probs, expected(&softmax)),
        ("probs on cpu", &cpu_probs, expected(&softmax)),
        ("act on ref", &ref_act, expected(&gelu)),
        ("act on cpu", &cpu_act, expected(&gelu)),
    ] {
        assert_eq!(mismatch(got, &want, 1e-5, 1e-6), None, "{name}: {got:?}");
    }
    // cpu (rewritten) and ref (as written) agree closely
    assert_eq!(mismatch(&cpu_probs, &ref_probs, 1e-6, 1e-7), None);
    assert_eq!(mismatch(&cpu_act, &ref_act, 1e-6, 1e-7), None);
}
