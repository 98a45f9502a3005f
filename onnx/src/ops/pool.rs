//! Pooling: `MaxPool` (also of 8- and 16-bit integers, through f32; with its Indices output,
//! from the windows gathered whole and the first maximum of each), `AveragePool` (explicit
//! pads, `auto_pad`, `ceil_mode`, dilations, `count_include_pad`), `GlobalAveragePool`, and `GlobalMaxPool` as a `reduce_max` over the
//! spatial dims; `LpPool` and `GlobalLpPool` as the p-th root of a sum of `|x|^p` (an average
//! pool times the window size, or a `reduce_sum`); `MaxUnpool` as a scatter into zeros.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::tensor::{check_constant, check_size};
use super::argmax::first_marked;
use super::axes::ints;
use super::padding::{check_symbolic_padding, kernel_shape, window};
use super::shape::reshape;
use mxc_dialects::{mx, strides_of, Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("MaxPool", max_pool);
    r.add_all("AveragePool", average_pool);
    r.add_all("GlobalAveragePool", global_average_pool);
    r.add_all("GlobalMaxPool", global_max_pool);
    r.add_all("LpPool", lp_pool);
    r.add_all("GlobalLpPool", global_lp_pool);
    r.add_all("MaxUnpool", max_unpool);
}

/// The input and the attributes every pool has: `kernel`, the window, `ceil_mode`.
fn pool_attrs(ctx: &Ctx) -> Result<(ValueId, Attrs), String> {
    let x = ctx.input(0)?;
    let shape = &ctx.ty(x).shape;
    if shape.len() < 3 {
        return Err(format!("X must be N x C x spatial..., got shape {shape:?}"));
    }
    let kernel = kernel_shape(&ctx.node, None)?;
    if kernel.len() != shape.len() - 2 {
        return Err(format!(
            "`kernel_shape` {kernel:?} must have {} entries",
            shape.len() - 2
        ));
    }
    check_symbolic_padding(&ctx.node, &ctx.ty(x).dims()[2..])?;
    let attrs = window(&ctx.node, &shape[2..], &kernel)?
        .attrs()
        .with("kernel", ints(&kernel))
        .with("ceil_mode", Attr::Int(ctx.node.int("ceil_mode", 0)?));
    Ok((x, attrs))
}

fn max_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let column_major = match ctx.node.int("storage_order", 0)? {
        0 => false,
        1 => true,
        other => {
            return Err(format!(
                "storage_order {other} is not supported (0 row major, 1 column major)"
            ))
        }
    };
    let (x, attrs) = pool_attrs(ctx)?;
    // Small integers are pooled as f32, which holds every one of them exactly.
    let dtype = ctx.ty(x).dtype;
    let pooled = if matches!(dtype, DType::I8 | DType::U8 | DType::I16 | DType::U16) {
        ctx.cast(x, DType::F32)?
    } else {
        x
    };
    if !ctx.wants_output(1) {
        let y = ctx.build1(OpKind::MaxPool, vec![pooled], attrs)?;
        return Ok(vec![ctx.cast(y, dtype)?]);
    }
    if ctx.ty(x).is_symbolic() {
        return Err("the Indices output over symbolic sizes is not supported yet".into());
    }
    let (y, indices) = max_pool_with_indices(ctx, pooled, &attrs, column_major)?;
    Ok(vec![ctx.cast(y, dtype)?, indices])
}

/// `MaxPool`'s two outputs from the windows gathered whole: `[N*C, windows, cells]`, padding
/// cells set to -inf. Y is their maximum; Indices the position, in the flattened input, of
/// the first cell (in row-major order of the window) that is not below it and is not padding
/// (a window holding NaN gives its first cell inside the input).
fn max_pool_with_indices(
    ctx: &mut Ctx,
    x: ValueId,
    attrs: &Attrs,
    column_major: bool,
) -> Result<(ValueId, ValueId), String> {
    let ty = ctx.ty(x).clone();
    let out = mx::infer(OpKind::MaxPool, std::slice::from_ref(&ty), attrs)?
        .remove(0)
        .shape;
    let rows = ty.shape[0] * ty.shape[1];
    let spatial = &ty.shape[2..];
    let cells = WindowCells::new(spatial, &out[2..], attrs, column_major)?;
    let (windows, size) = (cells.windows, cells.size);
    check_size(&[rows, windows, size])?;
    let table =
        |ctx: &mut Ctx, dtype, values: &[i64]| ctx.constant(Tensor::from_i64s(dtype, vec![windows, size], values));
    let read = table(ctx, DType::I64, &cells.read);
    let inside = table(ctx, DType::Bool, &cells.inside);
    let position = table(ctx, DType::I64, &cells.position);

    let count: usize = spatial.iter().product();
    let flat = reshape(ctx, x, &[rows, count])?;
    let gathered = ctx.build1(
        OpKind::Gather,
        vec![flat, read],
        Attrs::new().with("axis", Attr::Int(1)),
    )?;
    let lowest = ctx.scalar(ty.dtype, f64::NEG_INFINITY);
    let values = ctx.op(OpKind::Where, &[inside, gathered, lowest])?;
    let top = ctx.reduce(OpKind::ReduceMax, values, &[2], true)?;
    let below = ctx.op(OpKind::Less, &[values, top])?;
    let reached = ctx.op(OpKind::Not, &[below])?;
    let marked = ctx.op(OpKind::Where, &[inside, reached, inside])?;
    let ramp = ctx.ramp(size, 2, 3, DType::I64)?;
    let first = first_marked(ctx, marked, ramp, size, 2)?;
    let hit = ctx.op(OpKind::Equal, &[ramp, first])?;
    let none = ctx.scalar(DType::I64, -1.0);
    let picked = ctx.op(OpKind::Where, &[hit, position, none])?;
    let within = ctx.reduce(OpKind::ReduceMax, picked, &[2], false)?;
    // each image and channel starts its own stretch of the flattened input
    let starts: Vec<i64> = (0..rows).map(|r| (r * count) as i64).collect();
    let starts = ctx.constant(Tensor::from_i64s(DType::I64, vec![rows, 1], &starts));
    let index = ctx.op(OpKind::Add, &[within, starts])?;
    Ok((reshape(ctx, top, &out)?, reshape(ctx, index, &out)?))
}

/// The cells of every pooling window over one image channel, as `[windows, size]` tables
/// (windows and cells both in row-major order): where each cell is read from in the
/// row-major flattened spatial dims (0 for padding), whether it lies inside the input, and
/// the position it reports as an index (row or column major; -1 for padding).
struct WindowCells {
    windows: usize,
    size: usize,
    read: Vec<i64>,
    inside: Vec<i64>,
    position: Vec<i64>,
}

impl WindowCells {
    fn new(input: &[usize], out: &[usize], attrs: &Attrs, column_major: bool) -> Result<WindowCells, String> {
        let (kernel, strides) = (attrs.dims("kernel")?, attrs.dims("strides")?);
        let (dilations, pads) = (attrs.dims("dilations")?, attrs.dims("pads")?);
        let row_strides = strides_of(input);
        let reported_strides = if column_major {
            let reversed: Vec<usize> = input.iter().rev().copied().collect();
            strides_of(&reversed).into_iter().rev().collect()
        } else {
            row_strides.clone()
        };
        // the tables, with the window and cell coordinates unflattened
        check_constant(&TensorType::new(DType::I64, [out, &kernel].concat()))?;
        let windows: usize = out.iter().product();
        let size: usize = kernel.iter().product();
        let flat = |at: &[usize], strides: &[usize]| at.iter().zip(strides).map(|(i, s)| (i * s) as i64).sum();
        let mut cells = WindowCells {
            windows,
            size,
            read: Vec::with_capacity(windows * size),
            inside: Vec::with_capacity(windows * size),
            position: Vec::with_capacity(windows * size),
        };
        for w in 0..windows {
            let corner = unravel(w, out);
            for c in 0..size {
                let offset = unravel(c, &kernel);
                // the cell's coordinates in the input, None where it falls in the padding
                let at: Option<Vec<usize>> = (0..input.len())
                    .map(|d| {
                        (corner[d] * strides[d] + offset[d] * dilations[d])
                            .checked_sub(pads[d])
                            .filter(|&i| i < input[d])
                    })
                    .collect();
                match at {
                    Some(at) => {
                        cells.read.push(flat(&at, &row_strides));
                        cells.inside.push(1);
                        cells.position.push(flat(&at, &reported_strides));
                    }
                    None => {
                        cells.read.push(0);
                        cells.inside.push(0);
                        cells.position.push(-1);
                    }
                }
            }
        }
        Ok(cells)
    }
}

/// The coordinates of row-major position `i` in a tensor of `extents`.
fn unravel(mut i: usize, extents: &[usize]) -> Vec<usize> {
    let mut at = vec![0; extents.len()];
    for (a, &e) in at.iter_mut().zip(extents).rev() {
        *a = i % e;
        i /= e;
    }
    at
}

fn average_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, attrs) = pool_attrs(ctx)?;
    let attrs = attrs.with("count_include_pad", Attr::Int(ctx.node.int("count_include_pad", 0)?));
    Ok(vec![ctx.build1(OpKind::AveragePool, vec![x], attrs)?])
}

fn global_average_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    Ok(vec![ctx.build1(OpKind::GlobalAveragePool, vec![x], Attrs::new())?])
}

fn global_max_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).rank() as i64;
    let attrs = Attrs::new()
        .with("axes", Attr::Ints((2..rank).collect()))
        .with("keepdims", Attr::Int(1));
    Ok(vec![ctx.build1(OpKind::ReduceMax, vec![x], attrs)?])
}

/// The `p` of `LpPool` and `GlobalLpPool` (a float before opset 2, an int from it), and
/// `|x|^p`.
fn lp_power(ctx: &mut Ctx, x: ValueId) -> Result<(f64, ValueId), String> {
    let p = if ctx.opset < 2 {
        ctx.node.float("p", 2.0)? as f64
    } else {
        ctx.node.int("p", 2)? as f64
    };
    if p < 1.0 {
        return Err(format!("p {p} must be at least 1"));
    }
    let magnitude = ctx.op(OpKind::Abs, &[x])?;
    let dtype = ctx.ty(x).dtype;
    let powered = match p {
        1.0 => magnitude,
        2.0 => ctx.op(OpKind::Mul, &[x, x])?,
        _ => {
            let exponent = ctx.scalar(dtype, p);
            ctx.op(OpKind::Pow, &[magnitude, exponent])?
        }
    };
    Ok((p, powered))
}

/// `sum^(1/p)`.
fn lp_root(ctx: &mut Ctx, sum: ValueId, p: f64) -> Result<ValueId, String> {
    match p {
        1.0 => Ok(sum),
        2.0 => ctx.op(OpKind::Sqrt, &[sum]),
        _ => {
            let exponent = ctx.scalar(ctx.ty(sum).dtype, 1.0 / p);
            ctx.op(OpKind::Pow, &[sum, exponent])
        }
    }
}

/// `(sum of |x|^p over the window)^(1/p)`: the sum is an average pool that counts the pads
/// (which add 0) times the window's size.
fn lp_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, attrs) = pool_attrs(ctx)?;
    if attrs.int("ceil_mode")? != 0 {
        return Err("ceil_mode 1 is not supported (a partial window would be averaged over its own size)".into());
    }
    let window: i64 = attrs.ints("kernel")?.iter().product();
    let (p, powered) = lp_power(ctx, x)?;
    let attrs = attrs.with("count_include_pad", Attr::Int(1));
    let mean = ctx.build1(OpKind::AveragePool, vec![powered], attrs)?;
    let size = ctx.scalar(ctx.ty(x).dtype, window as f64);
    let sum = ctx.op(OpKind::Mul, &[mean, size])?;
    Ok(vec![lp_root(ctx, sum, p)?])
}

fn global_lp_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).rank();
    let (p, powered) = lp_power(ctx, x)?;
    let over: Vec<usize> = (2..rank).collect();
    let sum = ctx.reduce(OpKind::ReduceSum, powered, &over, true)?;
    Ok(vec![lp_root(ctx, sum, p)?])
}

/// Zeros of the shape before a pool with these attributes, with `X` scattered to the flat
/// positions `I` names there; an `output_shape` larger than that shape adds zeros at the end
/// of each spatial axis (the positions keep their coordinates).
fn max_unpool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, positions) = (ctx.input(0)?, ctx.input(1)?);
    let shape = ctx.ty(x).shape.clone();
    if shape.len() < 3 {
        return Err(format!("X must be N x C x spatial..., got shape {shape:?}"));
    }
    let n = shape.len() - 2;
    let kernel = kernel_shape(&ctx.node, None)?;
    let strides = super::padding::per_dim(&ctx.node, "strides", n)?;
    let pads = super::padding::explicit_pads(&ctx.node, n)?;
    if kernel.len() != n {
        return Err(format!("`kernel_shape` {kernel:?} must have {n} entries"));
    }
    let mut unpooled = shape[..2].to_vec();
    for d in 0..n {
        let full = (shape[d + 2].saturating_sub(1).checked_mul(strides[d]))
            .and_then(|v| v.checked_add(kernel[d]))
            .ok_or_else(|| format!("the unpooled extent of spatial dim {d} overflows"))?;
        let pad = pads[d].checked_add(pads[d + n]).ok_or("the pads overflow")?;
        unpooled.push(full.checked_sub(pad).ok_or("the pads exceed the unpooled extent")?);
    }
    let dtype = ctx.ty(x).dtype;
    let zeros = ctx.filled(TensorType::new(dtype, unpooled.clone()), 0.0)?;
    let mut y = super::index::scatter_flat(ctx, zeros, positions, x, "none")?;
    if let Some(t) = ctx.opt_const_input(2, "output_shape")? {
        let wanted = super::padding::sizes("output_shape", &t.to_i64_vec(), 0)?;
        let fits = wanted.len() == unpooled.len() && wanted[..2] == unpooled[..2];
        if !fits || wanted.iter().zip(&unpooled).any(|(w, u)| w < u) {
            return Err(format!(
                "output_shape {wanted:?} does not hold the unpooled shape {unpooled:?}"
            ));
        }
        let zero = ctx.scalar(dtype, 0.0);
        for d in 2..wanted.len() {
            let extra = (wanted[d] - unpooled[d]) as i64;
            if extra > 0 {
                y = super::pad::constant_pad(ctx, y, zero, d, 0, extra)?;
            }
        }
    }
    Ok(vec![y])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    #[test]
    fn pools_carry_normalised_attributes() {
        let text = ModelBuilder::new(19)
            .input("x", DataType::Float, &[1, 1, 5, 5])
            .node(node(
                "AveragePool",
                &["x"],
                &["y"],
                vec![
                    ints_attr("kernel_shape", &[2, 2]),
                    ints_attr("strides", &[2, 2]),
                    int_attr("ceil_mode", 1),
                    int_attr("count_include_pad", 1),
                ],
            ))
            .output("y")
            .text();
        assert!(
            text.contains("{ceil_mode = 1, count_include_pad = 1, dilations = [1, 1], kernel = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]} : tensor<1x1x3x3xf32>"),
            "{text}"
        );
    }

    #[test]
    fn bytes_are_max_pooled_as_floats() {
        let text = ModelBuilder::new(12)
            .input("x", DataType::Uint8, &[1, 1, 4, 4])
            .node(node(
                "MaxPool",
                &["x"],
                &["y"],
                vec![ints_attr("kernel_shape", &[2, 2])],
            ))
            .output("y")
            .text();
        assert!(
            text.contains("mx.cast %arg0 {to = f32}") && text.contains("{to = u8} : tensor<1x1x3x3xu8>"),
            "{text}"
        );
    }

    /// Y and Indices of a MaxPool of `x` (f32, of `shape`) with `attrs`.
    fn max_pool_with_indices(shape: &[usize], x: &[f32], attrs: Vec<AttributeProto>) -> (Vec<f64>, Vec<i64>) {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let g = ModelBuilder::new(22)
            .input("x", DataType::Float, &dims)
            .node(node("MaxPool", &["x"], &["y", "i"], attrs))
            .output("y")
            .output("i")
            .import()
            .unwrap();
        let out = run(&g, &[Tensor::from_f32s(shape.to_vec(), x)]).unwrap();
        (out[0].to_f64_vec(), out[1].to_i64_vec())
    }

    // The expected values below are onnxruntime's (and the ONNX reference's).

    #[test]
    fn indices_take_the_first_maximum_and_never_padding() {
        let inf = f32::NEG_INFINITY;
        let (y, i) = max_pool_with_indices(
            &[1, 2, 5],
            &[inf, inf, 2., 2., 1., 5., 5., 5., 5., 5.],
            vec![
                ints_attr("kernel_shape", &[2]),
                ints_attr("pads", &[1, 1]),
                ints_attr("strides", &[2]),
            ],
        );
        assert_eq!(y, [f64::NEG_INFINITY, 2., 2., 5., 5., 5.]);
        assert_eq!(i, [0, 2, 3, 5, 6, 8]);
    }

    /// Two images, the second the negation of the first.
    fn image_and_negation(rows: &[[f32; 5]; 3]) -> Vec<f32> {
        let first = rows.iter().flatten().copied();
        first.clone().chain(first.map(|v| -v)).collect()
    }

    #[test]
    fn indices_in_column_major_order_with_ceil_mode() {
        let x = image_and_negation(&[[1., 4., 4., 0., 6.], [2., 4., 3., 3., 6.], [7., 1., 7., 0., 1.]]);
        let (y, i) = max_pool_with_indices(
            &[2, 1, 3, 5],
            &x,
            vec![
                ints_attr("kernel_shape", &[2, 2]),
                ints_attr("strides", &[1, 2]),
                int_attr("ceil_mode", 1),
                int_attr("storage_order", 1),
            ],
        );
        assert_eq!(y, [4., 4., 6., 7., 7., 6., -1., 0., -6., -1., 0., -1.]);
        assert_eq!(i, [3, 6, 12, 2, 8, 13, 15, 24, 27, 20, 26, 29]);
    }

    #[test]
    fn indices_with_dilations_and_pads() {
        let x = image_and_negation(&[[1., 4., 4., 0., 6.], [2., 4., 3., 3., 6.], [7., 1., 7., 0., 1.]]);
        let (_, i) = max_pool_with_indices(
            &[2, 1, 3, 5],
            &x,
            vec![
                ints_attr("kernel_shape", &[2, 2]),
                ints_attr("strides", &[2, 1]),
                ints_attr("dilations", &[2, 1]),
                ints_attr("pads", &[1, 0, 0, 1]),
                int_attr("ceil_mode", 1),
            ],
        );
        assert_eq!(
            i,
            [6, 6, 7, 9, 9, 6, 6, 7, 9, 9, 20, 22, 22, 23, 24, 20, 22, 22, 23, 24]
        );
    }

    #[test]
    fn storage_order_must_be_zero_or_one() {
        let err = ModelBuilder::new(12)
            .input("x", DataType::Float, &[1, 1, 4, 4])
            .node(node(
                "MaxPool",
                &["x"],
                &["y", "i"],
                vec![ints_attr("kernel_shape", &[2, 2]), int_attr("storage_order", 2)],
            ))
            .output("y")
            .output("i")
            .error();
        assert!(
            err.ends_with("storage_order 2 is not supported (0 row major, 1 column major)"),
            "{err}"
        );
    }
}
