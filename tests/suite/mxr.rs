//! `.mxr` files (docs/mxr.md) through the CLI: the same model compiles to the same bytes, a
//! file from another format version or for another target is refused with a clear error,
//! `mxc params` lists a file's inputs and outputs, and `mxc read --format mlir` is MLIR that
//! `mlir-opt-22` accepts; a file whose plan disagrees with its kernels, or whose arena the
//! machine cannot give, is refused with a message and never runs.

use crate::common::{cache_dir, mxc, repo, stderr};
use std::path::Path;

fn compile(model: &Path, out: &Path, extra: &[&str]) {
    let mut args = vec!["compile", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(extra);
    let run = mxc(&args);
    assert!(run.status.success(), "mxc {args:?}: {}", stderr(&run));
}

/// `mxc run FILE` (with `extra` arguments) fails with a one-line error containing `expected`.
fn refused(file: &Path, extra: &[&str], expected: &str) {
    let mut args = vec!["run", file.to_str().unwrap()];
    args.extend(extra);
    let out = mxc(&args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} ran");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(expected) && err.contains(file.to_str().unwrap()), "{err}");
}

#[test]
fn the_same_model_compiles_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let model = cache_dir("models/convnet").join("model.onnx");
    let (a, b) = (dir.path().join("a.mxr"), dir.path().join("b.mxr"));
    compile(&model, &a, &[]);
    compile(&model, &b, &[]);
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap());
    assert_eq!(&bytes[..4], b"MXR\0");
}

#[test]
fn another_version_or_target_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx");
    let file = dir.path().join("tiny.mxr");
    compile(&model, &file, &["--target", "ref"]);
    // a ref file runs as what it is, and is refused as another target
    assert!(mxc(&["run", file.to_str().unwrap()]).status.success());
    refused(&file, &["--target", "cpu"], "compiled for target ref, not cpu");

    let mut bytes = std::fs::read(&file).unwrap();
    let current = mxc_kernels::mxr::VERSION;
    bytes[4..8].copy_from_slice(&(current + 1).to_le_bytes());
    let foreign = dir.path().join("foreign.mxr");
    std::fs::write(&foreign, &bytes).unwrap();
    let message = format!("format version {}; this mxc reads version {current}", current + 1);
    refused(&foreign, &[], &message);

    let old = dir.path().join("old.mxr");
    std::fs::write(&old, b"MXCA\x01\x00\x00\x00 an older container").unwrap();
    refused(&old, &[], "not an .mxr file");
}

#[test]
fn params_lists_inputs_and_outputs_of_a_model_and_of_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = cache_dir("models/encoder").join("model.onnx");
    let file = dir.path().join("encoder.mxr");
    compile(&model, &file, &[]);
    let expected = "inputs:\n  input_ids: tensor<1x16xi64>\n  attention_mask: tensor<1x16xi64>\noutputs:\n  last_hidden_state: tensor<1x16x64xf32>\n";
    for m in [&model, &file] {
        let out = mxc(&["params", m.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    }
}

#[test]
fn the_loop_level_is_mlir_that_mlir_opt_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let model = cache_dir("models/convnet").join("model.onnx");
    let out = mxc(&["read", model.to_str().unwrap(), "--target", "cpu", "--format", "mlir"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mlir = String::from_utf8(out.stdout).unwrap();
    assert!(mlir.starts_with("module {") && mlir.contains("func.func @k"), "{mlir}");
    let file = dir.path().join("convnet.mlir");
    std::fs::write(&file, &mlir).unwrap();
    let opt = std::process::Command::new("mlir-opt-22")
        .arg(&file)
        .output()
        .expect("mlir-opt-22 is installed by scripts/setup.sh (package mlir-22-tools)");
    assert!(opt.status.success(), "{}", String::from_utf8_lossy(&opt.stderr));
    assert!(String::from_utf8(opt.stdout).unwrap().contains("scf.for"));
}

#[test]
fn read_writes_json_and_dot_with_fused_kernels() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let read = |format: &str| {
        let out = mxc(&["read", model.to_str().unwrap(), "--target", "cpu", "--format", format]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let json = read("json");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.json");
    std::fs::write(&file, &json).unwrap();
    // the JSON parses, and its fused kernel holds the conv and the relu
    let check = "import json, sys; g = json.load(open(sys.argv[1])); \
        f = [o for o in g['ops'] if o['op'] == 'mx.fused'][0]; \
        print(g['name'], [o['op'] for o in f['body']['ops']], g['outputs'][0]['name'])";
    let python = crate::common::repo().join(".cache/venv/bin/python");
    let out = std::process::Command::new(&python)
        .args(["-c", check, file.to_str().unwrap()])
        .output()
        .expect("the test venv (scripts/setup.sh)");
    assert!(out.status.success(), "{}\n{json}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "tiny_cnn ['mx.conv_nhwc_packed', 'mx.relu'] scores"
    );
    let dot = read("dot");
    assert!(dot.starts_with("digraph \"tiny_cnn\""), "{dot}");
    assert_eq!(dot.matches("subgraph cluster_").count(), 7, "{dot}");
    assert!(
        dot.contains("[label=\"conv_nhwc_packed\"]") && dot.contains("[label=\"relu\"]"),
        "{dot}"
    );
}

/// `tiny_cnn` compiled to `dir/tiny.mxr`, changed by `change` and written again (the digest made
/// anew, as someone rewriting the file would), then run: it must fail with one line naming
/// `expected`, and no panic.
fn changed_and_refused(dir: &Path, change: impl Fn(&mut mxc_kernels::mxr::Mxr), expected: &str) {
    use mxc_kernels::mxr;
    let file = dir.join("tiny.mxr");
    compile(&repo().join("examples/tiny_cnn.onnx"), &file, &[]);
    let mut m = mxr::read(&file, None, &Default::default()).unwrap();
    change(&mut m);
    let changed = dir.join("changed.mxr");
    std::fs::write(&changed, mxr::encode(&m, None)).unwrap();
    let out = mxc(&["run", changed.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !err.contains("panicked") && err.trim_end().lines().count() == 1,
        "{err}"
    );
    assert!(err.contains(expected), "{err}");
}

#[test]
fn a_plan_at_odds_with_its_kernels_or_the_machine_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    changed_and_refused(d, |m| m.memory.size /= 2, "does not lie aligned inside the arena");
    changed_and_refused(
        d,
        |m| {
            m.program.steps[0].args.pop();
        },
        "arguments, the kernel takes",
    );
    let weight_as_result = |m: &mut mxc_kernels::mxr::Mxr| {
        let p = &mut m.program;
        let weight = (p.buffers.iter())
            .position(|b| matches!(b.kind, mxc_dialects::program::BufferKind::Constant(_)))
            .unwrap();
        let last = p.steps[0].args.len() - 1;
        p.steps[0].args[last] = weight;
    };
    changed_and_refused(d, weight_as_result, "invalid plan: step 0");
    for range in [1u64 << 62, i64::MAX as u64] {
        changed_and_refused(
            d,
            |m| m.program.steps[0].range = range,
            &format!("range {range}, the kernel's loop has"),
        );
    }
    changed_and_refused(d, |m| m.program.inputs.clear(), "which is not bound to it");
    // plans that are consistent but ask for an arena the machine cannot give
    changed_and_refused(
        d,
        |m| m.memory.size = 1 << 40,
        "the arena of temporaries: cannot allocate 1099511627776 bytes",
    );
    changed_and_refused(
        d,
        |m| m.memory.size = 1 << 63,
        "the arena of temporaries: cannot allocate",
    );
}
