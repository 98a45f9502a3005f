//! Shape ops: `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze` (all `mx.reshape` with the full
//! resolved shape), `Expand` (`mx.expand` to the broadcast shape), and `Shape` and `Size`,
//! which are compile-time constants with static shapes.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::shape_values::SizeValues;
use super::super::tensor::check_size;
use super::axes;
use mxc_dialects::dim::Dim;
use mxc_dialects::{mx::broadcast_shapes, Attr, Attrs, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Reshape", reshape_op);
    r.add_all("Flatten", flatten);
    r.add_all("Squeeze", squeeze);
    r.add_all("Unsqueeze", unsqueeze);
    r.add_all("Expand", expand);
    r.add_all("Shape", shape_op);
    r.add_all("Size", size);
}

/// `v` reshaped to `shape` (no op when it already has it).
pub fn reshape(ctx: &mut Ctx, v: ValueId, shape: &[usize]) -> Result<ValueId, String> {
    if ctx.ty(v).fixed_shape() == Some(shape) {
        return Ok(v);
    }
    ctx.build1(OpKind::Reshape, vec![v], Attrs::new().with("shape", axes::ints(shape)))
}

/// `v` reshaped to dimensions `dims`, symbolic or not (an `mx.reshape` to sizes).
pub fn reshape_dims(ctx: &mut Ctx, v: ValueId, dims: &[Dim]) -> Result<ValueId, String> {
    let fixed: Option<Vec<usize>> = dims.iter().map(|d| d.as_constant().map(|n| n as usize)).collect();
    match fixed {
        Some(shape) => reshape(ctx, v, &shape),
        None if ctx.ty(v).dims() == dims => Ok(v),
        None => ctx.build1(
            OpKind::Reshape,
            vec![v],
            Attrs::new().with("shape", Attr::Sizes(dims.to_vec())),
        ),
    }
}

/// The product of dimensions (1 for none).
pub fn product(dims: &[Dim]) -> Result<Dim, String> {
    dims.iter()
        .try_fold(Dim::constant(1), |acc, d| acc.mul(d))
        .map_err(|e| e.to_string())
}

/// An ONNX shape list as sizes, each checked to be non-negative.
fn sizes(list: &[i64], what: &str) -> Result<Vec<usize>, String> {
    list.iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("{what} {list:?} has a negative entry")))
        .collect()
}

/// Resolves a `Reshape` target: 0 copies the input's dim (unless `allow_zero`), -1 is inferred.
pub fn resolve_reshape(input: &[usize], target: &[i64], allow_zero: bool) -> Result<Vec<usize>, String> {
    let mut inferred = None;
    let mut out = Vec::with_capacity(target.len());
    for (i, &d) in target.iter().enumerate() {
        out.push(match d {
            -1 if inferred.is_none() => {
                inferred = Some(i);
                1
            }
            -1 => return Err(format!("shape {target:?} has more than one -1")),
            0 if !allow_zero => *input
                .get(i)
                .ok_or_else(|| format!("shape {target:?} copies dim {i}, which the input {input:?} does not have"))?,
            d => usize::try_from(d).map_err(|_| format!("shape {target:?} has the invalid entry {d}"))?,
        });
    }
    check_size(&out)?;
    let total: usize = input.iter().product();
    if let Some(i) = inferred {
        let known: usize = out.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!(
                "cannot infer the -1 of shape {target:?} for an input of shape {input:?}"
            ));
        }
        out[i] = total / known;
    }
    if out.iter().product::<usize>() != total {
        return Err(format!("cannot reshape {input:?} to {target:?}"));
    }
    Ok(out)
}

fn reshape_op(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let target = if ctx.opset < 5 {
        ctx.node.opt_ints("shape")?.ok_or("missing attribute `shape`")?
    } else {
        ctx.const_input(1, "shape")?.to_i64_vec()
    };
    let allow_zero = ctx.node.int("allowzero", 0)? != 0;
    if let Some(target) = ctx.sizes_input(1).filter(|_| ctx.opset >= 5) {
        let dims = mxc_dialects::dim::infer::reshape_to(&ctx.ty(x).dims(), &target.elements, allow_zero)
            .map_err(|e| e.to_string())?;
        return Ok(vec![reshape_dims(ctx, x, &dims)?]);
    }
    if ctx.ty(x).is_symbolic() {
        // a `0` copies a symbolic dimension, a `-1` takes what the others leave of them
        let dims =
            mxc_dialects::dim::infer::reshape(&ctx.ty(x).dims(), &target, allow_zero).map_err(|e| e.to_string())?;
        return Ok(vec![reshape_dims(ctx, x, &dims)?]);
    }
    let shape = resolve_reshape(&ctx.ty(x).shape, &target, allow_zero)?;
    Ok(vec![reshape(ctx, x, &shape)?])
}

fn flatten(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dims = ctx.ty(x).dims();
    let a = ctx.node.int("axis", 1)?;
    let axis = if a < 0 { a + dims.len() as i64 } else { a };
    if !(0..=dims.len() as i64).contains(&axis) {
        return Err(format!("axis {a} is out of range for rank {}", dims.len()));
    }
    let (outer, inner) = dims.split_at(axis as usize);
    let matrix = [product(outer)?, product(inner)?];
    Ok(vec![reshape_dims(ctx, x, &matrix)?])
}

/// The axes of `Squeeze`/`Unsqueeze`: an attribute before opset 13, an optional input after.
fn axes_operand(ctx: &Ctx) -> Result<Option<Vec<i64>>, String> {
    if ctx.opset < 13 {
        ctx.node.opt_ints("axes")
    } else {
        Ok(ctx.opt_const_input(1, "axes")?.map(|t| t.to_i64_vec()))
    }
}

fn squeeze(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dims = ctx.ty(x).dims();
    let one = |d: &Dim| d.as_constant() == Some(1);
    let drop = match axes_operand(ctx)? {
        Some(list) => {
            let drop = axes::axes(&list, dims.len())?;
            if let Some(&d) = drop.iter().find(|&&d| !one(&dims[d])) {
                return Err(format!("cannot squeeze axis {d} of extent {}", dims[d]));
            }
            drop
        }
        None => {
            // which axes go depends on the sizes where a symbolic one may be 1
            if let Some(d) = dims.iter().find(|d| d.as_constant().is_none() && d.bounds().0 <= 1) {
                return Err(format!(
                    "squeezing without axes over the symbolic extent {d}, which may be 1, is not supported (give the axes)"
                ));
            }
            (0..dims.len()).filter(|&d| one(&dims[d])).collect()
        }
    };
    let kept: Vec<Dim> = (0..dims.len())
        .filter(|d| !drop.contains(d))
        .map(|d| dims[d].clone())
        .collect();
    Ok(vec![reshape_dims(ctx, x, &kept)?])
}

fn unsqueeze(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).dims();
    let list = axes_operand(ctx)?.ok_or("missing axes")?;
    let rank = shape.len() + list.len();
    let inserted = axes::axes(&list, rank)?;
    let mut dims = shape.into_iter();
    let out: Vec<Dim> = (0..rank)
        .map(|d| match inserted.contains(&d) {
            true => Dim::constant(1),
            false => dims.next().unwrap_or(Dim::constant(1)),
        })
        .collect();
    Ok(vec![reshape_dims(ctx, x, &out)?])
}

fn expand(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    if let Some(sizes) = ctx.sizes_input(1).filter(SizeValues::is_symbolic) {
        let target = sizes.sizes("an expand's shape")?;
        return symbolic_expand(ctx, x, &target);
    }
    if ctx.ty(x).is_symbolic() {
        let target = sizes(&ctx.const_input(1, "shape")?.to_i64_vec(), "shape")?;
        let target: Vec<Dim> = target.iter().map(|&n| Dim::constant(n as u64)).collect();
        return symbolic_expand(ctx, x, &target);
    }
    let target = sizes(&ctx.const_input(1, "shape")?.to_i64_vec(), "shape")?;
    check_size(&target)?;
    let shape = broadcast_shapes(&ctx.ty(x).shape, &target)?;
    if shape == ctx.ty(x).shape {
        return Ok(vec![x]);
    }
    Ok(vec![ctx.build1(
        OpKind::Expand,
        vec![x],
        Attrs::new().with("shape", Attr::Ints(shape.iter().map(|&d| d as i64).collect())),
    )?])
}

/// `Expand` over symbolic sizes: `x` broadcast with `target` both ways (numpy).
fn symbolic_expand(ctx: &mut Ctx, x: ValueId, target: &[Dim]) -> Result<Vec<ValueId>, String> {
    let dims = ctx.ty(x).dims();
    let out = mxc_dialects::dim::infer::broadcast(&dims, target).map_err(|e| e.to_string())?;
    if out == dims {
        return Ok(vec![x]);
    }
    Ok(vec![super::constant::expand_to(ctx, x, &out)?])
}

/// The dimensions from `start` to `end` (negative from the end, clamped), as sizes: a constant,
/// or a shape of symbolic sizes (`shape_values.rs`).
fn shape_op(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let dims = ctx.ty(ctx.input(0)?).dims();
    let rank = dims.len() as i64;
    let clamp = |i: i64| (if i < 0 { i + rank } else { i }).clamp(0, rank) as usize;
    let start = clamp(ctx.node.int("start", 0)?);
    let end = clamp(ctx.node.int("end", rank)?).max(start);
    Ok(vec![ctx.sizes_constant(SizeValues::of_dims(&dims[start..end]))])
}

fn size(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let n = product(&ctx.ty(ctx.input(0)?).dims())?;
    let values = SizeValues {
        scalar: true,
        ..SizeValues::of_dims(&[n])
    };
    Ok(vec![ctx.sizes_constant(values)])
}

#[cfg(test)]
mod tests {
    use super::resolve_reshape;

    #[test]
    fn reshape_targets_resolve() {
        assert_eq!(resolve_reshape(&[2, 3, 4], &[0, -1], false), Ok(vec![2, 12]));
        assert_eq!(resolve_reshape(&[2, 3, 4], &[4, 0, 2], false), Ok(vec![4, 3, 2]));
        assert_eq!(resolve_reshape(&[0, 3], &[3, 0], true), Ok(vec![3, 0]));
        assert!(resolve_reshape(&[2, 3], &[-1, -1], false).is_err());
        assert!(resolve_reshape(&[2, 3], &[4, -1], false).is_err());
        assert!(resolve_reshape(&[2, 3], &[7], false).is_err());
    }
}

#[cfg(test)]
mod import_tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    #[test]
    fn exporter_shape_arithmetic_folds_to_a_literal_reshape() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3, 4])
            .init(i64_tensor("zero", &[], &[0]))
            .init(i64_tensor("axes", &[1], &[0]))
            .init(i64_tensor("minus_one", &[1], &[-1]))
            .node(node("Shape", &["x"], &["s"], vec![]))
            .node(node("Gather", &["s", "zero"], &["d0"], vec![]))
            .node(node("Unsqueeze", &["d0", "axes"], &["d0u"], vec![]))
            .node(node(
                "Concat",
                &["d0u", "minus_one"],
                &["shape"],
                vec![int_attr("axis", 0)],
            ))
            .node(node("Reshape", &["x", "shape"], &["y"], vec![]))
            .output("y")
            .text();
        let expected = "graph \"test\" (%arg0: tensor<2x3x4xf32> \"x\") {
  %0 = mx.reshape %arg0 {shape = [2, 12]} : tensor<2x12xf32>
  return \"y\" = %0
}
";
        assert_eq!(text, expected);
    }

    #[test]
    fn squeeze_unsqueeze_and_flatten_are_reshapes() {
        let text = ModelBuilder::new(11)
            .input("x", DataType::Float, &[1, 3, 1, 2])
            .node(node("Squeeze", &["x"], &["a"], vec![]))
            .node(node("Unsqueeze", &["a"], &["b"], vec![ints_attr("axes", &[-1, 0])]))
            .node(node("Flatten", &["b"], &["c"], vec![int_attr("axis", -1)]))
            .output("c")
            .text();
        assert!(text.contains("mx.reshape %arg0 {shape = [3, 2]}"), "{text}");
        assert!(text.contains("{shape = [1, 3, 2, 1]}"), "{text}");
        assert!(text.contains("{shape = [6, 1]}"), "{text}");
        let err = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .init(i64_tensor("axes", &[1], &[0]))
            .node(node("Squeeze", &["x", "axes"], &["y"], vec![]))
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (Squeeze): cannot squeeze axis 0 of extent 2"
        );
    }

    #[test]
    fn expand_broadcasts_both_ways_and_shape_takes_a_range() {
        let text = ModelBuilder::new(15)
            .input("x", DataType::Float, &[3, 1])
            .init(i64_tensor("shape", &[3], &[2, 1, 4]))
            .node(node("Expand", &["x", "shape"], &["y"], vec![]))
            .node(node("Shape", &["y"], &["s"], vec![int_attr("start", -2)]))
            .output("y")
            .output("s")
            .text();
        assert!(text.contains("mx.expand %arg0 {shape = [2, 3, 4]}"), "{text}");
        assert!(text.contains("dense<[3, 4]> : tensor<2xi64>"), "{text}");
    }
}
