//! `Scan` (opset 9 on) as one `mx.loop` that runs once per position of the scan axis, which
//! static shapes fix: the state variables are carried, the scan inputs passed in whole, and
//! the region built here takes position `iteration` of each (`len - 1 - iteration` scanning
//! backwards) with an `mx.gather` before the body's nodes. The loop stacks each scan output
//! on a new first axis, which is then reversed where the output is built backwards and moved
//! to the output's axis. At opset 8, whose inputs have a batch axis 0 and the scan axis 1, it
//! is one such loop per batch entry, the results stacked along the batch axis.

use super::super::super::ctx::Ctx;
use super::super::super::proto::GraphProto;
use super::super::axes;
use super::super::layout::{concat_values, slice_value, DimSlice};
use super::super::shape::reshape;
use super::required_graph;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};
use std::sync::Arc;

/// How a scan runs: where each scan input's positions are taken, each scan output's stacked,
/// and which go backwards.
struct Scan<'b> {
    body: &'b GraphProto,
    input_axes: Vec<usize>,
    input_backwards: Vec<bool>,
    output_axes: Vec<i64>,
    output_backwards: Vec<bool>,
}

/// The body, the numbers of state variables and scan inputs of a Scan of `inputs` states and
/// scan inputs, and its number of scan outputs.
fn signature<'b>(ctx: &Ctx<'b>, inputs: usize) -> Result<(&'b GraphProto, usize, usize, usize), String> {
    let body = required_graph(ctx, "body")?;
    let m = ctx
        .node
        .opt_int("num_scan_inputs")?
        .ok_or("missing attribute `num_scan_inputs`")?;
    let m = usize::try_from(m)
        .ok()
        .filter(|m| (1..=inputs).contains(m))
        .ok_or_else(|| format!("num_scan_inputs must be 1 to {inputs} (the inputs), got {m}"))?;
    let n = inputs - m;
    if body.input.len() != inputs {
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
    Ok((body, n, m, k))
}

/// Scan at opset 8: inputs `sequence_lens` (which, when given, must be known at compile time
/// and hold the full length everywhere), then the state variables and scan inputs, all with a
/// batch axis 0; the scan axis is 1. One loop per batch entry, on the entries' slices.
pub fn scan_with_batch_axis(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let inputs = (1..ctx.num_inputs())
        .map(|i| ctx.input(i))
        .collect::<Result<Vec<_>, _>>()?;
    let (body, n, m, k) = signature(ctx, inputs.len())?;
    let scan = Scan {
        body,
        input_axes: vec![0; m],
        input_backwards: directions(ctx, "directions", m)?,
        output_axes: vec![0; k],
        output_backwards: vec![false; k],
    };
    let batch = ctx
        .ty(inputs[0])
        .shape
        .first()
        .copied()
        .ok_or("the inputs must have a batch axis")?;
    let length = ctx
        .ty(inputs[n])
        .shape
        .get(1)
        .copied()
        .ok_or("the scan inputs must have a scan axis 1")?;
    if let Some(lens) = ctx.opt_const_input(0, "sequence_lens")? {
        if let Some(i) = (0..lens.len()).find(|&i| lens.get_i64(i) != length as i64) {
            return Err(format!(
                "sequence_lens[{i}] is {}, shorter than the scan axis's {length}: variable lengths are not supported",
                lens.get_i64(i)
            ));
        }
    }
    let mut per_entry: Vec<Vec<ValueId>> = vec![Vec::new(); n + k];
    for b in 0..batch {
        let entry = || DimSlice {
            start: b as i64,
            end: b as i64 + 1,
            step: 1,
        };
        let slices = inputs
            .iter()
            .map(|&x| {
                let shape = ctx.ty(x).shape[1..].to_vec();
                let slice = slice_value(ctx, x, &[(0, entry())])?;
                reshape(ctx, slice, &shape)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let results = scan_loop(ctx, &scan, &slices[..n], &slices[n..])?;
        for (all, y) in per_entry.iter_mut().zip(results) {
            let shape = [vec![1], ctx.ty(y).shape.clone()].concat();
            all.push(reshape(ctx, y, &shape)?);
        }
    }
    per_entry.into_iter().map(|ys| concat_values(ctx, ys, 0)).collect()
}

pub fn scan(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let inputs = ctx.all_inputs()?;
    let (body, n, m, k) = signature(ctx, inputs.len())?;
    let (states, scanned) = inputs.split_at(n);
    let scan = Scan {
        body,
        input_axes: list(ctx, "scan_input_axes", m)?
            .iter()
            .zip(scanned)
            .map(|(&a, &x)| axes::axis(a, ctx.ty(x).rank()))
            .collect::<Result<Vec<_>, _>>()?,
        input_backwards: directions(ctx, "scan_input_directions", m)?,
        output_axes: list(ctx, "scan_output_axes", k)?,
        output_backwards: directions(ctx, "scan_output_directions", k)?,
    };
    scan_loop(ctx, &scan, states, scanned)
}

/// The `mx.loop` of `scan` over `scanned` with the initial states `states`: the final
/// states, then the scan outputs.
fn scan_loop(ctx: &mut Ctx, scan: &Scan, states: &[ValueId], scanned: &[ValueId]) -> Result<Vec<ValueId>, String> {
    let Scan {
        body,
        input_axes,
        input_backwards,
        output_axes,
        output_backwards,
    } = scan;
    let n = states.len();
    let inputs: Vec<ValueId> = states.iter().chain(scanned).copied().collect();
    let length = ctx.ty(scanned[0]).shape[input_axes[0]];
    for (j, (&x, &axis)) in scanned.iter().zip(input_axes).enumerate() {
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
        for ((&x, &axis), &backwards) in values[2 + n..].iter().zip(input_axes).zip(input_backwards) {
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
    for (y, (&axis, &backwards)) in results[n..].iter_mut().zip(output_axes.iter().zip(output_backwards)) {
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
        // opset 8 takes sequence_lens first
        let operands: &[&str] = match opset {
            8 => &["", "sum_0", "prod_0", "x"],
            _ => &["sum_0", "prod_0", "x"],
        };
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
            .node(node("Scan", operands, &["sum", "prod", "sums"], attrs))
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
    fn at_opset_8_each_batch_entry_is_scanned() {
        // entry 0 scans [[1, 2], [3, 4], [5, 6]], entry 1 the same times 10, backwards
        let g = sum_and_product(8, &[2, 3, 2], &[2, 2], vec![ints_attr("directions", &[1])])
            .import()
            .unwrap();
        let x = f32s(&[2, 3, 2], &[1., 2., 3., 4., 5., 6., 10., 20., 30., 40., 50., 60.]);
        let out = run(&g, &[f32s(&[2, 2], &[0.; 4]), f32s(&[2, 2], &[1.; 4]), x]);
        assert_eq!(out[0].to_f64_vec(), [9., 12., 90., 120.]);
        assert_eq!(out[1].to_f64_vec(), [15., 48., 15000., 48000.]);
        assert_eq!(out[2].shape(), [2, 3, 2]);
        assert_eq!(out[2].to_f64_vec()[..6], [5., 6., 8., 10., 9., 12.]);
    }

    #[test]
    fn refusals() {
        let err = sum_and_product(16, &[3, 2], &[3], vec![]).error();
        assert!(err.contains("mx.add: "), "{err}");
        let err = sum_and_product(16, &[3, 2], &[2], vec![ints_attr("scan_output_directions", &[2])]).error();
        assert_eq!(
            err,
            "node #0 (output \"sum\") (Scan): scan_output_directions must hold 0 (forwards) or 1 (backwards), got 2"
        );
    }
}
