//! `mxc rules check`: a deliberately unsound rule file is caught with a counterexample, the
//! example user rule and the built-in rule files pass (and most of their rules really fire on
//! the generated instances), and a rule file with a mistake is an error with file:line:column.

use crate::common::{mxc, repo, stderr};
use std::process::Output;

fn check(files: &[&str]) -> Output {
    let mut args = vec!["rules", "check"];
    args.extend(files);
    mxc(&args)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn path(rel: &str) -> String {
    repo().join(rel).display().to_string()
}

/// The report line of rule `name`.
fn line_of<'a>(report: &'a str, name: &str) -> &'a str {
    let prefix = format!("  {name} (line ");
    report
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for `{name}` in:\n{report}"))
}

#[test]
fn the_unsound_example_is_caught_with_a_counterexample() {
    let out = check(&[&path("examples/rules/unsound.rules")]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    assert!(line_of(&report, "relu-is-abs").ends_with("UNSOUND"), "{report}");
    for part in [
        "counterexample: ?x: tensor<",
        "mx.relu",
        "mx.abs",
        "input ?x = ",
        "left side gives ",
        "rewritten gives ",
        "(left) and ",
    ] {
        assert!(report.contains(part), "`{part}` missing from:\n{report}");
    }
    assert!(
        stderr(&out).contains("1 of the rules checked is unsound"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stdout(&check(&[&path("examples/rules/unsound.rules")])),
        report,
        "the report is not deterministic"
    );
}

#[test]
fn wrong_constants_dropped_transposes_and_missed_cases_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong.rules");
    std::fs::write(
        &file,
        "rule add-one: (add ?x ?c) => ?x if splat(?c, 1) && type(?x) == type(root)\n\
         rule drop-transpose: (relu (transpose ?x perm=?p)) => (relu ?x)\n\
         rule slice-noop: (slice ?x starts=?s ends=?e steps=?t) => ?x if shape(?x) == shape(root)\n\
         rule neg-neg: (neg (neg ?x)) => ?x\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    for unsound in ["add-one", "drop-transpose", "slice-noop"] {
        assert!(line_of(&report, unsound).ends_with("UNSOUND"), "{report}");
    }
    assert!(line_of(&report, "neg-neg").contains(": ok ("), "{report}");
    assert!(report.contains("4 rules: 1 ok, 0 never fired, 3 unsound"), "{report}");
}

#[test]
fn the_example_user_rule_passes() {
    let out = check(&[&path("examples/rules/pool-before-relu.rules")]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    assert!(line_of(&report, "pool-before-relu").contains(": ok ("), "{report}");
}

#[test]
fn the_builtin_rules_pass_and_most_of_them_fire() {
    let files: Vec<String> = std::fs::read_dir(repo().join("rewrite/rules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rules"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(files.iter().any(|f| f.ends_with("algebra.rules")));
    let out = check(&files.iter().map(String::as_str).collect::<Vec<_>>());
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    let rules: Vec<&str> = report.lines().filter(|l| l.contains(" (line ")).collect();
    let fired = rules.iter().filter(|l| l.contains(": ok (")).count();
    assert!(
        fired * 4 >= rules.len() * 3,
        "only {fired} of {} rules fired on the generated instances:\n{report}",
        rules.len()
    );
}

#[test]
fn every_fusion_rule_fires_and_a_gelu_of_the_other_form_is_caught() {
    let out = check(&[&path("rewrite/rules/fusion.rules")]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    for rule in [
        "layer-norm",
        "gelu",
        "gelu-half-first",
        "gelu-tanh",
        "gelu-tanh-onnx",
        "gelu-tanh-dynamo",
        "gelu-tanh-gpt2",
        "softmax",
    ] {
        assert!(line_of(&report, rule).contains(": ok ("), "{report}");
    }
    assert!(report.contains("8 rules: 8 ok, 0 never fired, 0 unsound"), "{report}");

    // the tanh chain taken for the exact (erf) gelu
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong-gelu.rules");
    std::fs::write(
        &file,
        "rule tanh-as-erf:\n\
         (mul ?half (mul ?x (add ?one (tanh (mul ?k (add ?x (mul ?c (mul ?x (mul ?x ?x)))))))))\n\
         => (gelu ?x approximate=\"none\")\n\
         if dtype(?x) == f32 && splat(?k, 0.7978845834732056) && splat(?c, 0.044714998453855515)\n\
         && splat(?one, 1) && splat(?half, 0.5) && type(?x) == type(root)\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    assert!(line_of(&report, "tanh-as-erf").ends_with("UNSOUND"), "{report}");
}

#[test]
fn a_rule_file_with_a_mistake_is_an_error_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.rules");
    std::fs::write(
        &file,
        "rule ok: (neg (neg ?x)) => ?x\nrule bad: (relu ?x) => (abs ?y)\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}:2:29: variable `?y` is not bound", file.display())),
        "{err}"
    );
    assert!(stdout(&out).is_empty(), "no rule is checked before every file loads");
}

#[test]
fn every_layout_rule_fires_and_weights_in_the_wrong_layout_are_caught() {
    let out = check(&[&path("rewrite/rules/layout.rules")]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    assert!(report.contains("46 rules: 46 ok, 0 never fired, 0 unsound"), "{report}");

    // the kernel's rows and columns swapped: [M, kw, kh, C] where conv_nhwc wants [M, kh, kw, C]
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong-layout.rules");
    std::fs::write(
        &file,
        "rule conv-nhwc-swapped:\n\
         (conv ?x ?w dilations=?d group=?g pads=?p strides=?s)\n\
         => (transpose (conv_nhwc (transpose ?x perm=[0, 2, 3, 1]) (transpose ?w perm=[0, 3, 2, 1])\n\
         dilations=?d group=?g pads=?p strides=?s) perm=[0, 3, 1, 2])\n\
         if rank(?x) == 4\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    assert!(line_of(&report, "conv-nhwc-swapped").ends_with("UNSOUND"), "{report}");
}

#[test]
fn every_packing_rule_fires_and_weights_packed_untransposed_are_caught() {
    let out = check(&[&path("rewrite/rules/packing.rules")]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    assert!(report.contains("7 rules: 7 ok, 0 never fired, 0 unsound"), "{report}");

    // a Linear layer's weights [N, K] packed as if they were [K, N]: only square weights pass
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong-packing.rules");
    std::fs::write(
        &file,
        "rule gemm-packed-untransposed:\n\
         (gemm ?a ?b alpha=1.0 beta=?beta trans_a=0 trans_b=1)\n\
         => (matmul_packed ?a (pack ?b panel=16) n=dim(?b, 0))\n\
         if const(?b) && dtype(?b) == f32 && dim(?b, 0) == dim(?b, 1)\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    assert!(
        line_of(&report, "gemm-packed-untransposed").ends_with("UNSOUND"),
        "{report}"
    );
}

#[test]
fn every_integer_rule_fires_and_a_forgotten_zero_point_is_caught() {
    let out = check(&[&path("rewrite/rules/integer.rules")]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    assert!(report.contains("16 rules: 16 ok, 0 never fired, 0 unsound"), "{report}");

    // the integer product of the raw integers, the activations' zero point left out: only a
    // zero point of 0 passes
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong-integer.rules");
    std::fs::write(
        &file,
        "rule matmul-without-zero-point:\n\
         (matmul (dequantize_linear ?a ?sa ?za) (dequantize_linear ?b ?sb ?zb))\n\
         => (mul (cast (matmul (cast ?a to=i32) (sub (cast ?b to=i32) (cast ?zb to=i32))) to=f32) (mul ?sa ?sb))\n\
         if bits(dtype(?a)) == 8 && dtype(?sa) == f32 && dtype(?sb) == f32 && numel(?sa) == 1 && numel(?za) == 1\n\
            && rank(?a) >= 2 && rank(?b) == 2 && (numel(?sb) == 1 || dim(?sb, last_axis(?sb)) == numel(?sb))\n\
            && (numel(?zb) == 1 || dim(?zb, last_axis(?zb)) == numel(?zb))\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    assert!(
        line_of(&report, "matmul-without-zero-point").ends_with("UNSOUND"),
        "{report}"
    );

    // requantisation's scales divided at compile time without asking that the quotients be
    // finite: a scale of 0 turns the quotient's infinities into NaN
    let file = dir.path().join("unguarded-requantise.rules");
    std::fs::write(
        &file,
        "rule requantise-unguarded:\n\
         (round (div (add (mul ?x ?s) ?b) ?y)) => (round (add (mul ?x (div ?s ?y)) (div ?b ?y)))\n\
         if dtype(?x) == f32 && const(?s) && const(?b) && const(?y) && numel(?y) == 1\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    assert!(
        line_of(&report, "requantise-unguarded").ends_with("UNSOUND"),
        "{report}"
    );
}

#[test]
fn every_attention_rule_fires_and_a_wrong_scale_or_a_dropped_mask_is_caught() {
    let out = check(&[&path("rewrite/rules/attention.rules")]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    assert!(report.contains("12 rules: 12 ok, 0 never fired, 0 unsound"), "{report}");

    // the divisor of the scores taken as a factor, and the mask left out: both change the
    // numbers
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong-attention.rules");
    std::fs::write(
        &file,
        "rule divisor-as-factor:\n\
         (matmul (softmax (div (matmul ?q ?kt) ?c) axis=3) ?v)\n\
         => (attention ?q (transpose ?kt perm=[0, 1, 3, 2]) ?v layout=\"bhsd\" scale=value(?c) zero_nan_rows=0)\n\
         if dtype(?q) == f32 && const(?c) && numel(?c) == 1\n\
         rule mask-dropped:\n\
         (matmul (softmax (add (matmul ?q ?kt) ?mask) axis=3) ?v)\n\
         => (attention ?q (transpose ?kt perm=[0, 1, 3, 2]) ?v layout=\"bhsd\" scale=1.0 zero_nan_rows=0)\n\
         if dtype(?q) == f32\n",
    )
    .unwrap();
    let out = check(&[file.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}{}", stderr(&out));
    for rule in ["divisor-as-factor", "mask-dropped"] {
        assert!(line_of(&report, rule).ends_with("UNSOUND"), "{report}");
    }
}
