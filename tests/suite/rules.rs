//! Rules as data through the command line: a user rule file from `examples/` changes the
//! program the cpu target compiles without changing its outputs, a rule file with a mistake
//! is refused with its file, line and column, and the ref target refuses user rules.

use crate::common::{mxc, op_names, read_for_target, repo, stderr};

fn read_cpu(extra: &[&str]) -> String {
    let model = repo().join("examples/tiny_cnn.onnx");
    read_for_target(model.to_str().unwrap(), "cpu", extra)
}

#[test]
fn user_rule_file_changes_the_compiled_program() {
    let rules = repo().join("examples/rules/pool-before-relu.rules");
    let plain = read_cpu(&[]);
    let rewritten = read_cpu(&["--rules", rules.to_str().unwrap()]);
    // channels last: a transpose in, the global pool a mean over H and W, a transpose out
    let ops = |pool_then_relu: [&'static str; 2]| {
        [
            &["transpose", "conv_nhwc_packed"][..],
            &pool_then_relu,
            &["reduce_mean", "transpose", "reshape", "gemm"],
        ]
        .concat()
    };
    assert_eq!(op_names(&plain), ops(["relu", "max_pool_nhwc"]));
    assert_eq!(op_names(&rewritten), ops(["max_pool_nhwc", "relu"]));

    let model = repo().join("examples/tiny_cnn.onnx");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", model.to_str().unwrap()];
        args.extend(extra);
        let out = mxc(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run(&["--rules", rules.to_str().unwrap()]),
        run(&[]),
        "the rule changed the outputs"
    );
}

#[test]
fn rule_file_mistakes_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.rules");
    std::fs::write(
        &file,
        "rule ok: (neg (neg ?x)) => ?x\nrule bad: (frobnicate ?x) => ?x\n",
    )
    .unwrap();
    let model = repo().join("examples/tiny_cnn.onnx");
    let out = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "-o",
        dir.path().join("m.mxr").to_str().unwrap(),
        "--rules",
        file.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "a bad rule file was accepted");
    assert!(err.contains("mine.rules:2:12") && err.contains("frobnicate"), "{err}");
    assert!(
        !dir.path().join("m.mxr").exists(),
        "a failed compile left a file behind"
    );
    let out = mxc(&[
        "run",
        model.to_str().unwrap(),
        "--target",
        "ref",
        "--rules",
        file.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
}
