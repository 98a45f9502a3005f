//! Every kind of bad rule file is an error naming the file, line and column.

use crate::rules::{load_rules, parse_rules, RuleError};

/// Asserts that `text` fails at `line`:`column` with a message containing `needle`.
fn fails(text: &str, line: usize, column: usize, needle: &str) {
    match parse_rules(text, "bad.rules") {
        Err(RuleError::Invalid {
            file,
            line: l,
            column: c,
            message,
        }) => {
            assert_eq!(file, "bad.rules");
            assert!(message.contains(needle), "{message:?} should mention {needle:?}");
            assert_eq!((l, c), (line, column), "{message}");
        }
        other => panic!("{text:?}: expected an error at {line}:{column}, got {other:?}"),
    }
}

#[test]
fn syntax_errors() {
    fails("rule a: (neg ?x) ?x", 1, 18, "expected `=>`");
    fails("# fine\nrule a: (neg ?x) => ?x $", 2, 24, "unexpected character `$`");
    fails("rule a (neg ?x) => ?x", 1, 8, "expected `:`");
    fails("rule a: (neg ?x) => ?x if", 1, 26, "found the end of the file");
    fails("rule a: (neg ?x) => ?x if rank(?x) == two", 1, 39, "unknown name `two`");
    fails(
        "rule a: (neg ?x) => ?x\nrul b: (neg ?x) => ?x",
        2,
        1,
        "expected `if` or the next `rule`",
    );
    fails("rule a: (neg ?x => ?x", 1, 17, "expected an operand");
    fails("rule a: (transpose ?x perm=[1, ?y]) => ?x", 1, 32, "expected a number");
}

#[test]
fn unknown_ops_and_wrong_operand_counts() {
    fails("rule a: (frobnicate ?x) => ?x", 1, 10, "unknown op `frobnicate`");
    fails(
        "rule a: (neg ?x) =>\n   (add ?x)",
        2,
        5,
        "`add` takes 2 operands, got 1",
    );
    fails("rule a: (gemm ?a) => ?a", 1, 10, "`gemm` takes 2 to 3 operands");
    fails("rule a: (add ?x (constant)) => ?x", 1, 18, "`constant` cannot appear");
    fails("rule a: ?x => ?x", 1, 9, "must be an op pattern");
}

#[test]
fn unknown_missing_and_mistyped_attributes() {
    fails(
        "rule a: (transpose ?x prem=?p) => ?x",
        1,
        23,
        "no attribute `prem` (its attributes: perm)",
    );
    fails("rule a: (neg ?x axis=1) => ?x", 1, 17, "(its attributes: none)");
    fails("rule a: (transpose ?x perm=?p perm=?q) => ?x", 1, 31, "given twice");
    fails("rule a: (neg ?x) => (transpose ?x)", 1, 22, "needs attribute `perm`");
    fails(
        "rule a: (transpose ?x perm=1) => ?x",
        1,
        28,
        "must be a list of integers",
    );
    fails(
        "rule a: (cast ?x to=?t) => (transpose ?x perm=?t)",
        1,
        47,
        "must be a list of integers, this is an element type",
    );
    fails(
        "rule a: (transpose ?x perm=compose(?p, ?p)) => ?x",
        1,
        28,
        "on the left side an attribute",
    );
}

#[test]
fn unbound_and_misused_variables() {
    fails("rule a: (neg ?x) => ?y", 1, 21, "`?y` is not bound");
    fails("rule a: (neg ?x) => ?x if rank(?z) == 2", 1, 32, "`?z` is not bound");
    fails("rule a: (neg ?x) => (cast ?x to=dtype(?w))", 1, 39, "`?w` is not bound");
    fails(
        "rule a: (transpose ?x perm=?p) => ?p",
        1,
        35,
        "`?p` is an attribute, not an operand",
    );
    fails("rule a: (add (transpose ?x perm=?x) ?y) => ?y", 1, 25, "used both as");
    fails(
        "rule a: (neg ?x) => (transpose ?x perm=shape(root))",
        1,
        46,
        "`root` can only be used in conditions",
    );
}

#[test]
fn ill_sorted_conditions() {
    fails("rule a: (neg ?x) => ?x if rank(?x)", 1, 27, "must be a boolean");
    fails("rule a: (neg ?x) => ?x if frob(?x)", 1, 27, "unknown function `frob`");
    fails(
        "rule a: (neg ?x) => ?x if rank(?x, ?x)",
        1,
        27,
        "takes 1 arguments, got 2",
    );
    fails(
        "rule a: (neg ?x) => ?x if rank(?x) == f32",
        1,
        36,
        "cannot compare an integer with an element type",
    );
    fails(
        "rule a: (neg ?x) => ?x if ?x == root",
        1,
        30,
        "tensors are not compared directly",
    );
    fails("rule a: (neg ?x) => ?x if splat(?x, f32)", 1, 37, "expected a float");
    fails("rule a: (neg ?x) => ?x if shape(?x) < 3", 1, 27, "expected a number");
}

#[test]
fn sides_with_provably_different_types() {
    fails(
        "rule a: (cast ?x to=f32) => (cast ?x to=i64)",
        1,
        30,
        "left side gives f32 elements, the right side i64",
    );
    fails(
        "rule a: (neg ?x) => (equal ?x ?x) if dtype(?x) == f32",
        1,
        22,
        "the right side bool",
    );
    fails(
        "rule a: (neg ?x) => (cast ?x to=i32) if dtype(?x) == f32",
        1,
        22,
        "gives f32 elements",
    );
    fails(
        "rule a: (transpose ?x perm=[1, 0]) => (reshape ?x shape=[6])",
        1,
        40,
        "rank 2, the right side rank 1",
    );
    fails(
        "rule a: (reshape ?x shape=[6]) => ?x if rank(?x) == 2",
        1,
        35,
        "rank 1, the right side rank 2",
    );
}

#[test]
fn duplicate_rule_names() {
    fails(
        "rule a: (neg ?x) => ?x\n\nrule a: (abs ?x) => ?x",
        3,
        6,
        "already defined at line 1",
    );
}

#[test]
fn files_are_named_in_errors() {
    let dir = std::env::temp_dir().join(format!("mxc-rules-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("user.rules");
    std::fs::write(&path, "rule ok: (neg (neg ?x)) => ?x\nrule bad: (neg ?x) => ?q\n").unwrap();
    let err = load_rules(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:2:23: variable `?q` is not bound by the left side", path.display())
    );
    std::fs::write(&path, "rule ok: (neg (neg ?x)) => ?x\n").unwrap();
    assert_eq!(load_rules(&path).unwrap().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(
        load_rules(dir.join("missing.rules")),
        Err(RuleError::Io { .. })
    ));
}
