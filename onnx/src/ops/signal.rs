//! Signal processing: `DFT` (forward, inverse, one-sided and its inverse, `irfft`) as `matmul`s
//! of the real and imaginary parts by constant cosine and sine matrices; `STFT` as frames
//! gathered from the signal, windowed, and the same one-sided transform; the window functions
//! (`HannWindow`, `HammingWindow`, `BlackmanWindow`) and `MelWeightMatrix` as constants, their
//! sizes known at compile time.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::{check_constant, require_numeric_dtype};
use super::axes;
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};
use std::f64::consts::PI;

pub fn register(r: &mut Registry) {
    r.add("", "DFT", 17, 19, |ctx| dft(ctx, false));
    r.add("", "DFT", 20, LATEST, |ctx| dft(ctx, true));
    r.add_all("STFT", stft);
    r.add_all("HannWindow", |ctx| window(ctx, &[0.5, -0.5]));
    r.add_all("HammingWindow", |ctx| window(ctx, &[25.0 / 46.0, -21.0 / 46.0]));
    r.add_all("BlackmanWindow", |ctx| window(ctx, &[0.42, -0.5, 0.08]));
    r.add_all("MelWeightMatrix", mel_weight_matrix);
}

/// What a transform computes along its axis.
#[derive(Clone, Copy, PartialEq)]
enum Transform {
    Forward {
        onesided: bool,
    },
    Inverse,
    /// The inverse of a one-sided transform: a real signal of the transform's length.
    InverseOneSided,
}

/// A single integer from a compile-time input.
fn const_int(ctx: &Ctx, i: usize, name: &str) -> Result<i64, String> {
    Ok(ctx.const_number(i, name)?.get_i64(0))
}

fn dft(ctx: &mut Ctx, axis_input: bool) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let rank = shape.len();
    if rank < 2 || !matches!(shape[rank - 1], 1 | 2) {
        return Err(format!("input must be [..., signal, 1 or 2], got shape {shape:?}"));
    }
    let axis = if axis_input {
        match ctx.opt_input(2) {
            Some(_) => const_int(ctx, 2, "axis")?,
            None => -2,
        }
    } else {
        ctx.node.int("axis", 1)?
    };
    let axis = axes::axis(axis, rank)?;
    if axis == rank - 1 {
        return Err(format!("axis {axis} is the real/imaginary axis"));
    }
    let inverse = ctx.node.int("inverse", 0)? != 0;
    let onesided = ctx.node.int("onesided", 0)? != 0;
    let transform = match (inverse, onesided) {
        (false, onesided) => Transform::Forward { onesided },
        (true, false) => Transform::Inverse,
        (true, true) => Transform::InverseOneSided,
    };
    let n = shape[axis];
    let length = match ctx.opt_input(1) {
        Some(_) => const_int(ctx, 1, "dft_length")?,
        None if transform == Transform::InverseOneSided => 2 * (n as i64 - 1),
        None => n as i64,
    };
    let length = usize::try_from(length)
        .ok()
        .filter(|&l| l > 0)
        .ok_or(format!("dft_length {length} must be positive"))?;
    Ok(vec![transform_along(ctx, x, axis, length, transform)?])
}

/// The transform of `x` (`[..., signal, 1 or 2]`) along `axis` at length `length`.
fn transform_along(
    ctx: &mut Ctx,
    x: ValueId,
    axis: usize,
    length: usize,
    transform: Transform,
) -> Result<ValueId, String> {
    let shape = ctx.ty(x).shape.clone();
    let rank = shape.len();
    let dtype = ctx.ty(x).dtype;
    if !dtype.is_float() {
        return Err(format!("input must be a float tensor, got {dtype}"));
    }
    // the parts as [..., signal] with the signal axis last
    let mut perm: Vec<usize> = (0..rank - 1).filter(|&d| d != axis).collect();
    perm.push(axis);
    let mut part_shape = shape[..rank - 1].to_vec();
    let part = |ctx: &mut Ctx, k: i64| -> Result<ValueId, String> {
        let sliced = slice_value(
            ctx,
            x,
            &[(
                rank - 1,
                DimSlice {
                    start: k,
                    end: k + 1,
                    step: 1,
                },
            )],
        )?;
        let flat = reshape(ctx, sliced, &shape[..rank - 1])?;
        ctx.transpose(flat, &perm)
    };
    let real = part(ctx, 0)?;
    let imaginary = if shape[rank - 1] == 2 {
        Some(part(ctx, 1)?)
    } else {
        None
    };
    let n = shape[axis];
    let m = Matrices::new(n, length, transform);
    let out = m.outputs;
    let apply = |ctx: &mut Ctx, v: ValueId, values: &[f64]| -> Result<ValueId, String> {
        let matrix = ctx.constant(Tensor::from_f64s(dtype, vec![n, out], values));
        ctx.op(OpKind::MatMul, &[v, matrix])
    };
    let mut parts = Vec::new();
    for (from_real, from_imaginary) in m.weights() {
        let mut y = apply(ctx, real, &from_real)?;
        if let Some(im) = imaginary {
            let other = apply(ctx, im, &from_imaginary)?;
            y = ctx.op(OpKind::Add, &[y, other])?;
        }
        parts.push(y);
    }
    // back to the input's axis order, with the real/imaginary axis last
    part_shape[axis] = out;
    let inverse_perm: Vec<usize> = (0..rank - 1)
        .map(|d| perm.iter().position(|&p| p == d).expect("a permutation"))
        .collect();
    let mut with_last = part_shape.clone();
    with_last.push(1);
    let mut stacked = Vec::new();
    for y in parts {
        let back = ctx.transpose(y, &inverse_perm)?;
        stacked.push(reshape(ctx, back, &with_last)?);
    }
    concat_values(ctx, stacked, rank - 1)
}

/// The constant matrices of a transform: entry `[i, o]` weighs input position `i` (below the
/// transform's length) in output position `o`, from the real and from the imaginary part.
struct Matrices {
    inputs: usize,
    outputs: usize,
    length: usize,
    transform: Transform,
}

impl Matrices {
    fn new(inputs: usize, length: usize, transform: Transform) -> Matrices {
        let outputs = match transform {
            Transform::Forward { onesided: true } => length / 2 + 1,
            _ => length,
        };
        Matrices {
            inputs,
            outputs,
            length,
            transform,
        }
    }

    /// For each output part (real, then imaginary unless the output is real), the weights of
    /// the input's real and imaginary parts, row-major `[inputs, outputs]`.
    fn weights(&self) -> Vec<(Vec<f64>, Vec<f64>)> {
        let l = self.length as f64;
        let entry = |i: usize, o: usize, f: &dyn Fn(f64, f64) -> f64| {
            if i >= self.length {
                return 0.0;
            }
            let angle = 2.0 * PI * ((i * o) % self.length) as f64 / l;
            f(angle.cos(), angle.sin())
        };
        let matrix = |f: &dyn Fn(usize, f64, f64) -> f64| -> Vec<f64> {
            (0..self.inputs)
                .flat_map(|i| (0..self.outputs).map(move |o| (i, o)))
                .map(|(i, o)| entry(i, o, &|c, s| f(i, c, s)))
                .collect()
        };
        match self.transform {
            // (a + ib)(cos - i sin) = a cos + b sin + i(b cos - a sin)
            Transform::Forward { .. } => vec![
                (matrix(&|_, c, _| c), matrix(&|_, _, s| s)),
                (matrix(&|_, _, s| -s), matrix(&|_, c, _| c)),
            ],
            // (a + ib)(cos + i sin) / L
            Transform::Inverse => vec![
                (matrix(&|_, c, _| c / l), matrix(&|_, _, s| -s / l)),
                (matrix(&|_, _, s| s / l), matrix(&|_, c, _| c / l)),
            ],
            // the real part of the Hermitian extension's inverse: each bin but 0 and L/2 counts
            // twice (once for its mirror), bins past L/2 are not read
            Transform::InverseOneSided => {
                let half = self.length / 2;
                let weight = |k: usize| match k {
                    0 => 1.0,
                    k if k > half => 0.0,
                    k if 2 * k == self.length => 1.0,
                    _ => 2.0,
                };
                vec![(
                    matrix(&|k, c, _| weight(k) * c / l),
                    matrix(&|k, _, s| -weight(k) * s / l),
                )]
            }
        }
    }
}

/// Frames of `frame_length` every `frame_step` positions of the signal, multiplied by the
/// window, each transformed (one-sided unless `onesided` is 0).
fn stft(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let signal = ctx.input(0)?;
    let shape = ctx.ty(signal).shape.clone();
    if shape.len() != 3 || !matches!(shape[2], 1 | 2) {
        return Err(format!("signal must be [batch, length, 1 or 2], got shape {shape:?}"));
    }
    let step = const_int(ctx, 1, "frame_step")?;
    let window = ctx.opt_input(2);
    let frame = match (window, ctx.opt_input(3)) {
        (_, Some(_)) => const_int(ctx, 3, "frame_length")?,
        (Some(w), None) => ctx.ty(w).num_elements() as i64,
        (None, None) => return Err("needs a window or a frame_length".into()),
    };
    let length = shape[1] as i64;
    if step < 1 || frame < 1 || frame > length {
        return Err(format!(
            "frame_step {step} and frame_length {frame} do not frame a signal of {length}"
        ));
    }
    let (step, frame) = (step as usize, frame as usize);
    let frames = (shape[1] - frame) / step + 1;
    let index: Vec<i64> = (0..frames)
        .flat_map(|f| (0..frame).map(move |i| (f * step + i) as i64))
        .collect();
    let index = ctx.constant(Tensor::from_i64s(DType::I64, vec![frames, frame], &index));
    let mut framed = ctx.build1(
        OpKind::Gather,
        vec![signal, index],
        Attrs::new().with("axis", Attr::Int(1)),
    )?;
    if let Some(w) = window {
        if ctx.ty(w).shape != [frame] {
            return Err(format!("window of shape {:?} for frames of {frame}", ctx.ty(w).shape));
        }
        let w = reshape(ctx, w, &[1, 1, frame, 1])?;
        framed = ctx.op(OpKind::Mul, &[framed, w])?;
    }
    let onesided = ctx.node.int("onesided", 1)? != 0;
    Ok(vec![transform_along(
        ctx,
        framed,
        2,
        frame,
        Transform::Forward { onesided },
    )?])
}

/// A window of the size the input holds: `sum_j a_j cos(2 pi j n / D)` with `D` the size
/// (`periodic`) or the size less one.
fn window(ctx: &mut Ctx, coefficients: &[f64]) -> Result<Vec<ValueId>, String> {
    let size = const_int(ctx, 0, "size")?;
    let size = usize::try_from(size).map_err(|_| format!("size {size} is negative"))?;
    let dtype = require_numeric_dtype(ctx.node.int("output_datatype", 1)? as i32)?;
    let periodic = ctx.node.int("periodic", 1)? != 0;
    check_constant(&TensorType::new(dtype, vec![size]))?;
    let denominator = if periodic { size as f64 } else { size as f64 - 1.0 };
    let values: Vec<f64> = (0..size)
        .map(|n| {
            coefficients
                .iter()
                .enumerate()
                .map(|(j, a)| a * (2.0 * PI * (j * n) as f64 / denominator).cos())
                .sum()
        })
        .collect();
    Ok(vec![ctx.constant(Tensor::from_f64s(dtype, vec![size], &values))])
}

/// The triangular filters of `num_mel_bins` mel bands over the `dft_length / 2 + 1` bins of a
/// one-sided spectrum: the band edges step by `(high - low) / (num_mel_bins + 2)` on the mel
/// scale from the lower edge (the ONNX definition's step).
fn mel_weight_matrix(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let bands = const_int(ctx, 0, "num_mel_bins")?;
    let dft_length = const_int(ctx, 1, "dft_length")?;
    let rate = const_int(ctx, 2, "sample_rate")? as f64;
    let low = ctx.const_number(3, "lower_edge_hertz")?.get_f64(0);
    let high = ctx.const_number(4, "upper_edge_hertz")?.get_f64(0);
    let dtype = require_numeric_dtype(ctx.node.int("output_datatype", 1)? as i32)?;
    if bands < 1 || dft_length < 1 || rate <= 0.0 || !(0.0 <= low && low < high) {
        return Err(format!(
            "num_mel_bins {bands}, dft_length {dft_length}, sample_rate {rate} and edges {low}..{high} make no filters"
        ));
    }
    let (bands, bins) = (bands as usize, dft_length as usize / 2 + 1);
    check_constant(&TensorType::new(dtype, vec![bins, bands]))?;
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let hz = |m: f64| 700.0 * (10f64.powf(m / 2595.0) - 1.0);
    let (low_mel, high_mel) = (mel(low), mel(high));
    // the bin each of the bands + 2 edges falls in
    let edges: Vec<usize> = (0..bands + 2)
        .map(|i| {
            let m = low_mel + (high_mel - low_mel) * i as f64 / (bands + 2) as f64;
            ((dft_length as f64 + 1.0) * hz(m) / rate).floor() as usize
        })
        .collect();
    let mut values = vec![0.0; bins * bands];
    for b in 0..bands {
        let (lower, centre, upper) = (edges[b], edges[b + 1], edges[b + 2]);
        for (k, row) in values.chunks_mut(bands).enumerate() {
            row[b] = if k >= lower && k <= centre && centre > lower {
                (k - lower) as f64 / (centre - lower) as f64
            } else if k == centre {
                1.0
            } else if k > centre && k < upper {
                (upper - k) as f64 / (upper - centre) as f64
            } else {
                0.0
            };
        }
    }
    Ok(vec![ctx.constant(Tensor::from_f64s(dtype, vec![bins, bands], &values))])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transform of a unit impulse at 1 is `e^{-2 pi i k / L}`.
    #[test]
    fn forward_weights_rotate_by_the_bin() {
        let m = Matrices::new(2, 4, Transform::Forward { onesided: true });
        assert_eq!(m.outputs, 3);
        let w = m.weights();
        let (cos_row, minus_sin_row) = (&w[0].0[3..6], &w[1].0[3..6]);
        let expected_cos = [1.0, 0.0, -1.0];
        let expected_minus_sin = [0.0, -1.0, 0.0];
        for k in 0..3 {
            assert!((cos_row[k] - expected_cos[k]).abs() < 1e-12);
            assert!((minus_sin_row[k] - expected_minus_sin[k]).abs() < 1e-12);
        }
    }

    #[test]
    fn the_one_sided_inverse_counts_mirrored_bins_twice() {
        let m = Matrices::new(3, 4, Transform::InverseOneSided);
        let w = m.weights();
        assert_eq!(w.len(), 1, "a real output");
        // output position 0 reads bins 0, 1 (twice) and 2 with weight 1/4 each unit
        assert_eq!(
            &w[0].0.iter().step_by(4).copied().collect::<Vec<_>>(),
            &[0.25, 0.5, 0.25]
        );
    }
}
