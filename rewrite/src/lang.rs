//! The `mx` dialect as an egg language. Every op is an e-node whose children are first one
//! leaf per attribute (in the order of `OpKind::attr_names`, i.e. sorted by name), then its
//! operands; attribute values, constants and graph inputs are leaves. Keeping attributes as
//! children lets ordinary egg patterns bind them to variables (`(transpose ?x ?perm)`) and
//! rules compute new ones. A fused kernel (`Mx::Kernel`, added by `fuse.rs`) carries its body
//! graph, and a library call (`Mx::Call`, added by `library.rs`) its callee and the body it
//! computes; the children of both are their operands.

pub use crate::constant::ConstValue;
use egg::{Id, Language};
use mxc_dialects::mx::call::Callee;
use mxc_dialects::{Attr, DType, Graph, OpKind};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One e-node of the mx language.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mx {
    /// Graph input number `n`.
    Input(u32),
    /// A constant tensor.
    Const(ConstValue),
    /// An attribute value (a leaf child of the op that carries it).
    Attr(AttrValue),
    /// An op: `kind.attr_names().len()` attribute leaves, then the operands.
    Op(OpKind, Vec<Id>),
    /// Result `n` of a multi-result op (the only child).
    Result(u32, [Id; 1]),
    /// An `mx.fused` kernel: its body, then its operands (the body's inputs, in order).
    Kernel(GraphValue, Vec<Id>),
    /// An `mx.call`: the library function, the body it computes, then its operands.
    Call(Callee, GraphValue, Vec<Id>),
}

impl Mx {
    /// The attribute leaves and the operands of an op node (both empty for other nodes).
    pub fn split_op(&self) -> Option<(OpKind, &[Id], &[Id])> {
        match self {
            Mx::Op(kind, children) => {
                let n = kind.attr_names().len();
                Some((*kind, &children[..n], &children[n..]))
            }
            _ => None,
        }
    }

    /// The callee (none for a generated kernel), body and operands of a fused kernel or call.
    pub fn kernel(&self) -> Option<(Option<Callee>, &GraphValue, &[Id])> {
        match self {
            Mx::Kernel(body, operands) => Some((None, body, operands)),
            Mx::Call(callee, body, operands) => Some((Some(*callee), body, operands)),
            _ => None,
        }
    }
}

impl Language for Mx {
    type Discriminant = std::mem::Discriminant<Mx>;

    fn discriminant(&self) -> Self::Discriminant {
        std::mem::discriminant(self)
    }

    fn matches(&self, other: &Self) -> bool {
        match (self, other) {
            (Mx::Op(a, xs), Mx::Op(b, ys)) => a == b && xs.len() == ys.len(),
            (Mx::Result(a, _), Mx::Result(b, _)) => a == b,
            (Mx::Kernel(a, xs), Mx::Kernel(b, ys)) => a == b && xs.len() == ys.len(),
            (Mx::Call(f, a, xs), Mx::Call(g, b, ys)) => f == g && a == b && xs.len() == ys.len(),
            (a, b) => a == b,
        }
    }

    fn children(&self) -> &[Id] {
        match self {
            Mx::Op(_, children) | Mx::Kernel(_, children) | Mx::Call(_, _, children) => children,
            Mx::Result(_, child) => child,
            _ => &[],
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            Mx::Op(_, children) | Mx::Kernel(_, children) | Mx::Call(_, _, children) => children,
            Mx::Result(_, child) => child,
            _ => &mut [],
        }
    }
}

impl fmt::Display for Mx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mx::Input(n) => write!(f, "input{n}"),
            Mx::Const(c) => write!(f, "const<{}>", c.tensor.ty),
            Mx::Attr(a) => write!(f, "{a}"),
            Mx::Op(kind, _) => f.write_str(kind.name()),
            Mx::Result(n, _) => write!(f, "result{n}"),
            Mx::Kernel(body, _) => write!(f, "fused({})", body.op_names().join(", ")),
            Mx::Call(callee, _, _) => write!(f, "call {callee}"),
        }
    }
}

/// A graph held by an e-node (a fused kernel's body, a region of a control op), compared,
/// hashed and ordered by its printed text.
#[derive(Clone, Debug)]
pub struct GraphValue {
    pub graph: Arc<Graph>,
    /// Where each body op came from, when fusion built the kernel: the e-class and e-node it
    /// was made of (for explanations; not part of the kernel's identity).
    pub members: Arc<[(Id, Mx)]>,
    text: Arc<str>,
    hash: u64,
}

impl GraphValue {
    pub fn new(graph: Arc<Graph>, members: Vec<(Id, Mx)>) -> GraphValue {
        let text: Arc<str> = mxc_dialects::text::print(&graph).into();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        GraphValue {
            graph,
            members: members.into(),
            text,
            hash: h.finish(),
        }
    }

    /// The names of the body's ops (not its constants), in order.
    pub fn op_names(&self) -> Vec<&'static str> {
        self.graph
            .ops
            .iter()
            .filter(|op| op.kind != OpKind::Constant)
            .map(|op| op.kind.name())
            .collect()
    }
}

impl PartialEq for GraphValue {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}

impl Eq for GraphValue {}

impl Hash for GraphValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.hash.hash(state);
    }
}

impl PartialOrd for GraphValue {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GraphValue {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

/// An attribute value with total equality (floats compared by their bits).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttrValue {
    Int(i64),
    Float(u64),
    Ints(Vec<i64>),
    Sizes(Vec<mxc_dialects::dim::Dim>),
    Floats(Vec<u64>),
    Str(String),
    DType(DType),
    /// A region (`Attr::Graph`); rewrites inside it happen before the graph around it is
    /// rewritten (`codegen`'s `rewrites`), so here it is a leaf.
    Graph(GraphValue),
}

impl AttrValue {
    /// The leaf for an op attribute; tensors are not attributes of ops other than
    /// `mx.constant`, which becomes a `Const` leaf instead.
    pub fn from_attr(a: &Attr) -> Option<AttrValue> {
        Some(match a {
            Attr::Int(v) => AttrValue::Int(*v),
            Attr::Float(v) => AttrValue::Float(v.to_bits()),
            Attr::Ints(v) => AttrValue::Ints(v.clone()),
            Attr::Sizes(v) => AttrValue::Sizes(v.clone()),
            Attr::Floats(v) => AttrValue::Floats(v.iter().map(|x| x.to_bits()).collect()),
            Attr::Str(s) => AttrValue::Str(s.clone()),
            Attr::DType(d) => AttrValue::DType(*d),
            Attr::Graph(g) => AttrValue::Graph(GraphValue::new(g.clone(), Vec::new())),
            Attr::Tensor(_) => return None,
        })
    }

    pub fn to_attr(&self) -> Attr {
        match self {
            AttrValue::Int(v) => Attr::Int(*v),
            AttrValue::Float(b) => Attr::Float(f64::from_bits(*b)),
            AttrValue::Ints(v) => Attr::Ints(v.clone()),
            AttrValue::Sizes(v) => Attr::Sizes(v.clone()),
            AttrValue::Floats(v) => Attr::Floats(v.iter().map(|b| f64::from_bits(*b)).collect()),
            AttrValue::Str(s) => Attr::Str(s.clone()),
            AttrValue::DType(d) => Attr::DType(*d),
            AttrValue::Graph(g) => Attr::Graph(g.graph.clone()),
        }
    }
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(b) => write!(f, "{:?}", f64::from_bits(*b)),
            AttrValue::Ints(v) => write!(f, "{v:?}"),
            AttrValue::Sizes(v) => write!(f, "{}", mxc_dialects::dim::show(v)),
            AttrValue::Floats(v) => write!(f, "{:?}", v.iter().map(|b| f64::from_bits(*b)).collect::<Vec<_>>()),
            AttrValue::Str(s) => write!(f, "{s:?}"),
            AttrValue::DType(d) => write!(f, "{d}"),
            AttrValue::Graph(g) => write!(f, "graph<{}>", g.graph.name),
        }
    }
}
