//! Pooling: `MaxPool` (also of 8- and 16-bit integers, through f32), `AveragePool` (explicit
//! pads, `auto_pad`, `ceil_mode`, dilations, `count_include_pad`), `GlobalAveragePool`, and `GlobalMaxPool` as a `reduce_max` over the
//! spatial dims; `LpPool` and `GlobalLpPool` as the p-th root of a sum of `|x|^p` (an average
//! pool times the window size, or a `reduce_sum`); `MaxUnpool` as a scatter into zeros.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::axes::ints;
use super::padding::{kernel_shape, window};
use mxc_dialects::{Attr, Attrs, DType, OpKind, ValueId};

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
    let attrs = window(&ctx.node, &shape[2..], &kernel)?
        .attrs()
        .with("kernel", ints(&kernel))
        .with("ceil_mode", Attr::Int(ctx.node.int("ceil_mode", 0)?));
    Ok((x, attrs))
}

fn max_pool(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.wants_output(1) {
        return Err("the Indices output is not supported".into());
    }
    // the layout of the Indices output, refused above
    ctx.node.without_effect(&["storage_order"]);
    let (x, attrs) = pool_attrs(ctx)?;
    // Small integers are pooled as f32, which holds every one of them exactly.
    let dtype = ctx.ty(x).dtype;
    if matches!(dtype, DType::I8 | DType::U8 | DType::I16 | DType::U16) {
        let xf = cast(ctx, x, DType::F32)?;
        let y = ctx.build1(OpKind::MaxPool, vec![xf], attrs)?;
        return Ok(vec![cast(ctx, y, dtype)?]);
    }
    Ok(vec![ctx.build1(OpKind::MaxPool, vec![x], attrs)?])
}

fn cast(ctx: &mut Ctx, x: ValueId, to: DType) -> Result<ValueId, String> {
    ctx.build1(OpKind::Cast, vec![x], Attrs::new().with("to", Attr::DType(to)))
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
        let full = (shape[d + 2] - 1) * strides[d] + kernel[d];
        unpooled.push(
            full.checked_sub(pads[d] + pads[d + n])
                .ok_or("the pads exceed the unpooled extent")?,
        );
    }
    let count = unpooled.iter().product();
    let dtype = ctx.ty(x).dtype;
    let zeros = ctx.constant(mxc_dialects::Tensor::from_f64s(
        dtype,
        unpooled.clone(),
        &vec![0.0; count],
    ));
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
    use super::super::super::testutil::*;

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
    fn max_pool_indices_are_refused_and_bytes_pooled_as_floats() {
        let err = ModelBuilder::new(12)
            .input("x", DataType::Float, &[1, 1, 4, 4])
            .node(node(
                "MaxPool",
                &["x"],
                &["y", "i"],
                vec![ints_attr("kernel_shape", &[2, 2])],
            ))
            .output("y")
            .output("i")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (MaxPool): the Indices output is not supported"
        );
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
}
