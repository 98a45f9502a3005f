//! The repo's real models (a 21-conv ResNet-style net and a BERT-style encoder, made by
//! `scripts/models/*.py` with onnxruntime's outputs as reference): `mxc run` on both targets
//! matches onnxruntime, the rewritten program (cpu) matches the unrewritten one (ref), and
//! `mxc read` prints IR that parses back to the same text.

use crate::common::{cache_dir, data_files, mismatch, mxc, read_pb, run_case, stderr};

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn matches_onnxruntime(model: &str, target: &str) {
    let dir = cache_dir(&format!("models/{model}"));
    let set = dir.join("test_data_set_0");
    let out = tempfile::tempdir().unwrap();
    let actual = run_case(&dir.join("model.onnx"), &set, target, &[], out.path())
        .unwrap_or_else(|e| panic!("{model} on {target}: {e}"));
    let expected = data_files(&set, "output_");
    assert_eq!(actual.len(), expected.len());
    for (a, f) in actual.iter().zip(expected) {
        let (name, e) = read_pb(&f).unwrap();
        if let Some(why) = mismatch(a, &e, RTOL, ATOL) {
            panic!("{model} on {target}, output `{name}`: {why}");
        }
    }
}

fn rewritten_matches_unrewritten(model: &str) {
    let dir = cache_dir(&format!("models/{model}"));
    let set = dir.join("test_data_set_0");
    let outputs = ["ref", "cpu"].map(|target| {
        let out = tempfile::tempdir().unwrap();
        run_case(&dir.join("model.onnx"), &set, target, &[], out.path())
            .unwrap_or_else(|e| panic!("{model} on {target}: {e}"))
    });
    for (i, (plain, rewritten)) in outputs[0].iter().zip(&outputs[1]).enumerate() {
        if let Some(why) = mismatch(rewritten, plain, RTOL, ATOL) {
            panic!("{model}, output {i}: the rewritten program differs from ref's: {why}");
        }
    }
}

fn read_round_trips(model: &str) {
    let path = cache_dir(&format!("models/{model}")).join("model.onnx");
    let out = mxc(&["read", path.to_str().unwrap()]);
    assert!(out.status.success(), "mxc read {model}: {}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let graph = mxc_dialects::text::parse(&text).unwrap_or_else(|e| panic!("{model}: printed IR does not parse: {e}"));
    assert_eq!(
        mxc_dialects::text::print(&graph),
        text,
        "{model}: IR changed in a print-parse-print round trip"
    );
}

#[test]
fn convnet_matches_onnxruntime_on_ref() {
    matches_onnxruntime("convnet", "ref");
}

#[test]
fn convnet_matches_onnxruntime_on_cpu() {
    matches_onnxruntime("convnet", "cpu");
}

#[test]
fn encoder_matches_onnxruntime_on_ref() {
    matches_onnxruntime("encoder", "ref");
}

#[test]
fn encoder_matches_onnxruntime_on_cpu() {
    matches_onnxruntime("encoder", "cpu");
}

#[test]
fn convnet_rewritten_matches_unrewritten() {
    rewritten_matches_unrewritten("convnet");
}

#[test]
fn encoder_rewritten_matches_unrewritten() {
    rewritten_matches_unrewritten("encoder");
}

#[test]
fn convnet_ir_round_trips() {
    read_round_trips("convnet");
}

#[test]
fn encoder_ir_round_trips() {
    read_round_trips("encoder");
}
