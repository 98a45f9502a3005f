//! Convolutions: `Conv` and `ConvTranspose`, with `auto_pad`, `output_shape` and
//! `output_padding` resolved to explicit pads and output padding; `Col2Im` as a transposed
//! convolution that adds each column's entries into its block.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::axes::ints;
use super::padding::{
    check_extents, check_symbolic_padding, explicit_pads, kernel_shape, per_dim, sizes, split_total, window,
};
use super::shape::{reshape, reshape_dims};
use mxc_dialects::dim::Dim;
use mxc_dialects::{Attr, Attrs, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Conv", conv);
    r.add_all("ConvTranspose", conv_transpose);
    r.add_all("Col2Im", col_to_image);
}

/// The operands (X, W and the optional bias B) and the spatial extents of X and of the kernel.
struct Operands {
    values: Vec<ValueId>,
    input: Vec<usize>,
    kernel: Vec<usize>,
}

fn operands(ctx: &Ctx) -> Result<Operands, String> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let (xs, ws) = (&ctx.ty(x).shape, &ctx.ty(w).shape);
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(format!(
            "X must be N x C x spatial... and W of the same rank, got {xs:?} and {ws:?}"
        ));
    }
    let kernel = kernel_shape(&ctx.node, Some(&ws[2..]))?;
    check_symbolic_padding(&ctx.node, &ctx.ty(x).dims()[2..])?;
    let mut values = vec![x, w];
    values.extend(ctx.opt_input(2));
    Ok(Operands {
        values,
        input: xs[2..].to_vec(),
        kernel,
    })
}

fn conv(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let Operands { values, input, kernel } = operands(ctx)?;
    if input.len() == 1 {
        return conv_1d(ctx, values, &input, &kernel);
    }
    let attrs = conv_attrs(ctx, &input, &kernel)?;
    Ok(vec![ctx.build1(OpKind::Conv, values, attrs)?])
}

/// A 1-D convolution (`[N, C, L]`, an audio encoder's front, a TCN) as a 2-D one of height 1:
/// X and W get a unit dim before their last, the result loses it, so the 2-D kernels (channels
/// last, implicit GEMM, depthwise) compute it.
fn conv_1d(ctx: &mut Ctx, values: Vec<ValueId>, input: &[usize], kernel: &[usize]) -> Result<Vec<ValueId>, String> {
    let attrs = window(&ctx.node, input, kernel)?
        .with_unit_dim()
        .attrs()
        .with("group", Attr::Int(ctx.node.int("group", 1)?));
    let with_unit = |ctx: &mut Ctx, v: ValueId| {
        let dims = ctx.ty(v).dims();
        let unit = [&dims[..2], &[Dim::constant(1)], &dims[2..]].concat();
        reshape_dims(ctx, v, &unit)
    };
    let mut operands = vec![with_unit(ctx, values[0])?, with_unit(ctx, values[1])?];
    operands.extend(values.get(2));
    let y = ctx.build1(OpKind::Conv, operands, attrs)?;
    let dims = ctx.ty(y).dims();
    let without = [&dims[..2], &dims[3..]].concat();
    Ok(vec![reshape_dims(ctx, y, &without)?])
}

/// The attributes of an `mx.conv` of spatial extents `input` with a kernel of `kernel`, from
/// the node's window attributes and `group` (`Conv`, `ConvInteger`, `QLinearConv`).
pub fn conv_attrs(ctx: &Ctx, input: &[usize], kernel: &[usize]) -> Result<Attrs, String> {
    Ok(window(&ctx.node, input, kernel)?
        .attrs()
        .with("group", Attr::Int(ctx.node.int("group", 1)?)))
}

/// ConvTranspose. The full output of dim i has `s*(in-1) + output_padding + (k-1)*d + 1`
/// elements; pads take from it. With `output_shape` (or `SAME_*` auto padding, which asks for
/// `in * s`), the pads are what makes the output that long, split as `auto_pad` says; a
/// negative total becomes extra output padding at the end (where ONNX puts it, except for
/// `SAME_UPPER`, which would put it at the begin and is refused).
fn conv_transpose(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let Operands { values, input, kernel } = operands(ctx)?;
    let n = input.len();
    let node = &ctx.node;
    let strides = per_dim(node, "strides", n)?;
    let dilations = per_dim(node, "dilations", n)?;
    check_extents(&input, "spatial extents")?;
    check_extents(&kernel, "kernel extents")?;
    if input.contains(&0) || kernel.contains(&0) {
        return Err(format!(
            "spatial extents {input:?} and kernel {kernel:?} must not be empty"
        ));
    }
    let mut output_padding = match node.opt_ints("output_padding")? {
        None => vec![0; n],
        Some(p) if p.len() == n => sizes("output_padding", &p, 0)?,
        Some(p) => return Err(format!("`output_padding` {p:?} must have {n} entries")),
    };
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    if !matches!(auto_pad.as_str(), "NOTSET" | "VALID" | "SAME_UPPER" | "SAME_LOWER") {
        return Err(format!("unknown auto_pad \"{auto_pad}\""));
    }
    let same = auto_pad.starts_with("SAME_");
    let symbolic = ctx.ty(values[0]).is_symbolic();
    if symbolic && (same || node.opt_ints("output_shape")?.is_some()) {
        return Err(format!(
            "over symbolic sizes, the pads are explicit: {} sets them from the input's sizes",
            if same { "auto_pad SAME_*" } else { "output_shape" }
        ));
    }
    let output_shape = match node.opt_ints("output_shape")? {
        Some(o) if o.len() == n => Some(sizes("output_shape", &o, 0)?),
        Some(o) if o.len() == n + 2 => Some(sizes("output_shape", &o[2..], 0)?),
        Some(o) => return Err(format!("`output_shape` {o:?} must have {n} entries")),
        None if same => Some((0..n).map(|i| input[i] * strides[i]).collect()),
        None => None,
    };
    let pads = match output_shape {
        Some(out) => {
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let full = (strides[i] * (input[i].max(1) - 1)
                    + output_padding[i]
                    + dilations[i] * (kernel[i].max(1) - 1)
                    + 1) as i128;
                let total = full - out[i] as i128;
                if total < 0 && auto_pad == "SAME_UPPER" {
                    return Err(format!(
                        "output_shape {out:?} would need padding before the output, which is not supported"
                    ));
                } else if total < 0 {
                    output_padding[i] += (-total) as usize;
                } else {
                    (pads[i], pads[i + n]) = split_total(total as usize, auto_pad == "SAME_UPPER");
                }
            }
            pads
        }
        None => window(node, &input, &kernel)?.pads,
    };
    let group = node.int("group", 1)?;
    let unpadded = pads.iter().chain(&output_padding).all(|&p| p == 0);
    let tiles = kernel == strides && dilations.iter().all(|&d| d == 1);
    if n == 2 && group == 1 && unpadded && tiles && ctx.known(values[1]).is_some() {
        return Ok(vec![tiles_as_product(ctx, &values)?]);
    }
    let attrs = mxc_dialects::Attrs::new()
        .with("strides", ints(&strides))
        .with("dilations", ints(&dilations))
        .with("pads", ints(&pads))
        .with("output_padding", ints(&output_padding))
        .with("group", Attr::Int(group));
    Ok(vec![ctx.build1(OpKind::ConvTranspose, values, attrs)?])
}

/// A 2-D transposed convolution whose kernel is its stride, without padding, of constant
/// weights `w[C, M, kh, kw]`: each input pixel's channels times the weights give its own
/// `kh x kw` tile of the output, and the tiles do not overlap, so it is one matrix product
/// `[N*H*W, C] x [C, kh*kw*M]` (a decoder's or a text detector's upsampling, on the register-
/// tiled products) whose rows are then placed: `[N, H, W, kh, kw, M]` transposed to
/// `[N, M, H, kh, W, kw]`, which is the output `[N, M, H*kh, W*kw]`. Each output element is
/// the same sum over the channels as the convolution's.
fn tiles_as_product(ctx: &mut Ctx, values: &[ValueId]) -> Result<ValueId, String> {
    let (x, w) = (values[0], values[1]);
    let [batch, _, height, width] = <[Dim; 4]>::try_from(ctx.ty(x).dims()).map_err(|_| "X must have rank 4")?;
    let [channels, m, kh, kw] = <[usize; 4]>::try_from(ctx.ty(w).shape.clone()).map_err(|_| "W must have rank 4")?;
    let transpose = |ctx: &mut Ctx, v: ValueId, perm: &[i64]| {
        ctx.build1(
            OpKind::Transpose,
            vec![v],
            Attrs::new().with("perm", Attr::Ints(perm.to_vec())),
        )
    };
    let mul = |a: &Dim, b: &Dim| a.mul(b).map_err(|e| e.to_string());
    let constant = |n: usize| Dim::constant(n as u64);
    let pixels = mul(&mul(&batch, &height)?, &width)?;
    let image = transpose(ctx, x, &[0, 2, 3, 1])?;
    let rows = reshape_dims(ctx, image, &[pixels, constant(channels)])?;
    let weights = transpose(ctx, w, &[0, 2, 3, 1])?;
    let weights = reshape(ctx, weights, &[channels, kh * kw * m])?;
    let product = ctx.build1(OpKind::MatMul, vec![rows, weights], Attrs::new())?;
    let tiles = [
        batch.clone(),
        height.clone(),
        width.clone(),
        constant(kh),
        constant(kw),
        constant(m),
    ];
    let tiles = reshape_dims(ctx, product, &tiles)?;
    let placed = transpose(ctx, tiles, &[0, 5, 1, 3, 2, 4])?;
    let out = [
        batch,
        constant(m),
        mul(&height, &constant(kh))?,
        mul(&width, &constant(kw))?,
    ];
    let y = reshape_dims(ctx, placed, &out)?;
    match values.get(2) {
        Some(&bias) => {
            let bias = reshape(ctx, bias, &[m, 1, 1])?;
            ctx.build1(OpKind::Add, vec![y, bias], Attrs::new())
        }
        None => Ok(y),
    }
}

/// `Col2Im`: input `[N, C * K, L]` holds, for each of the `L` block positions (a grid over the
/// image, row-major), the `K` entries of a block of each channel; overlapping entries add up.
/// That is a transposed convolution of the grid `[N, C * K, blocks...]`, `C` groups, whose
/// one-hot weights send entry `k` of a block to its offset `k` in the kernel window.
fn col_to_image(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let image: Vec<usize> = sizes("image_shape", &ctx.const_input(1, "image_shape")?.to_i64_vec(), 1)?;
    let block: Vec<usize> = sizes("block_shape", &ctx.const_input(2, "block_shape")?.to_i64_vec(), 1)?;
    let n = image.len();
    if block.len() != n {
        return Err(format!(
            "block_shape {block:?} and image_shape {image:?} differ in rank"
        ));
    }
    let shape = ctx.ty(x).shape.clone();
    let per_block: usize = block.iter().product();
    if shape.len() != 3 || !shape[1].is_multiple_of(per_block) {
        return Err(format!("input must be [N, C * {per_block}, L], got shape {shape:?}"));
    }
    let channels = shape[1] / per_block;
    let node = &ctx.node;
    let (strides, dilations, pads) = (
        per_dim(node, "strides", n)?,
        per_dim(node, "dilations", n)?,
        explicit_pads(node, n)?,
    );
    let grid: Vec<usize> = (0..n)
        .map(|d| {
            let span = dilations[d] * (block[d] - 1) + 1;
            (image[d] + pads[d] + pads[d + n])
                .checked_sub(span)
                .map(|room| room / strides[d] + 1)
        })
        .collect::<Option<_>>()
        .ok_or(format!("blocks {block:?} do not fit image {image:?}"))?;
    if grid.iter().product::<usize>() != shape[2] {
        return Err(format!("{} blocks given, image {image:?} holds {grid:?}", shape[2]));
    }
    let mut grid_shape = shape[..2].to_vec();
    grid_shape.extend(&grid);
    let x = reshape(ctx, x, &grid_shape)?;
    let mut weight_shape = vec![shape[1], 1];
    weight_shape.extend(&block);
    let weights: Vec<f64> = (0..shape[1])
        .flat_map(|row| (0..per_block).map(move |k| f64::from(u8::from(k == row % per_block))))
        .collect();
    let w = ctx.constant(Tensor::from_f64s(ctx.ty(x).dtype, weight_shape, &weights));
    let attrs = Attrs::new()
        .with("dilations", ints(&dilations))
        .with("group", Attr::Int(channels as i64))
        .with("output_padding", ints(&vec![0; n]))
        .with("pads", ints(&pads))
        .with("strides", ints(&strides));
    Ok(vec![ctx.build1(OpKind::ConvTranspose, vec![x, w], attrs)?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    fn attrs_of(text: &str, op: &str) -> String {
        let line = text
            .lines()
            .find(|l| l.contains(op))
            .unwrap_or_else(|| panic!("{text}"));
        line.split_once('{').map_or("", |(_, rest)| rest).to_string()
    }

    #[test]
    fn conv_auto_pad_becomes_explicit_pads() {
        let conv = |auto_pad: &str| {
            let text = ModelBuilder::new(17)
                .input("x", DataType::Float, &[1, 1, 5, 6])
                .input("w", DataType::Float, &[2, 1, 3, 2])
                .node(node(
                    "Conv",
                    &["x", "w"],
                    &["y"],
                    vec![str_attr("auto_pad", auto_pad), ints_attr("strides", &[2, 2])],
                ))
                .output("y")
                .text();
            attrs_of(&text, "mx.conv")
        };
        assert_eq!(
            conv("SAME_UPPER"),
            "dilations = [1, 1], group = 1, pads = [1, 0, 1, 0], strides = [2, 2]} : tensor<1x2x3x3xf32>"
        );
        assert_eq!(
            conv("SAME_LOWER"),
            "dilations = [1, 1], group = 1, pads = [1, 0, 1, 0], strides = [2, 2]} : tensor<1x2x3x3xf32>"
        );
        assert_eq!(
            conv("VALID"),
            "dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [2, 2]} : tensor<1x2x2x3xf32>"
        );
    }

    #[test]
    fn a_1d_conv_is_a_2d_one_of_height_1_between_reshapes() {
        let text = ModelBuilder::new(17)
            .input("x", DataType::Float, &[1, 4, 9])
            .input("w", DataType::Float, &[6, 2, 3])
            .node(node(
                "Conv",
                &["x", "w"],
                &["y"],
                vec![
                    ints_attr("strides", &[2]),
                    ints_attr("pads", &[1, 0]),
                    ints_attr("dilations", &[1]),
                    int_attr("group", 2),
                ],
            ))
            .output("y")
            .text();
        assert_eq!(
            attrs_of(&text, "mx.conv"),
            "dilations = [1, 1], group = 2, pads = [0, 1, 0, 0], strides = [1, 2]} : tensor<1x6x1x4xf32>"
        );
        let reshapes: Vec<&str> = text.lines().filter(|l| l.contains("mx.reshape")).collect();
        assert_eq!(reshapes.len(), 3, "{text}");
        assert!(reshapes[0].ends_with("tensor<1x4x1x9xf32>"), "{text}");
        assert!(reshapes[1].ends_with("tensor<6x2x1x3xf32>"), "{text}");
        assert!(reshapes[2].ends_with("tensor<1x6x4xf32>"), "{text}");
    }

    #[test]
    fn conv_transpose_output_shape_sets_the_pads() {
        let convt = |attrs| {
            let text = ModelBuilder::new(17)
                .input("x", DataType::Float, &[1, 1, 3, 3])
                .input("w", DataType::Float, &[1, 2, 3, 3])
                .node(node("ConvTranspose", &["x", "w"], &["y"], attrs))
                .output("y")
                .text();
            attrs_of(&text, "mx.conv_transpose")
        };
        let out = convt(vec![ints_attr("strides", &[3, 2]), ints_attr("output_shape", &[10, 8])]);
        assert_eq!(out, "dilations = [1, 1], group = 1, output_padding = [1, 1], pads = [0, 0, 0, 0], strides = [3, 2]} : tensor<1x2x10x8xf32>");
        let out = convt(vec![ints_attr("strides", &[2, 2]), ints_attr("output_shape", &[6, 7])]);
        assert_eq!(out, "dilations = [1, 1], group = 1, output_padding = [0, 0], pads = [1, 0, 0, 0], strides = [2, 2]} : tensor<1x2x6x7xf32>");
        let out = convt(vec![ints_attr("strides", &[2, 2]), str_attr("auto_pad", "SAME_UPPER")]);
        assert_eq!(out, "dilations = [1, 1], group = 1, output_padding = [0, 0], pads = [0, 0, 1, 1], strides = [2, 2]} : tensor<1x2x6x6xf32>");
        let out = convt(vec![
            ints_attr("pads", &[1, 2, 1, 2]),
            ints_attr("output_padding", &[1, 1]),
            ints_attr("strides", &[3, 3]),
        ]);
        assert_eq!(out, "dilations = [1, 1], group = 1, output_padding = [1, 1], pads = [1, 2, 1, 2], strides = [3, 3]} : tensor<1x2x8x6xf32>");
    }

    #[test]
    fn conv_transpose_refuses_an_unknown_auto_pad_also_with_an_output_shape() {
        let err = ModelBuilder::new(17)
            .input("x", DataType::Float, &[1, 1, 3, 3])
            .input("w", DataType::Float, &[1, 2, 3, 3])
            .node(node(
                "ConvTranspose",
                &["x", "w"],
                &["y"],
                vec![ints_attr("output_shape", &[5, 5]), str_attr("auto_pad", "SAME")],
            ))
            .output("y")
            .error();
        assert!(err.ends_with("(ConvTranspose): unknown auto_pad \"SAME\""), "{err}");
    }
}
