//! The IR core: a graph of ops over SSA values, each value with a tensor type.
//!
//! A `Graph` is one function: named inputs, ops in a valid execution order (every operand is
//! defined before it is used), named outputs. Values are numbered densely by `ValueId`.

use crate::mx::call::Callee;
use crate::{mx, Attrs, IrError, OpKind, Tensor, TensorType};
use std::sync::Arc;

/// An SSA value: the input of a graph or a result of an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Def {
    Input(usize),
    Op { op: usize, result: usize },
}

/// One operation: kind, operands, attributes and the values it defines; an `mx.fused` op
/// also has a body (`mx::fused`), every other op none.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    pub operands: Vec<ValueId>,
    pub attrs: Attrs,
    pub results: Vec<ValueId>,
    pub body: Option<Arc<Graph>>,
}

/// A graph input or output: the name the outside world uses and the value behind it.
#[derive(Clone, Debug, PartialEq)]
pub struct Port {
    pub name: String,
    pub value: ValueId,
}

/// A function over tensors in SSA form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    pub name: String,
    types: Vec<TensorType>,
    defs: Vec<Def>,
    pub inputs: Vec<Port>,
    pub ops: Vec<Op>,
    pub outputs: Vec<Port>,
    /// How a model's sequence and optional inputs and outputs map to the ports (empty when
    /// all are tensors; kept by the graph an import makes, not by rewritten graphs).
    pub interface: crate::interface::Interface,
}

impl Graph {
    /// Each symbol the graph's types and sizes (in it, its regions and fused bodies) use, by
    /// name, as first seen (the verifier refuses one name with two constraint sets).
    pub fn symbols(&self) -> std::collections::BTreeMap<String, crate::dim::Symbol> {
        let mut symbols = std::collections::BTreeMap::new();
        self.collect_symbols(&mut symbols);
        symbols
    }

    fn collect_symbols(&self, symbols: &mut std::collections::BTreeMap<String, crate::dim::Symbol>) {
        let mut add = |dims: &[crate::dim::Dim]| {
            for s in dims.iter().flat_map(crate::dim::Dim::symbols) {
                symbols.entry(s.name.clone()).or_insert_with(|| s.clone());
            }
        };
        for v in 0..self.num_values() {
            if let Some(dims) = &self.ty(ValueId(v as u32)).symbolic {
                add(dims);
            }
        }
        for op in &self.ops {
            for a in op.attrs.0.values() {
                if let crate::Attr::Sizes(dims) = a {
                    add(dims);
                }
            }
        }
        for op in &self.ops {
            op.body.iter().for_each(|body| body.collect_symbols(symbols));
            op.attrs
                .regions()
                .for_each(|(_, region)| region.collect_symbols(symbols));
        }
    }

    pub fn new(name: &str) -> Graph {
        Graph {
            name: name.to_string(),
            ..Graph::default()
        }
    }

    pub fn ty(&self, v: ValueId) -> &TensorType {
        &self.types[v.index()]
    }

    pub fn def(&self, v: ValueId) -> Def {
        self.defs[v.index()]
    }

    pub fn num_values(&self) -> usize {
        self.types.len()
    }

    fn new_value(&mut self, ty: TensorType, def: Def) -> ValueId {
        let id = ValueId(self.types.len() as u32);
        self.types.push(ty);
        self.defs.push(def);
        id
    }

    pub fn add_input(&mut self, name: &str, ty: TensorType) -> ValueId {
        let v = self.new_value(ty, Def::Input(self.inputs.len()));
        self.inputs.push(Port {
            name: name.to_string(),
            value: v,
        });
        v
    }

    pub fn add_output(&mut self, name: &str, value: ValueId) {
        self.outputs.push(Port {
            name: name.to_string(),
            value,
        });
    }

    /// Appends an op whose result types are given (the verifier checks them later).
    pub fn push_op(
        &mut self,
        kind: OpKind,
        operands: Vec<ValueId>,
        attrs: Attrs,
        result_types: Vec<TensorType>,
    ) -> Vec<ValueId> {
        let op = self.ops.len();
        let results: Vec<ValueId> = result_types
            .into_iter()
            .enumerate()
            .map(|(result, ty)| self.new_value(ty, Def::Op { op, result }))
            .collect();
        self.ops.push(Op {
            kind,
            operands,
            attrs,
            results: results.clone(),
            body: None,
        });
        results
    }

    /// Appends an `mx.fused` op computing `body` on `operands`; refused if the body is not a
    /// valid kernel body or does not take the operands' types.
    pub fn build_fused(&mut self, body: Arc<Graph>, operands: Vec<ValueId>) -> Result<ValueId, IrError> {
        let types: Vec<TensorType> = operands.iter().map(|v| self.ty(*v).clone()).collect();
        let results = mx::fused::infer(Some(&body), &types);
        self.push_with_body(OpKind::Fused, Attrs::new(), body, operands, results)
    }

    /// Appends an `mx.call` of `callee` computing `body` on `operands`; refused if the callee
    /// does not compute the body (`mx::call::infer`).
    pub fn build_call(&mut self, callee: Callee, body: Arc<Graph>, operands: Vec<ValueId>) -> Result<ValueId, IrError> {
        let types: Vec<TensorType> = operands.iter().map(|v| self.ty(*v).clone()).collect();
        let results = mx::call::infer(callee.name(), Some(&body), &types);
        let attrs = Attrs::new().with("callee", crate::Attr::Str(callee.name().into()));
        self.push_with_body(OpKind::Call, attrs, body, operands, results)
    }

    fn push_with_body(
        &mut self,
        kind: OpKind,
        attrs: Attrs,
        body: Arc<Graph>,
        operands: Vec<ValueId>,
        results: Result<Vec<TensorType>, String>,
    ) -> Result<ValueId, IrError> {
        let results = results.map_err(|message| IrError::Op {
            op: kind.to_string(),
            message,
        })?;
        let r = self.push_op(kind, operands, attrs, results);
        self.ops.last_mut().expect("just pushed").body = Some(body);
        Ok(r[0])
    }

    /// Appends an op, inferring its result types; an op that does not type-check is refused.
    pub fn build(&mut self, kind: OpKind, operands: Vec<ValueId>, attrs: Attrs) -> Result<Vec<ValueId>, IrError> {
        let types: Vec<TensorType> = operands.iter().map(|v| self.ty(*v).clone()).collect();
        let results = mx::infer(kind, &types, &attrs).map_err(|message| IrError::Op {
            op: kind.to_string(),
            message,
        })?;
        Ok(self.push_op(kind, operands, attrs, results))
    }

    /// Like `build`, for ops with exactly one result.
    pub fn build1(&mut self, kind: OpKind, operands: Vec<ValueId>, attrs: Attrs) -> Result<ValueId, IrError> {
        Ok(self.build(kind, operands, attrs)?[0])
    }

    pub fn constant(&mut self, value: Tensor) -> ValueId {
        let ty = value.ty.clone();
        let attrs = Attrs::new().with("value", crate::Attr::Tensor(value));
        self.push_op(OpKind::Constant, vec![], attrs, vec![ty])[0]
    }

    /// The data of a value defined by `mx.constant`.
    pub fn constant_value(&self, v: ValueId) -> Option<&Tensor> {
        match self.def(v) {
            Def::Op { op, .. } if self.ops[op].kind == OpKind::Constant => self.ops[op].attrs.tensor("value").ok(),
            _ => None,
        }
    }

    /// The op defining `v`, if it is not a graph input.
    pub fn producer(&self, v: ValueId) -> Option<&Op> {
        match self.def(v) {
            Def::Op { op, .. } => Some(&self.ops[op]),
            Def::Input(_) => None,
        }
    }

    /// This graph and every region inside it, depth first, each graph before its regions and
    /// an op's regions in the order of their attribute names: the numbering the kernels and the
    /// plan share (0 is this graph).
    pub fn with_regions(&self) -> Vec<&Graph> {
        let mut all = vec![self];
        for op in &self.ops {
            for (_, region) in op.attrs.regions() {
                all.extend(region.with_regions());
            }
        }
        all
    }

    /// A copy of this graph with each region of its ops (not those nested inside them: `f`
    /// may recurse) replaced by `f` of it, which must keep the region's inputs and output
    /// types; `None` when no op has a region.
    pub fn map_regions<E>(&self, f: &mut impl FnMut(&Graph) -> Result<Graph, E>) -> Result<Option<Graph>, E> {
        if self.ops.iter().all(|op| op.attrs.regions().next().is_none()) {
            return Ok(None);
        }
        let mut out = self.clone();
        for op in &mut out.ops {
            let names: Vec<String> = op.attrs.regions().map(|(name, _)| name.to_string()).collect();
            for name in names {
                let region = op.attrs.graph(&name).expect("listed as a region");
                let mapped = f(region)?;
                op.attrs.set(&name, crate::Attr::Graph(Arc::new(mapped)));
            }
        }
        Ok(Some(out))
    }

    /// Removes ops whose results reach no output, renumbering the values that remain.
    pub fn prune(&self) -> Graph {
        let mut live = vec![false; self.num_values()];
        for p in &self.outputs {
            live[p.value.index()] = true;
        }
        let mut keep = vec![false; self.ops.len()];
        for (i, op) in self.ops.iter().enumerate().rev() {
            if op.results.iter().any(|r| live[r.index()]) {
                keep[i] = true;
                for v in &op.operands {
                    live[v.index()] = true;
                }
            }
        }
        let mut out = Graph::new(&self.name);
        let mut map: Vec<Option<ValueId>> = vec![None; self.num_values()];
        for p in &self.inputs {
            map[p.value.index()] = Some(out.add_input(&p.name, self.ty(p.value).clone()));
        }
        for (op, _) in self.ops.iter().zip(&keep).filter(|(_, k)| **k) {
            let operands = op
                .operands
                .iter()
                .map(|v| map[v.index()].expect("operand defined"))
                .collect();
            let types = op.results.iter().map(|r| self.ty(*r).clone()).collect();
            let results = out.push_op(op.kind, operands, op.attrs.clone(), types);
            out.ops.last_mut().expect("just pushed").body = op.body.clone();
            for (old, new) in op.results.iter().zip(results) {
                map[old.index()] = Some(new);
            }
        }
        for p in &self.outputs {
            out.add_output(&p.name, map[p.value.index()].expect("output defined"));
        }
        out.interface = self.interface.clone();
        out
    }
}
