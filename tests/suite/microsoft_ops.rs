//! The `com.microsoft` contrib ops (and onnxruntime's `SimplifiedLayerNormalization`), one
//! single-node model per case made by `scripts/models/microsoft_ops.py` with onnxruntime's
//! outputs as reference: `mxc run` on both targets matches onnxruntime on every case.

use crate::common::{data_files, generated_cases, mismatch, read_pb, run_case};
use std::path::Path;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn case_matches_onnxruntime(dir: &Path, target: &str) {
    let case = dir.file_name().unwrap().to_string_lossy();
    let set = dir.join("test_data_set_0");
    let out = tempfile::tempdir().unwrap();
    let actual = run_case(&dir.join("model.onnx"), &set, target, &[], out.path())
        .unwrap_or_else(|e| panic!("{case} on {target}: {e}"));
    let expected = data_files(&set, "output_");
    assert_eq!(actual.len(), expected.len(), "{case} on {target}: number of outputs");
    for (a, f) in actual.iter().zip(expected) {
        let (name, e) = read_pb(&f).unwrap();
        if let Some(why) = mismatch(a, &e, RTOL, ATOL) {
            panic!("{case} on {target}, output `{name}`: {why}");
        }
    }
}

fn all_cases_match_onnxruntime(target: &str) {
    for dir in &generated_cases("microsoft_ops") {
        case_matches_onnxruntime(dir, target);
    }
}

#[test]
fn microsoft_ops_match_onnxruntime_on_ref() {
    all_cases_match_onnxruntime("ref");
}

#[test]
fn microsoft_ops_match_onnxruntime_on_cpu() {
    all_cases_match_onnxruntime("cpu");
}
