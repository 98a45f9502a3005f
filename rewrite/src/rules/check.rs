//! The checker: ops exist and get the right number of operands, attributes exist and get
//! values of their sort, every variable the right side or a condition uses is bound by the
//! left side with one meaning (tensor or attribute), and expressions are well sorted.

use super::ast::{BinOp, Expr, Lit, OpPat, Pat, RuleDef};
use super::error::{Located, Pos};
use super::funcs;
use super::types::check_result_types;
use super::value::{attr_sort, Sort};
use mxc_dialects::OpKind;
use std::collections::BTreeMap;

/// What a left-side variable stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarKind {
    /// An operand: any tensor value.
    Tensor,
    /// An attribute value of this sort.
    Attr(Sort),
}

/// The variables a rule binds, by name.
pub type VarKinds = BTreeMap<String, VarKind>;

/// Checks one rule; returns what each of its variables stands for.
pub fn check_rule(rule: &RuleDef) -> Result<VarKinds, Located> {
    let Pat::Op(lhs) = &rule.lhs else {
        return Err(Located::new(
            rule.lhs.pos(),
            "the left side must be an op pattern, not a bare variable",
        ));
    };
    let mut vars = VarKinds::new();
    bind_lhs(lhs, &mut vars)?;
    check_rhs(&rule.rhs, &vars)?;
    if let Some(cond) = &rule.cond {
        let sort = sort_of(cond, &vars, true)?;
        if sort != Sort::Bool {
            return Err(Located::new(
                cond.pos(),
                format!("a condition must be a boolean, this is {sort}"),
            ));
        }
    }
    check_result_types(rule)?;
    Ok(vars)
}

fn bind(vars: &mut VarKinds, name: &str, kind: VarKind, pos: Pos) -> Result<(), Located> {
    match vars.get(name) {
        Some(&old) if old != kind => Err(Located::new(
            pos,
            format!(
                "variable `?{name}` is used both as {} and as {}",
                describe(old),
                describe(kind)
            ),
        )),
        _ => {
            vars.insert(name.to_string(), kind);
            Ok(())
        }
    }
}

fn describe(kind: VarKind) -> String {
    match kind {
        VarKind::Tensor => "an operand".into(),
        VarKind::Attr(sort) => format!("an attribute ({sort})"),
    }
}

/// The operand count and attribute names of an op pattern, on either side.
fn check_op_shape(op: &OpPat) -> Result<(), Located> {
    if op.kind == OpKind::Constant {
        return Err(Located::new(
            op.pos,
            "`constant` cannot appear in a rule: bind a variable and test it with `const(?x)` or `splat(?x, v)`",
        ));
    }
    let (min, max) = op.kind.arity();
    let n = op.operands.len();
    if n < min || n > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(Located::new(
            op.pos,
            format!("`{}` takes {want} operands, got {n}", op.kind.name()),
        ));
    }
    let names = op.kind.attr_names();
    for (i, (name, pos, _)) in op.attrs.iter().enumerate() {
        if !names.contains(&name.as_str()) {
            let known = if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            };
            return Err(Located::new(
                *pos,
                format!(
                    "`{}` has no attribute `{name}` (its attributes: {known})",
                    op.kind.name()
                ),
            ));
        }
        if op.attrs[..i].iter().any(|(n, _, _)| n == name) {
            return Err(Located::new(*pos, format!("attribute `{name}` given twice")));
        }
    }
    Ok(())
}

fn attr_sort_at(name: &str, pos: Pos) -> Result<Sort, Located> {
    attr_sort(name).ok_or_else(|| Located::new(pos, format!("attribute `{name}` cannot be used in rules")))
}

fn bind_lhs(op: &OpPat, vars: &mut VarKinds) -> Result<(), Located> {
    check_op_shape(op)?;
    for (name, pos, value) in &op.attrs {
        let sort = attr_sort_at(name, *pos)?;
        match value {
            Expr::Var(v, vpos) => bind(vars, v, VarKind::Attr(sort), *vpos)?,
            Expr::Lit(lit, lpos) => {
                if !lit_sort(lit).fits(sort) {
                    return Err(Located::new(*lpos, format!("attribute `{name}` must be {sort}")));
                }
            }
            other => {
                return Err(Located::new(
                    other.pos(),
                    "on the left side an attribute is a `?variable` or a literal; compute values on the right",
                ))
            }
        }
    }
    for operand in &op.operands {
        match operand {
            Pat::Var(v, pos) => bind(vars, v, VarKind::Tensor, *pos)?,
            Pat::Op(inner) => bind_lhs(inner, vars)?,
            Pat::Const(e) => {
                return Err(Located::new(
                    e.pos(),
                    "a computed constant can only be built on the right side; on the left, bind a variable and test it with `const(?x)`",
                ))
            }
            Pat::Result(_, _, pos) => {
                return Err(Located::new(
                    *pos,
                    "`(result N ...)` can only be written on the right side",
                ))
            }
        }
    }
    Ok(())
}

/// How many results an op of `kind` gives (`mx::infer`'s result count; only `layer_norm`
/// gives more than one).
pub fn result_count(kind: OpKind) -> usize {
    match kind {
        OpKind::LayerNorm => 3,
        _ => 1,
    }
}

fn check_rhs(pat: &Pat, vars: &VarKinds) -> Result<(), Located> {
    match pat {
        Pat::Var(v, pos) => match vars.get(v) {
            Some(VarKind::Tensor) => Ok(()),
            Some(VarKind::Attr(_)) => Err(Located::new(*pos, format!("`?{v}` is an attribute, not an operand"))),
            None => Err(unbound(v, *pos)),
        },
        Pat::Op(op) if result_count(op.kind) > 1 => Err(Located::new(
            op.pos,
            format!(
                "`{}` gives {} results: write the one meant as `(result N ({} ...))`",
                op.kind.name(),
                result_count(op.kind),
                op.kind.name()
            ),
        )),
        Pat::Op(op) => check_rhs_op(op, vars),
        Pat::Result(n, inner, pos) => match inner.as_ref() {
            Pat::Op(op) if result_count(op.kind) > 1 && (*n as usize) < result_count(op.kind) => check_rhs_op(op, vars),
            Pat::Op(op) => Err(Located::new(
                *pos,
                format!(
                    "`{}` gives {} result{}, there is no result {n} to take",
                    op.kind.name(),
                    result_count(op.kind),
                    if result_count(op.kind) == 1 { "" } else { "s" }
                ),
            )),
            other => Err(Located::new(
                other.pos(),
                "`(result N ...)` takes an op pattern `(op ...)`",
            )),
        },
        Pat::Const(e) => match sort_of(e, vars, false)? {
            Sort::Tensor => Ok(()),
            sort => Err(Located::new(
                e.pos(),
                format!("an operand must be a tensor (such as `scalar(v, dtype)`), this is {sort}"),
            )),
        },
    }
}

/// The attributes and operands of an op on the right side.
fn check_rhs_op(op: &OpPat, vars: &VarKinds) -> Result<(), Located> {
    check_op_shape(op)?;
    for name in op.kind.attr_names() {
        if !op.attrs.iter().any(|(n, _, _)| n == name) {
            return Err(Located::new(
                op.pos,
                format!("`{}` on the right side needs attribute `{name}`", op.kind.name()),
            ));
        }
    }
    for (name, pos, value) in &op.attrs {
        let want = attr_sort_at(name, *pos)?;
        let got = sort_of(value, vars, false)?;
        if !got.fits(want) {
            return Err(Located::new(
                value.pos(),
                format!("attribute `{name}` must be {want}, this is {got}"),
            ));
        }
    }
    op.operands.iter().try_for_each(|o| check_rhs(o, vars))
}

fn unbound(v: &str, pos: Pos) -> Located {
    Located::new(pos, format!("variable `?{v}` is not bound by the left side"))
}

pub fn lit_sort(lit: &Lit) -> Sort {
    match lit {
        Lit::Int(_) => Sort::Int,
        Lit::Float(_) => Sort::Float,
        Lit::Ints(_) => Sort::Ints,
        Lit::Floats(_) => Sort::Floats,
        Lit::DType(_) => Sort::DType,
        Lit::Bool(_) => Sort::Bool,
        Lit::Str(_) => Sort::Str,
    }
}

/// The sort of an expression; `root` is allowed in conditions only.
fn sort_of(e: &Expr, vars: &VarKinds, in_condition: bool) -> Result<Sort, Located> {
    let sub = |e: &Expr| sort_of(e, vars, in_condition);
    let expect = |e: &Expr, want: Sort| -> Result<(), Located> {
        let got = sub(e)?;
        if got.fits(want) {
            Ok(())
        } else {
            Err(Located::new(e.pos(), format!("expected {want}, this is {got}")))
        }
    };
    match e {
        Expr::Lit(lit, _) => Ok(lit_sort(lit)),
        Expr::Var(v, pos) => match vars.get(v) {
            Some(VarKind::Tensor) => Ok(Sort::Tensor),
            Some(VarKind::Attr(sort)) => Ok(*sort),
            None => Err(unbound(v, *pos)),
        },
        Expr::Root(pos) if !in_condition => Err(Located::new(*pos, "`root` can only be used in conditions")),
        Expr::Root(_) => Ok(Sort::Tensor),
        Expr::Call(name, args, pos) => {
            let f = funcs::lookup(name).ok_or_else(|| Located::new(*pos, format!("unknown function `{name}`")))?;
            if args.len() != f.params.len() {
                return Err(Located::new(
                    *pos,
                    format!("`{name}` takes {} arguments, got {}", f.params.len(), args.len()),
                ));
            }
            for (arg, &want) in args.iter().zip(f.params) {
                expect(arg, want)?;
            }
            Ok(f.result)
        }
        Expr::Not(inner, _) => expect(inner, Sort::Bool).map(|_| Sort::Bool),
        Expr::Bin(op, a, b, pos) => {
            let (sa, sb) = (sub(a)?, sub(b)?);
            match op {
                BinOp::And | BinOp::Or => {
                    // The sorts already computed: asking `expect` would walk each operand
                    // again, twice per level, which is exponential in a chain's length.
                    for (s, e) in [(sa, a), (sb, b)] {
                        if !s.fits(Sort::Bool) {
                            return Err(Located::new(e.pos(), format!("expected {}, this is {s}", Sort::Bool)));
                        }
                    }
                }
                BinOp::Eq | BinOp::Ne => {
                    if sa == Sort::Tensor || sb == Sort::Tensor {
                        return Err(Located::new(
                            *pos,
                            "tensors are not compared directly; compare facts such as `type(?x)` or `shape(?x)`",
                        ));
                    }
                    if !(sa.fits(sb) || sb.fits(sa)) {
                        return Err(Located::new(*pos, format!("cannot compare {sa} with {sb}")));
                    }
                }
                _ => {
                    for (s, e) in [(sa, a), (sb, b)] {
                        if !s.fits(Sort::Float) {
                            return Err(Located::new(e.pos(), format!("expected a number, this is {s}")));
                        }
                    }
                }
            }
            Ok(Sort::Bool)
        }
    }
}
