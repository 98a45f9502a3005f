//! `--fp16`, `--fp16-ops` and `--bf16` on the command line (docs/quantisation.md), on the
//! generated convnet and its test data set's input: a program compiled in f16 gives outputs
//! close to but not equal to f32's and its file says so (`mxc params`), MIGraphX's op names
//! are taken and unknown ones refused by name, `--fp16` and `--bf16` together are refused,
//! and `ref` and `cpu` compute the same bf16 program.

use crate::common::{convnet_case, mxc, not_close, run_case, run_file, stderr};
use std::path::Path;

/// `mxc compile MODEL -o OUT` with `flags`, which must succeed.
fn compile(model: &Path, out: &Path, flags: &[&str]) {
    let mut args = vec!["compile", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(flags);
    let result = mxc(&args);
    assert!(result.status.success(), "mxc {args:?}: {}", stderr(&result));
}

/// `mxc params FILE`'s output.
fn params(file: &Path) -> String {
    let out = mxc(&["params", file.to_str().unwrap()]);
    assert!(out.status.success(), "mxc params: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn fp16_is_close_to_f32_but_not_equal_and_its_file_says_so() {
    let (model, set) = convnet_case();
    let dir = tempfile::tempdir().unwrap();
    let (plain, half) = (dir.path().join("plain.mxr"), dir.path().join("f.mxr"));
    compile(&model, &plain, &[]);
    compile(&model, &half, &["--fp16"]);
    let run = |file: &Path, out: &str| {
        let mut outputs = run_file(&model, file, &set, "cpu", &[], &dir.path().join(out)).unwrap();
        assert_eq!(outputs.len(), 1);
        outputs.remove(0)
    };
    let (f32_out, f16_out) = (run(&plain, "plain"), run(&half, "half"));
    assert_eq!(f16_out.ty, f32_out.ty, "the outputs keep their type");
    assert_eq!(not_close(&f16_out, &f32_out, 0.02), None);
    assert_ne!(f16_out, f32_out, "f16 rounds the ops' results");
    assert!(
        params(&half).contains("precision: fp16 (docs/quantisation.md)"),
        "{}",
        params(&half)
    );
    assert!(!params(&plain).contains("precision:"), "{}", params(&plain));
}

#[test]
fn fp16_ops_takes_migraphx_names_and_refuses_unknown_ones() {
    let (model, _) = convnet_case();
    let dir = tempfile::tempdir().unwrap();
    let convs = dir.path().join("convs.mxr");
    compile(&model, &convs, &["--fp16-ops", "convolution"]);
    let shown = params(&convs);
    assert!(shown.contains("precision: fp16 (conv, conv_transpose)"), "{shown}");
    let gem = dir.path().join("gem.mxr");
    let out = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "--fp16-ops",
        "gem",
        "-o",
        gem.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--fp16-ops: no op is named `gem`"),
        "{}",
        stderr(&out)
    );
}

/// `mxc explain --fp16-ops` names the precision in its first line, and shows the named ops
/// computing in f16 (a product or convolution in f32 between casts, as `precision.rules` has it).
#[test]
fn explain_says_which_precision_it_explains() {
    let (model, _) = convnet_case();
    let out = mxc(&["explain", model.to_str().unwrap(), "--fp16-ops", "convolution"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap_or_default();
    assert!(first.ends_with("for cpu, in fp16 (conv, conv_transpose)"), "{first}");
    assert!(text.contains("conv-half-in-f32"), "{text}");
}

#[test]
fn read_shows_the_program_in_the_precision_asked_for() {
    // `mxc read` (imported, or as the cpu target rewrites it) takes the precision flags as
    // compile does: the convolutions in f16, not the f32 program with the flag ignored
    let (model, _) = convnet_case();
    let model = model.to_str().unwrap();
    for target in [&[][..], &["--target", "cpu"][..]] {
        let read = |extra: &[&str]| {
            let out = mxc(&[&["read", model][..], target, extra].concat());
            assert!(out.status.success(), "{}", stderr(&out));
            String::from_utf8(out.stdout).unwrap()
        };
        assert!(!read(&[]).contains("xf16>"), "{target:?}");
        let half = read(&["--fp16"]);
        assert!(half.contains("xf16>"), "{target:?}: {half}");
    }
}

#[test]
fn fp16_and_bf16_together_are_refused() {
    let (model, _) = convnet_case();
    let both = tempfile::tempdir().unwrap().path().join("both.mxr");
    let out = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "--fp16",
        "--bf16",
        "-o",
        both.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(
        stderr(&out).contains("'--fp16' cannot be used with '--bf16'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bf16_on_ref_and_cpu_agree() {
    let (model, set) = convnet_case();
    let dir = tempfile::tempdir().unwrap();
    let run = |target: &str| {
        let out_dir = dir.path().join(target);
        let mut outputs = run_case(&model, &set, target, &["--bf16"], &out_dir).unwrap();
        outputs.remove(0)
    };
    let (reference, cpu) = (run("ref"), run("cpu"));
    assert_eq!(not_close(&cpu, &reference, 1e-2), None);
}
