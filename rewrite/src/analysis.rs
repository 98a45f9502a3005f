//! The e-class analysis: every class knows what it is (an attribute value, a value of a tensor
//! type, or the tuple of results of a multi-result op) and, where known, its constant value.
//! Constants are folded here, while nodes are added, with `mxc_dialects::eval::eval` (the
//! evaluator tested against the `ref` target; there is no second one).
//!
//! Merge policy: merging classes whose types (or constant values) differ means a rule is
//! unsound. That is not a panic (rules are user input): the conflict is recorded in
//! `MxAnalysis::conflicts`, the runner stops at the next iteration and `optimize` returns
//! `RewriteError::Unsound`. A node that does not type-check (a rule's right side instantiated
//! where it does not fit) gets `Kind::Invalid`; merged into a typed class it yields to the
//! type, and extraction never picks it.

use crate::constant::defers;
use crate::lang::{AttrValue, ConstValue, Mx};
use egg::{Analysis, DidMerge, EGraph, Id, Language};
use mxc_dialects::{eval, mx, Attrs, OpKind, Tensor, TensorType, Trait};
use std::fmt;

/// Results with at most this many elements are folded when all operands are constants.
pub const DEFAULT_FOLD_LIMIT: usize = 4096;

/// What an e-class holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// An attribute leaf.
    Attr(AttrValue),
    /// A tensor value of this type.
    Value(TensorType),
    /// A multi-result op: its result types, each reached through `Mx::Result`.
    Tuple(Vec<TensorType>),
    /// A node that does not type-check, and why.
    Invalid(String),
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Attr(a) => write!(f, "attribute {a}"),
            Kind::Value(t) => write!(f, "{t}"),
            Kind::Tuple(ts) => {
                let ts: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
                write!(f, "({})", ts.join(", "))
            }
            Kind::Invalid(why) => write!(f, "invalid ({why})"),
        }
    }
}

/// The analysis data of one e-class.
#[derive(Clone, Debug)]
pub struct ClassData {
    pub kind: Kind,
    /// The value, when it is known at compile time.
    pub constant: Option<ConstValue>,
}

impl ClassData {
    fn of(kind: Kind) -> ClassData {
        ClassData { kind, constant: None }
    }

    /// The tensor type of a value class.
    pub fn ty(&self) -> Option<&TensorType> {
        match &self.kind {
            Kind::Value(t) => Some(t),
            _ => None,
        }
    }
}

/// Types and constant values for `Mx` e-graphs.
#[derive(Clone, Debug)]
pub struct MxAnalysis {
    /// The types of the graph inputs (`Mx::Input(n)` has type `inputs[n]`).
    pub inputs: Vec<TensorType>,
    /// Fold ops whose result has at most this many elements (data movement and element-wise
    /// arithmetic that do not grow their largest operand, such as transposing weights or
    /// scaling them per channel, are folded at any size).
    pub fold_limit: usize,
    /// Merges of classes that cannot be equal, in the order they happened.
    pub conflicts: Vec<String>,
}

impl Default for MxAnalysis {
    fn default() -> Self {
        MxAnalysis::new(Vec::new(), DEFAULT_FOLD_LIMIT)
    }
}

impl MxAnalysis {
    pub fn new(inputs: Vec<TensorType>, fold_limit: usize) -> MxAnalysis {
        MxAnalysis {
            inputs,
            fold_limit,
            conflicts: Vec::new(),
        }
    }

    fn conflict(&mut self, message: String) {
        // Keep the first few: one unsound rule can merge many classes.
        if self.conflicts.len() < 16 {
            self.conflicts.push(message);
        }
    }

    /// The fold policy: a small result (at most `fold_limit` elements) is always folded; a
    /// larger one only when computing it is weight preprocessing (`Trait::Preprocessing`: a
    /// data-movement or element-wise op whose result is no larger than its largest operand:
    /// transposing a weight, scaling it per channel, dequantising it). Ops that grow their
    /// operands (broadcasts, expands, concatenations) stay in the program and are computed at
    /// run time, except a concatenation, whose result is no larger than its operands together
    /// (weights padded with zeros: `integer.rules`' kernel rows). Weight layouts
    /// (`Trait::WeightLayout`) are always folded.
    /// Never where the result is symbolic: a constant has fixed sizes (a slice of a constant
    /// to a symbolic length stays an op).
    fn should_fold(&self, kind: OpKind, operands: &[&Tensor], result: &TensorType) -> bool {
        if result.is_symbolic() {
            return false;
        }
        let n = result.num_elements();
        let grows = operands.iter().all(|t| t.len() < n);
        n <= self.fold_limit
            || kind.has(Trait::WeightLayout)
            || (kind.has(Trait::Preprocessing) && !grows)
            || kind == OpKind::Concat
    }
}

/// The attributes of an op node, from its attribute leaves (`OpKind::attr_names` order).
pub fn node_attrs(egraph: &EGraph<Mx, MxAnalysis>, kind: OpKind, leaves: &[Id]) -> Result<Attrs, String> {
    let mut attrs = Attrs::new();
    for (name, id) in kind.attr_names().iter().zip(leaves) {
        match &egraph[*id].data.kind {
            Kind::Attr(a) => attrs.set(name, a.to_attr()),
            other => return Err(format!("attribute `{name}` is {other}, not an attribute")),
        }
    }
    Ok(attrs)
}

/// The types of an op node's operands.
pub fn operand_types(egraph: &EGraph<Mx, MxAnalysis>, operands: &[Id]) -> Result<Vec<TensorType>, String> {
    operands
        .iter()
        .map(|id| match &egraph[*id].data.kind {
            Kind::Value(t) => Ok(t.clone()),
            other => Err(format!("operand is {other}, not a tensor")),
        })
        .collect()
}

/// The result types `infer` gives an op node, or why it does not type-check.
pub fn infer_node(
    egraph: &EGraph<Mx, MxAnalysis>,
    node: &Mx,
) -> Result<(Attrs, Vec<TensorType>, Vec<TensorType>), String> {
    let (kind, leaves, operands) = node.split_op().ok_or("not an op")?;
    let attrs = node_attrs(egraph, kind, leaves)?;
    let types = operand_types(egraph, operands)?;
    let results = mx::infer(kind, &types, &attrs).map_err(|m| format!("{kind}: {m}"))?;
    Ok((attrs, types, results))
}

/// The result types of a fused kernel with `body` on `operands`, or why it does not fit.
pub fn kernel_types(
    egraph: &EGraph<Mx, MxAnalysis>,
    body: &mxc_dialects::Graph,
    operands: &[Id],
) -> Result<Vec<TensorType>, String> {
    let types = operand_types(egraph, operands)?;
    mx::fused::infer(Some(body), &types).map_err(|m| format!("{}: {m}", OpKind::Fused))
}

/// The constant `kind` computes from constant operands: deferred where `defers` says so (a
/// large folded weight, computed only if it is written), computed now otherwise.
fn fold(
    egraph: &EGraph<Mx, MxAnalysis>,
    kind: OpKind,
    attrs: &Attrs,
    leaves: &[Id],
    operands: &[&ConstValue],
    ty: &TensorType,
) -> Option<ConstValue> {
    if defers(kind, attrs, operands, ty, egraph.analysis.fold_limit) {
        let leaves = leaves.iter().map(|id| match &egraph[*id].data.kind {
            Kind::Attr(a) => Some(a.clone()),
            _ => None,
        });
        let leaves = leaves.collect::<Option<Vec<AttrValue>>>()?;
        return Some(ConstValue::folded(kind, attrs, leaves, operands, ty.clone()));
    }
    // a small value from a deferred operand computes the operand for it alone
    let values: Vec<Tensor> = operands.iter().map(|c| c.tensor.materialized()).collect();
    let refs: Vec<&Tensor> = values.iter().collect();
    match eval::eval(kind, &refs, attrs) {
        Some(Ok(mut values)) if values.len() == 1 && values[0].ty == *ty => Some(ConstValue::new(values.remove(0))),
        _ => None,
    }
}

fn make_op(egraph: &EGraph<Mx, MxAnalysis>, node: &Mx) -> ClassData {
    let (attrs, _, results) = match infer_node(egraph, node) {
        Ok(r) => r,
        Err(why) => return ClassData::of(Kind::Invalid(why)),
    };
    let Some((kind, leaves, operands)) = node.split_op() else {
        unreachable!("infer_node accepts only ops")
    };
    if results.len() != 1 {
        return ClassData::of(Kind::Tuple(results));
    }
    let ty = results.into_iter().next().expect("one result");
    let constants: Option<Vec<&ConstValue>> = operands.iter().map(|id| egraph[*id].data.constant.as_ref()).collect();
    let constant = constants
        .filter(|cs| {
            let tensors: Vec<&Tensor> = cs.iter().map(|c| &*c.tensor).collect();
            egraph.analysis.should_fold(kind, &tensors, &ty)
        })
        .and_then(|cs| fold(egraph, kind, &attrs, leaves, &cs, &ty));
    ClassData {
        kind: Kind::Value(ty),
        constant,
    }
}

impl Analysis<Mx> for MxAnalysis {
    type Data = ClassData;

    fn make(egraph: &mut EGraph<Mx, Self>, enode: &Mx, _id: Id) -> ClassData {
        match enode {
            Mx::Input(n) => ClassData::of(match egraph.analysis.inputs.get(*n as usize) {
                Some(t) => Kind::Value(t.clone()),
                None => Kind::Invalid(format!("there is no input {n}")),
            }),
            Mx::Const(c) => ClassData {
                kind: Kind::Value(c.tensor.ty.clone()),
                constant: Some(c.clone()),
            },
            Mx::Attr(a) => ClassData::of(Kind::Attr(a.clone())),
            Mx::Result(n, [tuple]) => ClassData::of(match &egraph[*tuple].data.kind {
                Kind::Tuple(ts) if (*n as usize) < ts.len() => Kind::Value(ts[*n as usize].clone()),
                Kind::Invalid(why) => Kind::Invalid(why.clone()),
                other => Kind::Invalid(format!("result {n} of {other}")),
            }),
            Mx::Op(..) => make_op(egraph, enode),
            Mx::Kernel(body, operands) | Mx::Call(_, body, operands) => {
                ClassData::of(match kernel_types(egraph, &body.graph, operands) {
                    Ok(mut ts) if ts.len() == 1 => Kind::Value(ts.remove(0)),
                    Ok(ts) => Kind::Tuple(ts),
                    Err(why) => Kind::Invalid(why),
                })
            }
        }
    }

    fn merge(&mut self, a: &mut ClassData, b: ClassData) -> DidMerge {
        let mut did = DidMerge(false, false);
        if a.kind != b.kind {
            match (&a.kind, &b.kind) {
                (Kind::Invalid(_), _) => {
                    a.kind = b.kind;
                    did.0 = true;
                }
                (_, Kind::Invalid(_)) => did.1 = true,
                (x, y) => {
                    self.conflict(format!("a value of type {x} was merged with one of type {y}"));
                    did.1 = true;
                }
            }
        }
        match (&a.constant, b.constant) {
            (None, Some(c)) => {
                a.constant = Some(c);
                did.0 = true;
            }
            (Some(_), None) => did.1 = true,
            (Some(x), Some(y)) if !x.same_value(&y) => {
                self.conflict(format!("two different constants of type {} were merged", x.tensor.ty));
                did.1 = true;
            }
            _ => {}
        }
        did
    }

    /// A class with a known value gets the `Const` leaf, and only leaves are kept: the
    /// constant costs nothing, so nothing else in the class could be extracted. Except a
    /// `dequantize_linear`: quantised weights keep saying what integers they are, which the
    /// integer products' rules read (`integer.rules`); it is never extracted (the leaf costs
    /// less), and no rule rewrites it where its operand is a constant.
    fn modify(egraph: &mut EGraph<Mx, Self>, id: Id) {
        let Some(c) = egraph[id].data.constant.clone() else {
            return;
        };
        if !egraph[id].nodes.iter().any(|n| matches!(n, Mx::Const(_))) {
            let leaf = egraph.add(Mx::Const(c));
            egraph.union(id, leaf);
        }
        let id = egraph.find(id);
        egraph[id]
            .nodes
            .retain(|n| n.is_leaf() || matches!(n, Mx::Op(OpKind::DequantizeLinear, _)));
    }
}

impl crate::rules::ClassFacts for ClassData {
    fn ty(&self) -> Option<&TensorType> {
        ClassData::ty(self)
    }

    fn constant(&self) -> Option<&ConstValue> {
        self.constant.as_ref()
    }
}
