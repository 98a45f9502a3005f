//! Type rules over symbolic dimensions: the result dimensions of an op whose operands (or
//! size attributes) have symbolic dimensions, as expressions (`dim::Dim`), proving at every
//! size in range what the op requires of its operands' sizes (equal sizes where they meet, a
//! window that fits) or refusing, saying which sizes and why.
//!
//! `mx::infer` runs the op's fixed-size rule first, on the sizes at the cost point: it checks
//! the element types, the attributes and the fixed sizes. This file adds what holds at every
//! size: each rule gives the result's dimensions, and `results` checks they are the fixed-size
//! rule's at the cost point, so the two rules cannot drift apart unnoticed. An op no rule here
//! covers (weight packing and the Winograd filter transform, laid out at fixed sizes; a loop's
//! stacked outputs) is refused by name.

use super::{attention, check_axis};
use crate::dim::{self, infer::Window, Dim};
use crate::mx;
use crate::{Attrs, OpKind, TensorType};

/// The result types of `kind` over `operands`, some symbolic, given the fixed-size rule's
/// `fixed` results at the cost point.
pub fn results(
    kind: OpKind,
    operands: &[TensorType],
    attrs: &Attrs,
    fixed: Vec<TensorType>,
) -> Result<Vec<TensorType>, String> {
    let dims = result_dims(kind, operands, attrs, &fixed)?;
    if dims.len() != fixed.len() {
        return Err(format!(
            "the symbolic rule gives {} results, the fixed-size rule {}",
            dims.len(),
            fixed.len()
        ));
    }
    dims.into_iter()
        .zip(fixed)
        .map(|(d, t)| {
            let typed = TensorType::of_dims(t.dtype, d);
            match typed.shape == t.shape {
                true => Ok(typed),
                false => Err(format!(
                    "the result {typed} is {:?} at the cost point, where the fixed-size rule gives {:?}",
                    typed.shape, t.shape
                )),
            }
        })
        .collect()
}

/// Where the operands' and size attributes' symbols are at the cost point: `b=1, s=128`.
pub fn cost_point(operands: &[TensorType], attrs: &Attrs) -> String {
    let sizes = attrs.0.values().filter_map(|a| match a {
        crate::Attr::Sizes(dims) => Some(dims.clone()),
        _ => None,
    });
    let at: std::collections::BTreeMap<String, u64> = operands
        .iter()
        .filter_map(|t| t.symbolic.clone())
        .chain(sizes)
        .flatten()
        .flat_map(|d| d.cost_point())
        .collect();
    let at: Vec<String> = at.iter().map(|(name, n)| format!("{name}={n}")).collect();
    at.join(", ")
}

fn text(e: dim::DimError) -> String {
    e.to_string()
}

fn shown(dims: &[Dim]) -> String {
    dim::show(dims)
}

/// Refuses unless `a` and `b` are the same size at every point.
fn same(a: &Dim, b: &Dim, what: &str) -> Result<(), String> {
    match a.same_size(b) {
        true => Ok(()),
        false => Err(format!(
            "{what}: {} and {} are not the same size at every size in range",
            a.expression(),
            b.expression()
        )),
    }
}

/// Refuses unless `dim` is fixed (an op whose code or weights are laid out for one size).
fn fixed(dim: &Dim, what: &str) -> Result<u64, String> {
    dim.as_constant()
        .ok_or_else(|| format!("{what} must be a fixed size, got {}", dim.expression()))
}

/// Refuses unless every one of `operands` has fixed sizes (weights and what goes with them).
fn all_fixed(operands: &[TensorType], what: &str) -> Result<(), String> {
    match operands.iter().find(|t| t.is_symbolic()) {
        Some(t) => Err(format!("{what} must have fixed sizes, got {t}")),
        None => Ok(()),
    }
}

/// The numpy broadcast of every operand's dimensions.
fn broadcast_all(operands: &[TensorType]) -> Result<Vec<Dim>, String> {
    operands.iter().skip(1).try_fold(operands[0].dims(), |acc, t| {
        dim::infer::broadcast(&acc, &t.dims()).map_err(text)
    })
}

/// Refuses unless `p` broadcasts to exactly `to` (a per-channel or per-row operand).
fn broadcasts_to(p: &TensorType, to: &[Dim], what: &str) -> Result<(), String> {
    let b = dim::infer::broadcast(&p.dims(), to).map_err(text)?;
    let exact = b.len() == to.len() && b.iter().zip(to).all(|(x, y)| x.same_size(y));
    match exact {
        true => Ok(()),
        false => Err(format!(
            "{what} {} does not broadcast to {}",
            shown(&p.dims()),
            shown(to)
        )),
    }
}

fn result_dims(
    kind: OpKind,
    ops: &[TensorType],
    attrs: &Attrs,
    fixed_results: &[TensorType],
) -> Result<Vec<Vec<Dim>>, String> {
    use OpKind::*;
    let one = |d: Vec<Dim>| Ok(vec![d]);
    let x = || ops[0].dims();
    match kind {
        Constant => Ok(fixed_results.iter().map(TensorType::dims).collect()),
        Identity | Cast | BitCast | Not | Sqrt | Exp | Log | Erf | Sigmoid | Tanh | Reciprocal | Floor | Ceil
        | Round | Sin | Cos | Tan | Asin | Acos | Atan | Gelu | Neg | Abs | Relu | LeakyRelu | Softmax | StringCase
        | RegexFullMatch => one(x()),
        Add | Sub | Mul | Div | Max | Min | Pow | Equal | Less | Greater | Where | BitAnd | BitOr | BitXor
        | ShiftLeft | ShiftRight | StringConcat => one(broadcast_all(ops)?),
        Clip => one(x()),
        DequantizeLinear => {
            let x = x();
            broadcasts_to(&ops[1], &x, "the scale")?;
            broadcasts_to(&ops[2], &x, "the zero point")?;
            one(x)
        }
        BatchNorm => {
            let x = x();
            let channels = x.get(1).ok_or("batch_norm needs a channel axis")?;
            for (p, name) in ops[1..].iter().zip(["scale", "bias", "mean", "var"]) {
                broadcasts_to(p, std::slice::from_ref(channels), name)?;
            }
            one(x)
        }
        LayerNorm => {
            let x = x();
            let axis = check_axis(attrs.int("axis")?, x.len(), "axis")?;
            for (p, name) in ops[1..].iter().zip(["scale", "bias"]) {
                broadcasts_to(p, &x[axis..], name)?;
            }
            let mut stat = x[..axis].to_vec();
            stat.extend(std::iter::repeat_n(Dim::constant(1), x.len() - axis));
            Ok(vec![x, stat.clone(), stat])
        }
        MatMul => one(matmul(&ops[0].dims(), &ops[1].dims())?),
        Gemm => {
            let (a, b) = (ops[0].dims(), ops[1].dims());
            let (m, ka) = match attrs.int("trans_a")? != 0 {
                true => (a[1].clone(), &a[0]),
                false => (a[0].clone(), &a[1]),
            };
            let (kb, n) = match attrs.int("trans_b")? != 0 {
                true => (&b[1], b[0].clone()),
                false => (&b[0], b[1].clone()),
            };
            same(ka, kb, "the inner dimensions of A and B")?;
            let result = vec![m, n];
            if let Some(c) = ops.get(2) {
                broadcasts_to(c, &result, "C")?;
            }
            one(result)
        }
        MatMulPacked | MatMulIntegerPacked => {
            let mut a = x();
            let k = a.last().ok_or("a product needs a matrix")?;
            fixed(k, "the depth of a product with packed weights")?;
            let panels = ops[1].dims();
            for d in panels.iter().rev().take(3) {
                fixed(d, "packed weights")?;
            }
            all_fixed(&ops[2..], "a product's column sums and zero point")?;
            if kind == MatMulPacked && ops[1].rank() == a.len() + 1 {
                let b = ops[1].dims();
                for (i, (p, q)) in a.iter().zip(&b).take(a.len() - 2).enumerate() {
                    same(p, q, &format!("batch axis {i} of a and of its packed matrices"))?;
                }
            }
            let n = attrs.int("n")?;
            *a.last_mut().expect("checked above") = Dim::constant(n.max(0) as u64);
            one(a)
        }
        Conv | ConvNhwc | ConvNhwcPacked | ConvNhwcIntegerPacked | ConvNhwcIntegerDepthwise => {
            one(convolution(kind, ops, attrs, fixed_results)?)
        }
        ConvTranspose => one(conv_transpose(ops, attrs)?),
        MaxPool | AveragePool | MaxPoolNhwc | AveragePoolNhwc => one(pool(kind, ops, attrs)?),
        GlobalAveragePool => {
            let mut x = x();
            for d in x.iter_mut().skip(2) {
                *d = Dim::constant(1);
            }
            one(x)
        }
        Attention => one(attention(ops, attrs)?),
        Reshape => {
            let target = attrs.sizes("shape")?;
            let (from, to) = (product(&x())?, product(&target)?);
            same(&from, &to, &format!("reshape {} to {}", shown(&x()), shown(&target)))?;
            one(target)
        }
        Expand => {
            let target = attrs.sizes("shape")?;
            let b = dim::infer::broadcast(&x(), &target).map_err(text)?;
            for (got, want) in b.iter().zip(&target) {
                same(got, want, &format!("expand {} to {}", shown(&x()), shown(&target)))?;
            }
            one(target)
        }
        Transpose => {
            let x = x();
            one(attrs.dims("perm")?.iter().map(|&p| x[p].clone()).collect())
        }
        Concat => {
            let axis = check_axis(attrs.int("axis")?, ops[0].rank(), "axis")?;
            let all: Vec<Vec<Dim>> = ops.iter().map(TensorType::dims).collect();
            one(dim::infer::concat(&all, axis).map_err(text)?)
        }
        Slice => one(slice(&x(), attrs, &fixed_results[0])?),
        Gather => {
            let (data, indices) = (x(), ops[1].dims());
            let axis = check_axis(attrs.int("axis")?, data.len(), "axis")?;
            let mut out = data[..axis].to_vec();
            out.extend(indices);
            out.extend_from_slice(&data[axis + 1..]);
            one(out)
        }
        Scatter => {
            let (indices, updates) = (ops[1].dims(), ops[2].dims());
            same(&indices[0], &updates[0], "scatter's updates and indices")?;
            one(x())
        }
        ReduceMean | ReduceSum | ReduceMax => {
            let axes = attrs.ints("axes")?;
            let keep = attrs.int("keepdims")? != 0;
            let out = x()
                .into_iter()
                .enumerate()
                .filter_map(|(d, size)| match (axes.contains(&(d as i64)), keep) {
                    (false, _) => Some(size),
                    (true, true) => Some(Dim::constant(1)),
                    (true, false) => None,
                })
                .collect();
            one(out)
        }
        // the branches' types, which the fixed-size rule took whole (symbolic dimensions too)
        If => Ok(fixed_results.iter().map(TensorType::dims).collect()),
        WinogradInput => one(winograd_input(ops, attrs)?),
        WinogradOutput => {
            let shape = attrs.sizes("shape")?;
            let [n, h, w, m] = <[Dim; 4]>::try_from(shape.clone())
                .map_err(|_| format!("shape must be [N, OH, OW, M], got {}", shown(&shape)))?;
            let tiles = product(&[n, winograd_tiles(&h)?, winograd_tiles(&w)?])?;
            let x = x();
            same(
                &x[1],
                &tiles,
                &format!("the tiles of an output of shape {}", shown(&shape)),
            )?;
            same(&x[2], &m, "the output's channels")?;
            one(shape)
        }
        Loop | Pack | WinogradWeights | Fused | Call => Err(format!(
            "{kind} does not take symbolic dimensions{}",
            match kind {
                Loop => ": a loop's carried values and stacked outputs must have fixed sizes",
                Pack | WinogradWeights => ": weights are laid out at fixed sizes",
                _ => "",
            }
        )),
    }
}

/// `winograd_input`: `[N, H, W, C]` with `pads` to `[36, N * tiles(OH) * tiles(OW), C]`,
/// where a 3x3 window must fit the padded image at every size.
fn winograd_input(ops: &[TensorType], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let pads = attrs.dims("pads")?;
    let x = ops[0].dims();
    let [n, h, w, c] =
        <[Dim; 4]>::try_from(x.clone()).map_err(|_| format!("takes an N x H x W x C image, got {}", shown(&x)))?;
    let [top, left, bottom, right] =
        <[usize; 4]>::try_from(pads.clone()).map_err(|_| format!("takes 4 pads, got {pads:?}"))?;
    let out = |size: &Dim, pads: usize| -> Result<Dim, String> {
        let padded = size.add(&Dim::constant(pads as u64)).map_err(text)?;
        padded
            .require_at_least(3, "a padded side under a 3x3 window")
            .map_err(text)?;
        padded.sub(&Dim::constant(2)).map_err(text)
    };
    let tiles = product(&[
        n,
        winograd_tiles(&out(&h, top + bottom)?)?,
        winograd_tiles(&out(&w, left + right)?)?,
    ])?;
    Ok(vec![Dim::constant(mx::winograd::POINTS as u64), tiles, c])
}

/// The 4x4 tiles along an output side of `size`: `ceil(size / 4)`.
fn winograd_tiles(size: &Dim) -> Result<Dim, String> {
    let tile = mx::winograd::TILE as u64;
    size.add(&Dim::constant(tile - 1))
        .and_then(|d| d.floor_div(tile))
        .map_err(text)
}

/// The product of dimensions.
fn product(dims: &[Dim]) -> Result<Dim, String> {
    dims.iter()
        .try_fold(Dim::constant(1), |acc, d| acc.mul(d).map_err(text))
}

/// numpy matmul: a vector operand is a matrix of one row (or column) that the result drops.
fn matmul(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let one = Dim::constant(1);
    let a2 = match a.len() {
        1 => vec![one.clone(), a[0].clone()],
        _ => a.to_vec(),
    };
    let b2 = match b.len() {
        1 => vec![b[0].clone(), one],
        _ => b.to_vec(),
    };
    let mut out = dim::infer::matmul(&a2, &b2).map_err(text)?;
    if b.len() == 1 {
        out.pop();
    }
    if a.len() == 1 {
        out.remove(out.len() - usize::from(b.len() > 1) - 1);
    }
    Ok(out)
}

/// The sliding windows of a convolution or pool along `spatial` axes of an input: the
/// attributes' strides, dilations (1 where the op has none) and pads, and `kernel`.
fn windows(attrs: &Attrs, kernel: &[u64], ceil: bool) -> Result<Vec<Window>, String> {
    let spatial = kernel.len();
    let strides = attrs.dims("strides")?;
    let dilations = match attrs.get("dilations") {
        Some(_) => attrs.dims("dilations")?,
        None => vec![1; spatial],
    };
    let pads = attrs.dims("pads")?;
    Ok((0..spatial)
        .map(|i| Window {
            kernel: kernel[i],
            stride: strides[i] as u64,
            dilation: dilations[i] as u64,
            pad_begin: pads[i] as u64,
            pad_end: pads[i + spatial] as u64,
            ceil,
        })
        .collect())
}

/// Where an op's layout keeps the spatial axes: NCHW from axis 2, NHWC from axis 1.
fn spatial_start(kind: OpKind) -> usize {
    match channels_last(kind) {
        true => 1,
        false => 2,
    }
}

/// Whether a convolution or pool of kind `kind` keeps its channels last (NHWC).
pub fn channels_last(kind: OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind,
        ConvNhwc | ConvNhwcPacked | ConvNhwcIntegerPacked | ConvNhwcIntegerDepthwise | MaxPoolNhwc | AveragePoolNhwc
    )
}

/// Each window's positions along the spatial axes of `x` from `start`.
fn slide(x: &[Dim], start: usize, windows: &[Window]) -> Result<Vec<Dim>, String> {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| dim::infer::window(&x[start + i], w).map_err(text))
        .collect()
}

/// A convolution's result: the batch and the output channels (fixed: the weights'), and the
/// windows' positions along each spatial axis; the input channels must be fixed.
fn convolution(
    kind: OpKind,
    ops: &[TensorType],
    attrs: &Attrs,
    fixed_results: &[TensorType],
) -> Result<Vec<Dim>, String> {
    let x = ops[0].dims();
    let start = spatial_start(kind);
    let spatial = x.len().saturating_sub(2);
    let channels = if start == 1 { &x[x.len() - 1] } else { &x[1] };
    fixed(channels, "a convolution's input channels")?;
    let kernel: Vec<u64> = match kind {
        OpKind::Conv => ops[1].shape[2..].iter().map(|&k| k as u64).collect(),
        OpKind::ConvNhwc => ops[1].shape[1..1 + spatial].iter().map(|&k| k as u64).collect(),
        _ => attrs.dims("kernel")?.iter().map(|&k| k as u64).collect(),
    };
    all_fixed(&ops[1..], "a convolution's weights, bias, sums and zero points")?;
    let positions = slide(&x, start, &windows(attrs, &kernel, false)?)?;
    // the output channels are the fixed-size rule's (from the weights or `out_channels`)
    let out = &fixed_results[0].shape;
    let channels_out = Dim::constant(if start == 1 { out[out.len() - 1] } else { out[1] } as u64);
    Ok(match start {
        1 => [vec![x[0].clone()], positions, vec![channels_out]].concat(),
        _ => [vec![x[0].clone(), channels_out], positions].concat(),
    })
}

/// `conv_transpose`: along each spatial axis `stride * (input - 1) + output_padding +
/// dilation * (kernel - 1) + 1 - pads`, the output channels the weights'.
fn conv_transpose(ops: &[TensorType], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let (x, w) = (ops[0].dims(), &ops[1]);
    fixed(&x[1], "a convolution's input channels")?;
    all_fixed(&ops[1..], "a convolution's weights and bias")?;
    let spatial = x.len() - 2;
    let (strides, dilations) = (attrs.dims("strides")?, attrs.dims("dilations")?);
    let (pads, extra) = (attrs.dims("pads")?, attrs.dims("output_padding")?);
    let group = attrs.int("group")?.max(1) as u64;
    let size = |n: usize| Dim::constant(n as u64);
    let mut out = vec![
        x[0].clone(),
        Dim::constant(w.shape[1] as u64)
            .mul(&Dim::constant(group))
            .map_err(text)?,
    ];
    for i in 0..spatial {
        // stride * (input - 1) + output_padding + dilation * (kernel - 1) + 1 - pads
        let span = size(dilations[i])
            .mul(&size(w.shape[2 + i].saturating_sub(1)))
            .and_then(|d| d.add(&size(1)))
            .and_then(|d| d.add(&size(extra[i])));
        let grown = x[2 + i]
            .sub(&size(1))
            .and_then(|d| d.mul(&size(strides[i])))
            .and_then(|d| d.add(&span?))
            .and_then(|d| d.sub(&size(pads[i]).add(&size(pads[i + spatial]))?))
            .map_err(text)?;
        out.push(grown);
    }
    Ok(out)
}

/// A pool's result: the batch and channels kept, the windows' positions along each spatial
/// axis (`ceil_mode` as the attribute says).
fn pool(kind: OpKind, ops: &[TensorType], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let x = ops[0].dims();
    let start = spatial_start(kind);
    let kernel: Vec<u64> = attrs.dims("kernel")?.iter().map(|&k| k as u64).collect();
    let ceil = attrs.int("ceil_mode")? != 0;
    let positions = slide(&x, start, &windows(attrs, &kernel, ceil)?)?;
    let mut out = x.clone();
    out.splice(start..start + positions.len(), positions);
    Ok(out)
}

/// `attention`: `q`'s layout with `v`'s depth; `k` and `v` share their batch, heads and keys
/// with `q`'s batch and heads, `k` its depth, and the mask broadcasts to the scores.
fn attention(ops: &[TensorType], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let (heads_axis, seq_axis) = attention::axes(attrs.str("layout")?)?;
    let (q, k, v) = (ops[0].dims(), ops[1].dims(), ops[2].dims());
    for axis in [0, heads_axis] {
        same(&k[axis], &q[axis], &format!("axis {axis} of k and q"))?;
        same(&v[axis], &q[axis], &format!("axis {axis} of v and q"))?;
    }
    same(&v[seq_axis], &k[seq_axis], "the keys of v and k")?;
    same(&k[3], &q[3], "the depth of k and q")?;
    if let Some(mask) = ops.get(3) {
        let scores = [
            q[0].clone(),
            q[heads_axis].clone(),
            q[seq_axis].clone(),
            k[seq_axis].clone(),
        ];
        broadcasts_to(mask, &scores, "the mask")?;
    }
    let mut out = q;
    out[3] = v[3].clone();
    Ok(out)
}

/// A normalised slice (`mx::layout`): along a fixed axis with fixed bounds what the
/// fixed-size rule gives; with symbolic bounds (sizes: a positive step) `ceil((end - start) /
/// step)`, the start proven at most the end and the end at most the axis; along a symbolic
/// axis with fixed bounds only a slice that reads the same elements at every size (it starts
/// and ends inside the axis's least size), so its extent is fixed.
fn slice(x: &[Dim], attrs: &Attrs, fixed_result: &TensorType) -> Result<Vec<Dim>, String> {
    let symbolic_bounds = [attrs.get("starts"), attrs.get("ends")]
        .iter()
        .any(|a| matches!(a, Some(crate::Attr::Sizes(_))));
    let (starts, ends, steps) = (attrs.int_list("starts")?, attrs.int_list("ends")?, attrs.ints("steps")?);
    let bounds = match symbolic_bounds {
        true => Some((attrs.sizes("starts")?, attrs.sizes("ends")?)),
        false => None,
    };
    x.iter()
        .enumerate()
        .map(|(d, size)| {
            if let Some((first, last)) = &bounds {
                if steps[d] <= 0 {
                    return Err(format!(
                        "a slice of axis {d} with symbolic bounds and step {}",
                        steps[d]
                    ));
                }
                let span = last[d].sub(&first[d]).map_err(|_| {
                    format!(
                        "the slice of axis {d} may end ({}) before it starts ({})",
                        last[d], first[d]
                    )
                })?;
                size.sub(&last[d])
                    .map_err(|_| format!("the slice of axis {d} may end ({}) past the axis ({size})", last[d]))?;
                let step = steps[d] as u64;
                return span
                    .add(&Dim::constant(step - 1))
                    .and_then(|s| s.floor_div(step))
                    .map_err(text);
            }
            let extent = Dim::constant(fixed_result.shape[d] as u64);
            if size.as_constant().is_some() || extent.as_constant() == Some(0) {
                return Ok(extent);
            }
            let least = size.bounds().0;
            let last = match steps[d] > 0 {
                true => ends[d] - 1,
                false => starts[d],
            };
            match last < least {
                true => Ok(extent),
                false => Err(format!(
                    "a slice {}:{}:{} of axis {d} of size {} reads past its least size {least}: \
                     slices that depend on the size are not supported yet",
                    starts[d],
                    ends[d],
                    steps[d],
                    size.expression()
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
