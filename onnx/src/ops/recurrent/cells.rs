//! The cells of the recurrent layers: one step of `RNN`, `GRU` or `LSTM`, from the step's
//! input projection and the states before it to the states after it.

use super::super::super::ctx::Ctx;
use super::super::layout::slice_value;
use super::{direction_slice, gemm_nt, span, Direction};
use mxc_dialects::{OpKind, ValueId};

/// A cell, as one direction runs it.
pub(super) trait Step {
    /// The bias added to every step's input projection `X_t · Wᵀ`: `Wb + Rb`, unless the cell
    /// needs part of `Rb` inside the recurrence.
    fn input_bias(&self, ctx: &mut Ctx, dir: &Direction) -> Result<Option<ValueId>, String> {
        dir.bias_sum(ctx)
    }

    /// The states after one step (hidden first) from those before it and the step's input
    /// projection `xw`, `[batch, gates * hidden]` with the input bias added.
    fn step(&self, ctx: &mut Ctx, dir: &Direction, xw: ValueId, states: &[ValueId]) -> Result<Vec<ValueId>, String>;
}

/// `H' = f(X·Wᵀ + H·Rᵀ + Wb + Rb)`.
pub(super) struct Rnn;

impl Step for Rnn {
    fn step(&self, ctx: &mut Ctx, dir: &Direction, xw: ValueId, states: &[ValueId]) -> Result<Vec<ValueId>, String> {
        let pre = gemm_nt(ctx, states[0], dir.r, Some(xw))?;
        Ok(vec![dir.activate(ctx, 0, pre)?])
    }
}

/// GRU, with gates z (update), r (reset) and h (hidden) in that order and activations f, g:
/// `z = f(X·Wzᵀ + H·Rzᵀ + Wbz + Rbz)`, `r` likewise, `h = g(X·Whᵀ + (r ⊙ H)·Rhᵀ + Rbh + Wbh)`
/// (with `linear_before_reset`, `h = g(X·Whᵀ + r ⊙ (H·Rhᵀ + Rbh) + Wbh)`), and
/// `H' = (1 - z) ⊙ h + z ⊙ H`.
pub(super) enum Gru {
    /// The reset gate scales H before its product with Rh, so z and r come from the rows of R
    /// before Rh, and h from Rh.
    ResetFirst { r_zr: ValueId, r_h: ValueId },
    /// `linear_before_reset`: the reset gate scales `H·Rhᵀ + Rbh`, so one product with all of R
    /// (plus Rb) serves every gate.
    LinearFirst,
}

impl Gru {
    pub fn new(ctx: &mut Ctx, dir: &Direction, linear_before_reset: bool) -> Result<Gru, String> {
        if linear_before_reset {
            return Ok(Gru::LinearFirst);
        }
        let hidden = dir.hidden;
        Ok(Gru::ResetFirst {
            r_zr: slice_value(ctx, dir.r, &[(0, span(0, 2 * hidden))])?,
            r_h: slice_value(ctx, dir.r, &[(0, span(2 * hidden, hidden))])?,
        })
    }

    /// The reset gate from the pre-activations of z and r.
    fn reset(ctx: &mut Ctx, dir: &Direction, zr: ValueId) -> Result<ValueId, String> {
        let r = dir.gate(ctx, zr, 1)?;
        dir.activate(ctx, 0, r)
    }
}

impl Step for Gru {
    fn input_bias(&self, ctx: &mut Ctx, dir: &Direction) -> Result<Option<ValueId>, String> {
        match self {
            Gru::ResetFirst { .. } => dir.bias_sum(ctx),
            Gru::LinearFirst => Ok(dir.wb),
        }
    }

    fn step(&self, ctx: &mut Ctx, dir: &Direction, xw: ValueId, states: &[ValueId]) -> Result<Vec<ValueId>, String> {
        let h = states[0];
        let xw_zr = dir.gates(ctx, xw, 0, 2)?;
        let xw_h = dir.gate(ctx, xw, 2)?;
        // The pre-activations of z and r, and of the hidden gate.
        let (zr, candidate) = match *self {
            Gru::ResetFirst { r_zr, r_h } => {
                let zr = gemm_nt(ctx, h, r_zr, Some(xw_zr))?;
                let r = Gru::reset(ctx, dir, zr)?;
                let reset_h = ctx.op(OpKind::Mul, &[r, h])?;
                (zr, gemm_nt(ctx, reset_h, r_h, Some(xw_h))?)
            }
            Gru::LinearFirst => {
                let recurrence = gemm_nt(ctx, h, dir.r, dir.rb)?;
                let recurrence_zr = dir.gates(ctx, recurrence, 0, 2)?;
                let zr = ctx.op(OpKind::Add, &[xw_zr, recurrence_zr])?;
                let r = Gru::reset(ctx, dir, zr)?;
                let recurrence_h = dir.gate(ctx, recurrence, 2)?;
                let reset = ctx.op(OpKind::Mul, &[r, recurrence_h])?;
                (zr, ctx.op(OpKind::Add, &[xw_h, reset])?)
            }
        };
        let z = dir.gate(ctx, zr, 0)?;
        let z = dir.activate(ctx, 0, z)?;
        let candidate = dir.activate(ctx, 1, candidate)?;
        let one = ctx.scalar(ctx.ty(z).dtype, 1.0);
        let keep = ctx.op(OpKind::Sub, &[one, z])?;
        let new = ctx.op(OpKind::Mul, &[keep, candidate])?;
        let old = ctx.op(OpKind::Mul, &[z, h])?;
        Ok(vec![ctx.op(OpKind::Add, &[new, old])?])
    }
}

/// LSTM's gates in the order of W, R and B; the peepholes P are in the same order (i, o, f).
const INPUT: usize = 0;
const OUTPUT: usize = 1;
const FORGET: usize = 2;
const CELL: usize = 3;

/// LSTM, with activations f, g, h and states H, C:
/// `i = f(X·Wiᵀ + H·Riᵀ + Pi ⊙ C + Wbi + Rbi)`, `f` likewise (or `1 - i` with `input_forget`,
/// as onnxruntime couples them), `c = g(X·Wcᵀ + H·Rcᵀ + Wbc + Rbc)`, `C' = f ⊙ C + i ⊙ c`,
/// `o = f(X·Woᵀ + H·Roᵀ + Po ⊙ C' + Wbo + Rbo)` and `H' = o ⊙ h(C')`. `clip` bounds the inputs
/// of f and g, not `C'` on its way into h (as in onnxruntime).
pub(super) struct Lstm {
    input_forget: bool,
    /// This direction's `[Pi, Po, Pf]`, `[hidden]` each.
    peepholes: Option<[ValueId; 3]>,
}

impl Lstm {
    pub fn new(ctx: &mut Ctx, dir: &Direction, input_forget: bool, p: Option<ValueId>) -> Result<Lstm, String> {
        let peepholes = match p {
            None => None,
            Some(p) => {
                let row = direction_slice(ctx, p, 0, dir.index)?;
                let mut parts = [row; 3];
                for (k, part) in parts.iter_mut().enumerate() {
                    *part = slice_value(ctx, row, &[(0, span(k * dir.hidden, dir.hidden))])?;
                }
                Some(parts)
            }
        };
        Ok(Lstm {
            input_forget,
            peepholes,
        })
    }

    /// Gate `k` (input, output or forget) through f, with its peephole on the cell state `c`.
    fn peeping(&self, ctx: &mut Ctx, dir: &Direction, gates: ValueId, k: usize, c: ValueId) -> Result<ValueId, String> {
        let mut v = dir.gate(ctx, gates, k)?;
        if let Some(p) = self.peepholes {
            let peep = ctx.op(OpKind::Mul, &[p[k], c])?;
            v = ctx.op(OpKind::Add, &[v, peep])?;
        }
        dir.activate(ctx, 0, v)
    }
}

impl Step for Lstm {
    fn step(&self, ctx: &mut Ctx, dir: &Direction, xw: ValueId, states: &[ValueId]) -> Result<Vec<ValueId>, String> {
        let (h, c) = (states[0], states[1]);
        let gates = gemm_nt(ctx, h, dir.r, Some(xw))?;
        let i = self.peeping(ctx, dir, gates, INPUT, c)?;
        let f = if self.input_forget {
            let one = ctx.scalar(ctx.ty(i).dtype, 1.0);
            ctx.op(OpKind::Sub, &[one, i])?
        } else {
            self.peeping(ctx, dir, gates, FORGET, c)?
        };
        let cell = dir.gate(ctx, gates, CELL)?;
        let cell = dir.activate(ctx, 1, cell)?;
        let kept = ctx.op(OpKind::Mul, &[f, c])?;
        let added = ctx.op(OpKind::Mul, &[i, cell])?;
        let c = ctx.op(OpKind::Add, &[kept, added])?;
        let o = self.peeping(ctx, dir, gates, OUTPUT, c)?;
        let shown = dir.activations[2].apply(ctx, c)?;
        Ok(vec![ctx.op(OpKind::Mul, &[o, shown])?, c])
    }
}
