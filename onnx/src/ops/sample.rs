//! `AffineGrid` and `GridSample`, decomposed. `AffineGrid` is a constant grid of normalised
//! positions (in homogeneous form) times the transposed matrices `theta`: one `matmul`.
//! `GridSample` reads positions only known at run time, so its taps are computed by
//! element-wise ops: each spatial axis turns its grid component into input coordinates, the
//! taps' indices along the axis (on an axis of their own, so that the axes' taps broadcast
//! into every combination) and their weights (linear or cubic in the fraction past the first
//! tap, and zero for taps off the input under `zeros` padding). The taps' flat indices into
//! the input, laid out as `[N * spatial, C]`, feed one `gather`; the weighted taps are summed
//! with a `reduce_sum`. The arithmetic follows the ONNX reference implementation (PyTorch's).

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::check_constant;
use super::layout::{slice_value, DimSlice};
use super::resize::flag;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "AffineGrid", 20, LATEST, affine_grid);
    r.add("", "GridSample", 16, LATEST, grid_sample);
}

/// The normalised coordinate (in [-1, 1]) of position `i` of an axis of extent `len`: the
/// centres of the corner positions at -1 and 1 with `align_corners`, their outer edges
/// without.
fn normalised(i: usize, len: usize, align_corners: bool) -> f64 {
    let i = i as f64;
    let len = len as f64;
    match align_corners {
        // a single position lies at -1 (as in PyTorch's linspace(-1, 1, 1))
        true if len == 1.0 => -1.0,
        true => -1.0 + i * (2.0 / (len - 1.0)),
        false => -1.0 + 1.0 / len + i * (2.0 / len),
    }
}

/// The homogeneous normalised positions of a grid of `spatial` extents, row-major, each as
/// `[x, y, (z,) 1]`: x runs along the last axis.
fn base_grid(spatial: &[usize], align_corners: bool) -> Vec<f64> {
    let count: usize = spatial.iter().product();
    let mut out = Vec::with_capacity(count * (spatial.len() + 1));
    for mut p in 0..count {
        for &len in spatial.iter().rev() {
            out.push(normalised(p % len, len, align_corners));
            p /= len;
        }
        out.push(1.0);
    }
    out
}

fn affine_grid(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let theta = ctx.input(0)?;
    let size = ctx.const_input(1, "size")?.to_i64_vec();
    let align_corners = flag(ctx, "align_corners")?;
    let ty = ctx.ty(theta).clone();
    if !ty.dtype.is_float() {
        return Err(format!("theta must be a float tensor, got {}", ty.dtype));
    }
    let extents: Vec<usize> = size
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("size {size:?} has a negative entry")))
        .collect::<Result<_, _>>()?;
    let (n, spatial) = match extents.as_slice() {
        [n, _, spatial @ ..] if matches!(spatial.len(), 2 | 3) => (*n, spatial.to_vec()),
        _ => return Err(format!("size {size:?} must be [N, C, H, W] or [N, C, D, H, W]")),
    };
    let r = spatial.len();
    if ty.shape != [n, r, r + 1] {
        return Err(format!(
            "theta must have shape [{n}, {r}, {}], got {:?}",
            r + 1,
            ty.shape
        ));
    }
    let count = spatial.iter().product::<usize>();
    check_constant(&TensorType::new(ty.dtype, vec![count, r + 1]))?;
    let positions = Tensor::from_f64s(ty.dtype, vec![count, r + 1], &base_grid(&spatial, align_corners));
    let positions = ctx.constant(positions);
    let transposed = ctx.transpose(theta, &[0, 2, 1])?;
    let grid = ctx.op(OpKind::MatMul, &[positions, transposed])?;
    let mut shape = vec![n];
    shape.extend(&spatial);
    shape.push(r);
    Ok(vec![reshape(ctx, grid, &shape)?])
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mode {
    Nearest,
    Linear,
    Cubic,
}

impl Mode {
    /// The offsets of the taps from the first position at or below the coordinate (nearest:
    /// the rounded coordinate itself).
    fn offsets(self) -> &'static [f64] {
        match self {
            Mode::Nearest => &[0.0],
            Mode::Linear => &[0.0, 1.0],
            Mode::Cubic => &[-1.0, 0.0, 1.0, 2.0],
        }
    }

    /// The taps' weights as polynomials in the fraction `f` of the coordinate past its
    /// floor: entry `k` holds the coefficients of `f^k`, one per tap. Cubic is Keys' kernel
    /// with a = -0.75 (PyTorch's) at the taps' distances 1 + f, f, 1 - f and 2 - f, expanded.
    fn weight_polynomials(self) -> Vec<Vec<f64>> {
        const A: f64 = -0.75;
        match self {
            Mode::Nearest => vec![],
            Mode::Linear => vec![vec![1.0, 0.0], vec![-1.0, 1.0]],
            Mode::Cubic => vec![
                vec![0.0, 1.0, 0.0, 0.0],
                vec![A, 0.0, -A, 0.0],
                vec![-2.0 * A, -(A + 3.0), 2.0 * A + 3.0, A],
                vec![A, A + 2.0, -(A + 2.0), -A],
            ],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// A GridSample node's settings (or those of `DeformConv`'s and `RoiAlign`'s bilinear taps),
/// with the element type of its grid (the coordinate arithmetic's) and the number of spatial
/// axes.
pub(super) struct Sampler {
    mode: Mode,
    padding: Padding,
    align_corners: bool,
    /// Whether the grid holds normalised coordinates (GridSample's); input positions
    /// (position `i` at `i`, as for `DeformConv` and `RoiAlign`) otherwise.
    normalised: bool,
    dtype: DType,
    rank: usize,
}

/// One spatial axis of the input: its extent and the coordinates that lie inside it (the
/// corner positions' centres with `align_corners`, their outer edges without).
struct Extent {
    len: f64,
    lo: f64,
    hi: f64,
}

fn grid_sample(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, grid) = (ctx.input(0)?, ctx.input(1)?);
    // opset 16 took 2-D images only, and named the modes after that case
    let only_2d = ctx.opset < 20;
    let names = match only_2d {
        true => ["nearest", "bilinear", "bicubic"],
        false => ["nearest", "linear", "cubic"],
    };
    let name = ctx.node.string("mode", names[1])?;
    let mode = match names.iter().position(|&m| m == name) {
        Some(0) => Mode::Nearest,
        Some(1) => Mode::Linear,
        Some(_) => Mode::Cubic,
        None => return Err(format!("mode \"{name}\" is not supported")),
    };
    let padding = match ctx.node.string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => return Err(format!("padding_mode \"{other}\" is not supported")),
    };
    let (xt, gt) = (ctx.ty(x).clone(), ctx.ty(grid).clone());
    let rank = spatial_rank(&xt, &gt, only_2d)?;
    if !gt.dtype.is_float() {
        return Err(format!("grid must be a float tensor, got {}", gt.dtype));
    }
    if xt.dtype == DType::Bool || (!xt.dtype.is_float() && mode != Mode::Nearest) {
        return Err(format!(
            "sampling {} data in mode \"{name}\" is not supported",
            xt.dtype
        ));
    }
    let sampler = Sampler {
        mode,
        padding,
        align_corners: flag(ctx, "align_corners")?,
        normalised: true,
        dtype: gt.dtype,
        rank,
    };
    Ok(vec![sampler.sample(ctx, x, grid)?])
}

/// The number of spatial axes `r` of an input `x` [N, C, d1..dr] (none empty) and a `grid`
/// [N, o1..or, r] that fit together.
fn spatial_rank(x: &TensorType, grid: &TensorType, only_2d: bool) -> Result<usize, String> {
    let r = x.rank().saturating_sub(2);
    let fit =
        r >= 1 && (r == 2 || !only_2d) && grid.rank() == r + 2 && grid.shape[0] == x.shape[0] && grid.shape[r + 1] == r;
    if !fit {
        let which = if only_2d { "2" } else { "r >= 1" };
        return Err(format!(
            "X {:?} and grid {:?} must be [N, C, d1..dr] and [N, o1..or, r] with {which} spatial axes",
            x.shape, grid.shape
        ));
    }
    if x.shape[2..].contains(&0) {
        return Err(format!("cannot sample the empty input {:?}", x.shape));
    }
    Ok(r)
}

impl Sampler {
    /// A sampler of grids of input positions: the extents' corner positions lie at their
    /// ends, as with `align_corners`.
    pub(super) fn at_positions(mode: Mode, padding: Padding, dtype: DType, rank: usize) -> Sampler {
        Sampler {
            mode,
            padding,
            align_corners: true,
            normalised: false,
            dtype,
            rank,
        }
    }

    fn scalar(&self, ctx: &mut Ctx, v: f64) -> ValueId {
        ctx.scalar(self.dtype, v)
    }

    /// A constant holding `values` along tap axis `axis` (after the grid's leading axes),
    /// every other dimension 1.
    fn along_tap_axis(&self, ctx: &mut Ctx, axis: usize, values: &[f64]) -> ValueId {
        let mut shape = vec![1; 1 + 2 * self.rank];
        shape[1 + self.rank + axis] = values.len();
        ctx.constant(Tensor::from_f64s(self.dtype, shape, values))
    }

    fn clip(&self, ctx: &mut Ctx, v: ValueId, lo: f64, hi: f64) -> Result<ValueId, String> {
        let (lo, hi) = (self.scalar(ctx, lo), self.scalar(ctx, hi));
        ctx.op(OpKind::Clip, &[v, lo, hi])
    }

    fn extent(&self, len: usize) -> Extent {
        let len = len as f64;
        match self.align_corners {
            true => Extent {
                len,
                lo: 0.0,
                hi: len - 1.0,
            },
            false => Extent {
                len,
                lo: -0.5,
                hi: len - 0.5,
            },
        }
    }

    /// Samples `x` [N, C, spatial...] at the grid's positions: [N, C, out...].
    pub(super) fn sample(&self, ctx: &mut Ctx, x: ValueId, grid: ValueId) -> Result<ValueId, String> {
        let (xt, gt) = (ctx.ty(x).clone(), ctx.ty(grid).clone());
        let r = self.rank;
        let channels = xt.shape[1];
        let rows = xt.shape[0] * xt.shape[2..].iter().product::<usize>();
        let (flat, weight) = self.flat_taps(ctx, grid, &xt.shape)?;
        let mut tap_shape = gt.shape[..=r].to_vec();
        tap_shape.push(self.mode.offsets().len().pow(r as u32));
        let flat = reshape(ctx, flat, &tap_shape)?;
        // the input as rows of channels, one per batch entry and spatial position
        let mut perm: Vec<usize> = (0..r + 2).collect();
        perm[1..].rotate_left(1);
        let pixels = ctx.transpose(x, &perm)?;
        let pixels = reshape(ctx, pixels, &[rows, channels])?;
        let gather = Attrs::new().with("axis", Attr::Int(0));
        let read = ctx.build1(OpKind::Gather, vec![pixels, flat], gather)?;
        let sampled = match weight {
            Some(w) => {
                tap_shape.push(1);
                let w = reshape(ctx, w, &tap_shape)?;
                let w = ctx.cast(w, xt.dtype)?;
                let weighted = ctx.op(OpKind::Mul, &[read, w])?;
                ctx.reduce(OpKind::ReduceSum, weighted, &[r + 1], false)?
            }
            None => {
                let mut shape = gt.shape[..=r].to_vec();
                shape.push(channels);
                reshape(ctx, read, &shape)?
            }
        };
        let mut perm: Vec<usize> = (0..r + 2).collect();
        perm[1..].rotate_right(1);
        ctx.transpose(sampled, &perm)
    }

    /// The taps of every grid position, [N, out..., taps along axis 1, ..., taps along axis
    /// r]: their flat indices into the input's spatial positions of all batch entries, and
    /// their weights (the product of the axes' weights) unless every weight is 1.
    fn flat_taps(&self, ctx: &mut Ctx, grid: ValueId, shape: &[usize]) -> Result<(ValueId, Option<ValueId>), String> {
        let (n, spatial) = (shape[0], &shape[2..]);
        let volume: usize = spatial.iter().product();
        let mut batch_shape = vec![1; 1 + 2 * self.rank];
        batch_shape[0] = n;
        let starts: Vec<i64> = (0..n).map(|b| (b * volume) as i64).collect();
        let mut flat = ctx.constant(Tensor::from_i64s(DType::I64, batch_shape, &starts));
        let mut weight = None;
        let mut stride = volume;
        for (axis, &len) in spatial.iter().enumerate() {
            stride /= len;
            // the grid lists the coordinates innermost axis first
            let component = self.component(ctx, grid, self.rank - 1 - axis)?;
            let (index, w) = self.axis_taps(ctx, component, axis, len)?;
            // integer arithmetic from here: flat indices can pass the integers floats hold
            let index = ctx.cast(index, DType::I64)?;
            let step = ctx.scalar(DType::I64, stride as f64);
            let offset = ctx.op(OpKind::Mul, &[index, step])?;
            flat = ctx.op(OpKind::Add, &[flat, offset])?;
            weight = match (weight, w) {
                (Some(a), Some(b)) => Some(ctx.op(OpKind::Mul, &[a, b])?),
                (a, b) => a.or(b),
            };
        }
        Ok((flat, weight))
    }

    /// Component `k` of the grid's position vectors, shaped [N, out..., 1 per tap axis].
    fn component(&self, ctx: &mut Ctx, grid: ValueId, k: usize) -> Result<ValueId, String> {
        let shape = ctx.ty(grid).shape.clone();
        let k = k as i64;
        let taken = DimSlice {
            start: k,
            end: k + 1,
            step: 1,
        };
        let c = slice_value(ctx, grid, &[(self.rank + 1, taken)])?;
        let mut target = shape[..=self.rank].to_vec();
        target.resize(1 + 2 * self.rank, 1);
        reshape(ctx, c, &target)
    }

    /// The taps along spatial axis `axis` (of extent `len`) of each coordinate `g`: their
    /// input indices (integers held as floats) and, unless every weight is 1, their weights,
    /// laid along the axis's tap axis.
    pub(super) fn axis_taps(
        &self,
        ctx: &mut Ctx,
        g: ValueId,
        axis: usize,
        len: usize,
    ) -> Result<(ValueId, Option<ValueId>), String> {
        let e = &self.extent(len);
        let mut x = match self.normalised {
            true => self.denormalise(ctx, g, e)?,
            false => g,
        };
        if self.mode == Mode::Nearest {
            x = self.round_half_even(ctx, x)?;
        }
        let x = self.pad_coordinate(ctx, x, e)?;
        let (first, fraction) = match self.mode {
            Mode::Nearest => (x, None),
            _ => {
                let floor = ctx.op(OpKind::Floor, &[x])?;
                (floor, Some(ctx.op(OpKind::Sub, &[x, floor])?))
            }
        };
        let offsets = self.along_tap_axis(ctx, axis, self.mode.offsets());
        let index = ctx.op(OpKind::Add, &[first, offsets])?;
        let weight = match fraction {
            Some(f) => Some(self.weights(ctx, f, axis)?),
            None => None,
        };
        self.pad_taps(ctx, index, weight, e)
    }

    /// The input coordinate of normalised coordinate `g` (in the reference's order of
    /// operations, so that nearest rounds the same ties).
    fn denormalise(&self, ctx: &mut Ctx, g: ValueId, e: &Extent) -> Result<ValueId, String> {
        let (one, two) = (self.scalar(ctx, 1.0), self.scalar(ctx, 2.0));
        let shifted = ctx.op(OpKind::Add, &[g, one])?;
        if self.align_corners {
            let last = self.scalar(ctx, e.len - 1.0);
            let half = ctx.op(OpKind::Div, &[shifted, two])?;
            ctx.op(OpKind::Mul, &[half, last])
        } else {
            let len = self.scalar(ctx, e.len);
            let scaled = ctx.op(OpKind::Mul, &[shifted, len])?;
            let edge = ctx.op(OpKind::Sub, &[scaled, one])?;
            ctx.op(OpKind::Div, &[edge, two])
        }
    }

    /// `x` rounded to the nearest integer, ties to even (as PyTorch's nearest mode).
    fn round_half_even(&self, ctx: &mut Ctx, x: ValueId) -> Result<ValueId, String> {
        let floor = ctx.op(OpKind::Floor, &[x])?;
        let fraction = ctx.op(OpKind::Sub, &[x, floor])?;
        let (zero, half, one, two) = (
            self.scalar(ctx, 0.0),
            self.scalar(ctx, 0.5),
            self.scalar(ctx, 1.0),
            self.scalar(ctx, 2.0),
        );
        // floor - 2 * floor(floor / 2): 1 when the floor is odd, so a tie rounds up
        let halved = ctx.op(OpKind::Div, &[floor, two])?;
        let halved = ctx.op(OpKind::Floor, &[halved])?;
        let evens = ctx.op(OpKind::Mul, &[halved, two])?;
        let odd = ctx.op(OpKind::Sub, &[floor, evens])?;
        let tie = ctx.op(OpKind::Equal, &[fraction, half])?;
        let tie_up = ctx.op(OpKind::Where, &[tie, odd, zero])?;
        let above = ctx.op(OpKind::Greater, &[fraction, half])?;
        let up = ctx.op(OpKind::Where, &[above, one, tie_up])?;
        ctx.op(OpKind::Add, &[floor, up])
    }

    /// Coordinate `v` moved inside the input for `border` (clamped to the corner positions)
    /// and `reflection` padding; left as it is for `zeros` and where it lies inside (a
    /// coordinate in the half-position margin outside the corner positions stays too, as in
    /// the reference: its taps are clamped later, which weights a cubic's differently).
    fn pad_coordinate(&self, ctx: &mut Ctx, v: ValueId, e: &Extent) -> Result<ValueId, String> {
        let moved = match self.padding {
            Padding::Zeros => return Ok(v),
            Padding::Border => self.clip(ctx, v, 0.0, e.len - 1.0)?,
            Padding::Reflection => self.reflect(ctx, v, e)?,
        };
        let clipped = self.clip(ctx, v, e.lo, e.hi)?;
        let inside = ctx.op(OpKind::Equal, &[clipped, v])?;
        ctx.op(OpKind::Where, &[inside, v, moved])
    }

    /// `v` reflected off the ends of the extent until it lies inside: a triangle wave of
    /// period twice the extent's span.
    fn reflect(&self, ctx: &mut Ctx, v: ValueId, e: &Extent) -> Result<ValueId, String> {
        let span = e.hi - e.lo;
        if span == 0.0 {
            // a single position with align_corners: everything reflects onto it
            return self.clip(ctx, v, e.lo, e.hi);
        }
        let (lo, span_v, period) = (
            self.scalar(ctx, e.lo),
            self.scalar(ctx, span),
            self.scalar(ctx, 2.0 * span),
        );
        let from_lo = ctx.op(OpKind::Sub, &[v, lo])?;
        let periods = ctx.op(OpKind::Div, &[from_lo, period])?;
        let periods = ctx.op(OpKind::Floor, &[periods])?;
        let whole = ctx.op(OpKind::Mul, &[periods, period])?;
        let phase = ctx.op(OpKind::Sub, &[from_lo, whole])?;
        let back = ctx.op(OpKind::Sub, &[period, phase])?;
        let returning = ctx.op(OpKind::Greater, &[phase, span_v])?;
        let folded = ctx.op(OpKind::Where, &[returning, back, phase])?;
        ctx.op(OpKind::Add, &[lo, folded])
    }

    /// The taps' weights: the mode's polynomials in fraction `f`, by Horner's rule.
    fn weights(&self, ctx: &mut Ctx, f: ValueId, axis: usize) -> Result<ValueId, String> {
        let polynomials = self.mode.weight_polynomials();
        let (highest, lower) = polynomials.split_last().expect("a filter has weights");
        let mut w = self.along_tap_axis(ctx, axis, highest);
        for coefficients in lower.iter().rev() {
            let c = self.along_tap_axis(ctx, axis, coefficients);
            let scaled = ctx.op(OpKind::Mul, &[w, f])?;
            w = ctx.op(OpKind::Add, &[scaled, c])?;
        }
        Ok(w)
    }

    /// Tap indices made readable: under `zeros` padding clamped, with the weight of taps off
    /// the input zeroed; clamped under `border`; reflected under `reflection`.
    fn pad_taps(
        &self,
        ctx: &mut Ctx,
        index: ValueId,
        weight: Option<ValueId>,
        e: &Extent,
    ) -> Result<(ValueId, Option<ValueId>), String> {
        match self.padding {
            Padding::Zeros => {
                let clamped = self.clip(ctx, index, 0.0, e.len - 1.0)?;
                let on_input = ctx.op(OpKind::Equal, &[clamped, index])?;
                let zero = self.scalar(ctx, 0.0);
                let kept = match weight {
                    Some(w) => w,
                    None => self.scalar(ctx, 1.0),
                };
                Ok((clamped, Some(ctx.op(OpKind::Where, &[on_input, kept, zero])?)))
            }
            Padding::Border => Ok((self.clip(ctx, index, 0.0, e.len - 1.0)?, weight)),
            Padding::Reflection => Ok((self.reflect(ctx, index, e)?, weight)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use super::super::resize::Filter;
    use super::*;

    #[test]
    fn the_base_grid_spans_minus_one_to_one() {
        assert_eq!(
            base_grid(&[1, 3], true),
            [-1.0, -1.0, 1.0, 0.0, -1.0, 1.0, 1.0, -1.0, 1.0]
        );
        let unaligned = base_grid(&[2], false);
        assert_eq!(unaligned, [-0.5, 1.0, 0.5, 1.0]);
    }

    #[test]
    fn cubic_weight_polynomials_expand_the_kernel() {
        let polynomials = Mode::Cubic.weight_polynomials();
        for f in [0.0, 0.25, 0.5, 0.9] {
            for (tap, offset) in Mode::Cubic.offsets().iter().enumerate() {
                let expanded: f64 = polynomials.iter().rev().fold(0.0, |w, c| w * f + c[tap]);
                let kernel = Filter::Cubic(-0.75).weight(offset - f);
                assert!((expanded - kernel).abs() < 1e-12, "f = {f}, tap {tap}");
            }
        }
    }

    #[test]
    fn affine_grid_is_a_matmul_with_a_constant_grid() {
        let text = ModelBuilder::new(20)
            .input("theta", DataType::Float, &[2, 2, 3])
            .init(i64_tensor("size", &[4], &[2, 3, 4, 5]))
            .node(node("AffineGrid", &["theta", "size"], &["grid"], vec![]))
            .output("grid")
            .text();
        assert!(text.contains("mx.matmul"), "{text}");
        assert!(text.contains("tensor<2x4x5x2xf32>"), "{text}");
    }

    #[test]
    fn grid_sample_gathers_weighted_taps() {
        let text = ModelBuilder::new(20)
            .input("x", DataType::Float, &[1, 2, 4, 4])
            .input("grid", DataType::Float, &[1, 3, 5, 2])
            .node(node("GridSample", &["x", "grid"], &["y"], vec![]))
            .output("y")
            .text();
        assert!(text.contains("{axis = 0} : tensor<1x3x5x4x2xf32>"), "{text}");
        assert!(
            text.contains("{axes = [3], keepdims = 0} : tensor<1x3x5x2xf32>"),
            "{text}"
        );
        assert!(text.contains("tensor<1x2x3x5xf32>"), "{text}");
    }

    #[test]
    fn unsupported_attribute_values_are_refused_by_name() {
        let model = |opset, attrs| {
            ModelBuilder::new(opset)
                .input("x", DataType::Float, &[1, 1, 4, 4])
                .input("grid", DataType::Float, &[1, 3, 5, 2])
                .node(node("GridSample", &["x", "grid"], &["y"], attrs))
                .output("y")
        };
        let err = model(20, vec![str_attr("padding_mode", "wrap")]).error();
        assert!(err.contains("padding_mode \"wrap\""), "{err}");
        let err = model(20, vec![str_attr("mode", "bilinear")]).error();
        assert!(err.contains("mode \"bilinear\""), "{err}");
        let err = model(16, vec![str_attr("mode", "linear")]).error();
        assert!(err.contains("mode \"linear\""), "{err}");
        let err = model(20, vec![int_attr("align_corners", 2)]).error();
        assert!(err.contains("align_corners"), "{err}");
    }
}
