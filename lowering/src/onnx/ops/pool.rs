//! Pooling: `MaxPool` (also of 8- and 16-bit integers, through f32), `AveragePool` (explicit
//! pads, `auto_pad`, `ceil_mode`, dilations, `count_include_pad`), `GlobalAveragePool`, and `GlobalMaxPool` as a `reduce_max` over the
//! spatial dims.

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
