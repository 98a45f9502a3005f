//! `Scan` (opset 9 on) as one `mx.loop` that runs once per position of the scan axis, which
//! static shapes fix: the state variables are carried, the scan inputs passed in whole, and
//! the region built here takes position `iteration` of each (`len - 1 - iteration` scanning
//! backwards) with an `mx.gather` before the body's nodes. The loop stacks each scan output
//! on a new first axis, which is then reversed where the output is built backwards and moved
//! to the output's axis.

use super::super::super::ctx::Ctx;
use super::super::axes;
use super::super::layout::{slice_value, DimSlice};
use super::required_graph;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};
use std::sync::Arc;

/// Scan at opset 8, whose inputs have a batch axis and optional sequence lengths.
pub fn scan_with_batch_axis(_: &mut Ctx) -> Result<Vec<ValueId>, String> {
    Err("Scan before opset 9 (a batch axis and sequence_lens) is not supported".into())
}

pub fn scan(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let body = required_graph(ctx, "body")?;
    let inputs = ctx.all_inputs()?;
    let m = ctx
        .node
        .opt_int("num_scan_inputs")?
        .ok_or("missing attribute `num_scan_inputs`")?;
    let m = usize::try_from(m)
        .ok()
        .filter(|m| (1..=inputs.len()).contains(m))
        .ok_or_else(|| format!("num_scan_inputs must be 1 to {} (the inputs), got {m}", inputs.len()))?;
    let n = inputs.len() - m;
    let (states, scanned) = inputs.split_at(n);
    if body.input.len() != inputs.len() {
        return Err(format!(
            "the body takes {} inputs; it must take the {n} state variables and the {m} scan input elements",
            body.input.len()
        ));
    }
    let k = body.output.len().checked_sub(n).ok_or_else(|| {
        format!(
            "the body gives {} outputs, fewer than the {n} state variables",
            body.output.len()
        )
    })?;
    let input_axes = list(ctx, "scan_input_axes", m)?
        .iter()
        .zip(scanned)
        .map(|(&a, &x)| axes::axis(a, ctx.ty(x).rank()))
        .collect::<Result<Vec<_>, _>>()?;
    let input_backwards = directions(ctx, "scan_input_directions", m)?;
    let output_axes = list(ctx, "scan_output_axes", k)?;
    let output_backwards = directions(ctx, "scan_output_directions", k)?;
    let length = ctx.ty(scanned[0]).shape[input_axes[0]];
    for (j, (&x, &axis)) in scanned.iter().zip(&input_axes).enumerate() {
        let positions = ctx.ty(x).shape[axis];
        if positions != length {
            return Err(format!(
                "scan input #{j} has {positions} positions along its axis {axis}, scan input #0 has {length}"
            ));
        }
    }

    let mut region_inputs = vec![
        ("iteration".to_string(), TensorType::new(DType::I64, vec![])),
        ("cond".to_string(), TensorType::new(DType::Bool, vec![])),
    ];
    for (vi, &v) in body.input.iter().zip(&inputs) {
        region_inputs.push((vi.name().to_string(), ctx.ty(v).clone()));
    }
    let region = ctx.region("body", &[body], &region_inputs, |ctx, values| {
        let iteration = values[0];
        let mut bound = values[2..2 + n].to_vec();
        for ((&x, &axis), &backwards) in values[2 + n..].iter().zip(&input_axes).zip(&input_backwards) {
            let position = match backwards {
                true => {
                    let last = ctx.constant(Tensor::from_i64s(DType::I64, vec![], &[length as i64 - 1]));
                    ctx.op(OpKind::Sub, &[last, iteration])?
                }
                false => iteration,
            };
            let attrs = Attrs::new().with("axis", Attr::Int(axis as i64));
            bound.push(ctx.build1(OpKind::Gather, vec![x, position], attrs)?);
        }
        let going = ctx.constant(Tensor::from_i64s(DType::Bool, vec![], &[1]));
        let mut outputs = vec![("cond".to_string(), going)];
        outputs.extend(ctx.import_body(body, &bound)?);
        Ok(outputs)
    })?;

    let trips = ctx.constant(Tensor::from_i64s(DType::I64, vec![], &[length as i64]));
    let going = ctx.constant(Tensor::from_i64s(DType::Bool, vec![], &[1]));
    let mut operands = vec![trips, going];
    operands.extend(states.iter().chain(scanned));
    operands.extend(region.captures);
    let attrs = Attrs::new()
        .with("body", Attr::Graph(Arc::new(region.graph)))
        .with("carried", Attr::Int(n as i64))
        .with("iterations", Attr::Int(length as i64));
    let mut results = ctx.build(OpKind::Loop, operands, attrs)?;
    for (y, (&axis, &backwards)) in results[n..].iter_mut().zip(output_axes.iter().zip(&output_backwards)) {
        if backwards && length > 1 {
            let reversed = DimSlice {
                start: length as i64 - 1,
                end: -1,
                step: -1,
            };
            *y = slice_value(ctx, *y, &[(0, reversed)])?;
        }
        let rank = ctx.ty(*y).rank();
        let axis = axes::axis(axis, rank)?;
        // the stacked axis 0 moves to `axis`, the others keep their order
        let perm: Vec<usize> = (1..=axis).chain([0]).chain(axis + 1..rank).collect();
        *y = ctx.transpose(*y, &perm)?;
    }
    Ok(results)
}

/// The list attribute `name` of one entry per scan input or output (`count`), all 0 when
/// it is absent.
fn list(ctx: &Ctx, name: &str, count: usize) -> Result<Vec<i64>, String> {
    let list = ctx.node.opt_ints(name)?.unwrap_or_else(|| vec![0; count]);
    if list.len() != count {
        return Err(format!("{name} has {} entries, there are {count}", list.len()));
    }
    Ok(list)
}

/// The directions attribute `name`: whether each entry goes backwards (1) or forwards (0).
fn directions(ctx: &Ctx, name: &str, count: usize) -> Result<Vec<bool>, String> {
    list(ctx, name, count)?
        .into_iter()
        .map(|d| match d {
            0 | 1 => Ok(d == 1),
            _ => Err(format!("{name} must hold 0 (forwards) or 1 (backwards), got {d}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::super::super::proto::tensor_proto::DataType;
    use super::super::super::super::proto::AttributeProto;
    use super::super::super::super::testutil::*;
    use super::super::tests::{f32s, run, subgraph, untyped};

    /// A Scan at `opset` over `x` of `dims` with a running sum and product as its states
    /// (`sum_0`, `prod_0`, of `state_dims`) and the running sum as its scan output.
    fn sum_and_product(opset: i64, dims: &[i64], state_dims: &[i64], attrs: Vec<AttributeProto>) -> ModelBuilder {
        let inputs = vec![untyped("sum"), untyped("prod"), untyped("row")];
        let nodes = vec![
            node("Add", &["sum", "row"], &["sum_next"], vec![]),
            node("Mul", &["prod", "row"], &["prod_next"], vec![]),
        ];
        let outputs = vec![untyped("sum_next"), untyped("prod_next"), untyped("sum_next")];
        let mut attrs = attrs;
        attrs.push(int_attr("num_scan_inputs", 1));
        attrs.push(graph_attr("body", subgraph("body", inputs, nodes, outputs)));
        ModelBuilder::new(opset)
            .input("sum_0", DataType::Float, state_dims)
            .input("prod_0", DataType::Float, state_dims)
            .input("x", DataType::Float, dims)
            .node(node("Scan", &["sum_0", "prod_0", "x"], &["sum", "prod", "sums"], attrs))
            .output("sum")
            .output("prod")
            .output("sums")
    }

    /// The outputs of `sum_and_product` on `x` = [[1, 2], [3, 4], [5, 6]] (seen along `axis`).
    fn run_on_rows(attrs: Vec<AttributeProto>, axis: usize) -> Vec<Vec<f64>> {
        let (dims, x) = match axis {
            0 => (vec![3, 2], f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.])),
            _ => (vec![2, 3], f32s(&[2, 3], &[1., 3., 5., 2., 4., 6.])),
        };
        let g = sum_and_product(16, &dims, &[2], attrs).import().unwrap();
        let states = [f32s(&[2], &[0., 0.]), f32s(&[2], &[1., 1.])];
        let out = run(&g, &[states[0].clone(), states[1].clone(), x]);
        out.iter().map(|t| t.to_f64_vec()).collect()
    }

    #[test]
    fn a_scan_is_a_loop_over_the_positions_of_its_axis() {
        let text = sum_and_product(16, &[3, 2], &[2], vec![]).text();
        assert!(
            text.contains("mx.gather %arg4, %arg0 {axis = 0} : tensor<2xf32>"),
            "{text}"
        );
        assert!(
            text.contains("carried = 2, iterations = 3} : tensor<2xf32>, tensor<2xf32>, tensor<3x2xf32>"),
            "{text}"
        );
        let out = run_on_rows(vec![], 0);
        assert_eq!(out, [vec![9., 12.], vec![15., 48.], vec![1., 2., 4., 6., 9., 12.]]);
    }

    #[test]
    fn directions_reverse_the_inputs_and_the_outputs() {
        let backwards = |name: &str| ints_attr(name, &[1]);
        let out = run_on_rows(vec![backwards("scan_input_directions")], 0);
        assert_eq!(out[2], [5., 6., 8., 10., 9., 12.]);
        let out = run_on_rows(vec![backwards("scan_output_directions")], 0);
        assert_eq!(out[2], [9., 12., 4., 6., 1., 2.]);
    }

    #[test]
    fn axes_choose_where_positions_are_taken_and_stacked() {
        let axes = vec![ints_attr("scan_input_axes", &[-1]), ints_attr("scan_output_axes", &[1])];
        let out = run_on_rows(axes, 1);
        assert_eq!(out[0], [9., 12.]);
        assert_eq!(out[2], [1., 4., 9., 2., 6., 12.]);
    }

    #[test]
    fn refusals() {
        let err = sum_and_product(8, &[3, 2], &[2], vec![]).error();
        assert_eq!(
            err,
            "node #0 (output \"sum\") (Scan): Scan before opset 9 (a batch axis and sequence_lens) is not supported"
        );
        let err = sum_and_product(16, &[3, 2], &[3], vec![]).error();
        assert!(err.contains("mx.add: "), "{err}");
        let err = sum_and_product(16, &[3, 2], &[2], vec![ints_attr("scan_output_directions", &[2])]).error();
        assert_eq!(
            err,
            "node #0 (output \"sum\") (Scan): scan_output_directions must hold 0 (forwards) or 1 (backwards), got 2"
        );
    }
}
