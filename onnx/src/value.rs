//! The ONNX values the importer holds by name: a tensor is an mx value; a sequence or an
//! optional is not a value of mx (whose values are tensors) but a structure fixed at import
//! that holds mx values, so the ops on it (`ops/sequence.rs`, `ops/optional.rs`) cost nothing
//! at run time.

use super::proto::type_proto::Value as TypeValue;
use super::proto::TypeProto;
use mxc_dialects::interface::Structure;
use mxc_dialects::{DType, ValueId};

/// An ONNX sequence whose length is known at import: its tensors, in order.
#[derive(Clone, Debug)]
pub struct Sequence {
    /// The element type, also of an empty sequence.
    pub dtype: DType,
    pub elements: Vec<ValueId>,
}

/// An ONNX value: a tensor, a sequence or an optional.
#[derive(Clone, Debug)]
pub enum OnnxValue {
    Tensor(ValueId),
    Sequence(Sequence),
    /// What the optional holds, `None` when it is empty; whether it is of a sequence (else of
    /// a tensor), as its type says.
    Optional {
        of_sequence: bool,
        value: Option<Box<OnnxValue>>,
    },
}

impl OnnxValue {
    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            OnnxValue::Tensor(_) => "a tensor",
            OnnxValue::Sequence(_) => "a sequence",
            OnnxValue::Optional { value: None, .. } => "an empty optional",
            OnnxValue::Optional { .. } => "an optional",
        }
    }

    /// The structure of the value, as the model's interface records it.
    pub fn structure(&self) -> Structure {
        match self {
            OnnxValue::Tensor(_) => Structure::Tensor,
            OnnxValue::Sequence(s) => Structure::Sequence(s.elements.len()),
            OnnxValue::Optional { of_sequence, value } => Structure::Optional {
                of_sequence: *of_sequence,
                value: value.as_ref().map(|v| Box::new(v.structure())),
            },
        }
    }

    /// The value as a value of the declared type `ty`: a tensor or sequence where an optional
    /// is declared is one held by an optional; anything else is unchanged.
    pub fn into_declared(self, ty: Option<&TypeProto>) -> OnnxValue {
        match (ty.and_then(|t| t.value.as_ref()), self) {
            (Some(TypeValue::OptionalType(_)), v @ (OnnxValue::Tensor(_) | OnnxValue::Sequence(_))) => {
                OnnxValue::Optional {
                    of_sequence: matches!(v, OnnxValue::Sequence(_)),
                    value: Some(Box::new(v)),
                }
            }
            (_, v) => v,
        }
    }

    /// The tensors the value holds, in order.
    pub fn tensors(&self) -> Vec<ValueId> {
        match self {
            OnnxValue::Tensor(v) => vec![*v],
            OnnxValue::Sequence(s) => s.elements.clone(),
            OnnxValue::Optional { value, .. } => value.as_ref().map_or_else(Vec::new, |v| v.tensors()),
        }
    }
}
