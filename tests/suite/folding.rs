//! Weight preprocessing by the built-in `fold` rules, end to end: on the repo's conv net every
//! batch normalisation is folded into the convolution before it (21 ops fewer, one kernel
//! each) and the cpu program still matches onnxruntime and the unrewritten `ref` program;
//! small graphs (a depthwise conv without bias, gemms with `trans_b` 0 and 1) give the same
//! outputs folded on cpu as unfolded on ref.

use crate::common::{
    cache_dir, data_files, kernel_count, mismatch, mxc, op_names, read_for_target, read_pb, run_case, stderr,
};
use mxc_codegen::{compile, rewrite_for, CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType, ValueId};
use mxc_kernels::Executable;
use std::collections::HashMap;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn convnet() -> std::path::PathBuf {
    cache_dir("models/convnet").join("model.onnx")
}

#[test]
fn convnet_batch_norms_fold_into_their_convs() {
    let model = convnet();
    let model = model.to_str().unwrap();
    let (imported, rewritten) = (read_for_target(model, "ref", &[]), read_for_target(model, "cpu", &[]));
    let (before, after) = (op_names(&imported), op_names(&rewritten));
    let count = |ops: &[&str], name: &str| ops.iter().filter(|o| **o == name).count();
    assert_eq!(count(&before, "batch_norm"), 21);
    assert_eq!(count(&after, "batch_norm"), 0, "{rewritten}");
    // channels first or last, weights packed or not, or Winograd's, as the cpu cost model
    // chooses
    let convs = ["conv", "conv_nhwc", "conv_nhwc_packed", "winograd_output"].map(|c| count(&after, c));
    assert_eq!(convs.iter().sum::<usize>(), 21, "{rewritten}");
    // 21 batch norms gone; the layout rules may add transposes around channels-last convs,
    // a Winograd conv adds its input transform, its product and its bias's add, and the
    // classifier's gemm may run as a packed product with its bias added in its epilogue
    let winograd = count(&after, "winograd_output");
    let gemm_split = usize::from(count(&after, "gemm") == 0);
    let computing = after.iter().filter(|o| **o != "transpose").count() - 3 * winograd - gemm_split;
    assert_eq!((before.len(), computing), (74, 53), "{rewritten}");

    let dir = tempfile::tempdir().unwrap();
    let mxr = dir.path().join("convnet.mxr");
    let out = mxc(&["compile", model, "-o", mxr.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = format!("{} kernels for cpu (74 ops imported)", kernel_count(&rewritten));
    assert!(stderr(&out).contains(&summary), "{}", stderr(&out));
}

#[test]
fn folded_convnet_matches_onnxruntime_and_ref() {
    let dir = cache_dir("models/convnet");
    let set = dir.join("test_data_set_0");
    let [plain, folded] = ["ref", "cpu"].map(|target| {
        let out = tempfile::tempdir().unwrap();
        run_case(&dir.join("model.onnx"), &set, target, &[], out.path()).unwrap_or_else(|e| panic!("{target}: {e}"))
    });
    let expected = data_files(&set, "output_");
    assert_eq!(folded.len(), expected.len());
    for ((f, p), file) in folded.iter().zip(&plain).zip(expected) {
        let (name, e) = read_pb(&file).unwrap();
        if let Some(why) = mismatch(f, &e, RTOL, ATOL) {
            panic!("output `{name}` on cpu differs from onnxruntime's: {why}");
        }
        if let Some(why) = mismatch(f, p, RTOL, ATOL) {
            panic!("output `{name}` on cpu differs from ref's: {why}");
        }
    }
}

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// A tensor of `shape` with values spread over `[lo, lo + 1)`.
fn spread(shape: &[usize], lo: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| lo + ((i * 7) % 13) as f32 / 13.0).collect();
    Tensor::from_f32s(shape.to_vec(), &values)
}

/// `batch_norm(y)` over `c` channels with constant parameters.
fn batch_norm(g: &mut Graph, y: ValueId, c: usize) -> ValueId {
    let mut operands = vec![y];
    for lo in [0.5, -0.5, -0.25, 0.1] {
        operands.push(g.constant(spread(&[c], lo)));
    }
    let attrs = Attrs::new().with("epsilon", Attr::Float(1e-5));
    g.build1(OpKind::BatchNorm, operands, attrs).unwrap()
}

fn run(g: &Graph, target: Target, inputs: &HashMap<String, Tensor>) -> Vec<Tensor> {
    let compiled = compile(g, target, &CompileOptions::default()).unwrap_or_else(|e| panic!("{target}: {e}"));
    let exe = Executable::load(compiled.program, &compiled.library).expect("kernels load");
    exe.run(inputs).expect("runs").into_iter().map(|(_, t)| t).collect()
}

/// The cpu target folds every `batch_norm` of `g` away, and its program computes what ref's
/// unfolded one does.
fn folds_and_matches_ref(g: &Graph, inputs: &[(&str, Tensor)]) {
    let (rewritten, _) = rewrite_for(g, Target::Cpu, &CompileOptions::default()).unwrap();
    let kinds: Vec<OpKind> = rewritten.ops.iter().map(|o| o.kind).collect();
    assert!(!kinds.contains(&OpKind::BatchNorm), "{}: {kinds:?}", g.name);
    let inputs: HashMap<String, Tensor> = inputs.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    let (plain, folded) = (run(g, Target::Ref, &inputs), run(g, Target::Cpu, &inputs));
    for (f, p) in folded.iter().zip(&plain) {
        if let Some(why) = mismatch(f, p, RTOL, ATOL) {
            panic!("{}: folded on cpu differs from ref: {why}", g.name);
        }
    }
}

#[test]
fn folded_depthwise_conv_matches_ref() {
    let c = 3;
    let mut g = Graph::new("depthwise");
    let x = g.add_input("x", f32s(&[2, c, 5, 5]));
    let w = g.constant(spread(&[c, 1, 3, 3], -0.5));
    let attrs = Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(c as i64))
        .with("pads", Attr::Ints(vec![1, 1, 1, 1]))
        .with("strides", Attr::Ints(vec![2, 1]));
    let y = g.build1(OpKind::Conv, vec![x, w], attrs).unwrap();
    let z = batch_norm(&mut g, y, c);
    g.add_output("z", z);
    folds_and_matches_ref(&g, &[("x", spread(&[2, c, 5, 5], -1.0))]);
}

#[test]
fn folded_gemms_match_ref() {
    let (n, k, m) = (3, 5, 4);
    for (trans_b, with_c) in [(0, true), (1, true), (0, false), (1, false)] {
        let mut g = Graph::new(&format!("gemm_tb{trans_b}_c{with_c}"));
        let a = g.add_input("a", f32s(&[n, k]));
        let b_shape = if trans_b == 1 { [m, k] } else { [k, m] };
        let mut operands = vec![a, g.constant(spread(&b_shape, -0.5))];
        if with_c {
            operands.push(g.constant(spread(&[1, m], 0.25)));
        }
        let attrs = Attrs::new()
            .with("alpha", Attr::Float(0.75))
            .with("beta", Attr::Float(1.5))
            .with("trans_a", Attr::Int(0))
            .with("trans_b", Attr::Int(trans_b));
        let y = g.build1(OpKind::Gemm, operands, attrs).unwrap();
        let z = batch_norm(&mut g, y, m);
        g.add_output("z", z);
        folds_and_matches_ref(&g, &[("a", spread(&[n, k], -1.0))]);
    }
}
