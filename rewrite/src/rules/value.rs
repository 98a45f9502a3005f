//! The values rule expressions compute and their sorts: attribute values, facts about a
//! tensor (type and, if known, constant value) and booleans. Also the sort of every `mx`
//! attribute, which fixes how literals and computed values become attribute leaves.

use crate::lang::{AttrValue, ConstValue};
use mxc_dialects::{DType, TensorType};
use std::fmt;

/// The sort of an expression, checked before any rule runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// A tensor value (a pattern variable in operand position, or `root`).
    Tensor,
    Int,
    Float,
    Ints,
    Floats,
    DType,
    Type,
    Bool,
    Str,
}

impl Sort {
    /// Whether a value of sort `self` is accepted where `want` is expected (integers widen
    /// to floats).
    pub fn fits(self, want: Sort) -> bool {
        self == want || matches!((self, want), (Sort::Int, Sort::Float) | (Sort::Ints, Sort::Floats))
    }
}

impl fmt::Display for Sort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Sort::Tensor => "a tensor",
            Sort::Int => "an integer",
            Sort::Float => "a float",
            Sort::Ints => "a list of integers",
            Sort::Floats => "a list of floats",
            Sort::DType => "an element type",
            Sort::Type => "a tensor type",
            Sort::Bool => "a boolean",
            Sort::Str => "a string",
        })
    }
}

/// What is known about one tensor value when a rule is tried.
#[derive(Clone, Debug, Default)]
pub struct TensorFacts {
    pub ty: Option<TensorType>,
    pub constant: Option<ConstValue>,
}

/// A computed value.
#[derive(Clone, Debug)]
pub enum Value {
    Tensor(TensorFacts),
    Int(i64),
    Float(f64),
    Ints(Vec<i64>),
    /// A list of sizes some of which are symbolic (of sort `Ints`: a function computing a
    /// shape gives it where its operands' types are symbolic; it becomes a sizes attribute).
    Sizes(Vec<mxc_dialects::dim::Dim>),
    Floats(Vec<f64>),
    DType(DType),
    Type(TensorType),
    Bool(bool),
    Str(String),
}

impl Value {
    pub fn from_attr(a: &AttrValue) -> Option<Value> {
        Some(match a {
            AttrValue::Int(v) => Value::Int(*v),
            AttrValue::Float(b) => Value::Float(f64::from_bits(*b)),
            AttrValue::Ints(v) => Value::Ints(v.clone()),
            AttrValue::Floats(v) => Value::Floats(v.iter().map(|b| f64::from_bits(*b)).collect()),
            AttrValue::DType(d) => Value::DType(*d),
            AttrValue::Str(s) => Value::Str(s.clone()),
            // symbolic sizes are no value rule expressions compute on: a rule that reads them
            // does not apply (rules over symbolic shapes see fixed sizes only)
            AttrValue::Graph(_) | AttrValue::Sizes(_) => return None,
        })
    }

    /// The attribute leaf for this value where an attribute of sort `sort` is expected.
    pub fn to_attr(&self, sort: Sort) -> Option<AttrValue> {
        Some(match (self, sort) {
            (Value::Int(v), Sort::Int) => AttrValue::Int(*v),
            (Value::Int(v), Sort::Float) => AttrValue::Float((*v as f64).to_bits()),
            (Value::Float(v), Sort::Float) => AttrValue::Float(v.to_bits()),
            (Value::Ints(v), Sort::Ints) => AttrValue::Ints(v.clone()),
            (Value::Sizes(v), Sort::Ints) => AttrValue::Sizes(v.clone()),
            (Value::Ints(v), Sort::Floats) => AttrValue::Floats(v.iter().map(|x| (*x as f64).to_bits()).collect()),
            (Value::Floats(v), Sort::Floats) => AttrValue::Floats(v.iter().map(|x| x.to_bits()).collect()),
            (Value::DType(d), Sort::DType) => AttrValue::DType(*d),
            (Value::Str(s), Sort::Str) => AttrValue::Str(s.clone()),
            _ => return None,
        })
    }

    /// Equality across sorts that compare (integers equal to floats of the same value).
    pub fn same(&self, other: &Value) -> Option<bool> {
        Some(match (self, other) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(_) | Value::Int(_), Value::Float(_) | Value::Int(_)) => self.as_f64()? == other.as_f64()?,
            (Value::Ints(a), Value::Ints(b)) => a == b,
            (Value::Sizes(a), Value::Sizes(b)) => a == b,
            (Value::Floats(a), Value::Floats(b)) => a == b,
            (Value::Ints(a), Value::Floats(b)) | (Value::Floats(b), Value::Ints(a)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| *x as f64 == *y)
            }
            (Value::DType(a), Value::DType(b)) => a == b,
            (Value::Type(a), Value::Type(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            _ => return None,
        })
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            _ => None,
        }
    }
}

/// The sort of the `mx` attribute called `name` (`None` for `value`, the tensor of
/// `mx.constant`, which rules do not build: constants are leaves of the e-graph).
pub fn attr_sort(name: &str) -> Option<Sort> {
    Some(match name {
        "axis" | "group" | "ceil_mode" | "count_include_pad" | "trans_a" | "trans_b" | "keepdims" | "n"
        | "out_channels" | "panel" | "zero_nan_rows" => Sort::Int,
        "alpha" | "beta" | "epsilon" | "scale" => Sort::Float,
        "axes" | "dilations" | "pads" | "strides" | "kernel" | "output_padding" | "shape" | "perm" | "starts"
        | "ends" | "steps" => Sort::Ints,
        "to" => Sort::DType,
        "approximate" | "layout" => Sort::Str,
        _ => return None,
    })
}
