//! Sequences and optionals at a model's boundary, through the command line: compiled to an
//! `.mxr` whose structure (a sequence's length, an optional's emptiness) is fixed by `--shape`,
//! run on ONNX `SequenceProto` inputs and writing `SequenceProto` outputs that match the ONNX
//! node suite's expected values; and the refusals naming the input.

use crate::common::{cache_dir, data_files, mismatch, mxc, stderr};
use mxc_onnx::data::{read_value_file, DataKind, DataValue};
use std::path::Path;

fn case(name: &str) -> std::path::PathBuf {
    cache_dir("onnx-backend-tests/node").join(name)
}

fn ok(args: &[&str]) -> String {
    let out = mxc(args);
    assert!(out.status.success(), "mxc {}: {}", args.join(" "), stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tensors of a sequence value.
fn elements(v: DataValue) -> Vec<mxc_dialects::Tensor> {
    match v {
        DataValue::Sequence(s) => s,
        other => panic!("not a sequence: {other:?}"),
    }
}

#[test]
fn a_compiled_sequence_program_runs_on_sequence_files() {
    let dir = case("test_sequence_insert_at_back");
    let set = dir.join("test_data_set_0");
    let tmp = tempfile::tempdir().unwrap();
    let mxr = tmp.path().join("insert.mxr");
    let model = dir.join("model.onnx");
    for target in ["ref", "cpu"] {
        let mxr = mxr.to_str().unwrap();
        ok(&[
            "compile",
            model.to_str().unwrap(),
            "--shape",
            "sequence=[4,3,2]",
            "--target",
            target,
            "-o",
            mxr,
            "-q",
        ]);
        let params = ok(&["params", mxr]);
        assert!(
            params.contains("  sequence: a sequence of 3 tensors\n    sequence[0]: tensor<4xi64>\n"),
            "{params}"
        );
        assert!(
            params.contains("  output_sequence: a sequence of 4 tensors\n"),
            "{params}"
        );
        let inputs = data_files(&set, "input_");
        let given = [
            format!("sequence={}", inputs[0].display()),
            format!("tensor={}", inputs[1].display()),
        ];
        let out = tmp.path().join(target);
        ok(&[
            "run",
            mxr,
            "--input",
            &given[0],
            "--input",
            &given[1],
            "-o",
            out.to_str().unwrap(),
        ]);
        let actual = elements(read_value_file(&out.join("output_sequence.pb"), DataKind::Sequence).unwrap());
        let expected = elements(read_value_file(&data_files(&set, "output_")[0], DataKind::Sequence).unwrap());
        assert_eq!(actual.len(), 4);
        for (a, e) in actual.iter().zip(&expected) {
            assert_eq!(mismatch(a, e, 0.0, 0.0), None, "{target}");
        }
    }
    // the program's structure is fixed: another length is refused, naming the input
    let mxr = mxr.to_str().unwrap();
    let model = model.to_str().unwrap();
    ok(&["compile", model, "--shape", "sequence=[4,3]", "-o", mxr, "-q"]);
    let given = format!("sequence={}", data_files(&set, "input_")[0].display());
    let err = mxc(&["run", mxr, "--input", &given]);
    assert!(!err.status.success());
    assert!(
        stderr(&err).contains(
            "input `sequence`: the program was compiled for a sequence of 2 tensors, the value given is a sequence \
             of 3 tensors"
        ),
        "{}",
        stderr(&err)
    );
}

#[test]
fn an_optional_input_is_present_or_empty_by_shape() {
    // an optional tensor holds one unless told otherwise
    let model = case("test_optional_has_element_optional_input").join("model.onnx");
    let model = model.to_str().unwrap();
    assert_eq!(ok(&["run", model]), "output: [] bool [1]\n");
    assert_eq!(
        ok(&["run", model, "--shape", "optional_input=none"]),
        "output: [] bool [0]\n"
    );
    // an optional sequence must be told its structure
    let model = case("test_optional_get_element_optional_sequence").join("model.onnx");
    let model = model.to_str().unwrap();
    let shown = ok(&["run", model, "--shape", "optional_input=[4]", "--fill1"]);
    assert_eq!(
        shown,
        "output: a sequence of 1 tensors\n  output[0]: [4] i32 [1, 1, 1, 1]\n"
    );
    let err = mxc(&["run", model]);
    assert!(
        stderr(&err).contains(
            "input \"optional_input\": it is an optional sequence: say whether it holds one, and its length and \
             shapes (--shape 'optional_input=[2x3]' or --shape optional_input=none), or give its value"
        ),
        "{}",
        stderr(&err)
    );
}

#[test]
fn optional_outputs_are_written_as_optional_protos() {
    let dir = case("test_if_opt");
    let set = dir.join("test_data_set_0");
    let out = tempfile::tempdir().unwrap();
    let given = format!("cond={}", data_files(&set, "input_")[0].display());
    ok(&[
        "run",
        dir.join("model.onnx").to_str().unwrap(),
        "--input",
        &given,
        "-o",
        out.path().to_str().unwrap(),
    ]);
    let written = read_value_file(&out.path().join("sequence.pb"), DataKind::Optional).unwrap();
    let expected = read_value_file(&data_files(&set, "output_")[0], DataKind::Optional).unwrap();
    assert_eq!(written, expected);
    assert!(Path::new(&out.path().join("sequence.pb")).is_file());
}
