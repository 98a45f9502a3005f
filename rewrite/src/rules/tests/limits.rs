//! Nesting limits: text nested past `MAX_NESTING` in any of the ways the grammar allows is a
//! `TooDeep` error naming the line and column, never a stack overflow; text nested exactly at
//! the limit parses, checks, compiles and rewrites on a small stack.

use super::harness::{check_rewrite, input, splat};
use crate::rules::{load_rules, parse_rules, RuleError, MAX_NESTING};
use mxc_dialects::DType::F32;

/// The stack the at-limit tests run on: half a test thread's default 2 MiB (an optimised
/// build needs between 256 and 512 KiB), where text nested a few thousand levels deep would
/// overflow.
const SMALL_STACK: usize = 1024 * 1024;

/// Runs `f` on a thread with a `SMALL_STACK`; a panic (a failed assertion) fails the test.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawns a thread")
        .join()
        .expect("the check passes on a small stack");
}

/// Asserts that `text` is refused as nested too deep at `line`:`column`.
fn too_deep(text: &str, line: usize, column: usize) {
    match parse_rules(text, "deep.rules") {
        Err(e @ RuleError::TooDeep { .. }) => {
            assert_eq!(
                e.to_string(),
                format!("deep.rules: nesting deeper than {MAX_NESTING} at line {line}, column {column}")
            );
        }
        Err(other) => panic!("expected nesting deeper than the limit, got: {other}"),
        Ok(_) => panic!("text nested past the limit was accepted"),
    }
}

/// `open` repeated `n` times, `middle`, then `close` repeated `n` times.
fn nest(open: &str, middle: &str, close: &str, n: usize) -> String {
    format!("{}{middle}{}", open.repeat(n), close.repeat(n))
}

const HEAD: &str = "rule deep: (neg ?x) => ?x if ";

/// The column just past `HEAD` (where a condition starts).
fn cond_col() -> usize {
    HEAD.len() + 1
}

#[test]
fn a_hundred_thousand_levels_of_each_kind_are_refused() {
    let n = 100_000;
    let past = MAX_NESTING; // the levels before the one refused
    too_deep(&format!("{HEAD}{}", nest("(", "true", ")", n)), 1, cond_col() + past);
    too_deep(&format!("{HEAD}{}true", "!".repeat(n)), 1, cond_col() + past);
    // the refused call is named where it starts: 5 characters per `flip(`
    too_deep(
        &format!("{HEAD}{} == 1", nest("flip(", "1", ")", n)),
        1,
        cond_col() + 5 * past,
    );
    let pattern = nest("(neg ", "?x", ")", n);
    too_deep(&format!("rule deep: {pattern} => ?x"), 1, 12 + 5 * past);
    too_deep(&format!("rule deep: (neg ?x) => {pattern}"), 1, 24 + 5 * past);
    // a long chain nests one level per operator (`true && ` is 8 characters; the refused
    // operator follows `past + 1` operands)
    let chain = vec!["true"; n].join(" && ");
    too_deep(&format!("{HEAD}{chain}"), 1, cond_col() + 8 * (past + 1) - 3);
    let chain = vec!["true"; n].join("\n|| ");
    too_deep(&format!("{HEAD}{chain}"), past + 2, 1);
    // a computed constant on the right side nests through its call
    let constant = format!("scalar({}, dtype(?x))", nest("ratio(", "1.0", ", 2.0)", n));
    too_deep(
        &format!("rule deep: (neg ?x) => (add ?x {constant})"),
        1,
        39 + 6 * (past - 2),
    );
}

#[test]
fn the_position_is_on_the_line_where_the_limit_is_passed() {
    let text = format!("{HEAD}\n{}", nest("(\n", "true", ")", 100_000));
    too_deep(&text, 2 + MAX_NESTING, 1);
}

#[test]
fn a_deep_file_is_refused_through_load_rules() {
    let dir = std::env::temp_dir().join(format!("mxc-rules-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("deep.rules");
    std::fs::write(&path, format!("{HEAD}{}", "!".repeat(100_000))).unwrap();
    let err = load_rules(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: nesting deeper than {MAX_NESTING} at line 1, column {}",
            path.display(),
            cond_col() + MAX_NESTING
        )
    );
    assert!(matches!(err, RuleError::TooDeep { limit: MAX_NESTING, .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Conditions nested exactly `MAX_NESTING` deep, each true, with where (as an offset in the
/// condition) the level past the limit starts when the whole condition is wrapped in one more
/// `( )`: `(((true)))`, `!!true`, nested calls, chains of `MAX_NESTING` operators, and the
/// deepest tree a level can build (each level a comparison, a `&&` and a `||` above a
/// parenthesis holding the next).
fn conditions_at_the_limit() -> Vec<(String, usize)> {
    let n = MAX_NESTING;
    let mut worst = "true".to_string();
    for _ in 0..n {
        worst = format!("({worst}) == true && true || true");
    }
    let and_chain = vec!["true"; n + 1].join(" && ");
    let or_chain = vec!["false"; n].join(" || ") + " || true";
    let last_op = |chain: &str, op: &str| chain.rfind(op).expect("an operator") + 1;
    vec![
        (nest("(", "true", ")", n), n - 1),
        (format!("{}true", "!".repeat(n)), n - 1),
        // flip(1) is 0, so an even number of flips of 1 is 1
        (format!("{} == 1", nest("flip(", "1", ")", n)), 5 * (n - 1)),
        (and_chain.clone(), last_op(&and_chain, " && ")),
        (or_chain.clone(), last_op(&or_chain, " || ")),
        (worst, n - 1),
    ]
}

#[test]
fn conditions_at_the_limit_parse_check_and_rewrite_on_a_small_stack() {
    on_small_stack(|| {
        for (cond, _) in conditions_at_the_limit() {
            // the rewrite happens only if the condition evaluates to true
            let rules = format!("rule deep: (mul ?x ?c) => ?x if {cond}");
            let leaves = [("x", input(F32, &[2])), ("c", splat(F32, &[], 1.0))];
            check_rewrite(&rules, "(mul ?x ?c)", &leaves, "?x");
        }
    });
}

#[test]
fn patterns_at_the_limit_parse_check_and_rewrite_on_a_small_stack() {
    on_small_stack(|| {
        let deep = nest("(neg ", "?x", ")", MAX_NESTING);
        let leaves = [("x", input(F32, &[2]))];
        check_rewrite(&format!("rule deep: {deep} => ?x"), &deep, &leaves, "?x");
        let rules = format!("rule deep: (abs ?x) => {}", nest("(abs ", "?x", ")", MAX_NESTING));
        assert_eq!(parse_rules(&rules, "deep.rules").expect("parses").len(), 1);
        let deeper = nest("(neg ", "?x", ")", MAX_NESTING + 1);
        assert!(matches!(
            parse_rules(&format!("rule deep: {deeper} => ?x"), "deep.rules"),
            Err(RuleError::TooDeep { line: 1, column, .. }) if column == 12 + 5 * MAX_NESTING
        ));
    });
}

#[test]
fn one_level_past_the_limit_is_refused() {
    for (cond, refused) in conditions_at_the_limit() {
        too_deep(&format!("{HEAD}({cond})"), 1, cond_col() + 1 + refused);
    }
}
