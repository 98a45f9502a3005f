//! What an op parser works with: the node (attributes), its operand values, compile-time
//! values of operands (looking through constants, foldable ops and specialised inputs), a
//! builder that folds ops on small constants as it goes, and the import of subgraphs, inlined
//! or as regions.

use super::importer::{unique_name, Capture, Importer, OnnxValue, Sequence};
use super::node::NodeView;
use super::proto::GraphProto;
use super::shape_values::SizeValues;
use super::tensor::decode_tensor;
use mxc_dialects::eval::eval;
use mxc_dialects::{mx, Attrs, DType, Def, Graph, OpKind, Tensor, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// Ops whose results have at most this many elements are evaluated when their operands are
/// all constants.
pub const FOLD_LIMIT: usize = 4096;

/// How many producers deep a compile-time value is looked for.
const KNOWN_DEPTH: usize = 64;

/// The most elements a value computed for compile time may have.
const KNOWN_LIMIT: usize = 1 << 16;

/// An ONNX subgraph imported as a graph of its own, for an op that runs it (`mx.if`,
/// `mx.loop`).
pub struct Region {
    pub graph: Graph,
    /// The values of the enclosing graph the region reads, bound to its inputs after the
    /// declared ones, in order (the op's operands after its own).
    pub captures: Vec<ValueId>,
}

/// The parsing context of one node.
pub struct Ctx<'a> {
    pub(super) imp: &'a mut Importer,
    pub node: NodeView<'a>,
    pub(super) inputs: Vec<Option<ValueId>>,
    /// The node's inputs that are sequences or optionals (`None` for tensors and absent
    /// inputs).
    pub(super) composite_inputs: Vec<Option<OnnxValue>>,
    /// Outputs the parser sets by position (`set_output`) rather than returns.
    pub(super) value_outputs: Vec<(usize, OnnxValue)>,
    /// The opset version of the node's domain in this model.
    pub opset: i64,
}

impl Ctx<'_> {
    pub fn graph(&self) -> &Graph {
        &self.imp.graph
    }

    pub fn ty(&self, v: ValueId) -> &TensorType {
        self.imp.graph.ty(v)
    }

    /// Number of inputs the node declares, optional ones left empty included.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Input `i`, if the node gives it.
    pub fn opt_input(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }

    /// Input `i`, a tensor the op requires.
    pub fn input(&self, i: usize) -> Result<ValueId, String> {
        self.opt_input(i).ok_or_else(|| match self.composite(i) {
            Some(composite) => format!("input #{i} is {}, not a tensor", composite.kind()),
            None => format!("missing input #{i}"),
        })
    }

    /// Input `i` when it is a sequence or optional.
    pub fn composite(&self, i: usize) -> Option<&OnnxValue> {
        self.composite_inputs.get(i).and_then(Option::as_ref)
    }

    /// Input `i` as a sequence.
    pub fn sequence_input(&self, i: usize) -> Result<&Sequence, String> {
        match self.composite(i) {
            Some(OnnxValue::Sequence(s)) => Ok(s),
            Some(other) => Err(format!("input #{i} is {}, not a sequence", other.kind())),
            None => Err(format!("input #{i} is not a sequence")),
        }
    }

    /// Input `i` whatever its kind, `None` when the node leaves it out.
    pub fn value_input(&self, i: usize) -> Option<OnnxValue> {
        self.composite(i)
            .cloned()
            .or_else(|| self.opt_input(i).map(OnnxValue::Tensor))
    }

    /// Makes output `k` the sequence `s` (the parser returns no value for it).
    pub fn set_sequence_output(&mut self, k: usize, s: Sequence) {
        self.set_output(k, OnnxValue::Sequence(s));
    }

    /// Makes output `k` `value`, whatever its kind (the parser returns no value for it).
    pub fn set_output(&mut self, k: usize, value: OnnxValue) {
        self.value_outputs.push((k, value));
    }

    /// All inputs of a variadic op; none may be left empty.
    pub fn all_inputs(&self) -> Result<Vec<ValueId>, String> {
        (0..self.inputs.len()).map(|i| self.input(i)).collect()
    }

    /// Whether the node asks for output `k` (it is present and its name is not empty).
    pub fn wants_output(&self, k: usize) -> bool {
        self.node.proto.output.get(k).is_some_and(|n| !n.is_empty())
    }

    /// The value of `v` if it can be known at compile time: a constant, a specialised graph
    /// input, or the result of evaluable ops on such values.
    pub fn known(&self, v: ValueId) -> Option<Tensor> {
        let mut known = Known {
            graph: &self.imp.graph,
            specialized: &self.imp.specialized,
            seen: HashMap::new(),
        };
        known.value(v, KNOWN_DEPTH)
    }

    /// Input `i` where it is a shape computed from symbolic sizes (`shape_values.rs`).
    pub fn sizes_input(&self, i: usize) -> Option<SizeValues> {
        self.opt_input(i).and_then(|v| self.imp.sizes.get(&v).cloned())
    }

    /// Sizes as a value kernels read (`Importer::sizes_at_run_time`).
    pub fn sizes_at_run_time(&mut self, values: &SizeValues) -> Result<ValueId, String> {
        self.imp.sizes_at_run_time(values)
    }

    /// Notes that the model reads at most so much of a symbolic size (`size_limits.rs`).
    pub fn note_limit(&mut self, limit: crate::SizeLimit) {
        if !self.imp.limits.contains(&limit) {
            self.imp.limits.push(limit);
        }
    }

    /// A constant of `values`: a placeholder of its sizes at the cost point, with the sizes
    /// kept beside it where some is symbolic.
    pub fn sizes_constant(&mut self, values: SizeValues) -> ValueId {
        self.imp.sizes_constant(values)
    }

    /// Input `i` (named `name` in the op's schema) as a compile-time value.
    pub fn const_input(&self, i: usize, name: &str) -> Result<Tensor, String> {
        self.opt_const_input(i, name)?
            .ok_or_else(|| format!("missing input \"{name}\""))
    }

    /// Like `const_input`, for an optional input: `None` when the node leaves it out. The
    /// values are read as numbers: strings are refused.
    pub fn opt_const_input(&self, i: usize, name: &str) -> Result<Option<Tensor>, String> {
        let Some(v) = self.opt_input(i) else {
            return Ok(None);
        };
        let t = (self.known(v)).ok_or_else(|| format!("input \"{name}\" must be known at compile time"))?;
        if t.dtype() == DType::Str {
            return Err(format!("input \"{name}\" holds strings, not numbers"));
        }
        Ok(Some(t))
    }

    /// Input `i` as one compile-time number: a tensor of a single element.
    pub fn const_number(&self, i: usize, name: &str) -> Result<Tensor, String> {
        self.opt_const_number(i, name)?
            .ok_or_else(|| format!("missing input \"{name}\""))
    }

    /// Like `const_number`, for an optional input: `None` when the node leaves it out.
    pub fn opt_const_number(&self, i: usize, name: &str) -> Result<Option<Tensor>, String> {
        self.opt_const_input(i, name)?.map(|t| one_number(t, name)).transpose()
    }

    /// A tensor attribute (`Constant`'s `value`, `ConstantOfShape`'s `value`).
    pub fn tensor_attr(&self, name: &str) -> Result<Option<Tensor>, String> {
        match self.node.opt_tensor(name)? {
            None => Ok(None),
            Some(t) => decode_tensor(t, self.imp.model_dir.as_deref())
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    }

    pub fn constant(&mut self, t: Tensor) -> ValueId {
        self.imp.graph.constant(t)
    }

    /// A scalar constant of `dtype`.
    pub fn scalar(&mut self, dtype: DType, value: f64) -> ValueId {
        self.constant(Tensor::from_f64s(dtype, vec![], &[value]))
    }

    /// Builds an op (checking its types); when all operands are constants and the results are
    /// small, the op is evaluated and its results become constants. A `dequantize_linear` is
    /// kept: the rewrites fold it, keeping what integers it holds (`integer.rules`).
    pub fn build(&mut self, kind: OpKind, operands: Vec<ValueId>, attrs: Attrs) -> Result<Vec<ValueId>, String> {
        let g = &mut self.imp.graph;
        let types: Vec<TensorType> = operands.iter().map(|v| g.ty(*v).clone()).collect();
        let results = mx::infer(kind, &types, &attrs).map_err(|m| format!("{kind}: {m}"))?;
        for t in &results {
            t.check_limit(self.imp.max_tensor_bytes)
                .map_err(|e| format!("{kind}: the result {e}"))?;
        }
        // a constant has fixed sizes: a result of symbolic ones stays an op
        let fixed = results.iter().all(|t| !t.is_symbolic());
        if kind != OpKind::DequantizeLinear && fixed && results.iter().all(|t| t.num_elements() <= FOLD_LIMIT) {
            let values: Option<Vec<Tensor>> = operands.iter().map(|v| g.constant_value(*v).cloned()).collect();
            if let Some(values) = values {
                let refs: Vec<&Tensor> = values.iter().collect();
                if let Some(folded) = eval(kind, &refs, &attrs) {
                    let folded = folded.map_err(|m| format!("{kind}: {m}"))?;
                    return Ok(folded.into_iter().map(|t| g.constant(t)).collect());
                }
            }
        }
        Ok(g.push_op(kind, operands, attrs, results))
    }

    /// `build` for ops with one result.
    pub fn build1(&mut self, kind: OpKind, operands: Vec<ValueId>, attrs: Attrs) -> Result<ValueId, String> {
        Ok(self.build(kind, operands, attrs)?[0])
    }

    /// Imports the nodes of a subgraph into this graph, where it sees the values of the
    /// enclosing graph, its first inputs bound to `inputs` (a branch of `If` taking none, a
    /// loop body unrolled, `SequenceMap`'s body), and returns the values of its outputs.
    pub fn inline_subgraph(&mut self, g: &GraphProto, inputs: &[OnnxValue]) -> Result<Vec<OnnxValue>, String> {
        self.imp
            .inline(g, inputs)
            .map_err(|e| format!("in subgraph \"{}\": {e}", g.name()))
    }

    /// `inline_subgraph` of a subgraph on tensors (a function-like attribute, as
    /// `FlexAttention`'s `score_mod`), whose outputs must be tensors.
    pub fn apply_subgraph(&mut self, g: &GraphProto, inputs: &[ValueId]) -> Result<Vec<ValueId>, String> {
        let inputs: Vec<OnnxValue> = inputs.iter().map(|&v| OnnxValue::Tensor(v)).collect();
        self.inline_subgraph(g, &inputs)?
            .into_iter()
            .zip(&g.output)
            .map(|(value, vi)| match value {
                OnnxValue::Tensor(v) => Ok(v),
                other => Err(format!(
                    "in subgraph \"{}\": output \"{}\" is {}, not a tensor",
                    g.name(),
                    vi.name(),
                    other.kind()
                )),
            })
            .collect()
    }

    /// Whether the subgraphs `graphs` read a sequence or optional from the scopes around them
    /// (they cannot be regions then).
    pub fn reads_composites(&self, graphs: &[&GraphProto]) -> bool {
        self.imp
            .free_names_of(graphs)
            .iter()
            .any(|n| self.imp.composites.contains_key(n))
    }

    /// Imports a region named `name` that runs (parts of) the subgraphs `reads`: a graph of
    /// its own whose inputs are `inputs`, then one per value of the enclosing graph those
    /// subgraphs read (`Region::captures`; constants of at most `FOLD_LIMIT` elements are
    /// copied in instead), so that regions built for the same `reads` and `inputs` take the
    /// same inputs (the branches of an `mx.if`). While `build` runs, the ops this context
    /// builds go into the region: it gets the values of `inputs`, builds what the region
    /// computes (typically with `import_body`) and returns its outputs by name (names are made
    /// distinct). The node's operands (`input`, ...) are values of the enclosing graph, which
    /// `build` must not use.
    pub fn region(
        &mut self,
        name: &str,
        reads: &[&GraphProto],
        inputs: &[(String, TensorType)],
        build: impl FnOnce(&mut Ctx, &[ValueId]) -> Result<Vec<(String, ValueId)>, String>,
    ) -> Result<Region, String> {
        let captures = self.imp.captures(reads)?;
        let (enclosing, values) = self.imp.enter_region(name, inputs, &captures);
        let outputs = build(self, &values);
        if let Ok(outputs) = &outputs {
            let mut taken = HashSet::new();
            for (name, v) in outputs {
                self.imp.graph.add_output(&unique_name(&mut taken, name), *v);
            }
        }
        let graph = self.imp.leave_region(enclosing);
        outputs?;
        let captures = captures
            .into_iter()
            .filter_map(|c| match c {
                Capture::Input { value, .. } => Some(value),
                Capture::Constant { .. } => None,
            })
            .collect();
        Ok(Region { graph, captures })
    }

    /// Within `region`'s `build`: imports the subgraph `g` into the region, its declared
    /// inputs bound to `inputs` (one each), and returns its outputs by name; the types `g`
    /// declares are checked where they are fixed.
    pub fn import_body(&mut self, g: &GraphProto, inputs: &[ValueId]) -> Result<Vec<(String, ValueId)>, String> {
        self.imp
            .import_body(g, inputs)
            .map_err(|e| format!("in subgraph \"{}\": {e}", g.name()))
    }
}

/// Finds compile-time values, remembering each value it looked at (so shared operands are
/// evaluated once).
struct Known<'g> {
    graph: &'g Graph,
    specialized: &'g HashMap<ValueId, Tensor>,
    seen: HashMap<ValueId, Option<Tensor>>,
}

impl Known<'_> {
    fn value(&mut self, v: ValueId, depth: usize) -> Option<Tensor> {
        if let Some(t) = self.graph.constant_value(v) {
            return Some(t.clone());
        }
        if let Some(known) = self.seen.get(&v) {
            return known.clone();
        }
        let known = match self.graph.def(v) {
            Def::Input(_) => self.specialized.get(&v).cloned(),
            // a value of symbolic sizes is no constant (its sizes are known at run time only)
            Def::Op { op, result }
                if !self.graph.ty(v).is_symbolic() && self.graph.ty(v).num_elements() <= KNOWN_LIMIT =>
            {
                let op = &self.graph.ops[op];
                let operands = op
                    .operands
                    .iter()
                    .map(|&o| self.value(o, depth.checked_sub(1)?))
                    .collect::<Option<Vec<Tensor>>>();
                operands.and_then(|operands| {
                    let refs: Vec<&Tensor> = operands.iter().collect();
                    eval(op.kind, &refs, &op.attrs)?.ok()?.into_iter().nth(result)
                })
            }
            Def::Op { .. } => None,
        };
        self.seen.insert(v, known.clone());
        known
    }
}

/// `t`, which must hold a single element (input `name`).
pub fn one_number(t: Tensor, name: &str) -> Result<Tensor, String> {
    match t.len() {
        1 => Ok(t),
        _ => Err(format!("{name} must be a single value, got shape {:?}", t.shape())),
    }
}
