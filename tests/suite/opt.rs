//! `mxc opt`: a textual mx program is rewritten exactly as `mxc read --target` rewrites the
//! model it came from, user rules included; a file that is missing, does not parse or does not
//! type-check is a one-line error naming the file (and the line), exit status 1, no panic.

use crate::common::{mxc, read_for_target, repo, stderr};
use std::path::Path;

/// `mxc opt FILE` with `extra` arguments, which must succeed: what it printed.
fn opt(file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["opt", file.to_str().unwrap()];
    args.extend(extra);
    let out = mxc(&args);
    assert!(out.status.success(), "mxc {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The error of `mxc opt FILE`, which must fail with exit status 1 and one line on stderr.
fn opt_error(file: &Path) -> String {
    let out = mxc(&["opt", file.to_str().unwrap(), "--target", "cpu"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty() && err.lines().count() == 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn opt_rewrites_text_as_read_rewrites_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx");
    let model = model.to_str().unwrap();
    let imported = mxc(&["read", model]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let file = dir.path().join("tiny_cnn.mx");
    std::fs::write(&file, &imported.stdout).unwrap();

    let rules = repo().join("examples/rules/pool-before-relu.rules");
    let rules = ["--rules", rules.to_str().unwrap()];
    for extra in [&[][..], &["--no-fusion"], &["-O1"], &rules] {
        let mut args = vec!["--target", "cpu"];
        args.extend(extra);
        assert_eq!(
            opt(&file, &args),
            read_for_target(model, "cpu", extra),
            "mxc opt {extra:?}"
        );
    }
    assert_eq!(opt(&file, &["--target", "ref"]).as_bytes(), imported.stdout);
    assert!(opt(&file, &["--format", "dot"]).starts_with("digraph"));
}

#[test]
fn opt_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        file
    };
    let unknown_op = write(
        "unknown.mx",
        "graph \"g\" (%arg0: tensor<2xf32> \"x\") {\n  %0 = mx.relu %arg0 : tensor<2xf32>\n  %1 = mx.frobnicate %0 : tensor<2xf32>\n  return \"y\" = %1\n}\n",
    );
    let err = opt_error(&unknown_op);
    assert!(err.contains("unknown.mx:3:8: unknown op `mx.frobnicate`"), "{err}");

    let wrong_type = write(
        "wrong_type.mx",
        "graph \"g\" (%arg0: tensor<2xf32> \"x\") {\n  %0 = mx.relu %arg0 : tensor<2xf32>\n  %1 = mx.neg %0 : tensor<3xf32>\n  return \"y\" = %1\n}\n",
    );
    let err = opt_error(&wrong_type);
    assert!(
        err.contains("wrong_type.mx:3:3: mx.neg: result types (tensor<3xf32>) differ"),
        "{err}"
    );

    let missing = dir.path().join("missing.mx");
    let err = opt_error(&missing);
    assert!(err.contains("missing.mx") && err.contains("No such file"), "{err}");
}
