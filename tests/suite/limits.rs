//! Nesting limits of the two text parsers: rule files and mx text nested far past the limit
//! are refused with one clear error naming the line and column (through the library and
//! through `mxc rules check` / `mxc read --rules`), never a stack overflow.

use crate::common::{mxc, repo, stderr};
use mxc_dialects::text::{parse, MAX_NESTING};
use mxc_dialects::IrError;
use mxc_rewrite::rules::MAX_NESTING as RULES_MAX_NESTING;

const DEEP: usize = 100_000;

/// `open` repeated `n` times, `middle`, then `close` repeated `n` times.
fn nest(open: &str, middle: &str, close: &str, n: usize) -> String {
    format!("{}{middle}{}", open.repeat(n), close.repeat(n))
}

/// Rule files nested `DEEP` levels in each way the grammar allows, with the line and column
/// where the level past the limit starts.
fn deep_rule_files() -> Vec<(&'static str, String, usize, usize)> {
    let head = "rule deep: (neg ?x) => ?x if ";
    let cond = head.len() + 1;
    let past = RULES_MAX_NESTING;
    vec![
        (
            "parentheses",
            format!("{head}{}", nest("(", "true", ")", DEEP)),
            1,
            cond + past,
        ),
        ("negations", format!("{head}{}true", "!".repeat(DEEP)), 1, cond + past),
        (
            "calls",
            format!("{head}{} == 1", nest("flip(", "1", ")", DEEP)),
            1,
            cond + 5 * past,
        ),
        (
            "patterns",
            format!("# a deep one\nrule deep: {} => ?x\n", nest("(neg ", "?x", ")", DEEP)),
            2,
            12 + 5 * past,
        ),
        (
            "chains",
            format!("{head}{}", vec!["true"; DEEP].join("\n&& ")),
            past + 2,
            1,
        ),
    ]
}

fn assert_refused(what: &str, out: &std::process::Output, file: &std::path::Path, line: usize, column: usize) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert!(!err.contains("overflow") && !err.contains("panicked"), "{what}: {err}");
    let want = format!(
        "{}: nesting deeper than {RULES_MAX_NESTING} at line {line}, column {column}",
        file.display()
    );
    assert!(err.contains(&want), "{what}: `{want}` missing from: {err}");
}

#[test]
fn deep_rule_files_are_refused_by_rules_check() {
    let dir = tempfile::tempdir().unwrap();
    for (what, text, line, column) in deep_rule_files() {
        let file = dir.path().join(format!("{what}.rules"));
        std::fs::write(&file, text).unwrap();
        let out = mxc(&["rules", "check", file.to_str().unwrap()]);
        assert_refused(what, &out, &file, line, column);
    }
}

#[test]
fn deep_rule_files_are_refused_by_read_with_rules() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx");
    for (what, text, line, column) in deep_rule_files() {
        let file = dir.path().join(format!("{what}.rules"));
        std::fs::write(&file, text).unwrap();
        let out = mxc(&[
            "read",
            model.to_str().unwrap(),
            "--target",
            "cpu",
            "--rules",
            file.to_str().unwrap(),
        ]);
        assert_refused(what, &out, &file, line, column);
    }
}

/// mx text whose graphs nest `levels` deep: each graph's one op is an `mx.fused` whose body
/// is the next graph, each graph starting a line (graph `k`, from 1, on line `2k - 1`).
fn nested_graphs(levels: usize) -> String {
    let open = "graph \"g\" (%arg0: tensor<2xf32> \"a\") {\n%0 = mx.fused %arg0 : tensor<2xf32>\n";
    let inner = "graph \"g\" (%arg0: tensor<2xf32> \"a\") {\n%0 = mx.neg %arg0 : tensor<2xf32>\nreturn \"y\" = %0\n}";
    let close = "\nreturn \"y\" = %0\n}";
    format!("{}{inner}{}\n", open.repeat(levels - 1), close.repeat(levels - 1))
}

#[test]
fn mx_text_nested_past_the_limit_is_refused() {
    let err = parse(&nested_graphs(DEEP)).expect_err("refused");
    assert!(
        matches!(err, IrError::TooDeep { line, column: 1, limit: MAX_NESTING } if line == 2 * MAX_NESTING + 1),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "nesting deeper than {MAX_NESTING} at line {}, column 1",
            2 * MAX_NESTING + 1
        )
    );
    let err = parse(&nested_graphs(MAX_NESTING + 1)).expect_err("refused");
    assert!(matches!(err, IrError::TooDeep { .. }), "{err}");
}

#[test]
fn mx_text_nested_at_the_limit_is_only_refused_by_the_verifier_on_a_small_stack() {
    // one level of bodies is a valid graph
    let g = parse(&nested_graphs(2)).expect("a fused op parses");
    assert!(g.ops[0].body.is_some());
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(|| {
            let err = parse(&nested_graphs(MAX_NESTING)).expect_err("bodies do not nest");
            assert!(!matches!(err, IrError::TooDeep { .. }), "{err}");
            assert!(err.to_string().contains("cannot be fused"), "{err}");
        })
        .unwrap()
        .join()
        .expect("parses on a small stack");
}

#[test]
fn other_brackets_in_mx_text_do_not_nest() {
    let head = "graph \"g\" (%arg0: tensor<2xf32> \"a\") {\n%0 = mx.transpose %arg0 {perm = ";
    for (what, text) in [
        ("lists", format!("{head}{}", nest("[", "0", "]", DEEP))),
        ("dictionaries", format!("{head}{}", nest("{", "", "}", DEEP))),
        ("parentheses", nest("graph \"g\" (", "", ")", DEEP)),
        ("types", format!("{head}{}", nest("tensor<", "f32", ">", DEEP))),
    ] {
        let err = parse(&text).expect_err(what);
        assert!(matches!(err, IrError::Parse { .. }), "{what}: {err}");
    }
}
