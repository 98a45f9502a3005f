//! Evaluation of rule expressions against one match: variables read the e-graph (class
//! facts for operands, attribute leaves for attributes), functions come from the table.

use super::ast::{BinOp, Expr, Lit};
use super::check::VarKind;
use super::facts::{attr_of, ClassFacts};
use super::funcs;
use super::value::{TensorFacts, Value};
use crate::lang::Mx;
use egg::{Analysis, EGraph, Id, Subst, Var};
use std::collections::BTreeMap;

/// The variables of a compiled rule: egg variable and meaning, by name.
pub type Bindings = BTreeMap<String, (Var, VarKind)>;

/// One match: the e-graph, the substitution and the matched class.
pub struct Env<'a, N: Analysis<Mx>> {
    pub egraph: &'a EGraph<Mx, N>,
    pub subst: &'a Subst,
    pub root: Id,
    pub vars: &'a Bindings,
}

impl<N> Env<'_, N>
where
    N: Analysis<Mx>,
    N::Data: ClassFacts,
{
    /// The facts of class `id`.
    pub fn facts(&self, id: Id) -> TensorFacts {
        let data = &self.egraph[id].data;
        TensorFacts {
            ty: data.ty().cloned(),
            constant: data.constant().cloned(),
        }
    }

    /// The value of `e`, or `None` when a fact it needs is unknown or out of domain.
    pub fn eval(&self, e: &Expr) -> Option<Value> {
        match e {
            Expr::Lit(lit, _) => Some(lit_value(lit)),
            Expr::Var(name, _) => {
                let (var, kind) = self.vars.get(name)?;
                let id = self.subst[*var];
                match kind {
                    VarKind::Tensor => Some(Value::Tensor(self.facts(id))),
                    VarKind::Attr(_) => Value::from_attr(attr_of(self.egraph, id)?),
                }
            }
            Expr::Root(_) => Some(Value::Tensor(self.facts(self.root))),
            Expr::Call(name, args, _) => {
                let f = funcs::lookup(name)?;
                let args = args.iter().map(|a| self.eval(a)).collect::<Option<Vec<_>>>()?;
                (f.eval)(&args)
            }
            Expr::Not(inner, _) => match self.eval(inner)? {
                Value::Bool(b) => Some(Value::Bool(!b)),
                _ => None,
            },
            Expr::Bin(op, a, b, _) => self.binary(*op, a, b).map(Value::Bool),
        }
    }

    /// Whether condition `e` holds (unknown counts as false).
    pub fn holds(&self, e: &Expr) -> bool {
        matches!(self.eval(e), Some(Value::Bool(true)))
    }

    fn binary(&self, op: BinOp, a: &Expr, b: &Expr) -> Option<bool> {
        match op {
            BinOp::And => return Some(self.holds(a) && self.holds(b)),
            BinOp::Or => return Some(self.holds(a) || self.holds(b)),
            _ => {}
        }
        let (x, y) = (self.eval(a)?, self.eval(b)?);
        match op {
            BinOp::Eq => x.same(&y),
            BinOp::Ne => x.same(&y).map(|s| !s),
            _ => {
                let (x, y) = (x.as_f64()?, y.as_f64()?);
                Some(match op {
                    BinOp::Lt => x < y,
                    BinOp::Le => x <= y,
                    BinOp::Gt => x > y,
                    _ => x >= y,
                })
            }
        }
    }
}

pub fn lit_value(lit: &Lit) -> Value {
    match lit {
        Lit::Int(v) => Value::Int(*v),
        Lit::Float(v) => Value::Float(*v),
        Lit::Ints(v) => Value::Ints(v.clone()),
        Lit::Floats(v) => Value::Floats(v.clone()),
        Lit::DType(d) => Value::DType(*d),
        Lit::Bool(b) => Value::Bool(*b),
        Lit::Str(s) => Value::Str(s.clone()),
    }
}
