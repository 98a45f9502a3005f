//! "This expression must become that one", one line each: the built-in algebra rules and
//! rules written inline, run on small e-graphs with the test analysis.

use super::harness::{check_algebra, check_rewrite, input, splat};
use mxc_dialects::DType::{F32, I64, U8};

#[test]
fn mul_by_one_disappears_when_types_agree() {
    check_algebra(
        "(mul ?x ?c)",
        &[("x", input(F32, &[2, 3])), ("c", splat(F32, &[], 1.0))],
        "?x",
    );
    check_algebra(
        "(mul ?c ?x)",
        &[("x", input(F32, &[2, 3])), ("c", splat(F32, &[3], 1.0))],
        "?x",
    );
}

#[test]
fn mul_by_one_stays_when_it_broadcasts() {
    let leaves = [("x", input(F32, &[3])), ("c", splat(F32, &[2, 3], 1.0))];
    check_algebra("(mul ?x ?c)", &leaves, "(mul ?x ?c)");
}

#[test]
fn additive_and_multiplicative_identities() {
    let x = || input(F32, &[4]);
    check_algebra("(add ?x ?c)", &[("x", x()), ("c", splat(F32, &[], 0.0))], "?x");
    check_algebra("(add ?c ?x)", &[("x", x()), ("c", splat(F32, &[1], 0.0))], "?x");
    check_algebra("(sub ?x ?c)", &[("x", x()), ("c", splat(F32, &[], 0.0))], "?x");
    check_algebra("(div ?x ?c)", &[("x", x()), ("c", splat(F32, &[], 1.0))], "?x");
    check_algebra("(mul ?x ?c)", &[("x", x()), ("c", splat(F32, &[], -1.0))], "(neg ?x)");
    check_algebra("(sub ?x ?c)", &[("x", x()), ("c", splat(F32, &[], 2.0))], "(sub ?x ?c)");
}

#[test]
fn negations_cancel_and_fold_into_sub() {
    let leaves = [("x", input(F32, &[4])), ("y", input(F32, &[4]))];
    check_algebra("(neg (neg ?x))", &leaves, "?x");
    check_algebra("(add ?x (neg ?y))", &leaves, "(sub ?x ?y)");
    check_algebra("(sub ?x (neg ?y))", &leaves, "(add ?x ?y)");
}

#[test]
fn repeated_operands_and_unsigned_no_ops() {
    check_algebra("(max ?x ?x)", &[("x", input(F32, &[2]))], "?x");
    check_algebra("(relu (relu ?x))", &[("x", input(F32, &[2]))], "(relu ?x)");
    check_algebra("(abs ?x)", &[("x", input(U8, &[2]))], "?x");
    check_algebra("(abs ?x)", &[("x", input(F32, &[2]))], "(abs ?x)");
}

#[test]
fn ops_that_do_nothing_are_removed() {
    let x = || input(F32, &[2, 3]);
    check_algebra("(identity ?x)", &[("x", x())], "?x");
    check_algebra("(cast ?x to=f32)", &[("x", x())], "?x");
    check_algebra("(cast ?x to=i64)", &[("x", x())], "(cast ?x to=i64)");
    check_algebra("(reshape ?x shape=[2, 3])", &[("x", x())], "?x");
    check_algebra("(transpose ?x perm=[0, 1])", &[("x", x())], "?x");
    check_algebra("(slice ?x starts=[0, 0] ends=[2, 3] steps=[1, 1])", &[("x", x())], "?x");
}

#[test]
fn transposes_compose() {
    let x = || input(F32, &[2, 3, 4]);
    check_algebra(
        "(transpose (transpose ?x perm=[1, 0, 2]) perm=[0, 2, 1])",
        &[("x", x())],
        "(transpose ?x perm=[1, 2, 0])",
    );
    check_algebra(
        "(transpose (transpose ?x perm=[1, 2, 0]) perm=[2, 0, 1])",
        &[("x", x())],
        "?x",
    );
}

#[test]
fn reshapes_merge() {
    let leaves = [("x", input(I64, &[2, 3]))];
    check_algebra(
        "(reshape (reshape ?x shape=[6]) shape=[3, 2])",
        &leaves,
        "(reshape ?x shape=[3, 2])",
    );
    check_algebra("(reshape (reshape ?x shape=[6]) shape=[2, 3])", &leaves, "?x");
}

#[test]
fn transposes_fold_into_matrix_products() {
    let leaves = [
        ("a", input(F32, &[3, 2])),
        ("b", input(F32, &[3, 4])),
        ("c", input(F32, &[4])),
    ];
    check_algebra(
        "(matmul (transpose ?a perm=[1, 0]) ?b)",
        &leaves,
        "(gemm ?a ?b alpha=1.0 beta=1.0 trans_a=1 trans_b=0)",
    );
    check_algebra(
        "(gemm (transpose ?a perm=[1, 0]) ?b ?c alpha=2.0 beta=1.0 trans_a=0 trans_b=0)",
        &leaves,
        "(gemm ?a ?b ?c alpha=2.0 beta=1.0 trans_a=1 trans_b=0)",
    );
    let square = [("a", input(F32, &[3, 3])), ("b", input(F32, &[3, 3]))];
    check_algebra(
        "(gemm (transpose ?a perm=[1, 0]) (transpose ?b perm=[1, 0]) alpha=1.0 beta=1.0 trans_a=1 trans_b=0)",
        &square,
        "(gemm ?a ?b alpha=1.0 beta=1.0 trans_a=0 trans_b=1)",
    );
}

#[test]
fn a_rule_without_its_type_guard_still_never_changes_a_type() {
    let rules = "rule careless: (mul ?x ?c) => ?x if splat(?c, 1)";
    let leaves = [("x", input(F32, &[3])), ("c", splat(F32, &[2, 3], 1.0))];
    check_rewrite(rules, "(mul ?x ?c)", &leaves, "(mul ?x ?c)");
}

#[test]
fn conditions_read_ranks_dtypes_and_attributes() {
    let rules = "rule t1: (transpose ?x perm=?p) => ?x if rank(?x) == 1 && dtype(?x) == f32 && len(?p) >= 1";
    check_rewrite(rules, "(transpose ?x perm=[0])", &[("x", input(F32, &[5]))], "?x");
    check_rewrite(
        rules,
        "(transpose (transpose ?x perm=[0]) perm=[0])",
        &[("x", input(F32, &[5]))],
        "?x",
    );
    let rules = "rule never: (neg ?x) => ?x if !(rank(?x) < 10) || const(?x)";
    check_rewrite(rules, "(neg ?x)", &[("x", input(F32, &[5]))], "(neg ?x)");
}

#[test]
fn literal_attributes_on_the_left_match_exactly() {
    let rules = "rule swap: (transpose (transpose ?x perm=[1, 0]) perm=[1, 0]) => ?x";
    let leaves = [("x", input(F32, &[2, 2, 2]))];
    check_rewrite(
        rules,
        "(transpose (transpose ?x perm=[1, 0, 2]) perm=[1, 0, 2])",
        &leaves,
        "(transpose (transpose ?x perm=[1, 0, 2]) perm=[1, 0, 2])",
    );
}

#[test]
fn rewrites_explain_themselves() {
    use super::analysis::TestAnalysis;
    use super::harness::expr;
    use crate::rules::{builtin_rules, rewrites};
    let leaves = [("x", input(F32, &[2, 3]))];
    let start = expr("(transpose (transpose ?x perm=[1, 0]) perm=[1, 0])", &leaves);
    let mut runner = egg::Runner::<crate::lang::Mx, TestAnalysis>::new(TestAnalysis {
        inputs: vec![mxc_dialects::TensorType::new(F32, vec![2, 3])],
    })
    .with_explanations_enabled()
    .with_expr(&start)
    .run(&rewrites(&builtin_rules("algebra").unwrap().unwrap()));
    let mut why = runner.explain_equivalence(&start, &expr("?x", &leaves));
    let steps: Vec<String> = why
        .make_flat_explanation()
        .iter()
        .flat_map(|t| [t.forward_rule, t.backward_rule])
        .flatten()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(steps, ["transpose-transpose", "transpose-identity"]);
}
