//! The built-in `fusion` rules and the rule-language pieces they need: `(result N (op ...))` on
//! the right side, `value(?c)`, `last_axis(?x)` and `single(?a)`, and string attributes
//! (`gelu`'s `approximate`).

use super::harness::{expr, input, simplify, splat, Leaf};
use crate::rules::{builtin_rules, parse_rules, RuleError};
use mxc_dialects::DType::{F32, I64};

/// The layer normalisation exporters write out, reducing over `axes`.
fn decomposed(axes: &str) -> String {
    let mean = format!("(reduce_mean ?x axes={axes} keepdims=1)");
    let var = format!("(reduce_mean (pow (sub ?x {mean}) ?two) axes={axes} keepdims=1)");
    format!("(add (mul (div (sub ?x {mean}) (sqrt (add {var} ?eps))) ?scale) ?bias)")
}

/// The leaves of a chain over `x` of `shape`, `eps` a constant of `eps_shape`.
fn leaves(shape: &[usize], two: f64, eps_shape: &[usize], scale: &[usize]) -> Vec<(&'static str, Leaf)> {
    vec![
        ("x", input(F32, shape)),
        ("two", splat(F32, &[], two)),
        ("eps", splat(F32, eps_shape, 0.0625)),
        ("scale", input(F32, scale)),
        ("bias", input(F32, scale)),
    ]
}

fn fuse(start: &str, leaves: &[(&str, Leaf)]) -> String {
    let rules = builtin_rules("fusion").unwrap().unwrap_or_else(|e| panic!("{e}"));
    simplify(&rules, start, leaves).to_string()
}

#[test]
fn layer_norm_written_out_over_the_last_axis_is_one_op() {
    let leaves = leaves(&[2, 3, 8], 2.0, &[], &[8]);
    let want = "(result 0 (layer_norm ?x ?scale ?bias axis=2 epsilon=0.0625))";
    assert_eq!(fuse(&decomposed("[2]"), &leaves), expr(want, &leaves).to_string());
    // a one-element eps of rank 1, and a scale that is one number
    let leaves = self::leaves(&[4, 8], 2.0, &[1], &[1]);
    let want = "(result 0 (layer_norm ?x ?scale ?bias axis=1 epsilon=0.0625))";
    assert_eq!(fuse(&decomposed("[1]"), &leaves), expr(want, &leaves).to_string());
}

#[test]
fn other_chains_stay_as_they_are() {
    let unchanged = |axes: &str, leaves: &[(&str, Leaf)]| {
        let start = decomposed(axes);
        assert_eq!(fuse(&start, leaves), expr(&start, leaves).to_string(), "{axes}");
    };
    // not the last axis
    unchanged("[1]", &leaves(&[2, 3, 8], 2.0, &[], &[8]));
    // several axes
    unchanged("[1, 2]", &leaves(&[2, 3, 8], 2.0, &[], &[8]));
    // a cube, not a square
    unchanged("[2]", &leaves(&[2, 3, 8], 3.0, &[], &[8]));
    // eps of several elements (per row)
    unchanged("[1]", &leaves(&[4, 8], 2.0, &[4, 1], &[8]));
    // scale and bias per row and column: layer_norm's are per column
    unchanged("[1]", &leaves(&[4, 8], 2.0, &[], &[4, 8]));
    // a scale along another axis (it broadcasts in the chain, not in layer_norm)
    unchanged("[2]", &leaves(&[2, 8, 8], 2.0, &[], &[8, 1]));
}

#[test]
fn integer_chains_stay_as_they_are() {
    let leaves = [
        ("x", input(I64, &[4, 8])),
        ("two", splat(I64, &[], 2.0)),
        ("eps", splat(I64, &[], 1.0)),
        ("scale", input(I64, &[8])),
        ("bias", input(I64, &[8])),
    ];
    let start = decomposed("[1]");
    assert_eq!(fuse(&start, &leaves), expr(&start, &leaves).to_string());
}

/// Asserts that `text` fails at `line`:`column` with a message containing `needle`.
fn fails(text: &str, line: usize, column: usize, needle: &str) {
    match parse_rules(text, "bad.rules") {
        Err(RuleError::Invalid {
            line: l,
            column: c,
            message,
            ..
        }) => {
            assert!(message.contains(needle), "{message:?} should mention {needle:?}");
            assert_eq!((l, c), (line, column), "{message}");
        }
        other => panic!("{text:?}: expected an error at {line}:{column}, got {other:?}"),
    }
}

#[test]
fn results_of_multi_result_ops() {
    let ok = "rule a: (neg ?x) => (result 1 (layer_norm ?x ?x axis=0 epsilon=1e-5))";
    assert!(parse_rules(ok, "ok.rules").is_ok());
    fails(
        "rule a: (neg ?x) => (layer_norm ?x ?x axis=0 epsilon=1e-5)",
        1,
        22,
        "write the one meant as `(result N (layer_norm ...))`",
    );
    fails(
        "rule a: (neg ?x) => (result 3 (layer_norm ?x ?x axis=0 epsilon=1e-5))",
        1,
        22,
        "there is no result 3",
    );
    fails(
        "rule a: (neg ?x) => (result 0 (neg ?x))",
        1,
        22,
        "`neg` gives 1 result, there is no result 0",
    );
    fails("rule a: (neg ?x) => (result 0 ?x)", 1, 31, "takes an op pattern");
    fails("rule a: (neg ?x) => (result ?x)", 1, 29, "expected a result number");
    fails("rule a: (neg ?x) => (result -1 (neg ?x))", 1, 29, "0 or more");
    fails(
        "rule a: (neg (result 0 (layer_norm ?x ?x))) => ?x",
        1,
        15,
        "only be written on the right side",
    );
    // result 1 (the mean) is f32 whatever x is
    fails(
        "rule a: (neg ?x) => (result 1 (layer_norm ?x ?x axis=0 epsilon=1e-5)) if dtype(?x) == f64",
        1,
        22,
        "the left side gives f64 elements, the right side f32",
    );
}

#[test]
fn value_and_last_axis_are_functions() {
    fails(
        "rule a: (add ?x ?c) => ?x if value(?c) == 1 && last_axis(?x) == [1]",
        1,
        62,
        "cannot compare",
    );
    fails("rule a: (add ?x ?c) => ?x if value(1) == 1", 1, 36, "expected a tensor");
}

#[test]
fn value_is_the_one_element_of_a_constant() {
    // x + c => x when c holds one number that is 0: `value` is unknown for bigger constants
    let rules = parse_rules("rule a: (add ?x ?c) => ?x if value(?c) == 0", "t.rules").unwrap();
    let run = |c: Leaf| {
        let leaves = [("x", input(F32, &[4])), ("c", c)];
        simplify(&rules, "(add ?x ?c)", &leaves).to_string()
    };
    let x = || expr("?x", &[("x", input(F32, &[4]))]).to_string();
    assert_eq!(run(splat(F32, &[], 0.0)), x());
    assert_eq!(run(splat(F32, &[1], 0.0)), x());
    assert_ne!(run(splat(F32, &[4], 0.0)), x());
    assert_ne!(run(splat(F32, &[], 1.0)), x());
}

#[test]
fn strings_are_attribute_values() {
    // a literal on the left matches that value only; on the right it sets the attribute (a
    // made-up rule, for the mechanics)
    let rules = parse_rules(
        r#"rule a: (gelu (neg (neg ?x)) approximate="tanh") => (gelu ?x approximate="none")"#,
        "t.rules",
    )
    .unwrap();
    let leaves = [("x", input(F32, &[4]))];
    let start = |a: &str| format!(r#"(gelu (neg (neg ?x)) approximate="{a}")"#);
    assert_eq!(
        simplify(&rules, &start("tanh"), &leaves).to_string(),
        expr(r#"(gelu ?x approximate="none")"#, &leaves).to_string()
    );
    assert_eq!(
        simplify(&rules, &start("none"), &leaves).to_string(),
        expr(&start("none"), &leaves).to_string()
    );
    // a variable binds it and conditions compare it
    let same = r#"rule a: (neg (gelu ?x approximate=?p)) => (gelu (neg ?x) approximate=?p) if ?p == "tanh""#;
    assert!(parse_rules(same, "ok.rules").is_ok());
    fails(
        "rule a: (gelu ?x approximate=1) => ?x",
        1,
        30,
        "attribute `approximate` must be a string",
    );
    fails(
        "rule a: (transpose ?x perm=\"none\") => ?x",
        1,
        28,
        "attribute `perm` must be a list of integers",
    );
    fails(
        "rule a: (neg ?x) => (gelu ?x approximate=\"tanh)",
        1,
        42,
        "a string must end with `\"` on the same line",
    );
    fails(
        r#"rule a: (gelu ?x approximate=?p) => ?x if ?p < "tanh""#,
        1,
        43,
        "expected a number, this is a string",
    );
}

#[test]
fn single_is_the_one_axis_of_a_list() {
    let rules = parse_rules(
        "rule a: (reduce_max ?x axes=?a keepdims=1) => (softmax ?x axis=single(?a))",
        "t.rules",
    )
    .unwrap();
    let leaves = [("x", input(F32, &[2, 1, 4]))];
    // (a made-up rule, for the mechanics: the types agree when the reduced axis has extent 1)
    let start = |axes: &str| format!("(reduce_max ?x axes={axes} keepdims=1)");
    assert_eq!(
        simplify(&rules, &start("[1]"), &leaves).to_string(),
        expr("(softmax ?x axis=1)", &leaves).to_string()
    );
    // two axes: `single` is unknown and the rule does not fire
    let two = start("[0, 1]");
    let leaves = [("x", input(F32, &[1, 1, 4]))];
    assert_eq!(
        simplify(&rules, &two, &leaves).to_string(),
        expr(&two, &leaves).to_string()
    );
}
