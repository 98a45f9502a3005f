//! Ops recognised by the built-in `fusion` rules, end to end: the repo's encoder writes four of
//! its five layer normalisations out (`ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
//! Add`); on cpu each becomes one `mx.layer_norm`, 8 ops and kernels fewer per chain. Its two
//! GELUs are written out too (`Div, Erf, Add, Mul, Mul`), and each becomes one `mx.gelu`, 4
//! fewer. That the rewritten program still matches onnxruntime and `ref` is checked in
//! `models.rs`.

use crate::common::{cache_dir, kernel_count, mxc, op_names, read_for_target, stderr};

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
    // 110 ops without the recognition rules: 4 chains of 9 ops become 4 ops (78), and 2 chains
    // of 5 ops become 2 ops (70)
    assert_eq!(op_names(&rewritten).len(), 70, "{rewritten}");
    let summary = format!("{} kernels for cpu (111 ops imported)", kernel_count(&rewritten));
    assert!(stderr(&out).contains(&summary), "{}", stderr(&out));
}
