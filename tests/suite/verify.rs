//! `mxc verify`: the repo's models agree with ref on cpu; a deliberately wrong user rule on a
//! small model built here makes cpu differ (a FAIL line, exit status 1), and `--bisect` names
//! exactly the op it breaks while `--reduce` reports the prefix ending at it; bad input is a
//! one-line error.

use crate::common::{cache_dir, data_files, float_value, model_bytes, model_io_names, mxc, stderr};
use mxc_onnx::proto;
use std::process::Output;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Verifies a repo model (with its test data set's inputs when `with_data`) and expects every
/// output line to say ok.
fn verifies(name: &str, with_data: bool) {
    let dir = cache_dir(&format!("models/{name}"));
    let model = dir.join("model.onnx");
    let mut args: Vec<String> = vec!["verify".into(), model.display().to_string()];
    if with_data {
        let (inputs, _) = model_io_names(&model).unwrap();
        for (input, f) in inputs.iter().zip(data_files(&dir.join("test_data_set_0"), "input_")) {
            args.push("--input".into());
            args.push(format!("{input}={}", f.display()));
        }
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mxc(&argv);
    let text = stdout(&out);
    assert!(out.status.success(), "mxc {argv:?}: {}\n{text}", stderr(&out));
    let (_, outputs) = model_io_names(&model).unwrap();
    for o in &outputs {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{o}: ")))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.ends_with(" ok") && line.contains("max |diff|"), "{line}");
    }
    assert!(
        text.contains(&format!("all {} outputs of cpu agree with ref", outputs.len())),
        "{text}"
    );
}

#[test]
fn the_conv_net_verifies_on_cpu() {
    verifies("convnet", false);
}

#[test]
fn the_encoder_verifies_on_cpu_with_its_test_inputs() {
    verifies("encoder", true);
}

fn node(op: &str, inputs: &[&str], output: &str) -> proto::NodeProto {
    proto::NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

fn vector(name: &str, v: &[f32]) -> proto::TensorProto {
    proto::TensorProto {
        name: Some(name.into()),
        dims: vec![v.len() as i64],
        data_type: Some(proto::tensor_proto::DataType::Float as i32),
        float_data: v.to_vec(),
        ..Default::default()
    }
}

/// x: f32[2, 8] → y, through two ops before the Tanh and three after it (one of them also
/// using a value from before the Tanh).
fn chain_model() -> Vec<u8> {
    let nodes = vec![
        node("Mul", &["x", "scale"], "scaled"),
        node("Add", &["scaled", "shift"], "shifted"),
        node("Tanh", &["shifted"], "t"),
        node("Mul", &["t", "scale"], "t2"),
        node("Add", &["t2", "shifted"], "sum"),
        node("Abs", &["sum"], "y"),
    ];
    let graph = proto::GraphProto {
        name: Some("chain".into()),
        node: nodes,
        initializer: vec![
            vector("scale", &[1.5, -2.0, 0.5, 3.0, -1.0, 2.5, 0.75, -0.25]),
            vector("shift", &[0.1, 0.2, -0.3, 0.4, -0.5, 0.6, -0.7, 0.8]),
        ],
        input: vec![float_value("x", &["2", "8"])],
        output: vec![float_value("y", &["2", "8"])],
        ..Default::default()
    };
    model_bytes(graph)
}

/// The chain model and a rule file that turns its tanh into a sigmoid, in `dir`.
fn wrong_setup(dir: &std::path::Path) -> (String, String) {
    let model = dir.join("chain.onnx");
    std::fs::write(&model, chain_model()).unwrap();
    let rules = dir.join("wrong.rules");
    std::fs::write(&rules, "# wrong on purpose\nrule wrong: (tanh ?x) => (sigmoid ?x)\n").unwrap();
    (model.display().to_string(), rules.display().to_string())
}

/// The line of `mxc read MODEL` defining the model's tanh: `%N = mx.tanh %M : ...`.
fn tanh_line(model: &str) -> String {
    let out = mxc(&["read", model]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains(" = mx.tanh "))
        .unwrap_or_else(|| panic!("{text}"));
    line.trim().to_string()
}

#[test]
fn a_wrong_rule_fails_with_status_1_and_a_fail_line() {
    let dir = tempfile::tempdir().unwrap();
    let (model, rules) = wrong_setup(dir.path());
    let out = mxc(&["verify", &model, "--rules", &rules]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    let line = text
        .lines()
        .find(|l| l.starts_with("y: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("FAIL") && line.contains("elements outside"), "{line}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("1 of 1 outputs of cpu differ from ref (first: `y`)"),
        "{err}"
    );
    // without the rule the same model agrees
    let out = mxc(&["verify", &model]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

/// `verify --bisect` with `rule` on the chain model names exactly its tanh; returns stdout.
fn bisect_finds_the_tanh(rule: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = wrong_setup(dir.path());
    let rules = dir.path().join("rule.rules");
    std::fs::write(&rules, rule).unwrap();
    let tanh = tanh_line(&model);
    let out = mxc(&["verify", &model, "--rules", rules.to_str().unwrap(), "--bisect"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    let found = text
        .lines()
        .find_map(|l| l.strip_prefix("first divergent op: "))
        .unwrap_or_else(|| panic!("{text}"));
    // exactly the tanh's line of the IR text, then its operand's name and type
    let operand = tanh.split(" = mx.tanh ").nth(1).unwrap().split(' ').next().unwrap();
    assert_eq!(
        found,
        format!("{tanh} (operands: {operand}: tensor<2x8xf32>)"),
        "{text}"
    );
    assert!(
        text.contains("  its result: max |diff|") && text.contains("FAIL"),
        "{text}"
    );
    text
}

#[test]
fn bisect_names_the_op_a_wrong_rule_breaks() {
    // tanh and sigmoid cost the same: with every value an output, extraction keeps the tanh,
    // and the walk goes one op at a time
    let text = bisect_finds_the_tanh("rule wrong: (tanh ?x) => (sigmoid ?x)\n");
    assert!(text.contains("walking back one op at a time"), "{text}");
}

#[test]
fn bisect_walks_the_copy_outputting_every_value_when_it_fails() {
    // neg is cheaper than tanh: chosen whatever the outputs, so the copy outputting every value
    // shows the tanh and the three ops after it diverging
    let text = bisect_finds_the_tanh("rule cheap: (tanh ?x) => (neg ?x)\n");
    assert!(
        text.contains("bisect: 4 of 6 imported values diverge when all are outputs"),
        "{text}"
    );
    assert!(!text.contains("one op at a time"), "{text}");
}

#[test]
fn reduce_reports_the_prefix_ending_at_the_broken_op() {
    let dir = tempfile::tempdir().unwrap();
    let (model, rules) = wrong_setup(dir.path());
    let tanh = tanh_line(&model);
    let prefix = dir.path().join("prefix.mlir");
    let out = mxc(&[
        "verify",
        &model,
        "--rules",
        &rules,
        "--reduce",
        "-o",
        prefix.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    let expected = format!("shortest failing prefix: k = 3 of 6 ops (constants not counted), ending at {tanh} (");
    assert!(text.contains(&expected), "expected `{expected}` in:\n{text}");
    // the prefix: the mul, add and tanh, the tanh's result and the add's (used later) as outputs
    let ir = std::fs::read_to_string(&prefix).unwrap();
    let ops: Vec<&str> = crate::common::op_names(&ir);
    assert_eq!(ops, ["mul", "add", "tanh"], "{ir}");
    let ret = ir.lines().find(|l| l.trim_start().starts_with("return ")).unwrap();
    assert_eq!(ret.matches(" = %").count(), 2, "{ir}");
}

#[test]
fn a_bad_model_path_is_a_one_line_error() {
    let out = mxc(&["verify", "/nonexistent/model.onnx"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/model.onnx"), "{err}");
}

#[test]
fn bisect_and_reduce_exclude_each_other() {
    let out = mxc(&["verify", "m.onnx", "--bisect", "--reduce"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot be used with"), "{}", stderr(&out));
}

/// `verify --fp16` and `--bf16` compare the target with ref computing the same precision,
/// within the half-precision tolerances (docs/verify.md): the convnet agrees, a wrong rule still
/// fails, and a tolerance given on the command line replaces the default.
#[test]
fn half_precision_programs_verify_against_ref_in_the_same_precision() {
    let model = crate::common::cache_dir("models/convnet").join("model.onnx");
    let model = model.to_str().unwrap();
    for flag in ["--fp16", "--bf16"] {
        let out = mxc(&["verify", model, flag]);
        assert!(out.status.success(), "{flag}: {}{}", stdout(&out), stderr(&out));
    }
    let dir = tempfile::tempdir().unwrap();
    let (chain, rules) = wrong_setup(dir.path());
    let out = mxc(&["verify", &chain, "--fp16", "--rules", &rules]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let out = mxc(&[
        "verify",
        &chain,
        "--fp16",
        "--rules",
        &rules,
        "--rtol",
        "10",
        "--scale-tol",
        "10",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}
