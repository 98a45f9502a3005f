//! Bad input: each case gives a one-line error that names the thing, a non-zero exit, and
//! no panic.

use crate::common::{float_value, model_bytes, mxc, mxc_under_address_limit, repo, stderr};
use mxc_dialects::{DType, Tensor};
use mxc_onnx::proto;
use std::path::Path;

/// Runs mxc, expecting failure with one error line containing every one of `needles`.
fn fails_naming(args: &[&str], needles: &[&str]) {
    let out = mxc(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "mxc {args:?} succeeded");
    assert_eq!(out.status.code(), Some(1), "mxc {args:?} did not exit with 1: {err}");
    assert!(!err.contains("panicked"), "mxc {args:?} panicked: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not a one-line error: {err}");
    for n in needles {
        assert!(err.contains(n), "error of mxc {args:?} does not name `{n}`: {err}");
    }
}

fn tiny_cnn() -> String {
    repo().join("examples/tiny_cnn.onnx").display().to_string()
}

/// A one-node model `y = op(x, w)` with `w` an initializer that may live in external data.
fn one_node_model(dir: &Path, op: &str, external: Option<&str>) -> String {
    let mut w = proto::TensorProto {
        name: Some("w".into()),
        dims: vec![2],
        data_type: Some(proto::tensor_proto::DataType::Float as i32),
        ..Default::default()
    };
    match external {
        Some(location) => {
            w.data_location = Some(proto::tensor_proto::DataLocation::External as i32);
            w.external_data = vec![proto::StringStringEntryProto {
                key: Some("location".into()),
                value: Some(location.into()),
            }];
        }
        None => w.float_data = vec![1.0, 2.0],
    }
    let node = proto::NodeProto {
        name: Some("the_node".into()),
        op_type: Some(op.into()),
        input: vec!["x".into(), "w".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let graph = proto::GraphProto {
        name: Some("g".into()),
        node: vec![node],
        initializer: vec![w],
        input: vec![float_value("x", &["2"])],
        output: vec![float_value("y", &["2"])],
        ..Default::default()
    };
    let path = dir.join("model.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path.display().to_string()
}

#[test]
fn missing_model_file() {
    fails_naming(&["read", "/nonexistent/model.onnx"], &["/nonexistent/model.onnx"]);
    fails_naming(&["run", "/nonexistent/model.onnx"], &["/nonexistent/model.onnx"]);
}

#[test]
fn file_that_is_not_protobuf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.onnx");
    std::fs::write(&path, "this is a text file, not a model\n").unwrap();
    fails_naming(&["read", path.to_str().unwrap()], &["notes.onnx"]);
}

#[test]
fn truncated_model() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(tiny_cnn()).unwrap();
    let path = dir.path().join("cut.onnx");
    std::fs::write(&path, &bytes[..bytes.len() * 3 / 5]).unwrap();
    fails_naming(&["run", path.to_str().unwrap()], &["cut.onnx"]);
}

#[test]
fn unknown_op_names_node_op_domain_and_opset() {
    let dir = tempfile::tempdir().unwrap();
    let model = one_node_model(dir.path(), "Frobnicate", None);
    fails_naming(&["read", &model], &["the_node", "Frobnicate", "17"]);
}

#[test]
fn input_of_the_wrong_shape_or_type() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.npy");
    mxc_kernels::npy::write(
        &small,
        &Tensor::zeros(mxc_dialects::TensorType::new(DType::F32, vec![1, 3, 4, 4])),
    )
    .unwrap();
    let doubles = dir.path().join("doubles.npy");
    mxc_kernels::npy::write(
        &doubles,
        &Tensor::zeros(mxc_dialects::TensorType::new(DType::F64, vec![1, 3, 8, 8])),
    )
    .unwrap();
    let model = tiny_cnn();
    fails_naming(
        &["run", &model, "--input", &format!("image={}", small.display())],
        &["image", "[1, 3, 8, 8]", "[1, 3, 4, 4]"],
    );
    fails_naming(
        &["run", &model, "--input", &format!("image={}", doubles.display())],
        &["image", "f32", "f64"],
    );
    fails_naming(
        &["run", &model, "--input", &format!("nope={}", small.display())],
        &["nope"],
    );
}

#[test]
fn external_data_through_a_symlink_out_or_a_fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.bin"), [0u8; 8]).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.bin"), dir.path().join("w.bin")).unwrap();
    let model = one_node_model(dir.path(), "Add", Some("w.bin"));
    fails_naming(&["read", &model], &["\"w\"", "w.bin", "outside the model's folder"]);
    std::fs::remove_file(dir.path().join("w.bin")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("w.bin"))
        .status()
        .unwrap();
    assert!(made.success());
    // would block forever if the FIFO were opened
    fails_naming(&["read", &model], &["w.bin is a FIFO, not a regular file"]);
}

#[test]
fn missing_or_escaping_external_data() {
    let dir = tempfile::tempdir().unwrap();
    let model = one_node_model(dir.path(), "Add", Some("weights.bin"));
    fails_naming(&["read", &model], &["weights.bin"]);
    let model = one_node_model(dir.path(), "Add", Some("../outside.bin"));
    fails_naming(&["read", &model], &["../outside.bin"]);
    std::fs::write(dir.path().join("weights.bin"), [0u8; 8]).unwrap();
    let model = one_node_model(dir.path(), "Add", Some("weights.bin"));
    let out = mxc(&["read", &model]);
    assert!(
        out.status.success(),
        "external data next to the model loads: {}",
        stderr(&out)
    );
}

/// The models that once crashed the ONNX fuzz targets or a mutation fuzzer
/// (`fuzz/regressions/onnx_import`, replayed by `scripts/fuzz.sh` too) are refused by `mxc
/// read`, `params` and `compile` with one line naming the node, under an 8 GiB address-space
/// limit as the fuzzers ran them.
#[test]
fn models_the_fuzzers_crashed_on_are_refused_naming_the_node() {
    let dir = repo().join("fuzz/regressions/onnx_import");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 30, "{} holds {files:?}", dir.display());
    let tmp = tempfile::tempdir().unwrap();
    let mxr = tmp.path().join("out.mxr");
    for file in files {
        let model = file.to_str().unwrap();
        for command in [
            &["read", model][..],
            &["params", model],
            &["compile", "-q", "--no-cache", model, "-o", mxr.to_str().unwrap()],
        ] {
            let out = mxc_under_address_limit(8 << 20, command);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "mxc {command:?} did not exit with 1: {err}");
            assert!(
                !err.contains("panicked") && err.trim_end().lines().count() == 1,
                "mxc {command:?}: {err}"
            );
            assert!(err.contains("node #"), "mxc {command:?} does not name the node: {err}");
        }
        assert!(!mxr.exists(), "a refused compile of {model} left {}", mxr.display());
    }
}
