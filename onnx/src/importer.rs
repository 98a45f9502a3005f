//! The graph walk: initializers and inputs become constants and graph inputs, each node is
//! handed to its parser, graph outputs are bound to the values that produce them, and the
//! types the model declares are checked against the ones mx infers. Names are bound to
//! tensors (mx values) or to sequences and optionals (`value.rs`); inputs and outputs that
//! are sequences or optionals are carried by ports of their own (`interface.rs`).
//!
//! A subgraph attribute is either inlined (`Importer::inline`: its nodes join the graph being
//! built and see every name around them) or imported as a region, a graph of its own for an
//! op that runs it (`mx.if`, `mx.loop`): the importer puts the enclosing graph's state aside
//! (`enter_region`), the region reads the enclosing scopes' names it uses (`captures`) as
//! extra inputs, or as copies of small constants, and `leave_region` restores the state.

use super::ctx::{Ctx, FOLD_LIMIT};
use super::error::node_label;
use super::proto::tensor_shape_proto::dimension::Value as Dim;
use super::proto::type_proto::Value as TypeValue;
use super::proto::{GraphProto, ModelProto, NodeProto, TypeProto, ValueInfoProto};
use super::registry::{imports_symbolic, reads_shape, takes_strings, Registry, NEWEST_OPSET};
use super::shape_values::{self, Operand, SizeValues, SHAPE_ARITHMETIC};
use super::tensor::{decode_tensor, dtype_of, require_dtype};
use super::{ImportError, ImportOptions};
use mxc_dialects::dim::infer::Target;
use mxc_dialects::{Attr, Attrs, DType, Def, Graph, OpKind, Tensor, TensorType, ValueId};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

pub use super::value::{OnnxValue, Sequence};

/// The state of one import: the graph being built and the ONNX names in scope.
pub struct Importer {
    pub graph: Graph,
    /// The tensors in scope, by name.
    pub(super) env: HashMap<String, ValueId>,
    /// The sequences and optionals in scope, by name (their tensors are values of the graph).
    pub(super) composites: HashMap<String, OnnxValue>,
    opsets: HashMap<String, i64>,
    pub specialized: HashMap<ValueId, Tensor>,
    pub model_dir: Option<PathBuf>,
    /// The most bytes an input or a computed tensor may take.
    pub max_tensor_bytes: usize,
    registry: &'static Registry,
    /// Shapes computed over symbolic sizes (`shape_values.rs`), by the placeholder constant
    /// that stands for each in the graph.
    pub(super) sizes: HashMap<ValueId, SizeValues>,
    /// Where the model clamps a symbolic size to a fixed extent (`size_limits.rs`).
    pub(super) limits: Vec<super::SizeLimit>,
}

/// A value a region reads from the graphs around it.
pub enum Capture {
    /// Passed in: a region input after its declared ones, bound to this value of the
    /// enclosing graph.
    Input { name: String, value: ValueId },
    /// A constant of at most `FOLD_LIMIT` elements, copied into the region so that the ops on
    /// it fold there.
    Constant { name: String, value: Tensor },
}

/// The state of the enclosing graph, put aside while a region is imported.
pub struct Enclosing {
    graph: Graph,
    env: HashMap<String, ValueId>,
    composites: HashMap<String, OnnxValue>,
    specialized: HashMap<ValueId, Tensor>,
    sizes: HashMap<ValueId, SizeValues>,
}

/// Imports a decoded model.
pub fn import_model(
    model: &ModelProto,
    model_dir: Option<PathBuf>,
    opts: &ImportOptions,
) -> Result<Graph, ImportError> {
    let g = model
        .graph
        .as_ref()
        .ok_or_else(|| ImportError::Model("the model has no graph".into()))?;
    let mut opsets = HashMap::new();
    for o in &model.opset_import {
        let domain = normal_domain(o.domain());
        if domain.is_empty() && o.version() > NEWEST_OPSET {
            return Err(ImportError::NewerOpset {
                opset: o.version(),
                newest: NEWEST_OPSET,
            });
        }
        opsets.insert(domain.to_string(), o.version());
    }
    let mut imp = Importer {
        graph: Graph::new(g.name()),
        env: HashMap::new(),
        composites: HashMap::new(),
        opsets,
        specialized: HashMap::new(),
        model_dir,
        max_tensor_bytes: match opts.max_tensor_bytes {
            Some(limit) => limit,
            None => mxc_dialects::max_tensor_bytes()?,
        },
        registry: Registry::standard(),
        sizes: HashMap::new(),
        limits: Vec::new(),
    };
    imp.add_initializers(g)?;
    imp.add_inputs(g, opts)?;
    let imported = imp.import_nodes(&g.node).and_then(|()| imp.add_outputs(&g.output));
    if let Err(error) = imported {
        return Err(match imp.limits.is_empty() {
            true => error,
            false => ImportError::Limited {
                error: Box::new(error),
                limits: imp.limits,
            },
        });
    }
    for vi in &g.value_info {
        if let Some(&v) = imp.env.get(vi.name()) {
            imp.check_declared(vi, v)?;
        }
    }
    Ok(imp.graph.prune())
}

/// Appends to `out` the names `g` reads (as node inputs, in nested subgraphs or as outputs)
/// that it does not define as an input, initializer or node output, each once, in the order
/// they are first read.
fn free_names(g: &GraphProto, out: &mut Vec<String>) {
    let defined: HashSet<&str> = g
        .input
        .iter()
        .map(|vi| vi.name())
        .chain(g.initializer.iter().map(|t| t.name()))
        .chain(
            g.sparse_initializer
                .iter()
                .filter_map(|s| s.values.as_ref())
                .map(|t| t.name()),
        )
        .chain(g.node.iter().flat_map(|n| n.output.iter().map(String::as_str)))
        .collect();
    let mut reads = Vec::new();
    for node in &g.node {
        reads.extend(node.input.iter().cloned());
        for a in &node.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                free_names(sub, &mut reads);
            }
        }
    }
    reads.extend(g.output.iter().map(|vi| vi.name().to_string()));
    for name in reads {
        if !name.is_empty() && !defined.contains(name.as_str()) && !out.contains(&name) {
            out.push(name);
        }
    }
}

/// `name`, or `name.N` for the first `N` that makes it a name not in `taken`; added to it.
pub fn unique_name(taken: &mut HashSet<String>, name: &str) -> String {
    let mut unique = name.to_string();
    let mut n = 1;
    while taken.contains(&unique) {
        unique = format!("{name}.{n}");
        n += 1;
    }
    taken.insert(unique.clone());
    unique
}

/// `ai.onnx` is another name of the default domain.
fn normal_domain(d: &str) -> &str {
    if d == "ai.onnx" {
        ""
    } else {
        d
    }
}

/// The tensor type a value info declares: element type code and dims (`None` for a dim
/// given by name or not at all); `None` when it declares no tensor type.
fn declared(tp: Option<&TypeProto>) -> Option<(i32, Option<Vec<Option<i64>>>)> {
    let Some(TypeValue::TensorType(t)) = tp.and_then(|t| t.value.as_ref()) else {
        return None;
    };
    let dims = t.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .map(|d| match d.value {
                Some(Dim::DimValue(v)) if v >= 0 => Some(v),
                _ => None,
            })
            .collect()
    });
    Some((t.elem_type(), dims))
}

impl Importer {
    fn add_initializers(&mut self, g: &GraphProto) -> Result<(), ImportError> {
        for t in &g.initializer {
            let value = decode_tensor(t, self.model_dir.as_deref())?;
            let v = self.graph.constant(value);
            self.env.insert(t.name().to_string(), v);
        }
        if let Some(s) = g.sparse_initializer.first() {
            let name = s.values.as_ref().map_or("", |v| v.name());
            return Err(ImportError::Tensor {
                tensor: name.to_string(),
                message: "sparse initializers are not supported".into(),
            });
        }
        Ok(())
    }

    fn add_inputs(&mut self, g: &GraphProto, opts: &ImportOptions) -> Result<(), ImportError> {
        let given = opts.input_shapes.keys().chain(opts.specialize.keys());
        for name in given.chain(opts.structures.keys()) {
            // a sequence's elements are given as `name[i]`
            let base = name.rsplit_once('[').map_or(name.as_str(), |(base, _)| base);
            if !g.input.iter().any(|i| i.name() == name || i.name() == base) {
                return Err(ImportError::Input {
                    input: name.clone(),
                    message: "the model has no input of this name".into(),
                });
            }
        }
        for vi in &g.input {
            if self.env.contains_key(vi.name()) {
                continue; // an initializer: a constant, not an input
            }
            let value = self.add_model_input(vi, opts)?;
            self.bind(vi.name(), value);
        }
        Ok(())
    }

    /// Adds a graph input named `port` of the tensor type `vi` declares (the shape given for
    /// `port` fixing its named dims), specialised to the value given for `port` if any.
    pub(super) fn add_tensor_input(
        &mut self,
        port: &str,
        vi: &ValueInfoProto,
        opts: &ImportOptions,
    ) -> Result<ValueId, ImportError> {
        let err = |message: String| ImportError::Input {
            input: port.to_string(),
            message,
        };
        let ty = match opts.symbolic_shapes.get(port) {
            Some(dims) => symbolic_input_type(vi, dims).map_err(err)?,
            None => input_type(vi, opts.input_shapes.get(port)).map_err(err)?,
        };
        ty.check_limit(self.max_tensor_bytes).map_err(|e| err(e.to_string()))?;
        let v = self.graph.add_input(port, ty.clone());
        if let Some(t) = opts.specialize.get(port) {
            // a bf16 or narrow-typed value read from .npy comes as its numpy stand-in
            let t = &t.as_stood_in_for(ty.dtype).unwrap_or_else(|| t.clone());
            if t.ty != ty {
                return Err(err(format!(
                    "the value given to specialise it is a {} but the input is a {ty}",
                    t.ty
                )));
            }
            self.specialized.insert(v, t.clone());
        }
        Ok(v)
    }

    pub fn import_nodes(&mut self, nodes: &[NodeProto]) -> Result<(), ImportError> {
        for (i, node) in nodes.iter().enumerate() {
            self.import_node(i, node)?;
        }
        Ok(())
    }

    fn import_node(&mut self, index: usize, node: &NodeProto) -> Result<(), ImportError> {
        let label = node_label(index, node.name(), &node.output);
        let (op, domain) = (node.op_type(), normal_domain(node.domain()));
        let Some(&opset) = self.opsets.get(domain) else {
            return Err(ImportError::NoOpset {
                node: label,
                op: op.into(),
                domain: domain.into(),
            });
        };
        let Some(parse) = self.registry.find(domain, op, opset) else {
            return Err(ImportError::UnsupportedOp {
                node: label,
                op: op.into(),
                domain: domain.into(),
                opset,
            });
        };
        let node_err = |label: &str, message: String| ImportError::Node {
            node: label.to_string(),
            op: op.into(),
            message,
        };
        let inputs = node
            .input
            .iter()
            .map(|name| match name.as_str() {
                "" => Ok(None),
                _ if self.composites.contains_key(name) => Ok(None),
                _ => self
                    .env
                    .get(name)
                    .map(|v| Some(*v))
                    .ok_or_else(|| node_err(&label, format!("input \"{name}\" is not defined before this node"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let is_string = |v: &Option<ValueId>| v.is_some_and(|v| self.graph.ty(v).dtype == DType::Str);
        let strings = (inputs.iter().enumerate()).find(|&(k, v)| is_string(v) && !takes_strings(domain, op, k));
        if let Some((k, _)) = strings {
            let message = format!(
                "input #{k} (\"{}\") holds strings; {op} takes numbers there",
                node.input[k]
            );
            return Err(node_err(&label, message));
        }
        // shapes computed from symbolic sizes: arithmetic on them here; a Slice or Gather
        // whose data is not one reads them as its bounds or indices (below)
        let sized = |k: usize| {
            inputs
                .get(k)
                .copied()
                .flatten()
                .is_some_and(|v| self.sizes.contains_key(&v))
        };
        let arithmetic = match op {
            "Slice" | "Gather" | "Reshape" => sized(0),
            _ => (0..inputs.len()).any(sized),
        };
        // a value computed at run time among the operands: the sizes become run-time values too
        let computed = |v: &ValueId| !self.sizes.contains_key(v) && self.graph.constant_value(*v).is_none();
        let at_run_time = inputs.iter().flatten().any(computed);
        if arithmetic && domain.is_empty() && SHAPE_ARITHMETIC.contains(&op) && !at_run_time {
            return self.shape_arithmetic(&label, node, opset, &inputs);
        }
        let mut inputs = inputs;
        for (k, input) in inputs.iter_mut().enumerate() {
            let Some(values) = input.and_then(|v| self.sizes.get(&v)).cloned() else {
                continue;
            };
            if !reads_shape(op, k) {
                *input = Some(self.sizes_at_run_time(&values).map_err(|m| node_err(&label, m))?);
            }
        }
        let symbolic = inputs.iter().flatten().find(|v| self.graph.ty(**v).is_symbolic());
        if let Some(&v) = symbolic.filter(|_| !imports_symbolic(domain, op)) {
            let message = format!(
                "reads a value of symbolic dimensions ({}); importing {op} over symbolic sizes is not supported yet",
                self.graph.ty(v)
            );
            return Err(node_err(&label, message));
        }
        let composite_inputs = node
            .input
            .iter()
            .map(|name| self.composites.get(name).cloned())
            .collect();
        let mut ctx = Ctx {
            imp: self,
            node: super::node::NodeView::new(node),
            inputs,
            composite_inputs,
            value_outputs: Vec::new(),
            opset,
        };
        let outputs = parse(&mut ctx).map_err(|m| node_err(&label, m))?;
        let mut value_outputs = std::mem::take(&mut ctx.value_outputs);
        if let [first, ..] = ctx.node.unread()[..] {
            let message = format!("attribute `{first}` is not supported (the parser does not read it)");
            return Err(node_err(&label, message));
        }
        for (k, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let value = match value_outputs.iter().position(|(j, _)| *j == k) {
                Some(at) => value_outputs.swap_remove(at).1,
                None => OnnxValue::Tensor(
                    *outputs
                        .get(k)
                        .ok_or_else(|| node_err(&label, format!("output #{k} (\"{name}\") is not supported")))?,
                ),
            };
            self.bind(name, value);
        }
        Ok(())
    }

    /// A node of shape arithmetic reading a shape computed from symbolic sizes: computed on
    /// the sizes (`shape_values::evaluate`), its output a placeholder constant with the sizes
    /// beside it, or a plain constant where none is symbolic (`sizes_constant`).
    fn shape_arithmetic(
        &mut self,
        label: &str,
        node: &NodeProto,
        opset: i64,
        inputs: &[Option<ValueId>],
    ) -> Result<(), ImportError> {
        let err = |message: String| ImportError::Node {
            node: label.to_string(),
            op: node.op_type().into(),
            message,
        };
        let operands = inputs
            .iter()
            .enumerate()
            .map(|(k, v)| match v {
                None => Ok(None),
                Some(v) => match (self.sizes.get(v), self.graph.constant_value(*v)) {
                    (Some(s), _) => Ok(Some(Operand::Sizes(s.clone()))),
                    (None, Some(t)) => Ok(Some(Operand::Constant(t.clone()))),
                    (None, None) => Err(err(format!(
                        "input #{k} (\"{}\") is computed at run time; shape arithmetic takes sizes and constants",
                        node.input[k]
                    ))),
                },
            })
            .collect::<Result<Vec<_>, _>>()?;
        let view = super::node::NodeView::new(node);
        let result = shape_values::evaluate(node.op_type(), &view, opset, &operands).map_err(err)?;
        view.without_effect(&["saturate"]);
        if let [first, ..] = view.unread()[..] {
            return Err(err(format!(
                "attribute `{first}` is not supported (the parser does not read it)"
            )));
        }
        let placeholder = self.sizes_constant(result);
        match node.output.first().filter(|name| !name.is_empty()) {
            Some(name) => self.bind(name, OnnxValue::Tensor(placeholder)),
            None => return Err(err("the node has no output".into())),
        }
        Ok(())
    }

    /// Sizes as a value a kernel reads (a node computes with a shape beside values only the run
    /// knows: `Range` indices times a sequence length): each symbolic element counted at run
    /// time, the sum of ones expanded to it (`reduce_sum` of `expand`); a vector's elements
    /// concatenated.
    pub(super) fn sizes_at_run_time(&mut self, values: &SizeValues) -> Result<ValueId, String> {
        let build = |g: &mut Graph, kind: OpKind, operands: Vec<ValueId>, attrs: Attrs| {
            g.build(kind, operands, attrs).map(|r| r[0]).map_err(|e| e.to_string())
        };
        let dtype = values.dtype;
        let one = self.graph.constant(Tensor::from_i64s(dtype, vec![1], &[1]));
        let mut elements = Vec::with_capacity(values.elements.len());
        for e in &values.elements {
            let element = match e {
                Target::Size(d) if d.as_constant().is_none() => {
                    let shape = Attrs::new().with("shape", Attr::Sizes(vec![d.clone()]));
                    let ones = build(&mut self.graph, OpKind::Expand, vec![one], shape)?;
                    let attrs = Attrs::new()
                        .with("axes", Attr::Ints(vec![0]))
                        .with("keepdims", Attr::Int(1));
                    build(&mut self.graph, OpKind::ReduceSum, vec![ones], attrs)?
                }
                Target::Size(d) => {
                    let n = i64::try_from(d.as_constant().unwrap_or(0)).unwrap_or(i64::MAX);
                    self.graph.constant(Tensor::from_i64s(dtype, vec![1], &[n]))
                }
                Target::Negative(n) => self.graph.constant(Tensor::from_i64s(dtype, vec![1], &[*n])),
            };
            elements.push(element);
        }
        let vector = match elements.len() {
            1 => elements[0],
            _ => build(
                &mut self.graph,
                OpKind::Concat,
                elements,
                Attrs::new().with("axis", Attr::Int(0)),
            )?,
        };
        match values.scalar {
            true => build(
                &mut self.graph,
                OpKind::Reshape,
                vec![vector],
                Attrs::new().with("shape", Attr::Ints(vec![])),
            ),
            false => Ok(vector),
        }
    }

    /// A constant of `values`: a placeholder of its sizes at the cost point, with the sizes
    /// kept beside it (`sizes`) where some is symbolic.
    pub(super) fn sizes_constant(&mut self, values: SizeValues) -> ValueId {
        let v = self.graph.constant(values.at_cost_point());
        if values.is_symbolic() {
            self.sizes.insert(v, values);
        }
        v
    }

    /// Gives `name` the value `value` in the current scope.
    pub(super) fn bind(&mut self, name: &str, value: OnnxValue) {
        match value {
            OnnxValue::Tensor(v) => {
                self.composites.remove(name);
                self.env.insert(name.to_string(), v);
            }
            composite => {
                self.env.remove(name);
                self.composites.insert(name.to_string(), composite);
            }
        }
    }

    /// The value named `name` in the current scope, if any.
    pub(super) fn lookup(&self, name: &str) -> Option<OnnxValue> {
        match self.env.get(name) {
            Some(&v) => Some(OnnxValue::Tensor(v)),
            None => self.composites.get(name).cloned(),
        }
    }

    /// Imports a subgraph's nodes into the current graph, its first inputs bound to `inputs`
    /// (tensors checked against the types they declare), and returns its output values,
    /// tensors, sequences or optionals; the names it defines go out of scope afterwards.
    pub fn inline(&mut self, g: &GraphProto, inputs: &[OnnxValue]) -> Result<Vec<OnnxValue>, ImportError> {
        let saved = (self.env.clone(), self.composites.clone());
        let result = self.import_subgraph_nodes(g, inputs).and_then(|()| {
            g.output
                .iter()
                .map(|o| {
                    self.lookup(o.name()).ok_or_else(|| ImportError::Value {
                        value: o.name().to_string(),
                        message: "is an output but no node, initializer or input defines it".into(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        });
        (self.env, self.composites) = saved;
        result
    }

    /// Imports the body of a region (between `enter_region` and `leave_region`): `g`'s
    /// declared inputs are bound to `inputs`, one each, its nodes imported, and its outputs
    /// returned by name; the types `g` declares for its inputs, outputs and other values are
    /// checked where they are fixed. The names it defines go out of scope afterwards.
    pub fn import_body(&mut self, g: &GraphProto, inputs: &[ValueId]) -> Result<Vec<(String, ValueId)>, ImportError> {
        if g.input.len() != inputs.len() {
            return Err(ImportError::Model(format!(
                "the graph declares {} inputs, the op binds {}",
                g.input.len(),
                inputs.len()
            )));
        }
        let saved = (self.env.clone(), self.composites.clone());
        let inputs: Vec<OnnxValue> = inputs.iter().map(|&v| OnnxValue::Tensor(v)).collect();
        let result = self.import_subgraph_nodes(g, &inputs).and_then(|()| {
            let outputs = g
                .output
                .iter()
                .map(|vi| {
                    let v = self.produced(vi.name())?;
                    self.check_declared(vi, v)?;
                    Ok((vi.name().to_string(), v))
                })
                .collect::<Result<Vec<_>, ImportError>>()?;
            for vi in &g.value_info {
                if let Some(&v) = self.env.get(vi.name()) {
                    self.check_declared(vi, v)?;
                }
            }
            Ok(outputs)
        });
        (self.env, self.composites) = saved;
        result
    }

    /// Binds `g`'s first inputs to `inputs` (checked against the types they declare) and
    /// imports its initializers and nodes.
    fn import_subgraph_nodes(&mut self, g: &GraphProto, inputs: &[OnnxValue]) -> Result<(), ImportError> {
        for (vi, value) in g.input.iter().zip(inputs) {
            if let OnnxValue::Tensor(v) = value {
                self.check_declared(vi, *v)?;
            }
            self.bind(vi.name(), value.clone().into_declared(vi.r#type.as_ref()));
        }
        self.add_initializers(g)?;
        self.import_nodes(&g.node)
    }

    /// The values the subgraphs `graphs` read from the scopes around them (the names they
    /// read, their nested subgraphs included, that they do not define), resolved in the
    /// current scope, in the order they are first read: what a region importing any of them
    /// takes in besides its own inputs.
    pub fn captures(&self, graphs: &[&GraphProto]) -> Result<Vec<Capture>, String> {
        self.free_names_of(graphs)
            .into_iter()
            .map(|name| {
                if let Some(composite) = self.composites.get(&name) {
                    return Err(format!(
                        "the subgraph reads \"{name}\", {}, from the graph around it; only tensors can be \
                         passed into a subgraph run at run time",
                        composite.kind()
                    ));
                }
                let &value = self.env.get(&name).ok_or_else(|| {
                    format!("the subgraph reads \"{name}\", which no graph around it defines before this node")
                })?;
                // a shape of symbolic sizes would be copied in as its sizes at the cost point
                if self.sizes.contains_key(&value) {
                    return Err(format!(
                        "the subgraph reads \"{name}\", a shape computed from symbolic sizes, from the graph \
                         around it; that is not supported yet"
                    ));
                }
                Ok(match self.graph.constant_value(value) {
                    Some(t) if t.len() <= FOLD_LIMIT => Capture::Constant { name, value: t.clone() },
                    _ => Capture::Input { name, value },
                })
            })
            .collect()
    }

    /// The names `graphs` read from the scopes around them, each once, in the order first read.
    pub fn free_names_of(&self, graphs: &[&GraphProto]) -> Vec<String> {
        let mut names = Vec::new();
        for g in graphs {
            free_names(g, &mut names);
        }
        names
    }

    /// Starts importing a region named `name`: the enclosing graph's state is put aside and
    /// replaced by an empty graph with `inputs`, then an input per `Capture::Input`, with the
    /// captured names bound to those inputs or to copies of the captured constants. Values
    /// known at compile time outside (specialised inputs) are not known inside. Returns the
    /// state to give `leave_region` and the values of `inputs`.
    pub fn enter_region(
        &mut self,
        name: &str,
        inputs: &[(String, TensorType)],
        captures: &[Capture],
    ) -> (Enclosing, Vec<ValueId>) {
        let enclosing = Enclosing {
            graph: std::mem::replace(&mut self.graph, Graph::new(name)),
            env: std::mem::take(&mut self.env),
            composites: std::mem::take(&mut self.composites),
            specialized: std::mem::take(&mut self.specialized),
            sizes: std::mem::take(&mut self.sizes),
        };
        let mut taken = HashSet::new();
        let values = inputs
            .iter()
            .map(|(name, ty)| self.graph.add_input(&unique_name(&mut taken, name), ty.clone()))
            .collect();
        for capture in captures {
            let (name, v) = match capture {
                Capture::Input { name, value } => {
                    let ty = enclosing.graph.ty(*value).clone();
                    (name, self.graph.add_input(&unique_name(&mut taken, name), ty))
                }
                Capture::Constant { name, value } => (name, self.graph.constant(value.clone())),
            };
            self.env.insert(name.clone(), v);
        }
        (enclosing, values)
    }

    /// Ends a region's import: returns its graph (the ops no output needs removed) and
    /// restores the enclosing graph's state.
    pub fn leave_region(&mut self, enclosing: Enclosing) -> Graph {
        self.env = enclosing.env;
        self.composites = enclosing.composites;
        self.specialized = enclosing.specialized;
        self.sizes = enclosing.sizes;
        std::mem::replace(&mut self.graph, enclosing.graph).prune()
    }

    pub(super) fn produced(&self, name: &str) -> Result<ValueId, ImportError> {
        let message = match self.composites.get(name) {
            Some(composite) => format!("is {}, not a tensor", composite.kind()),
            None => "is an output but no node, initializer or input defines it".into(),
        };
        self.env.get(name).copied().ok_or_else(|| ImportError::Value {
            value: name.to_string(),
            message,
        })
    }

    /// Makes `v` the graph output `port`; an input or a constant is copied by an identity
    /// first (an output is a result of the program).
    pub(super) fn add_output_port(&mut self, port: &str, mut v: ValueId) {
        let passthrough = match self.graph.def(v) {
            Def::Input(_) => true,
            Def::Op { op, .. } => self.graph.ops[op].kind == OpKind::Constant,
        };
        if passthrough {
            let ty = self.graph.ty(v).clone();
            v = self.graph.push_op(OpKind::Identity, vec![v], Attrs::new(), vec![ty])[0];
        }
        self.graph.add_output(port, v);
    }

    /// Checks the element type and the fixed dims a value info declares against `v`'s type.
    pub(super) fn check_declared(&self, vi: &ValueInfoProto, v: ValueId) -> Result<(), ImportError> {
        let Some((code, dims)) = declared(vi.r#type.as_ref()) else {
            return Ok(());
        };
        let ty = self.graph.ty(v);
        let dtype_ok = dtype_of(code).is_none_or(|d| d == ty.dtype);
        let dims_ok = dims.is_none_or(|dims| {
            dims.len() == ty.rank()
                && dims
                    .iter()
                    .enumerate()
                    .all(|(i, d)| d.is_none_or(|d| ty.fixed_dim(i) == Some(d as usize)))
        });
        if dtype_ok && dims_ok {
            return Ok(());
        }
        Err(ImportError::Value {
            value: vi.name().to_string(),
            message: format!("the model declares {} but the nodes compute {ty}", show_declared(vi)),
        })
    }
}

fn show_declared(vi: &ValueInfoProto) -> String {
    let Some((code, dims)) = declared(vi.r#type.as_ref()) else {
        return "no tensor type".into();
    };
    let dims = dims.map_or("?".into(), |d| {
        let d: Vec<String> = d.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
        format!("[{}]", d.join(", "))
    });
    format!("{} {dims}", super::tensor::type_name(code))
}

/// The type of a graph input: its declared element type and shape, named dims taken from
/// `given` (the shape the user gave for this input).
fn input_type(vi: &ValueInfoProto, given: Option<&Vec<usize>>) -> Result<TensorType, String> {
    let ty = declared_input_type(vi, given)?;
    ty.check_size().map_err(|e| e.to_string())?;
    Ok(ty)
}

/// The type of a graph input given symbolic dimensions `dims`: the declared element type, and
/// `dims`, each declared fixed size given as that size.
fn symbolic_input_type(vi: &ValueInfoProto, dims: &[mxc_dialects::dim::Dim]) -> Result<TensorType, String> {
    let at_cost_point: Vec<usize> = dims.iter().map(|d| d.at_cost_point() as usize).collect();
    let fixed = declared_input_type(vi, Some(&at_cost_point))?;
    if let Some((_, Some(declared))) = declared(vi.r#type.as_ref()) {
        let symbolic_where_fixed =
            (declared.iter().zip(dims)).position(|(d, given)| d.is_some() && given.as_constant().is_none());
        if let Some(i) = symbolic_where_fixed {
            return Err(format!(
                "dimension {i} is declared {} and given the symbolic {}",
                show_declared(vi),
                dims[i]
            ));
        }
    }
    let ty = TensorType::of_dims(fixed.dtype, dims.to_vec());
    ty.check_size().map_err(|e| e.to_string())?;
    Ok(ty)
}

fn declared_input_type(vi: &ValueInfoProto, given: Option<&Vec<usize>>) -> Result<TensorType, String> {
    let (code, dims) = declared(vi.r#type.as_ref()).ok_or("only tensor inputs are supported")?;
    let dtype = require_dtype(code)?;
    match (dims, given) {
        (None, None) => Err("its shape is not declared; give the input's shape".into()),
        (None, Some(g)) => Ok(TensorType::new(dtype, g.clone())),
        (Some(dims), Some(g)) => {
            let agrees = dims.len() == g.len() && dims.iter().zip(g).all(|(d, &s)| d.is_none_or(|d| d as usize == s));
            if !agrees {
                return Err(format!(
                    "the shape given, {g:?}, does not fit the declared {}",
                    show_declared(vi)
                ));
            }
            Ok(TensorType::new(dtype, g.clone()))
        }
        (Some(dims), None) => {
            let shape = dims
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    d.map(|d| d as usize).ok_or_else(|| {
                        format!(
                            "dimension {i} ({}) is not fixed; give the input's shape",
                            dim_name(vi, i)
                        )
                    })
                })
                .collect::<Result<Vec<usize>, String>>()?;
            Ok(TensorType::new(dtype, shape))
        }
    }
}

/// How a dim that is not fixed is named: its `dim_param`, or "unnamed".
fn dim_name(vi: &ValueInfoProto, i: usize) -> String {
    let Some(TypeValue::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return "unnamed".into();
    };
    match t
        .shape
        .as_ref()
        .and_then(|s| s.dim.get(i))
        .and_then(|d| d.value.as_ref())
    {
        Some(Dim::DimParam(p)) => format!("\"{p}\""),
        _ => "unnamed".into(),
    }
}
