//! Precision as a rewrite of the program, before the target's rewrites: what `--fp16`,
//! `--bf16` and `--half-as-f32` ask (MIGraphX's `quantize_fp16` / `quantize_bf16`).
//!
//! *Quantising* (`Quantize`) makes the chosen ops compute in f16 or bf16: each f32 operand is
//! cast to the half type (a constant is converted here, once), the op is built again on those
//! operands (its type rule gives half results), and each result that became half is cast back
//! to f32 for the ops that read it, so the program's inputs and outputs keep their types. A
//! quantised op reads another's half result directly (the casts `f16 -> f32 -> f16` between
//! them would be the identity; making them only to remove them in the e-graph would crowd it);
//! a half result read by an op that was not chosen stays rounded (`f32 -> f16 -> f32` is not
//! the identity). An op whose type rule
//! refuses half operands (a `layer_norm` whose statistics are f32 takes them; one that cannot
//! take a half operand is refused by `build`) stays as it is.
//!
//! *Half as f32* (`Precision::half_as_f32`) is the opposite: every f16 or bf16 value the
//! program computes is computed and kept in f32; half precision stays only in the weights
//! (converted to f32 exactly) and in the types of the program's inputs and outputs. This is
//! what onnxruntime's CPU provider does with a half-precision model (it computes such ops in
//! f32 between casts and drops the cast pairs), so it gives its answers; without it each op's
//! result is rounded to its type, ONNX's meaning (`docs/quantisation.md`).

pub mod int8;

use mxc_dialects::{eval, Attr, Attrs, DType, Graph, IrError, Op, OpKind, Tensor, Trait, ValueId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How a program's precision is changed before it is compiled (the default changes nothing).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Precision {
    pub quantize: Option<Quantize>,
    /// Compute every half-precision value in f32 (after quantising, if both are asked).
    pub half_as_f32: bool,
    /// The program's fp8 inputs and outputs become f32 at its boundary, cast to and from fp8
    /// inside (MIGraphX's `autocast_fp8`); the program is otherwise unchanged.
    pub autocast_fp8: bool,
    /// Quantise convolutions and products to int8 from calibrated ranges (before anything
    /// else; not with `quantize`).
    pub int8: Option<Int8>,
}

/// Ops to quantise to int8 (`int8.rs`), and the ranges that decide their scales.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8 {
    /// Which ops: `None` for every kind that has an integer form (`int8::QUANTISABLE`).
    pub ops: Option<Vec<OpKind>>,
    pub calibration: Calibration,
}

/// Where an int8 program's ranges come from.
#[derive(Clone, Debug)]
pub enum Calibration {
    /// Samples to run (a value for each input, by name), calibrated when the program compiles
    /// (`mxc_codegen::with_precision`); the first calibration is kept for the next compile of
    /// the same graph.
    Samples {
        samples: Arc<Vec<HashMap<String, Tensor>>>,
        calibrated: Arc<Mutex<Option<Arc<int8::Calibrated>>>>,
    },
    /// Ranges calibrated already (`quantize_int8`).
    Ranges(Arc<int8::Calibrated>),
}

impl Calibration {
    /// Samples to calibrate on when the program compiles.
    pub fn samples(samples: Vec<HashMap<String, Tensor>>) -> Calibration {
        Calibration::Samples {
            samples: Arc::new(samples),
            calibrated: Arc::new(Mutex::new(None)),
        }
    }

    /// The ranges calibrated for `graph`, if there are some.
    pub fn ranges_for(&self, graph: &Graph) -> Option<Arc<int8::Calibrated>> {
        let found = match self {
            Calibration::Ranges(c) => Some(c.clone()),
            Calibration::Samples { calibrated, .. } => calibrated.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        found.filter(|c| c.fingerprint == int8::Calibrated::fingerprint_of(graph))
    }

    /// How many samples the ranges come from.
    pub fn sample_count(&self) -> usize {
        match self {
            Calibration::Samples { samples, .. } => samples.len(),
            Calibration::Ranges(c) => c.samples,
        }
    }
}

impl PartialEq for Calibration {
    fn eq(&self, other: &Calibration) -> bool {
        match (self, other) {
            (Calibration::Samples { samples: a, .. }, Calibration::Samples { samples: b, .. }) => a == b,
            (Calibration::Ranges(a), Calibration::Ranges(b)) => a == b,
            _ => false,
        }
    }
}

/// Ops to compute in a half precision.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantize {
    /// `DType::F16` or `DType::BF16`.
    pub to: DType,
    /// Which ops: `None` for every op (MIGraphX's `["all"]`).
    pub ops: Option<Vec<OpKind>>,
}

impl Precision {
    pub fn is_default(&self) -> bool {
        *self == Precision::default()
    }

    /// Applies the precision to `graph` and the regions inside it.
    pub fn apply(&self, graph: &Graph) -> Result<Graph, IrError> {
        let mut g = graph.clone();
        if let Some(i) = &self.int8 {
            if self.quantize.is_some() {
                return Err(int8::int8_error(
                    "int8 and a half precision cannot both be asked for".into(),
                ));
            }
            let Some(calibrated) = i.calibration.ranges_for(&g) else {
                return Err(int8::int8_error(
                    "the program is not calibrated (mxc_codegen::with_precision calibrates it)".into(),
                ));
            };
            g = int8::quantize(&g, &i.ops, &calibrated)?;
        }
        if let Some(q) = &self.quantize {
            g = with_regions(&g, &|g| quantize(g, q))?;
        }
        if self.half_as_f32 {
            g = with_regions(&g, &half_as_f32)?;
        }
        if self.autocast_fp8 {
            g = autocast_fp8(&g)?;
        }
        Ok(g)
    }

    /// A short description for `.mxr` files and `mxc params`: `fp16 (conv, matmul)`,
    /// `bf16`, `half as f32`; empty for the default.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(q) = &self.quantize {
            let name = if q.to == DType::BF16 { "bf16" } else { "fp16" };
            parts.push(match &q.ops {
                None => name.to_string(),
                Some(ops) => {
                    let names: Vec<&str> = ops.iter().map(|k| k.name()).collect();
                    format!("{name} ({})", names.join(", "))
                }
            });
        }
        if let Some(i) = &self.int8 {
            parts.push(describe_int8(i));
        }
        if self.half_as_f32 {
            parts.push("half as f32".to_string());
        }
        if self.autocast_fp8 {
            parts.push("autocast fp8".to_string());
        }
        parts.join(", ")
    }
}

/// `int8 (conv, matmul; 50 of 54 ops, 8 calibration samples)`: the kinds asked for, how many
/// ops of those kinds have an integer form (once calibrated), and the samples.
fn describe_int8(i: &Int8) -> String {
    let kinds = match &i.ops {
        None => String::new(),
        Some(ops) => {
            let names: Vec<&str> = ops.iter().map(|k| k.name()).collect();
            format!("{}; ", names.join(", "))
        }
    };
    let calibrated = match &i.calibration {
        Calibration::Ranges(c) => Some(c.clone()),
        Calibration::Samples { calibrated, .. } => calibrated.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    let ops = calibrated.map_or(String::new(), |c| format!("{} of {} ops, ", c.quantisable, c.chosen));
    let samples = i.calibration.sample_count();
    let plural = if samples == 1 { "" } else { "s" };
    format!("int8 ({kinds}{ops}{samples} calibration sample{plural})")
}

/// The op kinds int8 quantisation is asked for by `names` (as `op_kinds` reads them): kinds
/// without an integer form are refused, and `convolution`'s `conv_transpose` left out.
pub fn int8_kinds(names: &[&str]) -> Result<Option<Vec<OpKind>>, String> {
    let Some(kinds) = op_kinds(names)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for k in kinds {
        match k {
            OpKind::ConvTranspose if names.contains(&"convolution") => {}
            k if int8::QUANTISABLE.contains(&k) => out.push(k),
            k => {
                return Err(format!(
                    "`{}` has no int8 form (int8 quantises conv, matmul and gemm: `convolution`, `dot`)",
                    k.name()
                ))
            }
        }
    }
    Ok(Some(out))
}

/// The op kinds named by `names`: mx's op names, and MIGraphX's `dot` (matmul and gemm),
/// `convolution` (conv and conv_transpose) and `all` (every op, `None`). An unknown name is
/// an error naming it.
pub fn op_kinds(names: &[&str]) -> Result<Option<Vec<OpKind>>, String> {
    if names.is_empty() {
        return Err("no ops named: name the ops to convert, or `all`".to_string());
    }
    let mut kinds = Vec::new();
    for name in names {
        match *name {
            "all" => return Ok(None),
            "dot" => kinds.extend([OpKind::MatMul, OpKind::Gemm]),
            "convolution" => kinds.extend([OpKind::Conv, OpKind::ConvTranspose]),
            other => match OpKind::from_name(other) {
                Some(k) if converts(k) => kinds.push(k),
                Some(k) => return Err(format!("`{}` has no precision of its own to change", k.name())),
                None => {
                    return Err(format!(
                    "no op is named `{other}` (mx's names, as `mxc read` prints them, or `dot`, `convolution`, `all`)"
                ))
                }
            },
        }
    }
    kinds.dedup();
    Ok(Some(kinds))
}

/// Whether an op of `kind` can be computed in another precision by building it again on
/// other operands: not the ops whose result types an attribute sets (`cast`, `bitcast`,
/// `constant`), nor those that run regions or hold a body. Every other op's type rule decides
/// whether it takes half operands.
fn converts(kind: OpKind) -> bool {
    !matches!(
        kind,
        OpKind::Constant | OpKind::Cast | OpKind::BitCast | OpKind::Fused | OpKind::Call
    ) && !kind.is_control()
        && !kind.has(Trait::Host)
}

/// `f` applied to `graph` and, inside out, to every region in it.
fn with_regions(graph: &Graph, f: &dyn Fn(&Graph) -> Result<Graph, IrError>) -> Result<Graph, IrError> {
    let mapped = graph.map_regions(&mut |region| with_regions(region, f))?;
    f(mapped.as_ref().unwrap_or(graph))
}

/// A graph being rebuilt from another: each old value's new one, and casts made once each.
struct Rebuild<'g> {
    old: &'g Graph,
    new: Graph,
    map: Vec<Option<ValueId>>,
    casts: HashMap<(ValueId, DType), ValueId>,
}

impl<'g> Rebuild<'g> {
    fn new(old: &'g Graph) -> Rebuild<'g> {
        Rebuild::with_inputs(old, |d| d)
    }

    /// With the inputs of `old`, each of element type `input_type` of its own.
    fn with_inputs(old: &'g Graph, input_type: impl Fn(DType) -> DType) -> Rebuild<'g> {
        let mut new = Graph::new(&old.name);
        new.interface = old.interface.clone();
        let mut map = vec![None; old.num_values()];
        for p in &old.inputs {
            let ty = old.ty(p.value);
            let ty = ty.with_dtype(input_type(ty.dtype));
            map[p.value.index()] = Some(new.add_input(&p.name, ty));
        }
        Rebuild {
            old,
            new,
            map,
            casts: HashMap::new(),
        }
    }

    fn get(&self, v: ValueId) -> ValueId {
        self.map[v.index()].expect("operands are defined before use")
    }

    /// `v` (a new value) as `to`: itself, a constant converted now, or a cast (made once).
    fn cast(&mut self, v: ValueId, to: DType) -> Result<ValueId, IrError> {
        if self.new.ty(v).dtype == to {
            return Ok(v);
        }
        if let Some(&c) = self.casts.get(&(v, to)) {
            return Ok(c);
        }
        let c = match self.new.constant_value(v) {
            Some(t) => {
                let t = converted(t, to).map_err(|message| IrError::Op {
                    op: "cast".into(),
                    message,
                })?;
                self.new.constant(t)
            }
            None => self
                .new
                .build1(OpKind::Cast, vec![v], Attrs::new().with("to", Attr::DType(to)))?,
        };
        self.casts.insert((v, to), c);
        Ok(c)
    }

    /// `op` as it was, on the new operands.
    fn copy(&mut self, op: &Op) -> Vec<ValueId> {
        let operands = op.operands.iter().map(|v| self.get(*v)).collect();
        self.copy_on(op, operands)
    }

    /// `op` with its attributes, body and result types, on `operands` (new values).
    fn copy_on(&mut self, op: &Op, operands: Vec<ValueId>) -> Vec<ValueId> {
        let types = op.results.iter().map(|r| self.old.ty(*r).clone()).collect();
        let results = self.new.push_op(op.kind, operands, op.attrs.clone(), types);
        self.new.ops.last_mut().expect("just pushed").body = op.body.clone();
        results
    }

    /// `op` built again on `operands` (new values), if its type rule takes them.
    fn rebuild(&mut self, op: &Op, operands: Vec<ValueId>) -> Option<Vec<ValueId>> {
        self.new.build(op.kind, operands, op.attrs.clone()).ok()
    }

    fn set(&mut self, old: &[ValueId], new: &[ValueId]) {
        for (o, n) in old.iter().zip(new) {
            self.map[o.index()] = Some(*n);
        }
    }

    /// The graph, its outputs given the old ones' types (cast where they differ).
    fn finish(self) -> Result<Graph, IrError> {
        self.finish_as(|d| d)
    }

    /// The graph, each output of element type `output_type` of the old one's.
    fn finish_as(mut self, output_type: impl Fn(DType) -> DType) -> Result<Graph, IrError> {
        for p in &self.old.outputs {
            let v = self.get(p.value);
            let v = self.cast(v, output_type(self.old.ty(p.value).dtype))?;
            self.new.add_output(&p.name, v);
        }
        Ok(self.new.prune())
    }
}

fn quantize(graph: &Graph, q: &Quantize) -> Result<Graph, IrError> {
    let mut r = Rebuild::new(graph);
    // the half result each widening cast back to f32 was made from: a chosen op reads it
    // directly, with no cast there and back between two chosen ops
    let mut narrow: HashMap<ValueId, ValueId> = HashMap::new();
    for op in &graph.ops {
        let chosen = converts(op.kind) && q.ops.as_ref().is_none_or(|ops| ops.contains(&op.kind));
        let is_f32 = |v: &ValueId| graph.ty(*v).dtype == DType::F32;
        if !chosen || !(op.operands.iter().any(is_f32) || op.results.iter().any(is_f32)) {
            let results = r.copy(op);
            r.set(&op.results, &results);
            continue;
        }
        let mut operands = Vec::new();
        for v in &op.operands {
            let n = r.get(*v);
            operands.push(match narrow.get(&n) {
                Some(&half) if r.new.ty(half).dtype == q.to => half,
                _ if is_f32(v) => r.cast(n, q.to)?,
                _ => n,
            });
        }
        let Some(results) = r.rebuild(op, operands) else {
            let results = r.copy(op);
            r.set(&op.results, &results);
            continue;
        };
        let mut back = Vec::new();
        for (old, new) in op.results.iter().zip(results) {
            let wide = r.cast(new, graph.ty(*old).dtype)?;
            if wide != new {
                narrow.insert(wide, new);
            }
            back.push(wide);
        }
        r.set(&op.results, &back);
    }
    r.finish()
}

fn half_as_f32(graph: &Graph) -> Result<Graph, IrError> {
    let mut r = Rebuild::new(graph);
    // half inputs are widened once, where they enter
    for p in &graph.inputs {
        if graph.ty(p.value).dtype.is_half() {
            let v = r.get(p.value);
            let wide = r.cast(v, DType::F32)?;
            r.set(&[p.value], &[wide]);
        }
    }
    for op in &graph.ops {
        let results = match op.kind {
            OpKind::Constant => {
                let results = r.copy(op);
                match graph.ty(op.results[0]).dtype.is_half() {
                    true => vec![r.cast(results[0], DType::F32)?],
                    false => results,
                }
            }
            // a cast to a half type keeps the value in f32 (a cast from one is the cast from
            // the f32 value)
            OpKind::Cast => {
                let to = match op.attrs.dtype("to") {
                    Ok(d) if d.is_half() => DType::F32,
                    Ok(d) => d,
                    Err(message) => {
                        return Err(IrError::Op {
                            op: "cast".into(),
                            message,
                        })
                    }
                };
                let v = r.get(op.operands[0]);
                vec![r.cast(v, to)?]
            }
            kind if converts(kind) => {
                let operands: Vec<ValueId> = op.operands.iter().map(|v| r.get(*v)).collect();
                match r.rebuild(op, operands) {
                    Some(results) => results,
                    None => as_declared(&mut r, op)?,
                }
            }
            _ => as_declared(&mut r, op)?,
        };
        r.set(&op.results, &results);
    }
    r.finish()
}

/// `op` on its operands in their declared types (half ones narrowed back from f32), its half
/// results widened: for the ops whose types are fixed (bitcasts, control flow, a type rule that
/// takes no f32 where the model had a half type).
fn as_declared(r: &mut Rebuild, op: &Op) -> Result<Vec<ValueId>, IrError> {
    let mut operands = Vec::new();
    for v in &op.operands {
        let n = r.get(*v);
        operands.push(r.cast(n, r.old.ty(*v).dtype)?);
    }
    let results = r.copy_on(op, operands);
    let mut out = Vec::new();
    for v in results {
        let wide = match r.new.ty(v).dtype.is_half() {
            true => DType::F32,
            false => r.new.ty(v).dtype,
        };
        out.push(r.cast(v, wide)?);
    }
    Ok(out)
}

/// The 8-bit floats MIGraphX's `autocast_fp8` converts at a program's boundary.
fn is_fp8(d: DType) -> bool {
    matches!(
        d,
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ
    )
}

/// `graph` with its fp8 inputs taken as f32 (each cast to its fp8 type as it enters: rounded
/// to nearest even, as `mx.cast` does) and its fp8 outputs given as f32 (exact).
fn autocast_fp8(graph: &Graph) -> Result<Graph, IrError> {
    let wide = |d: DType| if is_fp8(d) { DType::F32 } else { d };
    let mut r = Rebuild::with_inputs(graph, wide);
    for p in &graph.inputs {
        let v = r.get(p.value);
        let v = r.cast(v, graph.ty(p.value).dtype)?;
        r.set(&[p.value], &[v]);
    }
    for op in &graph.ops {
        let results = r.copy(op);
        r.set(&op.results, &results);
    }
    r.finish_as(wide)
}

/// A constant's tensor in another element type, as `mx.cast` gives it.
pub fn converted(t: &Tensor, to: DType) -> Result<Tensor, String> {
    let attrs = Attrs::new().with("to", Attr::DType(to));
    let out = eval::eval(OpKind::Cast, &[t], &attrs).expect("cast evaluates")?;
    Ok(out.into_iter().next().expect("one result"))
}
