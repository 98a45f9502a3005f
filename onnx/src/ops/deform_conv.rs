//! `DeformConv`: a convolution whose kernel taps are moved by run-time offsets and scaled by
//! an optional run-time mask. Each tap of each output position samples its channels at the
//! moved position, bilinearly with zeros outside the input: GridSample's taps (`sample.rs`)
//! at input positions, one `gather` for all of them, with the input seen as `N * offset_group`
//! images of the offset group's channels. The samples are the convolution's im2col columns,
//! `[N, group, C / group * kernel, outputs]`, which meet the weights in one batched `matmul`.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::{check_constant, check_size};
use super::build::float_compute_type;
use super::layout::{slice_value, DimSlice};
use super::padding::{check_extents, explicit_pads, kernel_shape, per_dim, sizes};
use super::sample::{Mode, Padding, Sampler};
use super::shape::reshape;
use mxc_dialects::{strides_of, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "DeformConv", 19, LATEST, deform_conv);
}

/// The sliding window of a DeformConv node: kernel and output extents, and where the first
/// tap of output position `o` lies along axis `a` before its offset:
/// `o * strides[a] - pads[a]`, each further tap `dilations[a]` on.
struct Window {
    kernel: Vec<usize>,
    output: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads: Vec<usize>,
}

impl Window {
    fn new(ctx: &Ctx, input: &[usize], weights: &[usize]) -> Result<Window, String> {
        let r = input.len();
        let kernel = kernel_shape(&ctx.node, Some(weights))?;
        check_extents(input, "spatial extents")?;
        check_extents(&kernel, "kernel extents")?;
        if input.contains(&0) || kernel.contains(&0) {
            return Err(format!(
                "spatial extents {input:?} and kernel {kernel:?} must not be empty"
            ));
        }
        let strides = per_dim(&ctx.node, "strides", r)?;
        let dilations = per_dim(&ctx.node, "dilations", r)?;
        let pads = explicit_pads(&ctx.node, r)?;
        let mut output = Vec::with_capacity(r);
        for a in 0..r {
            let span = dilations[a] * (kernel[a] - 1) + 1;
            let padded = input[a] + pads[a] + pads[a + r];
            if padded < span {
                return Err(format!(
                    "the dilated kernel {kernel:?} does not fit the padded input {input:?}"
                ));
            }
            output.push((padded - span) / strides[a] + 1);
        }
        Ok(Window {
            kernel,
            output,
            strides,
            dilations,
            pads,
        })
    }

    /// The number of kernel taps.
    fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// The number of output positions.
    fn outputs(&self) -> usize {
        self.output.iter().product()
    }

    /// The unmoved positions of every tap at every output position, `[taps, r, outputs]`
    /// (kernel taps and output positions row-major).
    fn positions(&self) -> Vec<f64> {
        let r = self.kernel.len();
        let (taps, outputs) = (self.taps(), self.outputs());
        let (tap_strides, output_strides) = (strides_of(&self.kernel), strides_of(&self.output));
        let mut out = Vec::with_capacity(taps * r * outputs);
        for t in 0..taps {
            for a in 0..r {
                let k = t / tap_strides[a] % self.kernel[a];
                for p in 0..outputs {
                    let o = p / output_strides[a] % self.output[a];
                    out.push((o * self.strides[a] + k * self.dilations[a]) as f64 - self.pads[a] as f64);
                }
            }
        }
        out
    }
}

fn deform_conv(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, w, offset) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let (bias, mask) = (ctx.opt_input(3), ctx.opt_input(4));
    let xt = ctx.ty(x).clone();
    let ws = ctx.ty(w).shape.clone();
    if !xt.dtype.is_float() {
        return Err(format!("X must be a float tensor, got {}", xt.dtype));
    }
    if [w, offset]
        .into_iter()
        .chain(bias)
        .chain(mask)
        .any(|v| ctx.ty(v).dtype != xt.dtype)
    {
        return Err(format!(
            "W, offset, B and mask must be of X's element type {}",
            xt.dtype
        ));
    }
    if xt.rank() < 3 || ws.len() != xt.rank() {
        return Err(format!(
            "X must be N x C x spatial... and W of the same rank, got {:?} and {ws:?}",
            xt.shape
        ));
    }
    let r = xt.rank() - 2;
    let (n, c, oc) = (xt.shape[0], xt.shape[1], ws[0]);
    let window = Window::new(ctx, &xt.shape[2..], &ws[2..])?;
    let group = sizes("group", &[ctx.node.int("group", 1)?], 1)?[0];
    let offset_group = sizes("offset_group", &[ctx.node.int("offset_group", 1)?], 1)?[0];
    if ws[1].checked_mul(group) != Some(c) || oc % group != 0 {
        return Err(format!("W {ws:?} does not fit {c} input channels in {group} groups"));
    }
    if c % offset_group != 0 {
        return Err(format!(
            "{c} input channels do not split into {offset_group} offset groups"
        ));
    }
    let (taps, outputs) = (window.taps(), window.outputs());
    // so that the channel counts below cannot overflow
    check_size(&[offset_group, taps, r, outputs])?;
    let expect = |ctx: &Ctx, v: ValueId, name: &str, channels: usize| {
        let mut shape = vec![n, channels];
        shape.extend(&window.output);
        match ctx.ty(v).shape == shape {
            true => Ok(()),
            false => Err(format!("{name} must be {shape:?}, got {:?}", ctx.ty(v).shape)),
        }
    };
    expect(ctx, offset, "offset", offset_group * taps * r)?;
    if let Some(m) = mask {
        expect(ctx, m, "mask", offset_group * taps)?;
    }
    if let Some(b) = bias {
        if ctx.ty(b).shape != [oc] {
            return Err(format!("B must be [{oc}], got {:?}", ctx.ty(b).shape));
        }
    }

    let columns = sample_columns(ctx, x, offset, mask, &window, offset_group)?;
    let columns = reshape(ctx, columns, &[n, group, c / group * taps, outputs])?;
    let weights = reshape(ctx, w, &[group, oc / group, c / group * taps])?;
    let y = ctx.op(OpKind::MatMul, &[weights, columns])?;
    let mut shape = vec![n, oc];
    shape.extend(&window.output);
    let y = reshape(ctx, y, &shape)?;
    match bias {
        Some(b) => {
            let mut per_channel = vec![oc];
            per_channel.resize(r + 1, 1);
            let b = reshape(ctx, b, &per_channel)?;
            Ok(vec![ctx.op(OpKind::Add, &[y, b])?])
        }
        None => Ok(vec![y]),
    }
}

/// The input sampled at the moved positions of every tap, times the mask:
/// `[N * offset_group, C / offset_group, kernel * outputs]`.
fn sample_columns(
    ctx: &mut Ctx,
    x: ValueId,
    offset: ValueId,
    mask: Option<ValueId>,
    window: &Window,
    offset_group: usize,
) -> Result<ValueId, String> {
    let xt = ctx.ty(x).clone();
    let r = window.kernel.len();
    let (taps, outputs) = (window.taps(), window.outputs());
    // one image per batch entry and offset group
    let images = xt.shape[0] * offset_group;
    let channels = xt.shape[1] / offset_group;
    let dtype = float_compute_type(xt.dtype);
    let offset = ctx.cast(offset, dtype)?;
    let offset = reshape(ctx, offset, &[images, taps, r, outputs])?;
    check_constant(&TensorType::new(dtype, vec![taps, r, outputs]))?;
    let unmoved = Tensor::from_f64s(dtype, vec![1, taps, r, outputs], &window.positions());
    let unmoved = ctx.constant(unmoved);
    let positions = ctx.op(OpKind::Add, &[offset, unmoved])?;
    let positions = ctx.transpose(positions, &[0, 1, 3, 2])?;
    // the sampler's grid lists a position's coordinates innermost axis first
    let reversed = DimSlice {
        start: r as i64 - 1,
        end: -1,
        step: -1,
    };
    let positions = slice_value(ctx, positions, &[(3, reversed)])?;
    let mut grid_shape = vec![images, taps * outputs];
    grid_shape.resize(r + 1, 1);
    grid_shape.push(r);
    let grid = reshape(ctx, positions, &grid_shape)?;

    let mut image_shape = vec![images, channels];
    image_shape.extend(&xt.shape[2..]);
    let x = reshape(ctx, x, &image_shape)?;
    let sampler = Sampler::at_positions(Mode::Linear, Padding::Zeros, dtype, r);
    let samples = sampler.sample(ctx, x, grid)?;
    let columns = reshape(ctx, samples, &[images, channels, taps * outputs])?;
    match mask {
        Some(m) => {
            let m = reshape(ctx, m, &[images, 1, taps * outputs])?;
            ctx.op(OpKind::Mul, &[columns, m])
        }
        None => Ok(columns),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;
    use super::*;

    fn model(x: &[i64], w: &[i64], offset: &[i64], attrs: Vec<AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(22)
            .input("x", DataType::Float, x)
            .input("w", DataType::Float, w)
            .input("offset", DataType::Float, offset)
            .node(node("DeformConv", &["x", "w", "offset"], &["y"], attrs))
            .output("y")
    }

    #[test]
    fn unmoved_positions_follow_the_window() {
        let window = Window {
            kernel: vec![2],
            output: vec![3],
            strides: vec![2],
            dilations: vec![3],
            pads: vec![1, 0],
        };
        assert_eq!(window.positions(), [-1.0, 1.0, 3.0, 2.0, 4.0, 6.0]);
        let window = Window {
            kernel: vec![1, 2],
            output: vec![2, 1],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: vec![0, 0, 0, 0],
        };
        // tap, then axis, then output position
        assert_eq!(window.positions(), [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn samples_become_columns_of_one_batched_matmul() {
        let text = ModelBuilder::new(22)
            .input("x", DataType::Float, &[1, 4, 5, 5])
            .input("w", DataType::Float, &[6, 2, 3, 3])
            .input("offset", DataType::Float, &[1, 36, 3, 3])
            .input("b", DataType::Float, &[6])
            .input("mask", DataType::Float, &[1, 18, 3, 3])
            .node(node(
                "DeformConv",
                &["x", "w", "offset", "b", "mask"],
                &["y"],
                vec![int_attr("group", 2), int_attr("offset_group", 2)],
            ))
            .output("y")
            .text();
        // each of the 2 * 81 taps' 4 corners reads 2 channels of an offset group's image
        assert!(text.contains("{axis = 0} : tensor<2x81x1x4x2xf32>"), "{text}");
        assert!(
            text.contains("mx.matmul") && text.contains("tensor<1x2x3x9xf32>"),
            "{text}"
        );
        assert!(text.contains("tensor<1x6x3x3xf32>"), "{text}");
    }

    #[test]
    fn one_and_three_spatial_axes_are_supported() {
        let text = model(&[1, 2, 9], &[3, 2, 3], &[1, 3, 7], vec![]).text();
        assert!(text.contains("tensor<1x3x7xf32>"), "{text}");
        let text = model(&[1, 1, 4, 4, 4], &[1, 1, 2, 2, 2], &[1, 24, 3, 3, 3], vec![]).text();
        assert!(text.contains("tensor<1x1x3x3x3xf32>"), "{text}");
    }

    #[test]
    fn inconsistent_shapes_and_attributes_are_refused_by_name() {
        let (x, w) = ([1, 4, 5, 5], [2, 4, 2, 2]);
        let err = model(&x, &w, &[1, 8, 3, 3], vec![]).error();
        assert!(err.contains("offset must be [1, 8, 4, 4]"), "{err}");
        let err = model(&x, &w, &[1, 8, 4, 4], vec![int_attr("offset_group", 3)]).error();
        assert!(err.contains("3 offset groups"), "{err}");
        let err = model(&x, &w, &[1, 8, 4, 4], vec![int_attr("offset_group", 0)]).error();
        assert!(err.contains("`offset_group`"), "{err}");
        let err = model(&x, &w, &[1, 8, 4, 4], vec![int_attr("group", 3)]).error();
        assert!(err.contains("in 3 groups"), "{err}");
        let err = model(&x, &w, &[1, 8, 4, 4], vec![ints_attr("kernel_shape", &[3, 3])]).error();
        assert!(err.contains("`kernel_shape`"), "{err}");
        let err = model(&x, &w, &[1, 8, 4, 4], vec![ints_attr("strides", &[1])]).error();
        assert!(err.contains("`strides`"), "{err}");
        let err = model(&x, &w, &[1, 8, 4, 4], vec![str_attr("auto_pad", "SAME_UPPER")]).error();
        assert!(err.contains("`auto_pad`"), "{err}");
        let err = model(&x, &[2, 4, 7, 7], &[1, 98, 1, 1], vec![]).error();
        assert!(err.contains("does not fit"), "{err}");
    }
}
