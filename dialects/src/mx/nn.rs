//! Type rules of the neural-network ops: convolution (also channels last), transposed
//! convolution, pooling, normalisation and softmax.
//!
//! Normalised attributes: `strides`, `dilations` and `kernel` have one entry per spatial
//! dimension; `pads` has the begin pads of every spatial dimension, then the end pads.
//! `axis` is non-negative.

use super::{check_axis, same_dtype};
use crate::{Attrs, DType, TensorType};

struct Window {
    strides: Vec<usize>,
    pads: Vec<usize>,
    dilations: Vec<usize>,
}

fn window(attrs: &Attrs, spatial: usize) -> Result<Window, String> {
    let w = Window {
        strides: attrs.dims("strides")?,
        pads: attrs.dims("pads")?,
        dilations: attrs.dims("dilations")?,
    };
    if w.strides.len() != spatial || w.dilations.len() != spatial || w.pads.len() != 2 * spatial {
        return Err(format!(
            "strides, dilations and pads must have {spatial}, {spatial} and {} entries",
            2 * spatial
        ));
    }
    if w.strides.contains(&0) || w.dilations.contains(&0) {
        return Err("strides and dilations must be positive".into());
    }
    Ok(w)
}

fn check_float_image(x: &TensorType) -> Result<usize, String> {
    if !x.dtype.is_float() {
        return Err(format!("input must be a float tensor, got {}", x.dtype));
    }
    check_image(x)
}

/// A convolution's input: a float image, or an i32 one (the convolutions of quantised
/// models' integers, summed exactly: `integer.rules`).
fn check_conv_image(x: &TensorType) -> Result<usize, String> {
    if !x.dtype.is_float() && x.dtype != DType::I32 {
        return Err(format!("input must be a float or i32 tensor, got {}", x.dtype));
    }
    check_image(x)
}

fn check_image(x: &TensorType) -> Result<usize, String> {
    if x.rank() < 3 {
        return Err(format!("input must be N x C x spatial..., got shape {:?}", x.shape));
    }
    Ok(x.rank() - 2)
}

/// Output extent of a sliding window, or an error when the window does not fit.
fn out_extent(
    input: usize,
    kernel: usize,
    stride: usize,
    pads: (usize, usize),
    dilation: usize,
    ceil: bool,
) -> Result<usize, String> {
    let too_big = || format!("window (kernel {kernel}, dilation {dilation}, pads {pads:?}) is too large");
    let span = dilation
        .checked_mul(kernel.max(1) - 1)
        .and_then(|s| s.checked_add(1))
        .ok_or_else(too_big)?;
    let padded = input
        .checked_add(pads.0)
        .and_then(|p| p.checked_add(pads.1))
        .ok_or_else(too_big)?;
    if padded < span {
        return Err(format!(
            "window of extent {span} does not fit the padded input of extent {padded}"
        ));
    }
    let mut out = (padded - span) / stride + 1;
    if ceil && !(padded - span).is_multiple_of(stride) {
        out += 1;
        // the last window must start inside the input or its begin padding
        if (out - 1)
            .checked_mul(stride)
            .is_none_or(|start| start >= input + pads.0)
        {
            out -= 1;
        }
    }
    Ok(out)
}

pub fn conv(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (x, w) = (&ops[0], &ops[1]);
    let spatial = check_conv_image(x)?;
    same_dtype(x, w, "input and weights")?;
    let win = window(attrs, spatial)?;
    let group = attrs.int("group")?;
    if w.rank() != x.rank() {
        return Err(format!("weights must have rank {}, got shape {:?}", x.rank(), w.shape));
    }
    if group < 1 || x.shape[1] % group as usize != 0 || w.shape[0] % group as usize != 0 {
        return Err(format!(
            "group {group} must divide the input channels {} and output channels {}",
            x.shape[1], w.shape[0]
        ));
    }
    if w.shape[1] * group as usize != x.shape[1] {
        return Err(format!(
            "weights take {} channels per group, input has {} channels in {group} groups",
            w.shape[1], x.shape[1]
        ));
    }
    if let Some(b) = ops.get(2) {
        same_dtype(x, b, "input and bias")?;
        if b.shape != [w.shape[0]] {
            return Err(format!("bias must have shape [{}], got {:?}", w.shape[0], b.shape));
        }
    }
    let mut shape = vec![x.shape[0], w.shape[0]];
    for i in 0..spatial {
        let pads = (win.pads[i], win.pads[i + spatial]);
        shape.push(out_extent(
            x.shape[i + 2],
            w.shape[i + 2],
            win.strides[i],
            pads,
            win.dilations[i],
            false,
        )?);
    }
    Ok(x.with_shape(shape))
}

/// 2-D convolution with channels last: `x` is `[N, H, W, C]`, `w` is `[M, kh, kw, C/group]`,
/// the optional bias `[M]`, the result `[N, OH, OW, M]`; the attributes are `conv`'s. Typed as
/// `conv` of the operands in NCHW order, with the result's channels moved last.
pub fn conv_nhwc(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (x, w) = (&ops[0], &ops[1]);
    for (t, name, dims) in [(x, "input", "N x H x W x C"), (w, "weights", "M x kh x kw x C/group")] {
        if t.rank() != 4 {
            return Err(format!(
                "{name} must be {dims} (channels last is 2-D only), got shape {:?}",
                t.shape
            ));
        }
    }
    let nchw = |t: &TensorType| t.with_shape(vec![t.shape[0], t.shape[3], t.shape[1], t.shape[2]]);
    let mut operands = vec![nchw(x), nchw(w)];
    operands.extend(ops.get(2).cloned());
    let y = conv(&operands, attrs)?;
    Ok(y.with_shape(vec![y.shape[0], y.shape[2], y.shape[3], y.shape[1]]))
}

/// `conv_nhwc_packed`: `conv_nhwc` whose weights `[M, kh, kw, C/group]` come packed (`pack`
/// of the matrix `[kh * kw * C/group, M]`): `[ceil(M / panel), kh * kw * C/group, panel]`,
/// with `kernel = [kh, kw]` and `out_channels = M`.
pub fn conv_nhwc_packed(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (x, wp) = (&ops[0], &ops[1]);
    let kernel = attrs.dims("kernel")?;
    let m = attrs.int("out_channels")?;
    let group = attrs.int("group")?;
    if x.rank() != 4 || kernel.len() != 2 || wp.rank() != 3 {
        return Err(format!(
            "takes an N x H x W x C input, a 2-D kernel and packed weights, got shapes {:?}, {kernel:?} and {:?}",
            x.shape, wp.shape
        ));
    }
    if m < 1 || group < 1 || x.shape[3] % group as usize != 0 {
        return Err(format!(
            "out_channels {m} and group {group} must be positive, group dividing the channels"
        ));
    }
    let (m, per_group) = (m as usize, x.shape[3] / group as usize);
    let depth = kernel[0].checked_mul(kernel[1]).and_then(|k| k.checked_mul(per_group));
    // `g` depths side by side in a panel's row (bf16 pairs)
    let g = super::linalg::depth_pairing(wp.dtype);
    let panel = wp.shape[2] / g;
    if panel == 0
        || wp.shape[2] % g != 0
        || Some(wp.shape[1]) != depth.map(|d| d.div_ceil(g))
        || wp.shape[0] != m.div_ceil(panel)
    {
        return Err(format!(
            "packed weights {:?} do not hold {m} output channels of {kernel:?} kernels over {per_group} channels",
            wp.shape
        ));
    }
    let weights = wp.with_shape(vec![m, kernel[0], kernel[1], per_group]);
    let mut operands = vec![x.clone(), weights];
    operands.extend(ops.get(2).cloned());
    let mut conv_attrs = attrs.clone();
    conv_attrs.0.remove("kernel");
    conv_attrs.0.remove("out_channels");
    conv_nhwc(&operands, &conv_attrs)
}

/// `conv_nhwc_integer_packed(x, wp, column_sums, x_zero)`: the exact convolution of `(x -
/// x_zero)` (u8, channels last, one group) with i8 weights packed in groups of four depths
/// (`pack` of the `[kh * kw * C, M]` matrix: `[ceil(M / panel), kh * kw * C / 4, 4 * panel]`),
/// in i32; positions outside the input add nothing (the padding is `x_zero`). `column_sums
/// [M]` are the weights' sums per output channel and `x_zero` a scalar, both i32: a kernel may
/// pad with `x_zero` and subtract `x_zero * column_sums`. The channels are a multiple of four,
/// so that a group never straddles two window positions.
pub fn conv_nhwc_integer_packed(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (x, wp, sums, zero) = (&ops[0], &ops[1], &ops[2], &ops[3]);
    if x.dtype != DType::U8 || wp.dtype != DType::I8 || sums.dtype != DType::I32 || zero.dtype != DType::I32 {
        return Err(format!(
            "takes a u8 image, i8 panels and i32 column sums and zero point, got {}, {}, {} and {}",
            x.dtype, wp.dtype, sums.dtype, zero.dtype
        ));
    }
    let kernel = attrs.dims("kernel")?;
    let m = attrs.int("out_channels")?;
    if x.rank() != 4 || kernel.len() != 2 || wp.rank() != 3 || zero.rank() != 0 || m < 1 {
        return Err(format!(
            "takes an N x H x W x C image, a 2-D kernel, packed weights and a scalar zero point, got shapes {:?}, {kernel:?}, {:?} and {:?}",
            x.shape, wp.shape, zero.shape
        ));
    }
    let (m, channels) = (m as usize, x.shape[3]);
    // a multiple of four channels: groups of four depths over the window; else each kernel
    // row's depths padded to whole groups, its pixels consecutive in the image (dilation 1)
    let row_depth = kernel[1].checked_mul(channels).map(|d| d.div_ceil(4) * 4);
    let depth = row_depth.and_then(|d| d.checked_mul(kernel[0]));
    let dilations = attrs.dims("dilations")?;
    if (!channels.is_multiple_of(4) && dilations.get(1) != Some(&1))
        || Some(wp.shape[1] * 4) != depth
        || wp.shape[2] != 64
        || wp.shape[0] != m.div_ceil(16)
    {
        return Err(format!(
            "panels {:?} do not hold {kernel:?} windows of {channels} channels (a multiple of 4, or kernel rows of dilation 1 padded to one) for {m} outputs",
            wp.shape
        ));
    }
    if sums.shape != [m] {
        return Err(format!("column sums must have shape [{m}], got {:?}", sums.shape));
    }
    // the shape of the convolution of the unpacked weights
    let image = x.with_dtype(DType::F32);
    let weights = TensorType::new(DType::F32, vec![m, kernel[0], kernel[1], channels]);
    let mut conv_attrs = attrs.clone();
    conv_attrs.0.remove("kernel");
    conv_attrs.0.remove("out_channels");
    conv_attrs.set("group", crate::Attr::Int(1));
    Ok(conv_nhwc(&[image, weights], &conv_attrs)?.with_dtype(DType::I32))
}

/// The most window taps of `conv_nhwc_integer_depthwise`: its sums are at most 514 x 255 x
/// 128 < 2^24 in magnitude, so a kernel may sum in f32 exactly.
pub const DEPTHWISE_INTEGER_TAPS: usize = 514;

/// `conv_nhwc_integer_depthwise(x, wp, x_zero)`: the exact depthwise convolution (a group per
/// channel) of `(x - x_zero)` (u8, channels last; `x_zero` a u8 scalar) with i8 weights packed
/// a column per channel, `[ceil(C / 16), kh * kw, 16]` (`pack` of the `[kh * kw, C]` matrix),
/// in i32; positions outside the input add nothing (the padding is `x_zero`). At most
/// `DEPTHWISE_INTEGER_TAPS` taps in the window.
pub fn conv_nhwc_integer_depthwise(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (x, wp, zero) = (&ops[0], &ops[1], &ops[2]);
    if x.dtype != DType::U8 || wp.dtype != DType::I8 || zero.dtype != DType::U8 {
        return Err(format!(
            "takes a u8 image, i8 panels and a u8 zero point, got {}, {} and {}",
            x.dtype, wp.dtype, zero.dtype
        ));
    }
    let kernel = attrs.dims("kernel")?;
    if x.rank() != 4 || kernel.len() != 2 || wp.rank() != 3 || zero.rank() != 0 {
        return Err(format!(
            "takes an N x H x W x C image, a 2-D kernel, packed weights and a scalar zero point, got shapes {:?}, {kernel:?}, {:?} and {:?}",
            x.shape, wp.shape, zero.shape
        ));
    }
    let channels = x.shape[3];
    let taps = kernel[0]
        .checked_mul(kernel[1])
        .filter(|&t| t <= DEPTHWISE_INTEGER_TAPS);
    let Some(taps) = taps else {
        return Err(format!(
            "a window of {kernel:?} has more than {DEPTHWISE_INTEGER_TAPS} taps, whose sums f32 would not hold exactly"
        ));
    };
    if wp.shape != [channels.div_ceil(16), taps, 16] {
        return Err(format!(
            "panels {:?} do not hold {kernel:?} windows for {channels} channels ([{}, {taps}, 16])",
            wp.shape,
            channels.div_ceil(16)
        ));
    }
    let image = x.with_dtype(DType::F32);
    let weights = TensorType::new(DType::F32, vec![channels, kernel[0], kernel[1], 1]);
    let mut conv_attrs = attrs.clone();
    conv_attrs.0.remove("kernel");
    conv_attrs.set("group", crate::Attr::Int(channels as i64));
    Ok(conv_nhwc(&[image, weights], &conv_attrs)?.with_dtype(DType::I32))
}

/// Transposed convolution; `output_padding` has one entry per spatial dimension.
pub fn conv_transpose(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (x, w) = (&ops[0], &ops[1]);
    let spatial = check_float_image(x)?;
    same_dtype(x, w, "input and weights")?;
    let win = window(attrs, spatial)?;
    let group = attrs.int("group")?;
    let output_padding = attrs.dims("output_padding")?;
    if w.rank() != x.rank() || w.shape[0] != x.shape[1] {
        return Err(format!(
            "weights must be [C={}, M/group, k...], got {:?}",
            x.shape[1], w.shape
        ));
    }
    if group < 1 || x.shape[1] % group as usize != 0 || output_padding.len() != spatial {
        return Err(format!(
            "group {group} must divide the input channels and output_padding must have {spatial} entries"
        ));
    }
    let m = w.shape[1] * group as usize;
    if let Some(b) = ops.get(2) {
        same_dtype(x, b, "input and bias")?;
        if b.shape != [m] {
            return Err(format!("bias must have shape [{m}], got {:?}", b.shape));
        }
    }
    let mut shape = vec![x.shape[0], m];
    for (i, &extra) in output_padding.iter().enumerate() {
        if x.shape[i + 2] == 0 || w.shape[i + 2] == 0 {
            return Err(format!("spatial axis {i} of the input or the kernel is empty"));
        }
        let full = win.strides[i]
            .checked_mul(x.shape[i + 2] - 1)
            .zip(win.dilations[i].checked_mul(w.shape[i + 2] - 1))
            .and_then(|(a, b)| a.checked_add(b)?.checked_add(extra)?.checked_add(1))
            .ok_or_else(|| format!("the output extent of spatial axis {i} overflows"))?;
        let pad = win.pads[i].saturating_add(win.pads[i + spatial]);
        if full <= pad {
            return Err(format!("pads {pad} remove the whole output extent {full}"));
        }
        shape.push(full - pad);
    }
    Ok(x.with_shape(shape))
}

/// Max and average pooling over `kernel` with `ceil_mode` (0 or 1); `average_pool` also has
/// `count_include_pad` (0 or 1: whether padded positions count in the divisor).
pub fn pool(x: &TensorType, attrs: &Attrs, max: bool) -> Result<TensorType, String> {
    // a maximum compares 8-bit integers too (a quantised model's bytes, ONNX's MaxPool since
    // opset 12); an average is of floats
    let spatial = match max && matches!(x.dtype, DType::U8 | DType::I8) {
        true => check_image(x)?,
        false => check_float_image(x)?,
    };
    let win = window(attrs, spatial)?;
    let kernel = attrs.dims("kernel")?;
    if kernel.len() != spatial {
        return Err(format!("kernel must have {spatial} entries"));
    }
    let ceil = attrs.int("ceil_mode")? != 0;
    let mut shape = x.shape[..2].to_vec();
    for (i, &k) in kernel.iter().enumerate() {
        let pads = (win.pads[i], win.pads[i + spatial]);
        shape.push(out_extent(
            x.shape[i + 2],
            k,
            win.strides[i],
            pads,
            win.dilations[i],
            ceil,
        )?);
    }
    Ok(x.with_shape(shape))
}

/// `max_pool` and `average_pool` channels last (2-D): `[N, H, W, C]` in and out.
pub fn pool_nhwc(x: &TensorType, attrs: &Attrs, max: bool) -> Result<TensorType, String> {
    if x.rank() != 4 {
        return Err(format!(
            "input must be N x H x W x C (channels last is 2-D only), got shape {:?}",
            x.shape
        ));
    }
    let y = pool(
        &x.with_shape(vec![x.shape[0], x.shape[3], x.shape[1], x.shape[2]]),
        attrs,
        max,
    )?;
    Ok(y.with_shape(vec![y.shape[0], y.shape[2], y.shape[3], y.shape[1]]))
}

pub fn global_pool(x: &TensorType) -> Result<TensorType, String> {
    let spatial = check_float_image(x)?;
    let mut shape = x.shape[..2].to_vec();
    shape.extend(std::iter::repeat_n(1, spatial));
    Ok(x.with_shape(shape))
}

/// Inference-mode batch normalisation: `x, scale, bias, mean, var`, each parameter of shape [C].
pub fn batch_norm(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let x = &ops[0];
    attrs.float("epsilon")?;
    if !x.dtype.is_float() || x.rank() < 2 {
        return Err(format!("input must be a float tensor N x C x ..., got {x}"));
    }
    for (p, name) in ops[1..].iter().zip(["scale", "bias", "mean", "var"]) {
        same_dtype(x, p, name)?;
        if p.shape != [x.shape[1]] {
            return Err(format!("{name} must have shape [{}], got {:?}", x.shape[1], p.shape));
        }
    }
    Ok(x.clone())
}

/// Layer normalisation over the axes from `axis` on: results are Y, the mean and the inverse
/// standard deviation (both f32, with the normalised axes kept as 1s).
pub fn layer_norm(ops: &[TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
    let x = &ops[0];
    let axis = check_axis(attrs.int("axis")?, x.rank(), "axis")?;
    attrs.float("epsilon")?;
    if !x.dtype.is_float() {
        return Err(format!("input must be a float tensor, got {}", x.dtype));
    }
    for (p, name) in ops[1..].iter().zip(["scale", "bias"]) {
        same_dtype(x, p, name)?;
        super::broadcast_shapes(&x.shape[axis..], &p.shape)
            .ok()
            .filter(|s| s.as_slice() == &x.shape[axis..])
            .ok_or_else(|| {
                format!(
                    "{name} of shape {:?} does not broadcast to the normalised shape {:?}",
                    p.shape,
                    &x.shape[axis..]
                )
            })?;
    }
    let mut stat = x.shape[..axis].to_vec();
    stat.extend(std::iter::repeat_n(1, x.rank() - axis));
    Ok(vec![
        x.clone(),
        TensorType::new(DType::F32, stat.clone()),
        TensorType::new(DType::F32, stat),
    ])
}

pub fn softmax(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    check_axis(attrs.int("axis")?, x.rank(), "axis")?;
    if !x.dtype.is_float() {
        return Err(format!("input must be a float tensor, got {}", x.dtype));
    }
    Ok(x.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attr;

    fn f32s(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    fn conv_attrs(pads: i64, stride: i64, group: i64) -> Attrs {
        Attrs::new()
            .with("dilations", Attr::Ints(vec![1, 1]))
            .with("group", Attr::Int(group))
            .with("pads", Attr::Ints(vec![pads; 4]))
            .with("strides", Attr::Ints(vec![stride; 2]))
    }

    #[test]
    fn conv_nhwc_puts_channels_last_and_agrees_with_conv() {
        let a = conv_attrs(1, 2, 1);
        let y = conv_nhwc(&[f32s(&[2, 9, 7, 3]), f32s(&[16, 3, 3, 3]), f32s(&[16])], &a).unwrap();
        assert_eq!(y, f32s(&[2, 5, 4, 16]));
        let nchw = conv(&[f32s(&[2, 3, 9, 7]), f32s(&[16, 3, 3, 3]), f32s(&[16])], &a).unwrap();
        assert_eq!(nchw, f32s(&[2, 16, 5, 4]));
        // grouped: 8 input channels in 4 groups, 2 per group; 1x2 kernel
        let y = conv_nhwc(&[f32s(&[1, 6, 6, 8]), f32s(&[12, 1, 2, 2])], &conv_attrs(0, 1, 4)).unwrap();
        assert_eq!(y, f32s(&[1, 6, 5, 12]));
    }

    #[test]
    fn conv_nhwc_refuses_other_ranks_and_mismatched_operands() {
        let a = conv_attrs(0, 1, 1);
        let err = conv_nhwc(&[f32s(&[1, 8, 3]), f32s(&[4, 3, 3])], &a).unwrap_err();
        assert!(
            err.contains("input must be N x H x W x C") && err.contains("2-D only"),
            "{err}"
        );
        let err = conv_nhwc(&[f32s(&[1, 8, 8, 3]), f32s(&[4, 3, 3])], &a).unwrap_err();
        assert!(err.contains("weights must be M x kh x kw x C/group"), "{err}");
        let err = conv_nhwc(&[f32s(&[1, 8, 8, 3]), f32s(&[4, 3, 3, 2])], &a).unwrap_err();
        assert!(err.contains("channels per group"), "{err}");
        let err = conv_nhwc(&[f32s(&[1, 8, 8, 3]), f32s(&[4, 3, 3, 3]), f32s(&[3])], &a).unwrap_err();
        assert!(err.contains("bias must have shape [4]"), "{err}");
        let err = conv_nhwc(&[f32s(&[1, 2, 2, 3]), f32s(&[4, 3, 3, 3])], &a).unwrap_err();
        assert!(err.contains("does not fit"), "{err}");
        // i32 images are the integer convolutions of quantised models; other integers are refused
        let ints = |d: DType| {
            [
                TensorType::new(d, vec![1, 8, 8, 3]),
                TensorType::new(d, vec![4, 3, 3, 3]),
            ]
        };
        assert_eq!(conv_nhwc(&ints(DType::I32), &a).unwrap().shape, [1, 6, 6, 4]);
        assert!(conv_nhwc(&ints(DType::I64), &a).unwrap_err().contains("float or i32"));
    }

    #[test]
    fn an_integer_convolution_takes_bytes_panels_of_groups_of_four_and_gives_i32() {
        let attrs = Attrs::new()
            .with("dilations", Attr::Ints(vec![1, 1]))
            .with("kernel", Attr::Ints(vec![3, 3]))
            .with("out_channels", Attr::Int(20))
            .with("pads", Attr::Ints(vec![1, 1, 1, 1]))
            .with("strides", Attr::Ints(vec![2, 2]));
        let t = |d: DType, s: &[usize]| TensorType::new(d, s.to_vec());
        let ops = |channels: usize, x: DType| {
            [
                t(x, &[1, 8, 8, channels]),
                t(DType::I8, &[2, 9 * channels / 4, 64]),
                t(DType::I32, &[20]),
                t(DType::I32, &[]),
            ]
        };
        let y = conv_nhwc_integer_packed(&ops(8, DType::U8), &attrs).unwrap();
        assert_eq!((y.dtype, y.shape), (DType::I32, vec![1, 4, 4, 20]));
        let err = conv_nhwc_integer_packed(&ops(8, DType::I8), &attrs).unwrap_err();
        assert!(err.contains("takes a u8 image"), "{err}");
        // 6 channels: a group of four would straddle two window positions
        let mut six = ops(8, DType::U8);
        six[0] = t(DType::U8, &[1, 8, 8, 6]);
        six[1] = t(DType::I8, &[2, 14, 64]);
        let err = conv_nhwc_integer_packed(&six, &attrs).unwrap_err();
        assert!(err.contains("a multiple of 4"), "{err}");
    }

    #[test]
    fn an_integer_depthwise_convolution_takes_a_column_of_taps_per_channel_and_gives_i32() {
        let attrs = |kernel: i64| {
            Attrs::new()
                .with("dilations", Attr::Ints(vec![1, 1]))
                .with("kernel", Attr::Ints(vec![kernel, kernel]))
                .with("pads", Attr::Ints(vec![1, 1, 1, 1]))
                .with("strides", Attr::Ints(vec![2, 2]))
        };
        let t = |d: DType, s: &[usize]| TensorType::new(d, s.to_vec());
        let ops = |wp: &[usize]| [t(DType::U8, &[1, 8, 8, 20]), t(DType::I8, wp), t(DType::U8, &[])];
        let y = conv_nhwc_integer_depthwise(&ops(&[2, 9, 16]), &attrs(3)).unwrap();
        assert_eq!((y.dtype, y.shape), (DType::I32, vec![1, 4, 4, 20]));
        let err = conv_nhwc_integer_depthwise(&ops(&[1, 9, 16]), &attrs(3)).unwrap_err();
        assert!(err.contains("do not hold"), "{err}");
        // 23 x 23 = 529 taps: sums past what f32 holds exactly
        let err = conv_nhwc_integer_depthwise(&ops(&[2, 529, 16]), &attrs(23)).unwrap_err();
        assert!(err.contains("more than 514 taps"), "{err}");
        let mut signed = ops(&[2, 9, 16]);
        signed[0] = t(DType::I8, &[1, 8, 8, 20]);
        let err = conv_nhwc_integer_depthwise(&signed, &attrs(3)).unwrap_err();
        assert!(err.contains("takes a u8 image"), "{err}");
    }
}
