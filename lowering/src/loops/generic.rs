//! Kernels over symbolic types: which op families have generators that take sizes at run
//! time, and the parameters such a kernel's buffers arrive as. A buffer of a symbolic type is a
//! pointer (`%in0_ptr: memref<Nxf32>`, N its elements at the largest sizes), viewed at the
//! kernel's entry with its run-time shape (`%in0: memref<?x768xf32>`); a buffer of a fixed type
//! is a parameter as in any kernel.

use super::buffer::{storage_ty, Buf};
use super::elementwise;
use super::emit::{Emitter, Ty};
use super::sizes::{Extent, SizeArgs};
use mxc_dialects::{mx, Graph, Op, OpKind, ValueId};

/// Whether the kernel of `op` (of `g`) can take its sizes at run time: element-wise ops, the
/// normalisations, reductions, reshapes, transposes, expands, slices, concatenations and gathers, matrix
/// products whose columns and depth are fixed (rows and batch may be symbolic), attention
/// whose heads and depths are (batch, queries and keys may be), convolutions and pools whose
/// channels are (batch, height and width may be); a fused kernel where its
/// anchor is one of these with the kernel's result shape (or it has none).
pub fn covers(g: &Graph, op: &Op) -> bool {
    use OpKind::*;
    match &op.body {
        Some(body) if op.kind == Fused => match mx::fused::anchor(body) {
            None => true,
            Some(a) => {
                let anchor = &body.ops[a];
                body.ty(anchor.results[0]).same_shape(g.ty(op.results[0])) && covers(body, anchor)
            }
        },
        Some(_) => false,
        None => match op.kind {
            MatMul | MatMulPacked | Gemm => fixed_columns_and_depth(g, op),
            Attention => fixed_heads_and_depths(g, op),
            kind if windowed(kind) => fixed_channels(g, op),
            Fused | Constant => false,
            kind => covers_kind(kind),
        },
    }
}

/// Whether an attention's heads and depths are fixed (its batch, queries and keys may be
/// symbolic): the last dimension of q, k and v, and their heads axis.
fn fixed_heads_and_depths(g: &Graph, op: &Op) -> bool {
    let Ok((heads_axis, _)) = op.attrs.str("layout").and_then(mx::attention::axes) else {
        return false;
    };
    op.operands[..3].iter().all(|&v| {
        let t = g.ty(v);
        t.rank() == 4 && t.fixed_dim(3).is_some() && t.fixed_dim(heads_axis).is_some()
    })
}

/// Whether some kernel of ops of kind `kind` takes sizes at run time (`covers` says which ops'
/// do): what a graph is checked for before its rewriting, which may turn ops into others
/// (products with symbolic columns into attention).
pub fn covers_kind(kind: OpKind) -> bool {
    use OpKind::*;
    elementwise::lowers(kind)
        || windowed(kind)
        || matches!(
            kind,
            Reshape
                | BitCast
                | Transpose
                | Expand
                | Slice
                | Concat
                | Gather
                | Softmax
                | LayerNorm
                | BatchNorm
                | ReduceSum
                | ReduceMean
                | ReduceMax
                | MatMul
                | MatMulPacked
                | Gemm
                | Attention
                | Fused
                | Constant
        )
}

/// Convolutions (Winograd's transforms too) and pools: their kernels take the batch, height and
/// width at run time.
fn windowed(kind: OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind,
        Conv | ConvNhwc
            | ConvNhwcPacked
            | WinogradInput
            | WinogradOutput
            | ConvTranspose
            | MaxPool
            | AveragePool
            | MaxPoolNhwc
            | AveragePoolNhwc
            | GlobalAveragePool
    )
}

/// Whether a convolution's or a pool's channels (of its input and result) and its other
/// operands (weights, bias) are fixed.
fn fixed_channels(g: &Graph, op: &Op) -> bool {
    // Winograd's transforms keep the channels last too ([N, H, W, C], [36, T, C])
    let channels_last = mx::channels_last(op.kind) || matches!(op.kind, OpKind::WinogradInput | OpKind::WinogradOutput);
    let channels_fixed = |v: &ValueId| {
        let t = g.ty(*v);
        let axis = if channels_last { t.rank().saturating_sub(1) } else { 1 };
        t.rank() > 2 && t.fixed_dim(axis).is_some()
    };
    channels_fixed(&op.operands[0])
        && channels_fixed(&op.results[0])
        && op.operands[1..].iter().all(|v| !g.ty(*v).is_symbolic())
}

/// Whether a product's columns (the result's last dimension) and depth are fixed.
fn fixed_columns_and_depth(g: &Graph, op: &Op) -> bool {
    let a = g.ty(op.operands[0]);
    let out = g.ty(op.results[0]);
    let depth_axis = match op.kind {
        OpKind::Gemm if op.attrs.int("trans_a").unwrap_or(0) != 0 => 0,
        _ => a.rank().saturating_sub(1),
    };
    let columns = out.rank().saturating_sub(1);
    a.fixed_dim(depth_axis).is_some() && (out.rank() == 0 || out.fixed_dim(columns).is_some())
}

/// The buffers of `op`'s operands and results, and the kernel's buffer parameters (name,
/// memref type), for a kernel that takes the values of `sizes`' symbols.
pub fn kernel_buffers(
    e: &mut Emitter,
    g: &Graph,
    op: &Op,
    sizes: &SizeArgs,
) -> (Vec<Buf>, Vec<Buf>, Vec<(String, String)>) {
    e.sizes = sizes.clone();
    let mut params = Vec::new();
    let mut named = |prefix: &str, values: &[ValueId]| -> Vec<Buf> {
        (values.iter().enumerate())
            .map(|(i, v)| {
                let name = format!("%{prefix}{i}");
                let ty = g.ty(*v);
                let Some(dims) = &ty.symbolic else {
                    let buf = Buf::new(&name, ty.dtype, &ty.shape);
                    params.push((name, buf.memref()));
                    return buf;
                };
                let extents: Vec<Extent> = dims.iter().map(|d| e.extent(d)).collect();
                let largest: usize = ty.largest_shape().iter().product();
                let pointer = format!("memref<{}x{}>", largest.max(1), storage_ty(ty.dtype).mlir());
                let param = format!("{name}_ptr");
                let view = Buf::with_extents(&name, ty.dtype, extents.clone());
                let strides: Vec<String> = (0..extents.len())
                    .map(|d| e.extent_product(&extents[d + 1..]).operand())
                    .collect();
                let sizes: Vec<String> = extents.iter().map(Extent::operand).collect();
                let viewed = e.hoisted_op(
                    &format!(
                        "memref.reinterpret_cast {param} to offset: [0], sizes: [{}], strides: [{}] : {pointer} to {}",
                        sizes.join(", "),
                        strides.join(", "),
                        view.memref()
                    ),
                    Ty::Index,
                    1,
                );
                params.push((param, pointer));
                Buf {
                    name: viewed.name,
                    ..view
                }
            })
            .collect()
    };
    let ins = named("in", &op.operands);
    let outs = named("out", &op.results);
    (ins, outs, params)
}

#[cfg(test)]
mod tests;
