//! Recurrent layers: `RNN`, `GRU` and `LSTM`, decomposed into mx ops by unrolling the
//! recurrence at import (all shapes are static). Per direction, the input projection of every
//! step is one `gemm` (`X · Wᵀ` plus the biases); each step then takes the previous hidden
//! state through a `gemm` with the recurrence weights and the cell's gates and state update
//! (`cells`). Supported: both directions, `layout` 0 and 1, `clip`, every activation the
//! spec lists (`activations`), initial states, and the outputs `Y`, `Y_h`, `Y_c`, each built
//! only when asked for.
//!
//! `sequence_lens` is honoured exactly whether or not it is known at compile time: at a step
//! past a sequence's length that sequence keeps its state and outputs zeros (an element-wise
//! `where` on the step index), so its final state is the one at its length (the initial
//! state for a length of 0), and a reverse direction starts at each sequence's own end.
//! Sequences longer than `MAX_STEPS` are refused: the unrolled graph grows with every step.

mod activations;
mod cells;
mod lengths;
#[cfg(test)]
mod tests;

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use activations::Activation;
use cells::{Gru, Lstm, Rnn, Step};
use lengths::Lengths;
use mxc_dialects::{Attr, Attrs, OpKind, Tensor, TensorType, ValueId};

/// The longest sequence unrolled; each step adds a dozen or so ops per direction.
const MAX_STEPS: usize = 1024;

pub fn register(r: &mut Registry) {
    r.add_all("RNN", rnn);
    r.add_all("GRU", gru);
    r.add_all("LSTM", lstm);
}

fn rnn(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let layer = Layer::new(ctx, &RNN)?;
    layer.run(ctx, |_, _| Ok(Rnn))
}

fn gru(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let layer = Layer::new(ctx, &GRU)?;
    let linear_before_reset = ctx.node.int("linear_before_reset", 0)? != 0;
    layer.run(ctx, |ctx, dir| Gru::new(ctx, dir, linear_before_reset))
}

fn lstm(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let layer = Layer::new(ctx, &LSTM)?;
    let input_forget = ctx.node.int("input_forget", 0)? != 0;
    let peepholes = ctx.opt_input(7);
    if let Some(p) = peepholes {
        check_shape(ctx, p, "P", &[layer.directions.len(), 3 * layer.hidden])?;
    }
    layer.run(ctx, |ctx, dir| Lstm::new(ctx, dir, input_forget, peepholes))
}

/// What distinguishes the three ops to the shared parsing.
struct Spec {
    /// Gates per hidden unit: W and R have `gates * hidden_size` rows.
    gates: usize,
    /// The activations of one direction when the node names none.
    activations: &'static [&'static str],
    /// The input holding the initial value of each state, and its name (hidden first).
    initial_inputs: &'static [(usize, &'static str)],
}

const RNN: Spec = Spec {
    gates: 1,
    activations: &["Tanh"],
    initial_inputs: &[(5, "initial_h")],
};

const GRU: Spec = Spec {
    gates: 3,
    activations: &["Sigmoid", "Tanh"],
    initial_inputs: &[(5, "initial_h")],
};

const LSTM: Spec = Spec {
    gates: 4,
    activations: &["Sigmoid", "Tanh", "Tanh"],
    initial_inputs: &[(5, "initial_h"), (6, "initial_c")],
};

/// A recurrent layer's node, parsed: its input as rows and what each direction runs with.
struct Layer {
    /// Every step's input, step after step: `[seq * batch, input]`.
    x: ValueId,
    seq: usize,
    batch: usize,
    hidden: usize,
    /// `layout` 1: X, the initial states and the outputs have the batch first.
    batch_first: bool,
    lengths: Lengths,
    directions: Vec<Direction>,
}

/// One direction of a layer: its weights, activations and initial states.
struct Direction {
    reverse: bool,
    /// The initial value of each state, `[batch, hidden]`.
    initial: Vec<ValueId>,
    /// The position of the direction in the inputs (0 forward, 1 backward when both).
    index: usize,
    hidden: usize,
    clip: Option<f64>,
    /// This direction's activations, in the order the op lists them.
    activations: Vec<Activation>,
    /// `[gates * hidden, input]`.
    w: ValueId,
    /// `[gates * hidden, hidden]`.
    r: ValueId,
    /// The biases of W and R, `[gates * hidden]` each, when the node has B.
    wb: Option<ValueId>,
    rb: Option<ValueId>,
}

impl Layer {
    fn new(ctx: &mut Ctx, spec: &Spec) -> Result<Layer, String> {
        let (x, w, r) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
        let dtype = ctx.ty(x).dtype;
        if !dtype.is_float() {
            return Err(format!("X must be floating-point, got {dtype}"));
        }
        // `output_sequence` (before opset 7) only said whether Y is optional: outputs are
        // built when the node names them.
        ctx.node.without_effect(&["output_sequence"]);
        let batch_first = match ctx.node.int("layout", 0)? {
            0 => false,
            1 => true,
            other => return Err(format!("unsupported layout {other} (0 or 1)")),
        };
        let reverse = match ctx.node.string("direction", "forward")?.as_str() {
            "forward" => vec![false],
            "reverse" => vec![true],
            "bidirectional" => vec![false, true],
            other => return Err(format!("unsupported direction \"{other}\"")),
        };
        let &[seq, batch, input] = &ctx.ty(x).shape[..] else {
            return Err(format!("X must have rank 3, got shape {:?}", ctx.ty(x).shape));
        };
        let (seq, batch) = if batch_first { (batch, seq) } else { (seq, batch) };
        if seq == 0 || seq > MAX_STEPS {
            return Err(format!(
                "a sequence of {seq} steps is not supported (unrolled at import: 1 to {MAX_STEPS} steps)"
            ));
        }
        let hidden = match ctx.node.opt_int("hidden_size")? {
            Some(h) => usize::try_from(h).map_err(|_| format!("hidden_size {h} is negative"))?,
            None => ctx.ty(r).shape.get(2).copied().unwrap_or(0),
        };
        if hidden == 0 {
            return Err("the hidden size is 0".into());
        }
        let d = reverse.len();
        let rows = spec.gates * hidden;
        check_shape(ctx, w, "W", &[d, rows, input])?;
        check_shape(ctx, r, "R", &[d, rows, hidden])?;
        if let Some(b) = ctx.opt_input(3) {
            check_shape(ctx, b, "B", &[d, 2 * rows])?;
        }
        let state_shape = if batch_first {
            [batch, d, hidden]
        } else {
            [d, batch, hidden]
        };
        for &(i, name) in spec.initial_inputs {
            if let Some(v) = ctx.opt_input(i) {
                check_shape(ctx, v, name, &state_shape)?;
            }
        }
        let clip = match ctx.node.opt_float("clip")? {
            Some(c) if c > 0.0 => Some(c as f64),
            Some(c) => return Err(format!("clip {c} is not positive")),
            None => None,
        };
        let activations = activations::parse(&ctx.node, spec.activations, d)?;
        let lengths = Lengths::new(ctx, seq, batch)?;
        let x = if batch_first { ctx.transpose(x, &[1, 0, 2])? } else { x };
        let x = reshape(ctx, x, &[seq * batch, input])?;
        let mut layer = Layer {
            x,
            seq,
            batch,
            hidden,
            batch_first,
            lengths,
            directions: Vec::new(),
        };
        let per_direction = spec.activations.len();
        for (index, reverse) in reverse.into_iter().enumerate() {
            let dir = Direction {
                reverse,
                initial: layer.initial_states(ctx, spec, index)?,
                index,
                hidden,
                clip,
                activations: activations[index * per_direction..][..per_direction].to_vec(),
                w: direction_slice(ctx, w, 0, index)?,
                r: direction_slice(ctx, r, 0, index)?,
                wb: layer.bias(ctx, spec, index, 0)?,
                rb: layer.bias(ctx, spec, index, 1)?,
            };
            layer.directions.push(dir);
        }
        Ok(layer)
    }

    /// The initial states of direction `index`, zeros for those the node leaves out.
    fn initial_states(&self, ctx: &mut Ctx, spec: &Spec, index: usize) -> Result<Vec<ValueId>, String> {
        let axis = if self.batch_first { 1 } else { 0 };
        let dtype = ctx.ty(self.x).dtype;
        let mut states = Vec::new();
        for &(i, _) in spec.initial_inputs {
            states.push(match ctx.opt_input(i) {
                Some(v) => direction_slice(ctx, v, axis, index)?,
                None => ctx.constant(Tensor::zeros(TensorType::new(dtype, vec![self.batch, self.hidden]))),
            });
        }
        Ok(states)
    }

    /// The W (`part` 0) or R (`part` 1) bias of direction `index`, when the node has B.
    fn bias(&self, ctx: &mut Ctx, spec: &Spec, index: usize, part: usize) -> Result<Option<ValueId>, String> {
        let Some(b) = ctx.opt_input(3) else {
            return Ok(None);
        };
        let rows = spec.gates * self.hidden;
        let half = slice_value(ctx, b, &[(0, span(index, 1)), (1, span(part * rows, rows))])?;
        Ok(Some(reshape(ctx, half, &[rows])?))
    }

    /// Unrolls every direction with the cell `make` builds for it and assembles the outputs
    /// the node asks for.
    fn run<S: Step>(
        &self,
        ctx: &mut Ctx,
        make: impl Fn(&mut Ctx, &Direction) -> Result<S, String>,
    ) -> Result<Vec<ValueId>, String> {
        let want_y = ctx.wants_output(0);
        let mut runs = Vec::new();
        for dir in &self.directions {
            let cell = make(ctx, dir)?;
            runs.push(self.unroll(ctx, dir, &cell, want_y)?);
        }
        // An output the node does not ask for is never bound, so any value can hold its
        // place before one it asks for.
        let unused = self.x;
        let mut outputs = vec![if want_y {
            self.sequence_output(ctx, &runs)?
        } else {
            unused
        }];
        for k in 0..self.directions[0].initial.len() {
            outputs.push(if ctx.wants_output(k + 1) {
                self.final_state(ctx, &runs, k)?
            } else {
                unused
            });
        }
        Ok(outputs)
    }

    /// Runs `cell` over the sequence in the direction's order.
    fn unroll(&self, ctx: &mut Ctx, dir: &Direction, cell: &impl Step, want_y: bool) -> Result<Run, String> {
        let bias = cell.input_bias(ctx, dir)?;
        let projected = gemm_nt(ctx, self.x, dir.w, bias)?;
        let mut steps: Vec<usize> = (0..self.seq).collect();
        if dir.reverse {
            steps.reverse();
        }
        let mut states = dir.initial.clone();
        let mut outputs = Vec::new();
        for &t in &steps {
            let xw = slice_value(ctx, projected, &[(0, span(t * self.batch, self.batch))])?;
            let next = cell.step(ctx, dir, xw, &states)?;
            match self.lengths.mask(ctx, t)? {
                None => {
                    outputs.push(next[0]);
                    states = next;
                }
                Some(mask) => {
                    if want_y {
                        let zero = ctx.scalar(ctx.ty(next[0]).dtype, 0.0);
                        outputs.push(ctx.op(OpKind::Where, &[mask, next[0], zero])?);
                    }
                    for (state, new) in states.iter_mut().zip(next) {
                        *state = ctx.op(OpKind::Where, &[mask, new, *state])?;
                    }
                }
            }
        }
        if dir.reverse {
            outputs.reverse();
        }
        Ok(Run { outputs, last: states })
    }

    /// Y: `[seq, directions, batch, hidden]` (`[batch, seq, directions, hidden]` batch first).
    fn sequence_output(&self, ctx: &mut Ctx, runs: &[Run]) -> Result<ValueId, String> {
        let mut per_direction = Vec::new();
        for run in runs {
            let rows = concat_values(ctx, run.outputs.clone(), 0)?;
            per_direction.push(reshape(ctx, rows, &[self.seq, 1, self.batch, self.hidden])?);
        }
        let y = concat_values(ctx, per_direction, 1)?;
        let perm: &[usize] = if self.batch_first { &[2, 0, 1, 3] } else { &[0, 1, 2, 3] };
        ctx.transpose(y, perm)
    }

    /// Y_h (`k` 0) or Y_c (`k` 1): `[directions, batch, hidden]` (`[batch, directions,
    /// hidden]` batch first).
    fn final_state(&self, ctx: &mut Ctx, runs: &[Run], k: usize) -> Result<ValueId, String> {
        let mut per_direction = Vec::new();
        for run in runs {
            per_direction.push(reshape(ctx, run.last[k], &[1, self.batch, self.hidden])?);
        }
        let state = concat_values(ctx, per_direction, 0)?;
        let perm: &[usize] = if self.batch_first { &[1, 0, 2] } else { &[0, 1, 2] };
        ctx.transpose(state, perm)
    }
}

/// One direction's results: the hidden state output at each step (`[batch, hidden]`, in time
/// order), and the final states.
struct Run {
    outputs: Vec<ValueId>,
    last: Vec<ValueId>,
}

impl Direction {
    /// The columns of `count` gates from gate `first` of `gates`, `[batch, n * hidden]`.
    fn gates(&self, ctx: &mut Ctx, gates: ValueId, first: usize, count: usize) -> Result<ValueId, String> {
        let cols = span(first * self.hidden, count * self.hidden);
        slice_value(ctx, gates, &[(1, cols)])
    }

    /// Gate `k`'s columns of `gates`.
    fn gate(&self, ctx: &mut Ctx, gates: ValueId, k: usize) -> Result<ValueId, String> {
        self.gates(ctx, gates, k, 1)
    }

    /// This direction's activation `i` applied to `v`, clipped first when the node clips.
    fn activate(&self, ctx: &mut Ctx, i: usize, v: ValueId) -> Result<ValueId, String> {
        let v = match self.clip {
            Some(c) => {
                let dtype = ctx.ty(v).dtype;
                let (lo, hi) = (ctx.scalar(dtype, -c), ctx.scalar(dtype, c));
                ctx.op(OpKind::Clip, &[v, lo, hi])?
            }
            None => v,
        };
        self.activations[i].apply(ctx, v)
    }

    /// `Wb + Rb`, when the node has B.
    fn bias_sum(&self, ctx: &mut Ctx) -> Result<Option<ValueId>, String> {
        match (self.wb, self.rb) {
            (Some(wb), Some(rb)) => Ok(Some(ctx.op(OpKind::Add, &[wb, rb])?)),
            _ => Ok(None),
        }
    }
}

/// `a · bᵀ (+ c)`.
fn gemm_nt(ctx: &mut Ctx, a: ValueId, b: ValueId, c: Option<ValueId>) -> Result<ValueId, String> {
    let attrs = Attrs::new()
        .with("alpha", Attr::Float(1.0))
        .with("beta", Attr::Float(1.0))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(1));
    let mut operands = vec![a, b];
    operands.extend(c);
    ctx.build1(OpKind::Gemm, operands, attrs)
}

/// Direction `index` of `v` along `axis`, with that axis dropped.
fn direction_slice(ctx: &mut Ctx, v: ValueId, axis: usize, index: usize) -> Result<ValueId, String> {
    let slice = slice_value(ctx, v, &[(axis, span(index, 1))])?;
    let mut shape = ctx.ty(v).shape.clone();
    shape.remove(axis);
    reshape(ctx, slice, &shape)
}

/// The `len` indices from `start`, as a slice of one axis.
fn span(start: usize, len: usize) -> DimSlice {
    DimSlice {
        start: start as i64,
        end: (start + len) as i64,
        step: 1,
    }
}

fn check_shape(ctx: &Ctx, v: ValueId, name: &str, expected: &[usize]) -> Result<(), String> {
    let shape = &ctx.ty(v).shape;
    if shape != expected {
        return Err(format!("{name} must have shape {expected:?}, got {shape:?}"));
    }
    Ok(())
}
