//! `Resize` of a value of symbolic dimensions: nearest upsampling by whole scales, the form
//! detectors and segmenters use between feature levels. Where every output position `y` of an
//! axis scaled by `s` reads input position `floor(y / s)` alone, the axis is its input with
//! each element repeated `s` times: a reshape that opens a unit axis after it, an expand of that
//! axis to `s`, and a reshape that merges the two, all of which take their sizes at run time.
//! Other interpolations read positions a table lists per output size, which a symbolic size
//! cannot give, and are refused.

use super::super::constant::expand_to;
use super::super::shape::reshape_dims;
use super::{AxisPlan, Coordinates, Interpolation, Kernel};
use crate::ctx::Ctx;
use mxc_dialects::dim::Dim;
use mxc_dialects::ValueId;

/// The input sizes at which an axis's taps are checked to read `floor(y / s)`: the modes
/// admitted map an output position to a source coordinate without the axis's size, so the
/// taps repeat with period `s` and a few sizes show them all.
const CHECKED_SIZES: u64 = 16;

/// `x` (of symbolic dimensions) resized by `scales`, one per axis.
pub(super) fn upsample(
    ctx: &mut Ctx,
    x: ValueId,
    interpolation: &Interpolation,
    scales: &[f64],
) -> Result<ValueId, String> {
    let dims = ctx.ty(x).dims();
    if scales.len() != dims.len() {
        return Err(format!("scales has {} entries, expected {}", scales.len(), dims.len()));
    }
    let refuse = |why: String| {
        Err(format!(
            "over symbolic sizes, Resize is a nearest upsampling by whole scales: {why}"
        ))
    };
    let size_free = matches!(
        interpolation.coordinates,
        Coordinates::Asymmetric
            | Coordinates::HalfPixel
            | Coordinates::PytorchHalfPixel
            | Coordinates::TfHalfPixelForNn
    );
    let Kernel::Nearest(rounding) = interpolation.kernel else {
        return refuse(format!("mode \"{}\" is not one", interpolation.kernel.mode()));
    };
    if !size_free {
        return refuse(format!(
            "coordinate_transformation_mode \"{}\" maps positions by the axis's size",
            interpolation.coordinates.name()
        ));
    }
    let mut whole = Vec::with_capacity(scales.len());
    for (axis, &s) in scales.iter().enumerate() {
        if !(s >= 1.0 && s.fract() == 0.0 && s <= u32::MAX as f64) {
            return refuse(format!("axis {axis} has the scale {s}"));
        }
        let s = s as u64;
        if s > 1 && !reads_floor(interpolation, s) {
            return refuse(format!(
                "under nearest_mode \"{}\" and coordinate_transformation_mode \"{}\", output position y of axis {axis} does not always read input floor(y / {s})",
                rounding.name(),
                interpolation.coordinates.name()
            ));
        }
        whole.push(s);
    }
    if whole.iter().all(|&s| s == 1) {
        return Ok(x);
    }
    let (mut opened, mut repeated, mut merged) = (Vec::new(), Vec::new(), Vec::new());
    for (d, &s) in dims.iter().zip(&whole) {
        opened.push(d.clone());
        repeated.push(d.clone());
        if s > 1 {
            opened.push(Dim::constant(1));
            repeated.push(Dim::constant(s));
        }
        merged.push(d.mul(&Dim::constant(s)).map_err(|e| e.to_string())?);
    }
    let y = reshape_dims(ctx, x, &opened)?;
    let y = expand_to(ctx, y, &repeated)?;
    reshape_dims(ctx, y, &merged)
}

/// Whether each output position `y` of an axis upsampled by `s` reads input position
/// `floor(y / s)` alone, with weight 1, at every input size up to `CHECKED_SIZES`.
fn reads_floor(interpolation: &Interpolation, s: u64) -> bool {
    (1..=CHECKED_SIZES).all(|n| {
        let plan = AxisPlan {
            axis: 0,
            input: n as usize,
            output: (n * s) as usize,
            scale: s as f64,
            roi: [0.0, 1.0],
        };
        let taps = interpolation.taps(&plan);
        (taps.iter().enumerate()).all(|(y, t)| t.as_deref() == Some(&[(y / s as usize, 1.0)][..]))
    })
}
