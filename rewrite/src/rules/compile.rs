//! Compiling a checked rule to an egg rewrite: the left side becomes a `Pattern` (attributes
//! not mentioned become fresh variables, literal ones exact leaves), the condition a
//! `Condition`, and the right side an `Applier` that computes its attribute leaves, infers
//! the new value's type, and unions it with the match only when that type is the matched
//! value's (so no rule can change a type, whatever its conditions forgot). A computed
//! constant on the right (`scalar(...)`) becomes a `Const` leaf, and `(result N (op ...))`
//! an `Mx::Result` node over the op (whose type is the op's result `N`).

use super::ast::{Expr, OpPat, Pat};
use super::eval::{lit_value, Bindings, Env};
use super::facts::ClassFacts;
use super::value::{attr_sort, TensorFacts, Value};
use crate::lang::Mx;
use egg::{Analysis, Applier, Condition, EGraph, ENodeOrVar, Id, Pattern, PatternAst, Subst, Symbol, Var};
use mxc_dialects::{mx, Attrs, TensorType};
use std::sync::Arc;

/// The egg variable for a rule variable (wildcards use `#`, which user names cannot hold).
pub fn egg_var(name: &str) -> Var {
    format!("?{name}")
        .parse()
        .expect("a `?` followed by a name is a variable")
}

/// The left side as an egg pattern.
pub fn lhs_pattern(op: &OpPat) -> Pattern<Mx> {
    let mut ast = PatternAst::default();
    let mut fresh = 0;
    add_lhs(op, &mut ast, &mut fresh);
    Pattern::new(ast)
}

fn add_lhs(op: &OpPat, ast: &mut PatternAst<Mx>, fresh: &mut usize) -> Id {
    let mut children = Vec::new();
    for name in op.kind.attr_names() {
        let node = match op.attrs.iter().find(|(n, _, _)| n == name).map(|(_, _, e)| e) {
            Some(Expr::Var(v, _)) => ENodeOrVar::Var(egg_var(v)),
            Some(Expr::Lit(lit, _)) => {
                let sort = attr_sort(name).expect("checked attribute");
                ENodeOrVar::ENode(Mx::Attr(lit_value(lit).to_attr(sort).expect("checked literal")))
            }
            _ => {
                *fresh += 1;
                ENodeOrVar::Var(egg_var(&format!("{name}#{fresh}")))
            }
        };
        children.push(ast.add(node));
    }
    for operand in &op.operands {
        children.push(match operand {
            Pat::Var(v, _) => ast.add(ENodeOrVar::Var(egg_var(v))),
            Pat::Op(inner) => add_lhs(inner, ast, fresh),
            Pat::Const(_) | Pat::Result(..) => {
                unreachable!("the checker allows computed constants and results on the right only")
            }
        });
    }
    ast.add(ENodeOrVar::ENode(Mx::Op(op.kind, children)))
}

/// A rule's `if` part.
pub struct RuleCondition {
    pub cond: Expr,
    pub vars: Arc<Bindings>,
}

impl<N> Condition<Mx, N> for RuleCondition
where
    N: Analysis<Mx>,
    N::Data: ClassFacts,
{
    fn check(&self, egraph: &mut EGraph<Mx, N>, eclass: Id, subst: &Subst) -> bool {
        let env = Env {
            egraph,
            subst,
            root: eclass,
            vars: &self.vars,
        };
        env.holds(&self.cond)
    }
}

/// A rule's right side.
pub struct RuleApplier {
    pub rhs: Pat,
    pub vars: Arc<Bindings>,
}

impl RuleApplier {
    /// The right side for one match, with computed attribute leaves, and its inferred type.
    /// `None` if an attribute cannot be computed or the new op would be ill-typed.
    fn instantiate<N>(&self, env: &Env<'_, N>, pat: &Pat, ast: &mut PatternAst<Mx>) -> Option<(Id, Option<TensorType>)>
    where
        N: Analysis<Mx>,
        N::Data: ClassFacts,
    {
        match pat {
            Pat::Var(v, _) => {
                let (var, _) = self.vars.get(v)?;
                let ty = env.egraph[env.subst[*var]].data.ty().cloned();
                Some((ast.add(ENodeOrVar::Var(*var)), ty))
            }
            Pat::Op(op) => {
                let (id, types) = self.instantiate_op(env, op, ast)?;
                match types {
                    // A multi-result op is only reached through `(result N ...)`.
                    Some(types) if types.len() != 1 => None,
                    Some(types) => Some((id, types.into_iter().next())),
                    None => Some((id, None)),
                }
            }
            Pat::Result(n, inner, _) => {
                let Pat::Op(op) = inner.as_ref() else {
                    return None;
                };
                let (id, types) = self.instantiate_op(env, op, ast)?;
                let ty = match types {
                    Some(mut types) if (*n as usize) < types.len() && types.len() > 1 => {
                        Some(types.swap_remove(*n as usize))
                    }
                    Some(_) => return None,
                    None => None,
                };
                Some((ast.add(ENodeOrVar::ENode(Mx::Result(*n, [id]))), ty))
            }
            Pat::Const(e) => {
                let Value::Tensor(TensorFacts { constant: Some(c), .. }) = env.eval(e)? else {
                    return None;
                };
                let ty = c.tensor.ty.clone();
                Some((ast.add(ENodeOrVar::ENode(Mx::Const(c))), Some(ty)))
            }
        }
    }

    /// An op of the right side and its result types (`None` when an operand's is unknown).
    fn instantiate_op<N>(
        &self,
        env: &Env<'_, N>,
        op: &OpPat,
        ast: &mut PatternAst<Mx>,
    ) -> Option<(Id, Option<Vec<TensorType>>)>
    where
        N: Analysis<Mx>,
        N::Data: ClassFacts,
    {
        let mut children = Vec::new();
        let mut attrs = Attrs::new();
        for name in op.kind.attr_names() {
            let expr = op.attrs.iter().find(|(n, _, _)| n == name).map(|(_, _, e)| e)?;
            let value = env.eval(expr)?.to_attr(attr_sort(name)?)?;
            attrs.set(name, value.to_attr());
            children.push(ast.add(ENodeOrVar::ENode(Mx::Attr(value))));
        }
        let mut types = Some(Vec::new());
        for operand in &op.operands {
            let (id, ty) = self.instantiate(env, operand, ast)?;
            children.push(id);
            types = types.zip(ty).map(|(mut v, t)| {
                v.push(t);
                v
            });
        }
        let results = match types {
            Some(types) => Some(mx::infer(op.kind, &types, &attrs).ok()?),
            None => None,
        };
        Some((ast.add(ENodeOrVar::ENode(Mx::Op(op.kind, children))), results))
    }
}

impl<N> Applier<Mx, N> for RuleApplier
where
    N: Analysis<Mx>,
    N::Data: ClassFacts,
{
    fn apply_one(
        &self,
        egraph: &mut EGraph<Mx, N>,
        eclass: Id,
        subst: &Subst,
        searcher_ast: Option<&PatternAst<Mx>>,
        rule_name: Symbol,
    ) -> Vec<Id> {
        let env = Env {
            egraph,
            subst,
            root: eclass,
            vars: &self.vars,
        };
        let mut ast = PatternAst::default();
        let Some((_, ty)) = self.instantiate(&env, &self.rhs, &mut ast) else {
            return vec![];
        };
        if let Some(want) = egraph[eclass].data.ty() {
            if ty.as_ref() != Some(want) {
                return vec![];
            }
        }
        Pattern::new(ast).apply_one(egraph, eclass, subst, searcher_ast, rule_name)
    }
}
