//! `FusedMatMul`: a `MatMul` of operands whose last two axes may be swapped, scaled.

use super::super::super::ctx::Ctx;
use mxc_dialects::OpKind;
use mxc_dialects::ValueId;

/// `alpha * op(A) @ op(B)`, where `op` swaps the last two axes of an operand whose `transA` /
/// `transB` is set. The batch transposes (`transBatchA`, `transBatchB`) are refused.
pub(super) fn fused_matmul(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    for name in ["transBatchA", "transBatchB"] {
        if ctx.node.int(name, 0)? != 0 {
            return Err(format!("{name} = 1 is not supported"));
        }
    }
    let a = transposed_if(ctx, 0, "transA")?;
    let b = transposed_if(ctx, 1, "transB")?;
    let product = ctx.op(OpKind::MatMul, &[a, b])?;
    let alpha = ctx.node.float("alpha", 1.0)? as f64;
    if alpha == 1.0 {
        return Ok(vec![product]);
    }
    let alpha = ctx.scalar(ctx.ty(product).dtype, alpha);
    Ok(vec![ctx.op(OpKind::Mul, &[product, alpha])?])
}

/// Input `i` with its last two axes swapped when the attribute `flag` is set.
fn transposed_if(ctx: &mut Ctx, i: usize, flag: &str) -> Result<ValueId, String> {
    let v = ctx.input(i)?;
    if ctx.node.int(flag, 0)? == 0 {
        return Ok(v);
    }
    let rank = ctx.ty(v).rank();
    if rank < 2 {
        return Err(format!("{flag} on an operand of rank {rank}"));
    }
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    ctx.transpose(v, &perm)
}
