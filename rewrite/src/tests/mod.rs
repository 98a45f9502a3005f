//! Tests of the engine as a whole, and what they share: rules built by hand from egg patterns
//! (the rule language is not needed for these), graph builders and a reference interpreter
//! that runs a graph op by op with `mxc_dialects::eval`.

mod batch_norm;
mod deferred;
mod extraction;
mod folding;
mod fusion;
mod int8;
mod kernels;
mod layout;
mod library;
mod precision;
mod recognise;
mod round_trip;
mod rules;

use crate::lang::Mx;
use crate::MxAnalysis;
use egg::{ENodeOrVar, Id, Pattern, RecExpr, Rewrite, Var};
use mxc_dialects::{eval, Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType, ValueId};

pub fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

pub fn i64s(shape: Vec<usize>, values: &[i64]) -> Tensor {
    Tensor::from_i64s(DType::I64, shape, values)
}

pub fn op(g: &mut Graph, kind: OpKind, operands: &[ValueId], attrs: Attrs) -> ValueId {
    g.build1(kind, operands.to_vec(), attrs).unwrap()
}

pub fn int(name: &str, v: i64) -> Attrs {
    Attrs::new().with(name, Attr::Int(v))
}

/// A pattern from its nodes in post-order: `Err(name)` is the variable `?name`, `Ok(node)` an
/// e-node whose children index earlier entries.
pub fn pattern(nodes: Vec<Result<Mx, &str>>) -> Pattern<Mx> {
    let ast: RecExpr<ENodeOrVar<Mx>> = nodes
        .into_iter()
        .map(|n| match n {
            Ok(node) => ENodeOrVar::ENode(node),
            Err(name) => ENodeOrVar::Var(format!("?{name}").parse::<Var>().unwrap()),
        })
        .collect::<Vec<_>>()
        .into();
    Pattern::new(ast)
}

pub fn id(n: usize) -> Id {
    Id::from(n)
}

/// `(neg (neg ?x)) => ?x`
pub fn neg_neg() -> Rewrite<Mx, MxAnalysis> {
    let lhs = pattern(vec![
        Err("x"),
        Ok(Mx::Op(OpKind::Neg, vec![id(0)])),
        Ok(Mx::Op(OpKind::Neg, vec![id(1)])),
    ]);
    Rewrite::new("neg-neg", lhs, pattern(vec![Err("x")])).unwrap()
}

/// `?x => (neg (neg ?x))`: true and useless (it saturates at once: `neg (neg x)` is `x`).
pub fn neg_intro() -> Rewrite<Mx, MxAnalysis> {
    let rhs = pattern(vec![
        Err("x"),
        Ok(Mx::Op(OpKind::Neg, vec![id(0)])),
        Ok(Mx::Op(OpKind::Neg, vec![id(1)])),
    ]);
    Rewrite::new("neg-intro", pattern(vec![Err("x")]), rhs).unwrap()
}

/// Commutativity and associativity of `max` (exact, even for -0 and NaN): on a chain of n
/// terms they build every bracketing of every subset, so they only stop at a limit.
pub fn max_ac() -> Vec<Rewrite<Mx, MxAnalysis>> {
    let max = |a: usize, b: usize| Ok(Mx::Op(OpKind::Max, vec![id(a), id(b)]));
    let comm = Rewrite::new(
        "max-comm",
        pattern(vec![Err("a"), Err("b"), max(0, 1)]),
        pattern(vec![Err("b"), Err("a"), max(0, 1)]),
    );
    let assoc = Rewrite::new(
        "max-assoc",
        pattern(vec![Err("a"), Err("b"), max(0, 1), Err("c"), max(2, 3)]),
        pattern(vec![Err("a"), Err("b"), Err("c"), max(1, 2), max(0, 3)]),
    );
    vec![comm.unwrap(), assoc.unwrap()]
}

/// `max` of `n` inputs of shape [4], as a left-leaning chain.
pub fn max_chain(n: usize) -> Graph {
    let mut g = Graph::new("chain");
    let inputs: Vec<ValueId> = (0..n).map(|i| g.add_input(&format!("x{i}"), f32s(&[4]))).collect();
    let mut acc = inputs[0];
    for x in &inputs[1..] {
        acc = op(&mut g, OpKind::Max, &[acc, *x], Attrs::new());
    }
    g.add_output("max", acc);
    g
}

/// Runs `g` on `inputs`, op by op, with the constant evaluator.
pub fn interpret(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    eval::run(g, inputs).unwrap_or_else(|e| panic!("{e}"))
}

/// `g` optimised with the built-in rule set `set` alone.
pub fn with_builtin(g: &Graph, set: &str) -> Graph {
    let rules = crate::rules::builtin_rules(set)
        .expect("a built-in set")
        .expect("parses");
    crate::optimize(g, &crate::rules::rewrites(&rules), &crate::OptimizeOptions::default())
        .expect("optimises")
        .graph
}

/// Asserts `actual` is `expected`, both IR text; `expected` is written indented in the test
/// source (four spaces of each line are dropped).
pub fn same_ir(actual: &str, expected: &str) {
    let expected: String = expected
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    assert_eq!(actual.trim(), expected.trim(), "\ngot:\n{actual}");
}

/// The non-constant ops of `g`.
pub fn kinds(g: &Graph) -> Vec<OpKind> {
    g.ops
        .iter()
        .map(|o| o.kind)
        .filter(|k| *k != OpKind::Constant)
        .collect()
}
