//! Op attributes: named compile-time parameters (strides, axes, constant values, ...).

use crate::dim::Dim;
use crate::{DType, Graph, Tensor};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f64),
    Ints(Vec<i64>),
    /// Sizes some of which are symbolic (a reshape's or an expand's result shape in a graph of
    /// symbolic types); fixed sizes are `Ints`.
    Sizes(Vec<Dim>),
    Floats(Vec<f64>),
    Str(String),
    DType(DType),
    Tensor(Tensor),
    /// A region: a graph the op runs (the branches of `mx.if`, the body of `mx.loop`). Its
    /// inputs are bound by the op, never to values around it (regions are isolated from above).
    Graph(Arc<Graph>),
}

/// An op's attributes, kept sorted by name so printing is deterministic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs(pub BTreeMap<String, Attr>);

impl Attrs {
    pub fn new() -> Self {
        Attrs::default()
    }

    /// Builder-style insertion.
    pub fn with(mut self, name: &str, value: Attr) -> Self {
        self.0.insert(name.to_string(), value);
        self
    }

    pub fn set(&mut self, name: &str, value: Attr) {
        self.0.insert(name.to_string(), value);
    }

    pub fn get(&self, name: &str) -> Option<&Attr> {
        self.0.get(name)
    }

    pub fn int(&self, name: &str) -> Result<i64, String> {
        match self.get(name) {
            Some(Attr::Int(v)) => Ok(*v),
            other => Err(expected(name, "an integer", other)),
        }
    }

    pub fn float(&self, name: &str) -> Result<f64, String> {
        match self.get(name) {
            Some(Attr::Float(v)) => Ok(*v),
            Some(Attr::Int(v)) => Ok(*v as f64),
            other => Err(expected(name, "a float", other)),
        }
    }

    pub fn ints(&self, name: &str) -> Result<&[i64], String> {
        match self.get(name) {
            Some(Attr::Ints(v)) => Ok(v),
            other => Err(expected(name, "a list of integers", other)),
        }
    }

    pub fn str(&self, name: &str) -> Result<&str, String> {
        match self.get(name) {
            Some(Attr::Str(v)) => Ok(v),
            other => Err(expected(name, "a string", other)),
        }
    }

    pub fn dtype(&self, name: &str) -> Result<DType, String> {
        match self.get(name) {
            Some(Attr::DType(v)) => Ok(*v),
            other => Err(expected(name, "an element type", other)),
        }
    }

    pub fn tensor(&self, name: &str) -> Result<&Tensor, String> {
        match self.get(name) {
            Some(Attr::Tensor(v)) => Ok(v),
            other => Err(expected(name, "a tensor", other)),
        }
    }

    pub fn graph(&self, name: &str) -> Result<&Arc<Graph>, String> {
        match self.get(name) {
            Some(Attr::Graph(g)) => Ok(g),
            other => Err(expected(name, "a graph", other)),
        }
    }

    /// The regions among the attributes, by name.
    pub fn regions(&self) -> impl Iterator<Item = (&str, &Arc<Graph>)> {
        self.0.iter().filter_map(|(k, a)| match a {
            Attr::Graph(g) => Some((k.as_str(), g)),
            _ => None,
        })
    }

    /// A list of non-negative integers as `usize`; symbolic sizes at their cost point.
    pub fn dims(&self, name: &str) -> Result<Vec<usize>, String> {
        if let Some(Attr::Sizes(sizes)) = self.get(name) {
            return Ok(sizes.iter().map(|d| d.at_cost_point() as usize).collect());
        }
        self.ints(name)?
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| format!("attribute `{name}` must not be negative, got {v}")))
            .collect()
    }

    /// A list of integers; symbolic sizes at their cost point.
    pub fn int_list(&self, name: &str) -> Result<Vec<i64>, String> {
        match self.get(name) {
            Some(Attr::Sizes(sizes)) => Ok(sizes.iter().map(|d| d.at_cost_point() as i64).collect()),
            _ => self.ints(name).map(<[i64]>::to_vec),
        }
    }

    /// A list of sizes as dimensions: symbolic ones as they are, fixed ones as constants.
    pub fn sizes(&self, name: &str) -> Result<Vec<Dim>, String> {
        match self.get(name) {
            Some(Attr::Sizes(sizes)) => Ok(sizes.clone()),
            _ => Ok(self.dims(name)?.into_iter().map(|d| Dim::constant(d as u64)).collect()),
        }
    }

    /// Whether some attribute holds symbolic sizes.
    pub fn has_symbolic_sizes(&self) -> bool {
        self.0.values().any(|a| matches!(a, Attr::Sizes(_)))
    }
}

fn expected(name: &str, what: &str, got: Option<&Attr>) -> String {
    match got {
        None => format!("missing attribute `{name}` ({what})"),
        Some(Attr::Graph(g)) => format!("attribute `{name}` must be {what}, got the graph `{}`", g.name),
        Some(a) => format!("attribute `{name}` must be {what}, got {a:?}"),
    }
}
