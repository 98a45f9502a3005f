//! `RoiAlign`: each region of interest, split into `output_height x output_width` bins, is
//! sampled at a regular grid of points in each bin, bilinearly (GridSample's taps,
//! `sample.rs`, at input positions clamped into the image; a point more than one position
//! outside reads zero), and a bin's points averaged (`avg`) or its largest weighted tap taken
//! (`max`, as the ONNX reference and onnxruntime define it). The rois are run-time values, so
//! the points are element-wise ops on them with constant fractions of a bin; the taps of all
//! points are one `gather` from the input's rows of channels (at flat indices that include
//! each roi's batch entry), weighted and reduced by one reduction. With `sampling_ratio` 0 a
//! roi's points per bin depend on its size, so the rois must be known at compile time; each
//! roi then has its own grid, filled up to the largest with repeats of its last point,
//! weightless in `avg`.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::check_constant;
use super::build::float_compute_type;
use super::layout::{slice_value, DimSlice};
use super::padding::sizes;
use super::sample::{Mode, Padding, Sampler};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "RoiAlign", 10, LATEST, roi_align);
}

/// A RoiAlign node's settings and the shapes of its operands.
struct Rois {
    /// `reduce_sum` for `avg` (the points' weights divide by their count), `reduce_max`.
    reduction: OpKind,
    /// The bins along the height and the width.
    bins: [usize; 2],
    spatial_scale: f64,
    /// Whether roi corners are moved half a position back (`half_pixel`); without it, rois
    /// are at least one position high and wide.
    half_pixel: bool,
    /// The points per bin along the height and the width: one entry shared by every roi, or
    /// one per roi.
    grids: Vec<[usize; 2]>,
    /// The input's extents, [N, C, H, W].
    input: [usize; 4],
    num_rois: usize,
    /// The type the coordinate arithmetic runs in.
    dtype: DType,
}

fn roi_align(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, rois, batch) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let xt = ctx.ty(x).clone();
    let input: [usize; 4] = xt
        .shape
        .as_slice()
        .try_into()
        .map_err(|_| format!("X must be [N, C, H, W], got {:?}", xt.shape))?;
    if !xt.dtype.is_float() || ctx.ty(rois).dtype != xt.dtype {
        return Err(format!(
            "X and rois must be float tensors of one type, got {} and {}",
            xt.dtype,
            ctx.ty(rois).dtype
        ));
    }
    let num_rois = ctx.ty(batch).shape.first().copied().unwrap_or(0);
    if ctx.ty(rois).shape != [num_rois, 4] || ctx.ty(batch).rank() != 1 || !ctx.ty(batch).dtype.is_int() {
        return Err(format!(
            "rois must be [num_rois, 4] and batch_indices [num_rois] integers, got {} and {}",
            ctx.ty(rois),
            ctx.ty(batch)
        ));
    }
    if input[0] * input[2] * input[3] == 0 {
        return Err(format!("cannot sample the empty input {input:?}"));
    }
    let node = &ctx.node;
    let reduction = match node.string("mode", "avg")?.as_str() {
        "avg" => OpKind::ReduceSum,
        "max" => OpKind::ReduceMax,
        other => return Err(format!("mode \"{other}\" is not supported")),
    };
    let bins = [
        sizes("output_height", &[node.int("output_height", 1)?], 1)?[0],
        sizes("output_width", &[node.int("output_width", 1)?], 1)?[0],
    ];
    let ratio = sizes("sampling_ratio", &[node.int("sampling_ratio", 0)?], 0)?[0];
    let spatial_scale = node.float("spatial_scale", 1.0)? as f64;
    // opset 10 has no such attribute and does what `output_half_pixel` does
    let half_pixel = ctx.opset >= 16
        && match node.string("coordinate_transformation_mode", "half_pixel")?.as_str() {
            "half_pixel" => true,
            "output_half_pixel" => false,
            other => return Err(format!("coordinate_transformation_mode \"{other}\" is not supported")),
        };
    let mut settings = Rois {
        reduction,
        bins,
        spatial_scale,
        half_pixel,
        grids: vec![[ratio, ratio]],
        input,
        num_rois,
        dtype: float_compute_type(xt.dtype),
    };
    if ratio == 0 {
        let known = ctx
            .known(rois)
            .ok_or("sampling_ratio 0 (points per bin from each roi's size) needs the rois known at compile time")?;
        settings.grids = settings.adaptive_grids(&known.to_f64_vec());
    }
    Ok(vec![settings.align(ctx, x, rois, batch)?])
}

impl Rois {
    /// The points per bin of each roi (corners `[x1, y1, x2, y2]`), for `sampling_ratio` 0:
    /// as many as the bin is positions long (rounded up; none for an empty roi).
    fn adaptive_grids(&self, rois: &[f64]) -> Vec<[usize; 2]> {
        let points = |corners: &[f64], axis: usize| {
            let extent = (corners[3 - axis] - corners[1 - axis]) * self.spatial_scale;
            let extent = if self.half_pixel { extent } else { extent.max(1.0) };
            (extent / self.bins[axis] as f64).ceil() as usize
        };
        rois.chunks(4)
            .map(|corners| [0, 1].map(|axis| points(corners, axis)))
            .collect()
    }

    /// The pooled rois, [num_rois, C, output_height, output_width].
    fn align(&self, ctx: &mut Ctx, x: ValueId, rois: ValueId, batch: ValueId) -> Result<ValueId, String> {
        let [_, channels, height, width] = self.input;
        let dtype = ctx.ty(x).dtype;
        let sampler = Sampler::at_positions(Mode::Linear, Padding::Border, self.dtype, 2);
        let rois = ctx.cast(rois, self.dtype)?;
        let rois = reshape(ctx, rois, &[self.num_rois, 4, 1, 1, 1])?;
        // the taps of every point, [num_rois, points along H, points along W, 2, 2]
        let (row, row_weight) = self.axis_taps(ctx, &sampler, rois, 0, height)?;
        let (column, column_weight) = self.axis_taps(ctx, &sampler, rois, 1, width)?;
        let batch = ctx.cast(batch, DType::I64)?;
        let batch = reshape(ctx, batch, &[self.num_rois, 1, 1, 1, 1])?;
        let image = ctx.scalar(DType::I64, (height * width) as f64);
        let start = ctx.op(OpKind::Mul, &[batch, image])?;
        let row_length = ctx.scalar(DType::I64, width as f64);
        let row_start = ctx.op(OpKind::Mul, &[row, row_length])?;
        let flat = ctx.op(OpKind::Add, &[start, row_start])?;
        let flat = ctx.op(OpKind::Add, &[flat, column])?;
        let weight = ctx.op(OpKind::Mul, &[row_weight, column_weight])?;

        // the input as rows of channels, one per batch entry and position
        let pixels = ctx.transpose(x, &[0, 2, 3, 1])?;
        let pixels = reshape(ctx, pixels, &[self.input[0] * height * width, channels])?;
        let gather = Attrs::new().with("axis", Attr::Int(0));
        let read = ctx.build1(OpKind::Gather, vec![pixels, flat], gather)?;
        let mut shape = ctx.ty(weight).shape.clone();
        shape.push(1);
        let weight = reshape(ctx, weight, &shape)?;
        let weight = ctx.cast(weight, dtype)?;
        let weighted = ctx.op(OpKind::Mul, &[read, weight])?;
        let [bins_h, bins_w] = self.bins;
        let [points_h, points_w] = self.largest_grid();
        let by_bin = [self.num_rois, bins_h, points_h, bins_w, points_w, 4, channels];
        let weighted = reshape(ctx, weighted, &by_bin)?;
        let pooled = ctx.reduce(self.reduction, weighted, &[2, 4, 5], false)?;
        ctx.transpose(pooled, &[0, 3, 1, 2])
    }

    fn largest_grid(&self) -> [usize; 2] {
        // at least one point, weightless where no roi has any
        [0, 1].map(|axis| self.grids.iter().map(|g| g[axis]).max().unwrap_or(0).max(1))
    }

    /// The taps along axis `axis` (of extent `len`) of every point, laid along the axis's
    /// point and tap axes of `[num_rois, points along H, points along W, taps along H, taps
    /// along W]`: their i64 indices and weights, zero for points more than one position
    /// outside the input and scaled by the points' weights in their bins.
    fn axis_taps(
        &self,
        ctx: &mut Ctx,
        sampler: &Sampler,
        rois: ValueId,
        axis: usize,
        len: usize,
    ) -> Result<(ValueId, ValueId), String> {
        let corner = |ctx: &mut Ctx, k: i64| {
            let column = DimSlice {
                start: k,
                end: k + 1,
                step: 1,
            };
            let c = slice_value(ctx, rois, &[(1, column)])?;
            let scale = ctx.scalar(self.dtype, self.spatial_scale);
            ctx.op(OpKind::Mul, &[c, scale])
        };
        let (mut start, mut end) = (corner(ctx, 1 - axis as i64)?, corner(ctx, 3 - axis as i64)?);
        if self.half_pixel {
            // the reference's order of operations: the half position comes off both corners
            let half = ctx.scalar(self.dtype, 0.5);
            start = ctx.op(OpKind::Sub, &[start, half])?;
            end = ctx.op(OpKind::Sub, &[end, half])?;
        }
        let mut extent = ctx.op(OpKind::Sub, &[end, start])?;
        if !self.half_pixel {
            let one = ctx.scalar(self.dtype, 1.0);
            extent = ctx.op(OpKind::Max, &[extent, one])?;
        }
        let bins = ctx.scalar(self.dtype, self.bins[axis] as f64);
        let bin = ctx.op(OpKind::Div, &[extent, bins])?;
        let (fractions, point_weights) = self.points(ctx, axis)?;
        let along = ctx.op(OpKind::Mul, &[bin, fractions])?;
        let position = ctx.op(OpKind::Add, &[start, along])?;

        let (index, weight) = sampler.axis_taps(ctx, position, axis, len)?;
        let weight = weight.expect("linear taps have weights");
        let (below, above) = (ctx.scalar(self.dtype, -1.0), ctx.scalar(self.dtype, len as f64));
        let clipped = ctx.op(OpKind::Clip, &[position, below, above])?;
        let inside = ctx.op(OpKind::Equal, &[clipped, position])?;
        let zero = ctx.scalar(self.dtype, 0.0);
        let mut weight = ctx.op(OpKind::Where, &[inside, weight, zero])?;
        if let Some(w) = point_weights {
            weight = ctx.op(OpKind::Mul, &[weight, w])?;
        }
        Ok((ctx.cast(index, DType::I64)?, weight))
    }

    /// The points along axis `axis` of every bin, as constants laid along the axis's point
    /// axis (after one entry per grid): their positions in bins from the roi's start, and,
    /// unless all are 1, their weights: 1 / points in `avg` (0 for the repeats filling a
    /// grid up to the largest) and 1 in `max` (0 where a roi has no points).
    fn points(&self, ctx: &mut Ctx, axis: usize) -> Result<(ValueId, Option<ValueId>), String> {
        let (bins, largest) = (self.bins[axis], self.largest_grid()[axis]);
        check_constant(&TensorType::new(self.dtype, vec![self.grids.len(), bins, largest]))?;
        let mut positions = Vec::with_capacity(self.grids.len() * bins * largest);
        let mut weights = Vec::with_capacity(positions.capacity());
        for grid in &self.grids {
            let points = grid[axis];
            for bin in 0..bins {
                for p in 0..largest {
                    let repeated = p.min(points.saturating_sub(1));
                    positions.push(bin as f64 + (repeated as f64 + 0.5) / points.max(1) as f64);
                    weights.push(match self.reduction {
                        OpKind::ReduceSum if p < points => 1.0 / points as f64,
                        OpKind::ReduceMax if points > 0 => 1.0,
                        _ => 0.0,
                    });
                }
            }
        }
        let mut shape = vec![self.grids.len(), 1, 1, 1, 1];
        shape[1 + axis] = bins * largest;
        let positions = ctx.constant(Tensor::from_f64s(self.dtype, shape.clone(), &positions));
        let weights = match weights.iter().all(|&w| w == 1.0) {
            true => None,
            false => Some(ctx.constant(Tensor::from_f64s(self.dtype, shape, &weights))),
        };
        Ok((positions, weights))
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;
    use super::*;

    fn model(opset: i64, attrs: Vec<AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(opset)
            .input("x", DataType::Float, &[2, 3, 10, 12])
            .input("rois", DataType::Float, &[4, 4])
            .input("batch", DataType::Int64, &[4])
            .node(node("RoiAlign", &["x", "rois", "batch"], &["y"], attrs))
            .output("y")
    }

    #[test]
    fn the_taps_of_every_point_are_one_gather_and_one_reduction() {
        let attrs = vec![
            int_attr("sampling_ratio", 2),
            int_attr("output_height", 3),
            int_attr("output_width", 4),
        ];
        let text = model(22, attrs).text();
        assert!(text.contains("{axis = 0} : tensor<4x6x8x2x2x3xf32>"), "{text}");
        assert!(
            text.contains("{axes = [2, 4, 5], keepdims = 0} : tensor<4x3x4x3xf32>"),
            "{text}"
        );
        assert!(text.contains("tensor<4x3x3x4xf32>"), "{text}");
    }

    #[test]
    fn adaptive_grids_follow_the_roi_sizes() {
        let mut rois = Rois {
            reduction: OpKind::ReduceSum,
            bins: [5, 2],
            spatial_scale: 1.0,
            half_pixel: false,
            grids: vec![],
            input: [1, 1, 10, 10],
            num_rois: 3,
            dtype: DType::F32,
        };
        let corners = [0.0, 0.0, 9.0, 9.0, 0.0, 5.0, 4.0, 9.0, 8.0, 8.0, 3.0, 3.0];
        // an inverted roi is one position high and wide without half_pixel, empty with it
        assert_eq!(rois.adaptive_grids(&corners), [[2, 5], [1, 2], [1, 1]]);
        rois.half_pixel = true;
        assert_eq!(rois.adaptive_grids(&corners), [[2, 5], [1, 2], [0, 0]]);
    }

    #[test]
    fn adaptive_sampling_needs_the_rois_at_compile_time() {
        let err = model(16, vec![]).error();
        assert!(err.contains("sampling_ratio 0"), "{err}");
        let text = ModelBuilder::new(16)
            .input("x", DataType::Float, &[1, 1, 10, 10])
            .init(f32_tensor("rois", &[2, 4], &[0.0, 0.0, 9.0, 9.0, 0.0, 5.0, 4.0, 9.0]))
            .input("batch", DataType::Int64, &[2])
            .node(node("RoiAlign", &["x", "rois", "batch"], &["y"], vec![]))
            .output("y")
            .text();
        // the first roi's grid, 9 x 9 points, is the largest
        assert!(text.contains("{axis = 0} : tensor<2x9x9x2x2x1xf32>"), "{text}");
    }

    #[test]
    fn unsupported_attribute_values_are_refused_by_name() {
        let ratio = || int_attr("sampling_ratio", 1);
        let err = model(22, vec![ratio(), str_attr("mode", "min")]).error();
        assert!(err.contains("mode \"min\""), "{err}");
        let err = model(
            22,
            vec![ratio(), str_attr("coordinate_transformation_mode", "asymmetric")],
        )
        .error();
        assert!(err.contains("coordinate_transformation_mode \"asymmetric\""), "{err}");
        let err = model(22, vec![ratio(), int_attr("output_width", 0)]).error();
        assert!(err.contains("`output_width`"), "{err}");
        let err = model(22, vec![int_attr("sampling_ratio", -1)]).error();
        assert!(err.contains("`sampling_ratio`"), "{err}");
        // opset 10 has no coordinate_transformation_mode
        let err = model(
            10,
            vec![ratio(), str_attr("coordinate_transformation_mode", "half_pixel")],
        )
        .error();
        assert!(err.contains("`coordinate_transformation_mode`"), "{err}");
    }
}
