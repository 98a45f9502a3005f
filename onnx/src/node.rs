//! A read-only view of an ONNX node for the op parsers: typed attribute accessors with
//! defaults, and the subgraph attributes (`GRAPH`) as decoded protos for control-flow
//! parsers.

use super::proto::attribute_proto::AttributeType;
use super::proto::{AttributeProto, GraphProto, NodeProto, TensorProto, TypeProto};
use std::cell::RefCell;

/// An attribute that means nothing to an inference compiler on any op, so a parser need not
/// read it: `consumed_inputs` (opsets before 6: a memory hint). Attributes that have no effect
/// on one op are marked by its parser (`without_effect`).
const WITHOUT_MEANING_HERE: [&str; 1] = ["consumed_inputs"];

/// A node, as its parser sees it. It records which attributes the parser asked for, so that
/// one it never looked at (a newer attribute, or a misspelt one) is refused, not ignored.
pub struct NodeView<'a> {
    pub proto: &'a NodeProto,
    asked: RefCell<Vec<bool>>,
}

impl<'a> NodeView<'a> {
    pub fn new(proto: &'a NodeProto) -> NodeView<'a> {
        NodeView {
            proto,
            asked: RefCell::new(vec![false; proto.attribute.len()]),
        }
    }

    fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        let i = self.proto.attribute.iter().position(|a| a.name() == name)?;
        self.asked.borrow_mut()[i] = true;
        Some(&self.proto.attribute[i])
    }

    /// Marks attributes as seen that the parser found to have no effect on this node (say
    /// why where it calls this).
    pub fn without_effect(&self, names: &[&str]) {
        for name in names {
            self.attr(name);
        }
    }

    /// The node's attributes its parser never asked for (less those without meaning here).
    pub fn unread(&self) -> Vec<&'a str> {
        let asked = self.asked.borrow();
        self.proto
            .attribute
            .iter()
            .zip(asked.iter())
            .filter(|(a, &asked)| !asked && !WITHOUT_MEANING_HERE.contains(&a.name()))
            .map(|(a, _)| a.name())
            .collect()
    }

    /// The attribute `name` if it is present, checked to be of type `ty` (an attribute whose
    /// type field is unset, as in old models, is taken to be of the type asked for).
    fn typed(&self, name: &str, ty: AttributeType, what: &str) -> Result<Option<&'a AttributeProto>, String> {
        match self.attr(name) {
            Some(a) if a.r#type.is_none() || a.r#type() == ty => Ok(Some(a)),
            Some(a) => Err(format!(
                "attribute `{name}` must be {what}, got {}",
                a.r#type().as_str_name()
            )),
            None => Ok(None),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    pub fn opt_int(&self, name: &str) -> Result<Option<i64>, String> {
        Ok(self.typed(name, AttributeType::Int, "an integer")?.map(|a| a.i()))
    }

    pub fn int(&self, name: &str, default: i64) -> Result<i64, String> {
        Ok(self.opt_int(name)?.unwrap_or(default))
    }

    pub fn opt_float(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self.typed(name, AttributeType::Float, "a float")?.map(|a| a.f()))
    }

    pub fn float(&self, name: &str, default: f32) -> Result<f32, String> {
        Ok(self.opt_float(name)?.unwrap_or(default))
    }

    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        Ok(self
            .typed(name, AttributeType::Ints, "a list of integers")?
            .map(|a| a.ints.clone()))
    }

    pub fn opt_strings(&self, name: &str) -> Result<Option<Vec<String>>, String> {
        let a = self.typed(name, AttributeType::Strings, "a list of strings")?;
        a.map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8(s.clone()).map_err(|_| format!("attribute `{name}` is not UTF-8")))
                .collect()
        })
        .transpose()
    }

    pub fn opt_floats(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        Ok(self
            .typed(name, AttributeType::Floats, "a list of floats")?
            .map(|a| a.floats.clone()))
    }

    pub fn opt_string(&self, name: &str) -> Result<Option<String>, String> {
        let a = self.typed(name, AttributeType::String, "a string")?;
        a.map(|a| String::from_utf8(a.s().to_vec()).map_err(|_| format!("attribute `{name}` is not UTF-8")))
            .transpose()
    }

    pub fn string(&self, name: &str, default: &str) -> Result<String, String> {
        Ok(self.opt_string(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn opt_tensor(&self, name: &str) -> Result<Option<&'a TensorProto>, String> {
        Ok(self
            .typed(name, AttributeType::Tensor, "a tensor")?
            .and_then(|a| a.t.as_ref()))
    }

    /// A `TYPE_PROTO` attribute (the type of `Optional`'s empty value).
    pub fn opt_type(&self, name: &str) -> Result<Option<&'a TypeProto>, String> {
        Ok(self
            .typed(name, AttributeType::TypeProto, "a type")?
            .and_then(|a| a.tp.as_ref()))
    }

    /// A `GRAPH` attribute (the body of `If`, `Loop`, `Scan`).
    pub fn graph(&self, name: &str) -> Result<Option<&'a GraphProto>, String> {
        Ok(self
            .typed(name, AttributeType::Graph, "a graph")?
            .and_then(|a| a.g.as_ref()))
    }
}
