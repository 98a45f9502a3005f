//! Concrete instances of a rule's left side: a small `Graph` with one output, `out`, whose
//! operand variables are graph inputs (or constants, where the condition asks for one with
//! `const(?c)` or `splat(?c, v)`), and whose attributes are literals, bound variables or
//! generated values. Shapes, element types and attribute values come from `generate`; an
//! instance is kept only if every op of it type-checks (`Graph::build`).

use super::generate::{self, Domain, Gen};
use mxc_dialects::{Attr, DType, Graph, OpKind, Tensor, TensorType, ValueId};
use mxc_rewrite::rules::ast::{BinOp, Expr, Lit, OpPat, Pat};
use mxc_rewrite::rules::value::attr_sort;
use mxc_rewrite::rules::Rule;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One operand variable of an instance.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The variable's name, without `?`.
    pub name: String,
    pub ty: TensorType,
    pub kind: LeafKind,
}

#[derive(Clone, Debug)]
pub enum LeafKind {
    /// A graph input (named `in_NAME`) drawn from this domain.
    Input(Domain),
    Constant(Tensor),
}

/// A concrete left side.
#[derive(Clone, Debug)]
pub struct Instance {
    pub graph: Graph,
    pub leaves: Vec<Leaf>,
    /// Attribute values: `?v` for the rule's attribute variables, `op.name` for attributes
    /// the left side leaves out.
    pub attrs: Vec<(String, Attr)>,
}

impl Instance {
    /// One line: each variable's type (and value, for constants) and each attribute value.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .leaves
            .iter()
            .map(|l| match &l.kind {
                LeafKind::Input(_) => format!("?{}: {}", l.name, l.ty),
                LeafKind::Constant(t) => format!("?{} = constant {}", l.name, super::show::tensor(t)),
            })
            .collect();
        parts.extend(
            self.attrs
                .iter()
                .map(|(n, a)| format!("{n} = {}", super::show::attr(a))),
        );
        parts.join(", ")
    }

    /// What sets this instance apart beside its shapes: element types, constants and attribute
    /// values.
    pub fn variety(&self) -> String {
        let leaves = self.leaves.iter().map(|l| match &l.kind {
            LeafKind::Input(_) => l.ty.dtype.to_string(),
            LeafKind::Constant(t) => super::show::tensor(t),
        });
        let attrs = self.attrs.iter().map(|(n, a)| format!("{n}={}", super::show::attr(a)));
        leaves.chain(attrs).collect::<Vec<_>>().join(" ")
    }

    /// The graph input name of variable `name`.
    pub fn input_name(name: &str) -> String {
        format!("in_{name}")
    }
}

/// What the rule's condition says about its operand variables: which must be constants, the
/// values `splat(?c, v)` asks for, and which must be one element (`numel(?c) == 1`).
#[derive(Debug, Default)]
pub struct Hints {
    constants: BTreeMap<String, Vec<f64>>,
    single: BTreeSet<String>,
    /// The element types the condition names (`dtype(?a) == bf16`): an instance is of one of
    /// them, and a `to` attribute one of them, half of the time.
    dtypes: Vec<DType>,
}

impl Hints {
    /// One of the condition's element types half of the time (never when it names none).
    fn dtype(&self, g: &mut Gen) -> Option<DType> {
        (!self.dtypes.is_empty() && g.chance(0.5)).then(|| g.pick(&self.dtypes))
    }

    pub fn of(rule: &Rule) -> Hints {
        let mut hints = Hints::default();
        if let Some(cond) = &rule.def.cond {
            hints.scan(cond);
        }
        hints
    }

    fn scan(&mut self, e: &Expr) {
        match e {
            Expr::Call(f, args, _) => {
                if let (Some(Expr::Var(v, _)), "const" | "splat") = (args.first(), f.as_str()) {
                    let values = self.constants.entry(v.clone()).or_default();
                    if let Some(Expr::Lit(Lit::Int(x), _)) = args.get(1) {
                        values.push(*x as f64);
                    } else if let Some(Expr::Lit(Lit::Float(x), _)) = args.get(1) {
                        values.push(*x);
                    }
                }
                args.iter().for_each(|a| self.scan(a));
            }
            Expr::Not(inner, _) => self.scan(inner),
            Expr::Bin(BinOp::Eq, a, b, _) if matches!(**b, Expr::Lit(Lit::Int(1), _)) => {
                if let Expr::Call(f, args, _) = &**a {
                    if let (Some(Expr::Var(v, _)), "numel") = (args.first(), f.as_str()) {
                        self.single.insert(v.clone());
                    }
                }
                self.scan(a);
            }
            Expr::Bin(_, a, b, _) => {
                self.scan(a);
                self.scan(b);
            }
            Expr::Lit(Lit::DType(d), _) => self.dtypes.push(*d),
            Expr::Lit(..) | Expr::Var(..) | Expr::Root(_) => {}
        }
    }
}

/// Draws one instance of `lhs`, or `None` if the drawn types or attributes do not type-check.
pub fn sample(lhs: &OpPat, hints: &Hints, g: &mut Gen) -> Option<Instance> {
    let mut b = Builder {
        graph: Graph::new("instance"),
        values: BTreeMap::new(),
        instance_attrs: Vec::new(),
        leaves: Vec::new(),
        base: base_for(lhs, g),
        dtype: hints.dtype(g).unwrap_or_else(|| g.dtype()),
        hints,
        g,
    };
    let out = b.op(lhs)?;
    b.graph.add_output("out", out);
    Some(Instance {
        graph: b.graph,
        leaves: b.leaves,
        attrs: b.instance_attrs,
    })
}

/// A base shape of at least the rank `lhs` needs: a drawn one, or `[1, 2, 4, 4]` where the
/// pattern reaches axis 3 (`softmax ... axis=3`) or holds an `attention` (rank 4), which no
/// lower-rank instance could type-check.
fn base_for(lhs: &OpPat, g: &mut Gen) -> Vec<usize> {
    let base = g.base_shape();
    match needed_rank(lhs) {
        r if r > base.len() => vec![1, 2, 4, 4][4 - r.min(4)..].to_vec(),
        _ => base,
    }
}

/// The rank the ops and literal axes of a pattern need of its tensors.
fn needed_rank(op: &OpPat) -> usize {
    let own = match op.kind {
        // attention's heads, and the 2-D images the convolutions' and pools' rules are about
        OpKind::Attention
        | OpKind::Conv
        | OpKind::ConvNhwc
        | OpKind::MaxPool
        | OpKind::MaxPoolNhwc
        | OpKind::AveragePool
        | OpKind::AveragePoolNhwc => 4,
        _ => op
            .attrs
            .iter()
            .filter_map(|(name, _, e)| match (name.as_str(), e) {
                ("axis", Expr::Lit(Lit::Int(a), _)) => Some(*a as usize + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0),
    };
    op.operands
        .iter()
        .filter_map(|p| match p {
            Pat::Op(inner) => Some(needed_rank(inner)),
            _ => None,
        })
        .fold(own, usize::max)
}

struct Builder<'a> {
    graph: Graph,
    /// Operand variables already built, and attribute variables already bound.
    values: BTreeMap<String, Bound>,
    instance_attrs: Vec<(String, Attr)>,
    leaves: Vec<Leaf>,
    base: Vec<usize>,
    dtype: DType,
    hints: &'a Hints,
    g: &'a mut Gen,
}

enum Bound {
    Value(ValueId),
    Attr(Attr),
}

impl Builder<'_> {
    fn op(&mut self, op: &OpPat) -> Option<ValueId> {
        let mut operands = Vec::new();
        for (index, pat) in op.operands.iter().enumerate() {
            let id = if let Pat::Op(inner) = pat {
                self.op(inner)?
            } else if let Pat::Var(name, _) = pat {
                self.leaf(name, op.kind, index, &operands)?
            } else {
                return None;
            };
            operands.push(id);
        }
        let types: Vec<TensorType> = operands.iter().map(|v| self.graph.ty(*v).clone()).collect();
        let mut attrs = generate::attributes(self.g, op.kind, &types);
        if let (Some(_), Some(d)) = (attrs.get("to"), self.hints.dtype(self.g)) {
            attrs.set("to", Attr::DType(d));
        }
        for (name, _, expr) in &op.attrs {
            let value = match expr {
                Expr::Lit(lit, _) => literal(lit, name)?,
                Expr::Var(v, _) => match self.values.get(v) {
                    Some(Bound::Attr(a)) => a.clone(),
                    Some(Bound::Value(_)) => return None,
                    None => {
                        let a = attrs.get(name)?.clone();
                        self.values.insert(v.clone(), Bound::Attr(a.clone()));
                        self.instance_attrs.push((format!("?{v}"), a.clone()));
                        a
                    }
                },
                _ => return None,
            };
            attrs.set(name, value);
        }
        for (name, value) in &attrs.0 {
            if !op.attrs.iter().any(|(n, _, _)| n == name) {
                self.instance_attrs
                    .push((format!("{}.{name}", op.kind.name()), value.clone()));
            }
        }
        self.graph.build(op.kind, operands, attrs).ok().map(|r| r[0])
    }

    /// The value of operand variable `name`, used as operand `index` of `kind` after
    /// `siblings`: built on first use (an input, or a constant if the condition wants one).
    fn leaf(&mut self, name: &str, kind: OpKind, index: usize, siblings: &[ValueId]) -> Option<ValueId> {
        match self.values.get(name) {
            Some(Bound::Value(v)) => return Some(*v),
            Some(Bound::Attr(_)) => return None,
            None => {}
        }
        let sibling_types: Vec<TensorType> = siblings.iter().map(|v| self.graph.ty(*v).clone()).collect();
        // one element where the condition asks for it, most of the time (a scale, a bound)
        let shape = match self.hints.single.contains(name) && !siblings.is_empty() && self.g.chance(0.8) {
            true => Vec::new(),
            false => generate::operand_shape(self.g, kind, index, &sibling_types, &self.base),
        };
        let ty = TensorType::new(generate::operand_dtype(kind, index, self.dtype, &sibling_types), shape);
        let (id, leaf_kind) = match self.hints.constants.get(name) {
            Some(values) if self.g.chance(0.9) => {
                let t = generate::constant(self.g, &ty, values);
                (self.graph.constant(t.clone()), LeafKind::Constant(t))
            }
            _ => {
                let domain = match (kind, index, sibling_types.first()) {
                    (OpKind::Gather, 1, Some(data)) => Domain::Indices(gather_extent(data)),
                    _ => Domain::Data,
                };
                (
                    self.graph.add_input(&Instance::input_name(name), ty.clone()),
                    LeafKind::Input(domain),
                )
            }
        };
        self.values.insert(name.to_string(), Bound::Value(id));
        self.leaves.push(Leaf {
            name: name.to_string(),
            ty,
            kind: leaf_kind,
        });
        Some(id)
    }
}

/// The smallest extent of `data`'s axes (the gather axis is drawn later), so indices are
/// valid on any axis.
fn gather_extent(data: &TensorType) -> usize {
    data.shape.iter().copied().min().unwrap_or(1)
}

/// A literal written for attribute `name`, as the attribute value it denotes.
fn literal(lit: &Lit, name: &str) -> Option<Attr> {
    let wants_float = matches!(attr_sort(name)?, mxc_rewrite::rules::value::Sort::Float);
    Some(match lit {
        Lit::Int(v) if wants_float => Attr::Float(*v as f64),
        Lit::Int(v) => Attr::Int(*v),
        Lit::Float(v) => Attr::Float(*v),
        Lit::Ints(v) => Attr::Ints(v.clone()),
        Lit::Floats(v) => Attr::Floats(v.clone()),
        Lit::DType(d) => Attr::DType(*d),
        Lit::Str(s) => Attr::Str(s.clone()),
        Lit::Bool(_) => return None,
    })
}

/// A short identity for deduplicating instances: the graph's text and its constants' values.
pub fn key(instance: &Instance) -> String {
    let mut key = mxc_dialects::text::print(&instance.graph);
    for leaf in &instance.leaves {
        if let LeafKind::Constant(t) = &leaf.kind {
            let _ = write!(key, "|{}", super::show::tensor(t));
        }
    }
    key
}
