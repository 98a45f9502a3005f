//! The GELU forms: `Gelu` and `BiasGelu` (the erf form), `FastGelu` (the tanh form), each of
//! an optionally biased input, and `QuickGelu` (`x * sigmoid(alpha * x)`).

use super::super::super::ctx::Ctx;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

/// `mx.gelu` (`approximate` "none", the erf form, or "tanh") of input 0 plus the optional
/// input 1, a bias broadcast along the last axis (`BiasGelu` requires it, `FastGelu` takes it
/// optionally, `Gelu` has none).
pub(super) fn biased_gelu(ctx: &mut Ctx, approximate: &str) -> Result<Vec<ValueId>, String> {
    let mut x = ctx.input(0)?;
    if let Some(bias) = ctx.opt_input(1) {
        x = ctx.op(OpKind::Add, &[x, bias])?;
    }
    let attrs = Attrs::new().with("approximate", Attr::Str(approximate.into()));
    Ok(vec![ctx.build1(OpKind::Gelu, vec![x], attrs)?])
}

/// `x * sigmoid(alpha * x)`.
pub(super) fn quick_gelu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let alpha = ctx.scalar(ctx.ty(x).dtype, ctx.node.float("alpha", 1.702)? as f64);
    let scaled = ctx.op(OpKind::Mul, &[alpha, x])?;
    let gate = ctx.op(OpKind::Sigmoid, &[scaled])?;
    Ok(vec![ctx.op(OpKind::Mul, &[x, gate])?])
}
