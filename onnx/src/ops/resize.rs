//! `Resize` and `Upsample`, decomposed axis by axis (the interpolation is separable). The
//! scales or sizes (and the region of interest) are compile-time values, so for each resized
//! axis the input positions every output position reads, and their weights, are worked out
//! here in f64: the axis becomes a `gather` of those positions (indices `[k, out]` for `k`
//! taps), times constant weights, summed over the taps with a `reduce_sum`. Nearest
//! interpolation is a lone `gather`; positions outside a `tf_crop_and_resize` region take the
//! extrapolation value through a `where`. The arithmetic follows the ONNX reference
//! implementation (its kernels, tap windows and edge clamping).

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::check_constant;
use super::axes;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

mod symbolic;

pub fn register(r: &mut Registry) {
    r.add("", "Upsample", 7, 8, upsample_7);
    r.add("", "Upsample", 9, 9, resize_10);
    r.add("", "Resize", 10, 10, resize_10);
    r.add("", "Resize", 11, LATEST, resize);
}

/// How nearest interpolation rounds a source coordinate to an input position.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rounding {
    PreferFloor,
    PreferCeil,
    Floor,
    Ceil,
}

impl Rounding {
    fn parse(name: &str) -> Result<Rounding, String> {
        Ok(match name {
            "round_prefer_floor" => Rounding::PreferFloor,
            "round_prefer_ceil" => Rounding::PreferCeil,
            "floor" => Rounding::Floor,
            "ceil" => Rounding::Ceil,
            other => return Err(format!("nearest_mode \"{other}\" is not supported")),
        })
    }

    /// Its `nearest_mode` spelling.
    fn name(self) -> &'static str {
        match self {
            Rounding::PreferFloor => "round_prefer_floor",
            Rounding::PreferCeil => "round_prefer_ceil",
            Rounding::Floor => "floor",
            Rounding::Ceil => "ceil",
        }
    }

    fn round(self, x: f64) -> i64 {
        let floor = x.floor();
        let fraction = x - floor;
        let up = match self {
            Rounding::PreferFloor => fraction > 0.5,
            Rounding::PreferCeil => fraction >= 0.5,
            Rounding::Floor => false,
            Rounding::Ceil => fraction > 0.0,
        };
        floor as i64 + up as i64
    }
}

/// A continuous interpolation kernel, as a function of the distance to the source coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Filter {
    Linear,
    /// Keys' cubic convolution with coefficient `a`.
    Cubic(f64),
}

impl Filter {
    /// Half the width of the kernel's support.
    fn radius(self) -> f64 {
        match self {
            Filter::Linear => 1.0,
            Filter::Cubic(_) => 2.0,
        }
    }

    pub(super) fn weight(self, d: f64) -> f64 {
        let t = d.abs();
        match self {
            Filter::Linear => (1.0 - t).max(0.0),
            Filter::Cubic(a) if t <= 1.0 => ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
            Filter::Cubic(a) if t < 2.0 => ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a,
            Filter::Cubic(_) => 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Nearest(Rounding),
    Filter(Filter),
}

impl Kernel {
    /// Its `mode` spelling.
    fn mode(self) -> &'static str {
        match self {
            Kernel::Nearest(_) => "nearest",
            Kernel::Filter(Filter::Linear) => "linear",
            Kernel::Filter(Filter::Cubic(_)) => "cubic",
        }
    }
}

/// `coordinate_transformation_mode`: how an output position maps to an input coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coordinates {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    TfCropAndResize,
}

impl Coordinates {
    /// The modes of Resize at `opset` (`tf_half_pixel_for_nn` was dropped in 13,
    /// `half_pixel_symmetric` added in 19).
    fn parse(name: &str, opset: i64) -> Result<Coordinates, String> {
        Ok(match name {
            "half_pixel" => Coordinates::HalfPixel,
            "half_pixel_symmetric" if opset >= 19 => Coordinates::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coordinates::PytorchHalfPixel,
            "align_corners" => Coordinates::AlignCorners,
            "asymmetric" => Coordinates::Asymmetric,
            "tf_half_pixel_for_nn" if opset < 13 => Coordinates::TfHalfPixelForNn,
            "tf_crop_and_resize" => Coordinates::TfCropAndResize,
            other => return Err(format!("coordinate_transformation_mode \"{other}\" is not supported")),
        })
    }

    /// Its `coordinate_transformation_mode` spelling.
    fn name(self) -> &'static str {
        match self {
            Coordinates::HalfPixel => "half_pixel",
            Coordinates::HalfPixelSymmetric => "half_pixel_symmetric",
            Coordinates::PytorchHalfPixel => "pytorch_half_pixel",
            Coordinates::AlignCorners => "align_corners",
            Coordinates::Asymmetric => "asymmetric",
            Coordinates::TfHalfPixelForNn => "tf_half_pixel_for_nn",
            Coordinates::TfCropAndResize => "tf_crop_and_resize",
        }
    }

    /// The input coordinate of output position `y` of the axis `p`. The conditions on a
    /// single output position use the integer output extent, as the spec words them (so
    /// `pytorch_half_pixel` then gives 0, as in the spec and onnxruntime, where the reference
    /// implementation gives -0.5); the denominators use the extent before rounding down,
    /// `scale * input`, as the reference implementation computes them (and the backend
    /// suite's expected outputs with them).
    fn source(self, y: f64, p: &AxisPlan) -> f64 {
        let (input, scale) = (p.input as f64, p.scale);
        let width = scale * input;
        match self {
            Coordinates::HalfPixel => (y + 0.5) / scale - 0.5,
            Coordinates::HalfPixelSymmetric => {
                let adjustment = p.output as f64 / width;
                let offset = input / 2.0 * (1.0 - adjustment);
                offset + (y + 0.5) / scale - 0.5
            }
            Coordinates::PytorchHalfPixel if p.output == 1 => 0.0,
            Coordinates::PytorchHalfPixel => (y + 0.5) / scale - 0.5,
            Coordinates::AlignCorners if p.output == 1 => 0.0,
            Coordinates::AlignCorners => y * (input - 1.0) / (width - 1.0),
            Coordinates::Asymmetric => y / scale,
            Coordinates::TfHalfPixelForNn => (y + 0.5) / scale,
            Coordinates::TfCropAndResize => {
                let [start, end] = p.roi;
                let from_start = if p.output == 1 {
                    (end - start) * (input - 1.0) / 2.0
                } else {
                    y * (end - start) * (input - 1.0) / (width - 1.0)
                };
                from_start + start * (input - 1.0)
            }
        }
    }
}

/// Everything about the interpolation that is the same on every axis.
struct Interpolation {
    kernel: Kernel,
    coordinates: Coordinates,
    /// Whether a filter is stretched by 1 / scale when downsampling.
    antialias: bool,
    /// Whether taps outside the input get no weight (the others renormalised).
    exclude_outside: bool,
    /// The value of positions outside the region of interest of `tf_crop_and_resize`.
    extrapolation_value: f64,
}

/// One resized axis: its extents, the scale mapping output to input coordinates, and (for
/// `tf_crop_and_resize`) its region of interest in normalised input coordinates.
#[derive(Clone, Debug, PartialEq)]
struct AxisPlan {
    axis: usize,
    input: usize,
    output: usize,
    scale: f64,
    roi: [f64; 2],
}

/// What one output position reads: distinct in-range input positions with non-zero weights,
/// or `None` outside the region of interest, where it takes the extrapolation value.
type Taps = Option<Vec<(usize, f64)>>;

impl Interpolation {
    fn taps(&self, p: &AxisPlan) -> Vec<Taps> {
        let last = p.input as f64 - 1.0;
        (0..p.output)
            .map(|y| {
                let x = self.coordinates.source(y as f64, p);
                if self.coordinates == Coordinates::TfCropAndResize && !(0.0..=last).contains(&x) {
                    return None;
                }
                Some(self.settle(self.window(x, p.scale), p.input))
            })
            .collect()
    }

    /// The raw taps around input coordinate `x`: the nearest position, or the `n` positions
    /// centred on `x` a filter covers (stretched by 1 / scale when antialiasing a
    /// downsampling), each weighted by the filter at its distance from `x`.
    fn window(&self, x: f64, scale: f64) -> Vec<(i64, f64)> {
        match self.kernel {
            Kernel::Nearest(rounding) => vec![(rounding.round(x), 1.0)],
            Kernel::Filter(filter) => {
                let stretch = if self.antialias { scale.min(1.0) } else { 1.0 };
                let n = 2 * (filter.radius() / stretch).ceil() as i64;
                // an integer `x` takes the window whose upper half starts at `x`
                let first = x.ceil() as i64 - n / 2;
                (first..first + n)
                    .map(|i| (i, filter.weight((i as f64 - x) * stretch)))
                    .collect()
            }
        }
    }

    /// Raw taps made readable on an axis of `n` positions: taps outside dropped under
    /// `exclude_outside`, the weights normalised to sum to 1 (they do already, up to rounding,
    /// unless antialiasing or excluding), positions clamped into the axis (the edge values
    /// extend it), taps of one position merged and zero weights dropped.
    fn settle(&self, raw: Vec<(i64, f64)>, n: usize) -> Vec<(usize, f64)> {
        let last = n as i64 - 1;
        let kept: Vec<(i64, f64)> = raw
            .into_iter()
            .filter(|&(i, _)| !self.exclude_outside || (0..=last).contains(&i))
            .collect();
        let total: f64 = kept.iter().map(|t| t.1).sum();
        let mut taps: Vec<(usize, f64)> = Vec::with_capacity(kept.len());
        for (i, w) in kept {
            let i = i.clamp(0, last) as usize;
            let w = if total == 0.0 { 0.0 } else { w / total };
            match taps.iter_mut().find(|t| t.0 == i) {
                Some(t) => t.1 += w,
                None => taps.push((i, w)),
            }
        }
        taps.retain(|t| t.1 != 0.0);
        taps
    }
}

/// `Resize` from opset 11: roi, scales and sizes inputs and the attributes of each opset.
fn resize(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let interpolation = interpolation(ctx)?;
    if ctx.ty(x).is_symbolic() {
        if ctx.opset >= 18 && ctx.node.opt_ints("axes")?.is_some() {
            return Err("over symbolic sizes, Resize takes scales for every axis (no `axes`)".into());
        }
        if given(ctx, 3, "sizes")?.is_some() {
            return Err("over symbolic sizes, Resize takes scales (sizes would fix the output's)".into());
        }
        let scales = given(ctx, 2, "scales")?.ok_or("needs scales or sizes")?;
        return Ok(vec![symbolic::upsample(ctx, x, &interpolation, &scales)?]);
    }
    let plans = plans(ctx, &ctx.ty(x).shape.clone(), interpolation.coordinates)?;
    Ok(vec![resize_axes(ctx, x, &interpolation, plans)?])
}

/// The interpolation attributes of `Resize` from opset 11 (`antialias` from 18).
fn interpolation(ctx: &Ctx) -> Result<Interpolation, String> {
    let n = &ctx.node;
    let rounding = Rounding::parse(&n.string("nearest_mode", "round_prefer_floor")?)?;
    let a = n.float("cubic_coeff_a", -0.75)? as f64;
    let kernel = match n.string("mode", "nearest")?.as_str() {
        "nearest" => Kernel::Nearest(rounding),
        "linear" => Kernel::Filter(Filter::Linear),
        "cubic" => Kernel::Filter(Filter::Cubic(a)),
        other => return Err(format!("mode \"{other}\" is not supported")),
    };
    let antialias = ctx.opset >= 18 && flag(ctx, "antialias")?;
    if antialias && matches!(kernel, Kernel::Nearest(_)) {
        return Err("antialias is not defined for mode \"nearest\"".into());
    }
    Ok(Interpolation {
        kernel,
        coordinates: Coordinates::parse(&n.string("coordinate_transformation_mode", "half_pixel")?, ctx.opset)?,
        antialias,
        exclude_outside: flag(ctx, "exclude_outside")?,
        extrapolation_value: n.float("extrapolation_value", 0.0)? as f64,
    })
}

/// A 0/1 attribute.
pub(super) fn flag(ctx: &Ctx, name: &str) -> Result<bool, String> {
    match ctx.node.int(name, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!("{name} must be 0 or 1, got {other}")),
    }
}

/// A compile-time input that counts as absent when empty (opset 11 requires `roi` and
/// `scales` even where they are not used, passing empty tensors).
fn given(ctx: &Ctx, i: usize, name: &str) -> Result<Option<Vec<f64>>, String> {
    Ok(ctx
        .opt_const_input(i, name)?
        .filter(|t| !t.is_empty())
        .map(|t| t.to_f64_vec()))
}

/// The resized axes of an input of `shape`, from the `axes` attribute (opset 18) and the
/// scales or sizes input, with the region of interest for `tf_crop_and_resize`.
fn plans(ctx: &Ctx, shape: &[usize], coordinates: Coordinates) -> Result<Vec<AxisPlan>, String> {
    let rank = shape.len();
    let listed = match ctx.opset >= 18 {
        true => ctx.node.opt_ints("axes")?,
        false => None,
    };
    let axes = match listed {
        Some(list) => {
            axes::axes(&list, rank)?; // checks they are distinct
            list.iter()
                .map(|&a| axes::axis(a, rank))
                .collect::<Result<Vec<_>, _>>()?
        }
        None => (0..rank).collect(),
    };
    let policy = match ctx.opset >= 18 {
        true => ctx.node.string("keep_aspect_ratio_policy", "stretch")?,
        false => "stretch".into(),
    };
    let extents = match (given(ctx, 2, "scales")?, given(ctx, 3, "sizes")?) {
        (Some(scales), None) => from_scales(&scales, &axes, shape, &policy)?,
        (None, Some(sizes)) => from_sizes(&sizes, &axes, shape, &policy)?,
        (Some(_), Some(_)) => return Err("give scales or sizes, not both".into()),
        (None, None) => return Err("needs scales or sizes".into()),
    };
    let roi = match coordinates {
        Coordinates::TfCropAndResize => given(ctx, 1, "roi")?.ok_or("tf_crop_and_resize needs the roi input")?,
        _ => vec![],
    };
    if !roi.is_empty() && roi.len() != 2 * axes.len() {
        return Err(format!("roi has {} entries, expected {}", roi.len(), 2 * axes.len()));
    }
    let plans = axes
        .iter()
        .zip(extents)
        .enumerate()
        .map(|(i, (&axis, (output, scale)))| AxisPlan {
            axis,
            input: shape[axis],
            output,
            scale,
            roi: match roi.is_empty() {
                true => [0.0, 1.0],
                false => [roi[i], roi[axes.len() + i]],
            },
        });
    Ok(plans.collect())
}

/// Checks that `values` has an entry per listed axis, and that no listed axis is empty (an
/// empty axis has nothing to interpolate from).
fn check_listed(values: &[f64], what: &str, axes: &[usize], shape: &[usize]) -> Result<(), String> {
    if values.len() != axes.len() {
        return Err(format!("{what} has {} entries, expected {}", values.len(), axes.len()));
    }
    match axes.iter().find(|&&a| shape[a] == 0) {
        Some(a) => Err(format!("cannot resize the empty axis {a}")),
        None => Ok(()),
    }
}

/// (output extent, scale) of each listed axis given scales: the extent is the scaled one
/// rounded down (`keep_aspect_ratio_policy` applies to sizes only).
fn from_scales(scales: &[f64], axes: &[usize], shape: &[usize], policy: &str) -> Result<Vec<(usize, f64)>, String> {
    check_listed(scales, "scales", axes, shape)?;
    check_policy(policy)?;
    axes.iter()
        .zip(scales)
        .map(|(&a, &s)| {
            let out = (s * shape[a] as f64).floor();
            if !(s > 0.0 && out <= isize::MAX as f64) {
                return Err(format!("scale {s} of axis {a} is not a positive scale"));
            }
            Ok((out as usize, s))
        })
        .collect()
}

fn check_policy(policy: &str) -> Result<(), String> {
    match policy {
        "stretch" | "not_larger" | "not_smaller" => Ok(()),
        other => Err(format!("keep_aspect_ratio_policy \"{other}\" is not supported")),
    }
}

/// (output extent, scale) of each listed axis given sizes: the sizes themselves, or under a
/// policy keeping the aspect ratio, one scale for all (the least or greatest of the sizes'
/// ratios) and the extents it gives rounded to nearest.
fn from_sizes(sizes: &[f64], axes: &[usize], shape: &[usize], policy: &str) -> Result<Vec<(usize, f64)>, String> {
    check_listed(sizes, "sizes", axes, shape)?;
    check_policy(policy)?;
    if let Some(s) = sizes.iter().find(|&&s| s < 0.0) {
        return Err(format!("sizes has the negative entry {s}"));
    }
    let ratios = axes.iter().zip(sizes).map(|(&a, &s)| s / shape[a] as f64);
    let common = match policy {
        "not_larger" => ratios.reduce(f64::min),
        "not_smaller" => ratios.reduce(f64::max),
        _ => None,
    };
    Ok(axes
        .iter()
        .zip(sizes)
        .map(|(&a, &s)| match common {
            Some(scale) => ((scale * shape[a] as f64 + 0.5).floor() as usize, scale),
            None => (s as usize, s / shape[a] as f64),
        })
        .collect())
}

/// `Resize` at opset 10 and `Upsample` at 9: a scales input, asymmetric coordinates and
/// nearest taken by rounding down (the behaviour those versions had, before
/// `coordinate_transformation_mode` and `nearest_mode` named it).
fn resize_10(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let scales = ctx.const_input(1, "scales")?.to_f64_vec();
    legacy(ctx, &scales)
}

/// `Upsample` at opsets 7 and 8: the scales are an attribute.
fn upsample_7(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let scales = ctx.node.opt_floats("scales")?.ok_or("missing attribute `scales`")?;
    legacy(ctx, &scales.iter().map(|&s| s as f64).collect::<Vec<_>>())
}

fn legacy(ctx: &mut Ctx, scales: &[f64]) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let kernel = match ctx.node.string("mode", "nearest")?.as_str() {
        "nearest" => Kernel::Nearest(Rounding::Floor),
        "linear" => Kernel::Filter(Filter::Linear),
        other => return Err(format!("mode \"{other}\" is not supported")),
    };
    let interpolation = Interpolation {
        kernel,
        coordinates: Coordinates::Asymmetric,
        antialias: false,
        exclude_outside: false,
        extrapolation_value: 0.0,
    };
    if ctx.ty(x).is_symbolic() {
        return Ok(vec![symbolic::upsample(ctx, x, &interpolation, scales)?]);
    }
    let shape = ctx.ty(x).shape.clone();
    let axes: Vec<usize> = (0..shape.len()).collect();
    let plans = from_scales(scales, &axes, &shape, "stretch")?
        .into_iter()
        .zip(axes)
        .map(|((output, scale), axis)| AxisPlan {
            axis,
            input: shape[axis],
            output,
            scale,
            roi: [0.0, 1.0],
        })
        .collect();
    Ok(vec![resize_axes(ctx, x, &interpolation, plans)?])
}

/// Resizes `x` along each planned axis, those that shrink the data first.
fn resize_axes(
    ctx: &mut Ctx,
    x: ValueId,
    interpolation: &Interpolation,
    mut plans: Vec<AxisPlan>,
) -> Result<ValueId, String> {
    plans.sort_by(|a, b| (a.output * b.input).cmp(&(b.output * a.input)));
    // each axis's taps are a table of its output size: sized before they are made
    for p in &plans {
        check_constant(&TensorType::new(DType::F64, vec![p.output]))?;
    }
    let mut x = x;
    for p in &plans {
        let taps = interpolation.taps(p);
        x = resize_axis(ctx, x, p, &taps, interpolation.extrapolation_value)?;
    }
    Ok(x)
}

/// Whether every output position reads the input position of the same index alone.
fn is_identity(p: &AxisPlan, taps: &[Taps]) -> bool {
    p.input == p.output
        && taps
            .iter()
            .enumerate()
            .all(|(y, t)| t.as_deref() == Some(&[(y, 1.0)][..]))
}

/// One axis: a `gather` of the taps (`[out]` indices for one tap per position, `[k, out]`
/// for `k`), unless they all have weight 1 times the weights and summed over the taps, then
/// the extrapolation value put where the positions have no taps. The tap axis comes before
/// the output axis so that the sum runs over an outer axis, with the data's inner axes
/// contiguous beneath it: on cpu two to three times faster than summing a short innermost
/// axis of taps when the last axis is resized.
fn resize_axis(ctx: &mut Ctx, x: ValueId, p: &AxisPlan, taps: &[Taps], extrapolation: f64) -> Result<ValueId, String> {
    if is_identity(p, taps) {
        return Ok(x);
    }
    let ty = ctx.ty(x).clone();
    let k = taps.iter().flatten().map(Vec::len).max().unwrap_or(0).max(1);
    let grid = if k == 1 { vec![p.output] } else { vec![k, p.output] };
    check_constant(&TensorType::new(DType::F64, grid.clone()))?;
    let mut index = Vec::with_capacity(p.output * k);
    let mut weight = Vec::with_capacity(p.output * k);
    for j in 0..k {
        for row in taps {
            let row = row.as_deref().unwrap_or_default();
            let (i, w) = row.get(j).copied().unwrap_or((0, 0.0));
            index.push(i as i64);
            weight.push(w);
        }
    }
    let index = ctx.constant(Tensor::from_i64s(DType::I64, grid.clone(), &index));
    let gather = Attrs::new().with("axis", Attr::Int(p.axis as i64));
    let mut y = ctx.build1(OpKind::Gather, vec![x, index], gather)?;
    let weighted = taps
        .iter()
        .flatten()
        .any(|row| row.len() != k || row.iter().any(|t| t.1 != 1.0));
    if weighted {
        if !ty.dtype.is_float() {
            return Err(format!("interpolating {} data is not supported", ty.dtype));
        }
        let mut shape = grid.clone();
        shape.resize(grid.len() + ty.rank() - p.axis - 1, 1);
        let weight = ctx.constant(Tensor::from_f64s(ty.dtype, shape, &weight));
        y = ctx.op(OpKind::Mul, &[y, weight])?;
        if k > 1 {
            y = ctx.reduce(OpKind::ReduceSum, y, &[p.axis], false)?;
        }
    }
    if taps.iter().any(Option::is_none) {
        let mut shape = vec![1; ty.rank() - p.axis];
        shape[0] = p.output;
        let outside: Vec<i64> = taps.iter().map(|t| t.is_none() as i64).collect();
        let mask = ctx.constant(Tensor::from_i64s(DType::Bool, shape, &outside));
        let value = ctx.scalar(ty.dtype, extrapolation);
        y = ctx.op(OpKind::Where, &[mask, value, y])?;
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use super::*;

    fn axis(input: usize, output: usize, scale: f64) -> AxisPlan {
        AxisPlan {
            axis: 0,
            input,
            output,
            scale,
            roi: [0.0, 1.0],
        }
    }

    fn interpolation(kernel: Kernel, coordinates: Coordinates) -> Interpolation {
        Interpolation {
            kernel,
            coordinates,
            antialias: false,
            exclude_outside: false,
            extrapolation_value: 0.0,
        }
    }

    #[test]
    fn nearest_rounds_as_each_mode_says() {
        let at = |r: Rounding| [1.5, 1.2, 1.7, 2.0].map(|x| r.round(x));
        assert_eq!(at(Rounding::PreferFloor), [1, 1, 2, 2]);
        assert_eq!(at(Rounding::PreferCeil), [2, 1, 2, 2]);
        assert_eq!(at(Rounding::Floor), [1, 1, 1, 2]);
        assert_eq!(at(Rounding::Ceil), [2, 2, 2, 2]);
    }

    #[test]
    fn linear_taps_clamp_to_the_edges() {
        let up = interpolation(Kernel::Filter(Filter::Linear), Coordinates::HalfPixel);
        let taps = up.taps(&axis(2, 4, 2.0));
        assert_eq!(taps[0], Some(vec![(0, 1.0)]), "x = -0.25 reads the edge value");
        assert_eq!(taps[1], Some(vec![(0, 0.75), (1, 0.25)]));
        assert_eq!(taps[3], Some(vec![(1, 1.0)]));
    }

    #[test]
    fn cubic_taps_sum_to_one_and_exclude_outside_renormalises() {
        let mut cubic = interpolation(Kernel::Filter(Filter::Cubic(-0.5)), Coordinates::Asymmetric);
        let sum = |row: &[(usize, f64)]| row.iter().map(|t| t.1).sum::<f64>();
        let taps = cubic.taps(&axis(4, 8, 2.0));
        let (inner, edge) = (taps[3].clone().unwrap(), taps[1].clone().unwrap());
        assert_eq!(inner.len(), 4, "x = 1.5 reads 0..=3: {inner:?}");
        assert!((sum(&inner) - 1.0).abs() < 1e-12);
        cubic.exclude_outside = true;
        let excluded = cubic.taps(&axis(4, 8, 2.0))[1].clone().unwrap();
        assert_eq!(
            excluded.iter().map(|t| t.0).collect::<Vec<_>>(),
            [0, 1, 2],
            "x = 0.5 reads -1..=2"
        );
        assert!((sum(&excluded) - 1.0).abs() < 1e-12);
        // a = -0.5 gives position -1 a negative weight, which clamping added to position 0
        assert!(excluded[0].1 > edge[0].1, "{excluded:?} {edge:?}");
    }

    #[test]
    fn antialias_widens_the_filter_when_downsampling() {
        let mut linear = interpolation(Kernel::Filter(Filter::Linear), Coordinates::HalfPixel);
        linear.antialias = true;
        let p = axis(8, 2, 0.25);
        // x = 1.5: the filter stretched 4 times covers 8 taps, -2..=5, the first three clamped to 0
        let row = linear.taps(&p)[0].clone().unwrap();
        assert_eq!(row.iter().map(|t| t.0).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn crop_and_resize_extrapolates_outside_the_roi() {
        let crop = interpolation(Kernel::Filter(Filter::Linear), Coordinates::TfCropAndResize);
        let p = AxisPlan {
            roi: [0.5, 1.5],
            ..axis(3, 3, 1.0)
        };
        let taps = crop.taps(&p);
        assert_eq!(taps[0], Some(vec![(1, 1.0)]));
        assert_eq!(taps[2], None, "x = 3 is past the last position");
    }

    #[test]
    fn nearest_upsampling_is_a_gather() {
        let text = ModelBuilder::new(19)
            .input("x", DataType::Float, &[1, 1, 2, 2])
            .init(f32_tensor("scales", &[4], &[1.0, 1.0, 2.0, 3.0]))
            .node(node(
                "Resize",
                &["x", "", "scales"],
                &["y"],
                vec![str_attr("mode", "nearest")],
            ))
            .output("y")
            .text();
        assert!(text.contains("dense<[0, 0, 1, 1]> : tensor<4xi64>"), "{text}");
        assert!(text.contains("{axis = 2} : tensor<1x1x4x2xf32>"), "{text}");
        assert!(text.contains("dense<[0, 0, 0, 1, 1, 1]> : tensor<6xi64>"), "{text}");
        assert!(!text.contains("mx.mul"), "{text}");
    }

    #[test]
    fn linear_resizing_weights_and_sums_the_taps() {
        let text = ModelBuilder::new(19)
            .input("x", DataType::Float, &[1, 3, 4])
            .init(i64_tensor("sizes", &[1], &[7]))
            .node(node(
                "Resize",
                &["x", "", "", "sizes"],
                &["y"],
                vec![str_attr("mode", "linear"), ints_attr("axes", &[-1])],
            ))
            .output("y")
            .text();
        assert!(text.contains("{axis = 2} : tensor<1x3x2x7xf32>"), "{text}");
        assert!(text.contains("mx.mul"), "{text}");
        assert!(
            text.contains("{axes = [2], keepdims = 0} : tensor<1x3x7xf32>"),
            "{text}"
        );
    }

    #[test]
    fn upsample_takes_the_scales_attribute_before_opset_9() {
        let text = ModelBuilder::new(7)
            .input("x", DataType::Float, &[1, 1, 2])
            .node(node(
                "Upsample",
                &["x"],
                &["y"],
                vec![floats_attr("scales", &[1.0, 1.0, 2.0])],
            ))
            .output("y")
            .text();
        assert!(text.contains("dense<[0, 0, 1, 1]> : tensor<4xi64>"), "{text}");
    }

    #[test]
    fn unsupported_attribute_values_are_refused_by_name() {
        let model = |attrs| {
            ModelBuilder::new(19)
                .input("x", DataType::Float, &[1, 1, 2, 2])
                .init(f32_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0]))
                .node(node("Resize", &["x", "", "scales"], &["y"], attrs))
                .output("y")
        };
        let err = model(vec![str_attr("nearest_mode", "round_half_even")]).error();
        assert!(err.contains("nearest_mode \"round_half_even\""), "{err}");
        let err = model(vec![str_attr("coordinate_transformation_mode", "tf_half_pixel_for_nn")]).error();
        assert!(
            err.contains("coordinate_transformation_mode \"tf_half_pixel_for_nn\""),
            "{err}"
        );
        let err = model(vec![int_attr("antialias", 1)]).error();
        assert!(err.contains("antialias"), "{err}");
    }

    #[test]
    fn scales_must_be_known_at_compile_time() {
        let err = ModelBuilder::new(19)
            .input("x", DataType::Float, &[1, 1, 2, 2])
            .input("scales", DataType::Float, &[4])
            .node(node("Resize", &["x", "", "scales"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(err.contains("\"scales\" must be known at compile time"), "{err}");
    }
}
