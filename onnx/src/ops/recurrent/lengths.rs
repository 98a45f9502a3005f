//! `sequence_lens`: which steps of which sequences count, as a mask per step.

use super::super::super::ctx::Ctx;
use super::super::shape::reshape;
use super::check_shape;
use mxc_dialects::{DType, OpKind, Tensor, ValueId};

/// Which steps of which sequences count (`sequence_lens`).
pub(super) enum Lengths {
    /// Every sequence spans every step.
    Full,
    /// Known at compile time, some shorter than the input.
    Known(Vec<i64>),
    /// Known at run time: `[batch, 1]`.
    Runtime(ValueId),
}

impl Lengths {
    /// The node's `sequence_lens` (input 4) for sequences of `seq` steps; known lengths
    /// outside `0..=seq` are refused.
    pub(super) fn new(ctx: &mut Ctx, seq: usize, batch: usize) -> Result<Lengths, String> {
        let Some(v) = ctx.opt_input(4) else {
            return Ok(Lengths::Full);
        };
        check_shape(ctx, v, "sequence_lens", &[batch])?;
        if !ctx.ty(v).dtype.is_int() {
            return Err(format!("sequence_lens must be integers, got {}", ctx.ty(v).dtype));
        }
        let Some(known) = ctx.known(v) else {
            return Ok(Lengths::Runtime(reshape(ctx, v, &[batch, 1])?));
        };
        let lengths = known.to_i64_vec();
        if let Some(bad) = lengths.iter().find(|&&l| l < 0 || l > seq as i64) {
            return Err(format!("sequence_lens {lengths:?} has {bad}, outside 0..={seq}"));
        }
        Ok(if lengths.iter().all(|&l| l == seq as i64) {
            Lengths::Full
        } else {
            Lengths::Known(lengths)
        })
    }

    /// Which sequences reach step `t`, as a `[batch, 1]` mask: `None` when all do.
    pub(super) fn mask(&self, ctx: &mut Ctx, t: usize) -> Result<Option<ValueId>, String> {
        match self {
            Lengths::Full => Ok(None),
            Lengths::Known(lengths) if lengths.iter().all(|&l| t < l as usize) => Ok(None),
            Lengths::Known(lengths) => {
                let reached: Vec<i64> = lengths.iter().map(|&l| (t < l as usize) as i64).collect();
                let mask = Tensor::from_i64s(DType::Bool, vec![lengths.len(), 1], &reached);
                Ok(Some(ctx.constant(mask)))
            }
            Lengths::Runtime(lengths) => {
                let step = ctx.scalar(ctx.ty(*lengths).dtype, t as f64);
                Ok(Some(ctx.op(OpKind::Less, &[step, *lengths])?))
            }
        }
    }
}
