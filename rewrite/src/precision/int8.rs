//! int8 quantisation of an f32 program from calibrated ranges (MIGraphX's `quantize_int8`,
//! `--int8 --calibration`): the chosen convolutions and products get QDQ operands, the same
//! `DequantizeLinear(QuantizeLinear(x))` pairs onnxruntime's `quantize_static` writes, so that
//! `integer.rules` makes the integer kernels of them as it does of a QDQ model.
//!
//! - **Activations**, per tensor, u8 asymmetric: the range calibrated for the operand, widened
//!   to hold 0, split into 255 steps (`scale = (max - min) / 255`, `zero_point =
//!   round(-min / scale)`), quantised by the ops `QuantizeLinear` imports as (divide, round half
//!   to even, add the zero point, saturate, cast), so that the kernels' epilogues fuse them.
//!   u8 is what VNNI's `vpdpbusd` multiplies (u8 x s8); s8 symmetric activations would waste
//!   half their range on the non-negative outputs of ReLU (docs/quantisation.md).
//! - **Weights**, per output channel, symmetric s8: `scale = max |w| / 127`, zero point 0,
//!   the integers computed here, once.
//! - **Which ops**: the kinds asked for (conv, matmul, gemm), where mxc has an integer kernel
//!   for them: a 2-D convolution of one group or a depthwise one, with constant weights; a
//!   product by a constant 2-D matrix; a Linear layer (`gemm` with `trans_b`, bias, alpha =
//!   beta = 1). Any other op stays f32 (a grouped convolution, a product of two activations):
//!   quantising it would round its operands for no faster kernel. The bias stays f32, added in the epilogue.

use super::Rebuild;
use mxc_dialects::{eval, Attr, Attrs, DType, Def, Graph, IrError, Op, OpKind, Tensor, Trait, ValueId};
use std::collections::{HashMap, HashSet};

/// The op kinds int8 quantisation can make integer.
pub const QUANTISABLE: [OpKind; 3] = [OpKind::Conv, OpKind::MatMul, OpKind::Gemm];

/// What calibration found on one graph: the range of each quantised op's activation operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibrated {
    /// Each observed value's least and greatest value over the samples.
    pub ranges: HashMap<ValueId, (f32, f32)>,
    /// How many samples were run.
    pub samples: usize,
    /// The graph's `(values, ops)`, so that ranges are not applied to another graph.
    pub fingerprint: (usize, usize),
    /// Ops of the chosen kinds, and how many of them have an integer form.
    pub chosen: usize,
    pub quantisable: usize,
}

impl Calibrated {
    pub fn fingerprint_of(graph: &Graph) -> (usize, usize) {
        (graph.num_values(), graph.ops.len())
    }
}

/// Along which axis of a weight matrix its scales run.
#[derive(Clone, Copy, Debug)]
enum Channels {
    /// A convolution's `[M, C, kh, kw]`: one scale per output channel, `[M, 1, 1, 1]`.
    Filters,
    /// A product's `[K, N]`: one per column, `[N]`.
    Columns,
    /// A Linear layer's `[N, K]` (`trans_b`): one per row, `[N, 1]`.
    Rows,
}

impl Channels {
    /// How many channels weights of `shape` have.
    fn count(self, shape: &[usize]) -> usize {
        match self {
            Channels::Filters | Channels::Rows => shape[0],
            Channels::Columns => shape[1],
        }
    }

    /// The channel of element `i` (in row-major order) of weights of `shape`.
    fn of(self, shape: &[usize], i: usize) -> usize {
        match self {
            Channels::Filters => i / (shape.iter().skip(1).product::<usize>()).max(1),
            Channels::Columns => i % shape[1].max(1),
            Channels::Rows => i / shape[1].max(1),
        }
    }

    /// The shape of the scales of weights of `shape`, broadcast against them.
    fn scale_shape(self, shape: &[usize]) -> Vec<usize> {
        match self {
            Channels::Filters => vec![shape[0], 1, 1, 1],
            Channels::Columns => vec![shape[1]],
            Channels::Rows => vec![shape[0], 1],
        }
    }
}

/// A chosen op that has an integer form: its activation operand and constant weights.
struct Candidate {
    op: usize,
    activation: ValueId,
    weight: Tensor,
    channels: Channels,
}

/// The activation operands whose ranges calibration records for `graph`, in op order.
pub fn observed(graph: &Graph, kinds: &Option<Vec<OpKind>>) -> Vec<ValueId> {
    let mut seen = Vec::new();
    for c in candidates(graph, kinds) {
        if !seen.contains(&c.activation) {
            seen.push(c.activation);
        }
    }
    seen
}

/// How many ops of the chosen kinds `graph` has, and how many of them can be quantised.
pub fn counts(graph: &Graph, kinds: &Option<Vec<OpKind>>) -> (usize, usize) {
    let chosen = graph.ops.iter().filter(|op| is_chosen(op.kind, kinds)).count();
    (chosen, candidates(graph, kinds).len())
}

fn is_chosen(kind: OpKind, kinds: &Option<Vec<OpKind>>) -> bool {
    QUANTISABLE.contains(&kind) && kinds.as_ref().is_none_or(|k| k.contains(&kind))
}

/// The chosen ops of `graph` that have an integer form.
fn candidates(graph: &Graph, kinds: &Option<Vec<OpKind>>) -> Vec<Candidate> {
    let mut folded = Folded::default();
    let mut out = Vec::new();
    for (i, op) in graph.ops.iter().enumerate() {
        if !is_chosen(op.kind, kinds) {
            continue;
        }
        let is_activation = |v: ValueId| {
            graph.ty(v).dtype == DType::F32 && !matches!(graph.producer(v), Some(p) if p.kind == OpKind::Constant)
        };
        let (a, b) = (op.operands[0], op.operands[1]);
        if !is_activation(a) || graph.ty(b).dtype != DType::F32 {
            continue;
        }
        let Some(channels) = integer_form(graph, op) else {
            continue;
        };
        let Some(weight) = folded.get(graph, b) else {
            continue;
        };
        out.push(Candidate {
            op: i,
            activation: a,
            weight,
            channels,
        });
    }
    out
}

/// Whether `op` (its weights constant) has an integer kernel, and how its weights' scales run:
/// the forms `integer.rules` makes integer.
fn integer_form(graph: &Graph, op: &Op) -> Option<Channels> {
    let shape = |v: ValueId| graph.ty(v).shape.clone();
    let (a, b) = (shape(op.operands[0]), shape(op.operands[1]));
    let int = |name: &str, default: i64| op.attrs.int(name).unwrap_or(default);
    let float = |name: &str| op.attrs.float(name).unwrap_or(1.0);
    match op.kind {
        OpKind::Conv => {
            let pointwise = b.len() == 4 && b[2] == 1 && b[3] == 1;
            // few channels: read by kernel rows, whose bytes (`kw * C`) pad to whole groups
            let undilated_rows = op.attrs.dims("dilations").is_ok_and(|d| d.get(1) == Some(&1));
            let kernel_rows = b.len() == 4 && undilated_rows && (b[1] * b[3]) % 4 != 0;
            let group = int("group", 1);
            let dense = group == 1 && (a[1] % 4 == 0 || pointwise || kernel_rows);
            // depthwise: `conv_nhwc_integer_depthwise` (a channel per group, windows of at
            // most 22 x 22 taps, as `depthwise-conv-integer` asks)
            let depthwise =
                group > 1 && group as usize == a[1] && b[0] == a[1] && b[1] == 1 && b[2] <= 22 && b[3] <= 22;
            (a.len() == 4 && b.len() == 4 && (dense || depthwise)).then_some(Channels::Filters)
        }
        OpKind::MatMul => (a.len() >= 2 && b.len() == 2 && b[0] <= MAX_DEPTH).then_some(Channels::Columns),
        OpKind::Gemm => {
            let linear = int("trans_a", 0) == 0 && int("trans_b", 0) == 1 && float("alpha") == 1.0;
            let bias = op.operands.len() == 3 && float("beta") == 1.0 && graph.ty(op.operands[2]).dtype == DType::F32;
            (linear && bias && b.len() == 2 && b[1] <= MAX_DEPTH).then_some(Channels::Rows)
        }
        _ => None,
    }
}

/// The deepest product whose u8 x s8 sums stay exact in i32 (`integer.rules`).
const MAX_DEPTH: usize = 33025;

/// Constants folded through evaluable ops (a weight transposed or reshaped in the model).
#[derive(Default)]
struct Folded {
    values: HashMap<ValueId, Option<Tensor>>,
}

impl Folded {
    fn get(&mut self, graph: &Graph, v: ValueId) -> Option<Tensor> {
        if let Some(t) = self.values.get(&v) {
            return t.clone();
        }
        let t = match graph.def(v) {
            Def::Input(_) => None,
            Def::Op { op, result } => {
                let op = &graph.ops[op];
                match op.kind {
                    OpKind::Constant => graph.constant_value(v).cloned(),
                    k if k.has(Trait::Evaluable) && op.body.is_none() => {
                        let operands: Option<Vec<Tensor>> = op.operands.iter().map(|o| self.get(graph, *o)).collect();
                        operands.and_then(|ts| {
                            let refs: Vec<&Tensor> = ts.iter().collect();
                            let out = eval::eval(op.kind, &refs, &op.attrs)?.ok()?;
                            out.into_iter().nth(result)
                        })
                    }
                    _ => None,
                }
            }
        };
        self.values.insert(v, t.clone());
        t
    }
}

/// `graph` with the chosen ops' operands quantised by `calibrated`'s ranges. A residual join
/// (`Add`) of a value that the quantised ops' kernels compute (`integer_stream`) and another
/// reads quantised adds that value's quantised form, as onnxruntime's quantiser has it:
/// MobileNetV2's block output is the next block's image and its residual, and adding its
/// floats would have the program compute it twice, once to bytes and once to floats (a kernel
/// has one result). A join of another value (BERT's layer norm, read by quantised products)
/// keeps its floats: computed once either way, they lose nothing to rounding.
pub fn quantize(graph: &Graph, kinds: &Option<Vec<OpKind>>, calibrated: &Calibrated) -> Result<Graph, IrError> {
    if Calibrated::fingerprint_of(graph) != calibrated.fingerprint {
        return Err(int8_error(
            "the ranges were calibrated on another program (quantise the program they were calibrated on)".into(),
        ));
    }
    let candidates: HashMap<usize, Candidate> = (candidates(graph, kinds).into_iter())
        .filter(|c| {
            calibrated
                .ranges
                .get(&c.activation)
                .is_some_and(|(lo, hi)| lo.is_finite() && hi.is_finite())
        })
        .map(|c| (c.op, c))
        .collect();
    // values the integer kernels compute that another reads quantised: a residual join adds
    // their quantised form (see `quantize`'s comment)
    let computed = integer_stream(graph, &candidates);
    let rejoined: HashSet<ValueId> = (candidates.values())
        .map(|c| c.activation)
        .filter(|v| computed.contains(v))
        .collect();
    let mut r = Rebuild::new(graph);
    let mut activations: HashMap<ValueId, ValueId> = HashMap::new();
    let mut quantise = |r: &mut Rebuild, v: ValueId| -> Result<ValueId, IrError> {
        if let Some(&q) = activations.get(&v) {
            return Ok(q);
        }
        let (lo, hi) = calibrated.ranges[&v];
        let x = r.get(unclipped(graph, v, activation_params(lo, hi)));
        let q = quantised_activation(&mut r.new, x, lo, hi)?;
        activations.insert(v, q);
        Ok(q)
    };
    for (i, op) in graph.ops.iter().enumerate() {
        let Some(c) = candidates.get(&i) else {
            if op.kind != OpKind::Add || !op.operands.iter().any(|v| rejoined.contains(v)) {
                let results = r.copy(op);
                r.set(&op.results, &results);
                continue;
            }
            let mut operands = Vec::with_capacity(op.operands.len());
            for &v in &op.operands {
                operands.push(match rejoined.contains(&v) {
                    true => quantise(&mut r, v)?,
                    false => r.get(v),
                });
            }
            let results = r.new.build(op.kind, operands, op.attrs.clone())?;
            r.set(&op.results, &results);
            continue;
        };
        let a = quantise(&mut r, c.activation)?;
        let w = quantised_weight(&mut r.new, &c.weight, c.channels)?;
        let mut operands = vec![a, w];
        operands.extend(op.operands[2..].iter().map(|v| r.get(*v)));
        let results = r.new.build(op.kind, operands, op.attrs.clone())?;
        r.set(&op.results, &results);
    }
    r.finish()
}

/// The values the quantised ops' kernels compute: their results, joins (`Add`) of such values
/// and ReLUs or clips of them (a residual network's stream between its blocks).
fn integer_stream(graph: &Graph, candidates: &HashMap<usize, Candidate>) -> HashSet<ValueId> {
    let mut stream = HashSet::new();
    for (i, op) in graph.ops.iter().enumerate() {
        let joined = match op.kind {
            OpKind::Add => op.operands.iter().all(|v| stream.contains(v)),
            OpKind::Relu | OpKind::Clip => stream.contains(&op.operands[0]),
            _ => candidates.contains_key(&i),
        };
        if joined {
            stream.extend(op.results.iter().copied());
        }
    }
    stream
}

pub(super) fn int8_error(message: String) -> IrError {
    IrError::Op {
        op: "int8".into(),
        message,
    }
}

/// The u8 scale and zero point of the range `[lo, hi]`, widened to hold 0.
pub fn activation_params(lo: f32, hi: f32) -> (f32, u8) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    if hi == lo {
        return (1.0, 0);
    }
    let scale = (hi - lo) / 255.0;
    let zero = (-lo / scale).round_ties_even().clamp(0.0, 255.0);
    (scale, zero as u8)
}

/// What `x` clips (`clip` or `relu` with constant bounds) where the quantisation `(scale,
/// zero)` saturates at those bounds anyway: the bounds quantise to 0 and 255, and quantising
/// is monotonic, so quantising the clip's operand gives the same bytes for every value (NaN
/// included), and the clip need not stay in float before the integer kernel (ReLU6 before a
/// quantised convolution; onnxruntime's QDQ graphs drop it the same way). Else `x`.
fn unclipped(graph: &Graph, x: ValueId, (scale, zero): (f32, u8)) -> ValueId {
    let quantised = |v: f32| ((v / scale).round_ties_even() + zero as f32).clamp(0.0, 255.0);
    let bound = |v: ValueId| match graph.constant_value(v).map(|t| t.to_f64_vec()) {
        Some(values) if values.len() == 1 => Some(values[0] as f32),
        _ => None,
    };
    let Some(op) = graph.producer(x) else { return x };
    let (lo, hi) = match op.kind {
        OpKind::Relu => (Some(0.0), Some(f32::INFINITY)),
        OpKind::Clip => (bound(op.operands[1]), bound(op.operands[2])),
        _ => (None, None),
    };
    match (lo, hi) {
        (Some(lo), Some(hi)) if quantised(lo) == 0.0 && quantised(hi) == 255.0 => op.operands[0],
        _ => x,
    }
}

/// `dequantize_linear(quantize_linear(x))` per tensor in u8, as `QuantizeLinear` and
/// `DequantizeLinear` import.
fn quantised_activation(g: &mut Graph, x: ValueId, lo: f32, hi: f32) -> Result<ValueId, IrError> {
    let (scale, zero) = activation_params(lo, hi);
    let f32_scalar = |g: &mut Graph, v: f32| g.constant(Tensor::from_f32s(vec![], &[v]));
    let s = f32_scalar(g, scale);
    let mut q = g.build1(OpKind::Div, vec![x, s], Attrs::new())?;
    q = g.build1(OpKind::Round, vec![q], Attrs::new())?;
    let z = f32_scalar(g, zero as f32);
    q = g.build1(OpKind::Add, vec![q, z], Attrs::new())?;
    let (lo, hi) = (f32_scalar(g, 0.0), f32_scalar(g, 255.0));
    q = g.build1(OpKind::Max, vec![q, lo], Attrs::new())?;
    q = g.build1(OpKind::Min, vec![q, hi], Attrs::new())?;
    q = g.build1(OpKind::Cast, vec![q], Attrs::new().with("to", Attr::DType(DType::U8)))?;
    let z = g.constant(Tensor::from_i64s(DType::U8, vec![], &[zero as i64]));
    g.build1(OpKind::DequantizeLinear, vec![q, s, z], Attrs::new())
}

/// The weights `w` as s8 integers with a scale per output channel, dequantised.
fn quantised_weight(g: &mut Graph, w: &Tensor, channels: Channels) -> Result<ValueId, IrError> {
    let shape = w.shape().to_vec();
    let values: Vec<f32> = w.to_f64_vec().into_iter().map(|v| v as f32).collect();
    let count = channels.count(&shape);
    let channel_of = |i: usize| channels.of(&shape, i);
    let mut largest = vec![0f32; count];
    for (i, v) in values.iter().enumerate() {
        if !v.is_finite() {
            return Err(int8_error(format!(
                "weights of shape {shape:?} hold {v}: they cannot be quantised"
            )));
        }
        let c = channel_of(i);
        largest[c] = largest[c].max(v.abs());
    }
    let scales: Vec<f32> = largest
        .iter()
        .map(|&m| if m == 0.0 { 1.0 } else { m / 127.0 })
        .collect();
    let ints: Vec<i64> = (values.iter().enumerate())
        .map(|(i, v)| (v / scales[channel_of(i)]).round_ties_even().clamp(-127.0, 127.0) as i64)
        .collect();
    let s = g.constant(Tensor::from_f32s(channels.scale_shape(&shape), &scales));
    let q = g.constant(Tensor::from_i64s(DType::I8, shape, &ints));
    let z = g.constant(Tensor::from_i64s(DType::I8, vec![], &[0]));
    g.build1(OpKind::DequantizeLinear, vec![q, s, z], Attrs::new())
}
