//! What rules need to know about an e-class, as a trait the e-class analysis implements:
//! the value's type and, where known, its constant value. Attribute values are read from the
//! class's `Mx::Attr` leaf and need nothing from the analysis.

use crate::lang::{AttrValue, ConstValue, Mx};
use egg::{Analysis, EGraph, Id};
use mxc_dialects::TensorType;

/// Per-class facts rules read (implemented by the analysis's class data).
pub trait ClassFacts {
    /// The type of the class's value, if known.
    fn ty(&self) -> Option<&TensorType>;
    /// The class's value, if it is a known constant.
    fn constant(&self) -> Option<&ConstValue>;
}

/// The attribute value held by class `id` (an attribute leaf), if any.
pub fn attr_of<N: Analysis<Mx>>(egraph: &EGraph<Mx, N>, id: Id) -> Option<&AttrValue> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Mx::Attr(a) => Some(a),
        _ => None,
    })
}
