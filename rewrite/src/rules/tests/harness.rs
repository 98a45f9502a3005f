//! "This expression must become that one": expressions written in rule syntax, whose
//! variables name typed graph inputs or constants, run through rules and extracted by size (attribute leaves
//! not counted).

use super::analysis::TestAnalysis;
use crate::lang::{ConstValue, Mx};
use crate::rules::ast::{Expr, Pat};
use crate::rules::eval::lit_value;
use crate::rules::parse::parse_pattern;
use crate::rules::value::attr_sort;
use crate::rules::{builtin_rules, parse_rules, rewrites, Rule};
use egg::{CostFunction, Extractor, Id, Language, RecExpr, Runner};
use mxc_dialects::{DType, Tensor, TensorType};

/// What a variable of a test expression stands for.
pub enum Leaf {
    Input(TensorType),
    Const(Tensor),
}

/// A graph input of type `dtype[shape]`.
pub fn input(dtype: DType, shape: &[usize]) -> Leaf {
    Leaf::Input(TensorType::new(dtype, shape.to_vec()))
}

/// A constant of type `dtype[shape]` with every element `v`.
pub fn splat(dtype: DType, shape: &[usize], v: f64) -> Leaf {
    let n = shape.iter().product();
    Leaf::Const(Tensor::from_f64s(dtype, shape.to_vec(), &vec![v; n]))
}

fn build(pat: &Pat, leaves: &[(&str, Leaf)], expr: &mut RecExpr<Mx>) -> Id {
    match pat {
        Pat::Var(v, _) => {
            let i = leaves
                .iter()
                .position(|(n, _)| n == v)
                .unwrap_or_else(|| panic!("no leaf `{v}`"));
            let node = match &leaves[i].1 {
                Leaf::Input(_) => {
                    Mx::Input(leaves[..i].iter().filter(|(_, l)| matches!(l, Leaf::Input(_))).count() as u32)
                }
                Leaf::Const(t) => Mx::Const(ConstValue::new(t.clone())),
            };
            expr.add(node)
        }
        Pat::Op(op) => {
            let mut children = Vec::new();
            for name in op.kind.attr_names() {
                let value = match op.attrs.iter().find(|(n, _, _)| n == name) {
                    Some((_, _, Expr::Lit(lit, _))) => lit_value(lit),
                    _ => panic!("test expressions give every attribute as a literal ({name})"),
                };
                let attr = value.to_attr(attr_sort(name).unwrap()).unwrap();
                children.push(expr.add(Mx::Attr(attr)));
            }
            for operand in &op.operands {
                children.push(build(operand, leaves, expr));
            }
            expr.add(Mx::Op(op.kind, children))
        }
        Pat::Result(n, inner, _) => {
            let op = build(inner, leaves, expr);
            expr.add(Mx::Result(*n, [op]))
        }
        Pat::Const(_) => panic!("test expressions name their constants as variables"),
    }
}

/// The expression `text` (rule syntax) with its variables replaced by `leaves`.
pub fn expr(text: &str, leaves: &[(&str, Leaf)]) -> RecExpr<Mx> {
    let pat = parse_pattern(text).unwrap_or_else(|e| panic!("{text}: {}", e.message));
    let mut out = RecExpr::default();
    build(&pat, leaves, &mut out);
    out
}

/// Expression size without attribute leaves (attributes are part of their op).
struct OpSize;

impl CostFunction<Mx> for OpSize {
    type Cost = usize;

    fn cost<C: FnMut(Id) -> usize>(&mut self, enode: &Mx, mut costs: C) -> usize {
        let own = usize::from(!matches!(enode, Mx::Attr(_)));
        enode.children().iter().fold(own, |sum, &c| sum + costs(c))
    }
}

/// `start` rewritten by `rules` to saturation, then the smallest equivalent expression.
pub fn simplify(rules: &[Rule], start: &str, leaves: &[(&str, Leaf)]) -> RecExpr<Mx> {
    let inputs = leaves
        .iter()
        .filter_map(|(_, l)| match l {
            Leaf::Input(t) => Some(t.clone()),
            Leaf::Const(_) => None,
        })
        .collect();
    let runner: Runner<Mx, TestAnalysis> = Runner::new(TestAnalysis { inputs })
        .with_iter_limit(20)
        .with_expr(&expr(start, leaves))
        .run(&rewrites::<TestAnalysis>(rules));
    Extractor::new(&runner.egraph, OpSize).find_best(runner.roots[0]).1
}

/// Asserts that `rules_text` rewrites `start` to `expected` (both in rule syntax).
pub fn check_rewrite(rules_text: &str, start: &str, leaves: &[(&str, Leaf)], expected: &str) {
    let rules = parse_rules(rules_text, "test.rules").unwrap_or_else(|e| panic!("{e}"));
    let got = simplify(&rules, start, leaves);
    assert_eq!(got.to_string(), expr(expected, leaves).to_string(), "{start}");
}

/// Asserts that the built-in `algebra` rules rewrite `start` to `expected`.
pub fn check_algebra(start: &str, leaves: &[(&str, Leaf)], expected: &str) {
    let rules = builtin_rules("algebra").unwrap().unwrap_or_else(|e| panic!("{e}"));
    let got = simplify(&rules, start, leaves);
    assert_eq!(got.to_string(), expr(expected, leaves).to_string(), "{start}");
}
