//! `Loop` as an `mx.loop`. The trip count `M` and the condition are made rank 0 (an absent `M`
//! is `i64::MAX`, an absent condition `true`); the body becomes a region taking the iteration
//! number, the condition, the loop-carried values and then what it reads from around it. The
//! number of iterations is recorded when it is known at compile time: none when the condition
//! is known to be false, `M` when `M` is known and nothing can stop the loop earlier, and `M`
//! when `M` is known and there are scan outputs to stack (their length must be fixed; the run
//! fails if the loop stops earlier). A body that needs compile-time values it cannot have as a
//! region (the iteration number as a slice's start) is unrolled instead when the trip count and
//! condition are known (`unroll.rs`).

use super::super::super::ctx::Ctx;
use super::super::super::proto::type_proto::Value as TypeValue;
use super::super::super::proto::ValueInfoProto;
use super::super::shape::reshape;
use super::unroll::unrolled_loop;
use super::{required_graph, scalar_operand};
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};
use std::sync::Arc;

pub fn loop_op(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let body = required_graph(ctx, "body")?;
    let n = ctx.num_inputs().saturating_sub(2);
    if body.input.len() != 2 + n {
        return Err(format!(
            "the body takes {} inputs; it must take the iteration number, the condition and the {n} \
             loop-carried values",
            body.input.len()
        ));
    }
    if body.output.len() < 1 + n {
        return Err(format!(
            "the body gives {} outputs; it must give the condition and the {n} loop-carried values, \
             then the scan outputs",
            body.output.len()
        ));
    }
    let composite_carried = (2..ctx.num_inputs()).any(|i| ctx.composite(i).is_some());
    if composite_carried || body.input.iter().any(|vi| !is_tensor(vi)) || ctx.reads_composites(&[body]) {
        return unrolled_loop(ctx, body);
    }
    let initial = (2..ctx.num_inputs())
        .map(|i| ctx.input(i))
        .collect::<Result<Vec<_>, _>>()?;
    let (max_trips, trips) = match ctx.opt_input(0) {
        None => (ctx.constant(Tensor::from_i64s(DType::I64, vec![], &[i64::MAX])), None),
        Some(m) => {
            let m = scalar_operand(ctx, m, DType::I64, "M")?;
            (m, ctx.known(m).map(|t| t.get_i64(0).max(0)))
        }
    };
    let (cond, cond_known) = match ctx.opt_input(1) {
        None => (ctx.constant(Tensor::from_i64s(DType::Bool, vec![], &[1])), Some(true)),
        Some(c) => {
            let c = scalar_operand(ctx, c, DType::Bool, "cond")?;
            (c, ctx.known(c).map(|t| t.get_i64(0) != 0))
        }
    };
    let mut inputs = vec![
        (body.input[0].name().to_string(), TensorType::new(DType::I64, vec![])),
        (body.input[1].name().to_string(), TensorType::new(DType::Bool, vec![])),
    ];
    for (vi, &v) in body.input[2..].iter().zip(&initial) {
        inputs.push((vi.name().to_string(), ctx.ty(v).clone()));
    }
    // whether the body's next condition is always its condition or true
    let mut keeps_going = false;
    let region = ctx.region("body", &[body], &inputs, |ctx, values| {
        let iteration = as_declared(ctx, values[0], &body.input[0])?;
        let cond_in = as_declared(ctx, values[1], &body.input[1])?;
        let mut bound = vec![iteration, cond_in];
        bound.extend_from_slice(&values[2..]);
        let mut outputs = ctx.import_body(body, &bound)?;
        let next = outputs[0].1;
        let always_true = ctx
            .graph()
            .constant_value(next)
            .is_some_and(|t| (0..t.len()).all(|i| t.get_i64(i) != 0));
        keeps_going = next == cond_in || always_true;
        outputs[0].1 = scalar_operand(ctx, next, DType::Bool, "the body's condition output")?;
        Ok(outputs)
    });
    let region = match region {
        Ok(region) => region,
        // a body that needs a value known at compile time which a region cannot know (the
        // iteration number as a slice's start) is unrolled when the loop's trips are known:
        // each iteration's values are then constants
        Err(e) if e.contains("must be known at compile time") && trips.is_some() && cond_known.is_some() => {
            return unrolled_loop(ctx, body).map_err(|_| e);
        }
        Err(e) => return Err(e),
    };
    let scans = body.output.len() - 1 - n;
    let iterations = match (trips, cond_known) {
        (_, Some(false)) => 0,
        (Some(m), Some(true)) if keeps_going => m,
        (Some(m), _) if scans > 0 => m,
        (None, _) if scans > 0 => {
            let why = match ctx.opt_input(0) {
                None => "M is not given",
                Some(_) => "M is not known at compile time",
            };
            return Err(format!(
                "the loop has scan outputs but its number of iterations is not known at compile time ({why}): \
                 scan outputs of a loop whose length is known only at run time are not supported (they need \
                 dynamic shapes)"
            ));
        }
        _ => -1,
    };
    let mut operands = vec![max_trips, cond];
    operands.extend(initial);
    operands.extend(region.captures);
    let attrs = Attrs::new()
        .with("body", Attr::Graph(Arc::new(region.graph)))
        .with("carried", Attr::Int(n as i64))
        .with("iterations", Attr::Int(iterations));
    ctx.build(OpKind::Loop, operands, attrs)
}

/// Whether `vi` declares a tensor, or no type.
fn is_tensor(vi: &ValueInfoProto) -> bool {
    let value = vi.r#type.as_ref().and_then(|t| t.value.as_ref());
    matches!(value, None | Some(TypeValue::TensorType(_)))
}

/// The rank-0 region input `v` as the body declares it in `vi`: of shape `[1]` where it
/// declares rank 1, unchanged otherwise.
pub(super) fn as_declared(ctx: &mut Ctx, v: ValueId, vi: &ValueInfoProto) -> Result<ValueId, String> {
    let rank = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(TypeValue::TensorType(t)) => t.shape.as_ref().map(|s| s.dim.len()),
        _ => None,
    };
    match rank {
        Some(1) => reshape(ctx, v, &[1]),
        _ => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::super::proto::tensor_proto::DataType;
    use super::super::super::super::proto::{NodeProto, ValueInfoProto};
    use super::super::super::super::testutil::*;
    use super::super::tests::{f32s, run, subgraph, untyped};
    use mxc_dialects::{DType, OpKind, Tensor};

    fn i64s(values: &[i64]) -> Tensor {
        Tensor::from_i64s(DType::I64, vec![], values)
    }

    /// A body taking `(i, c, y)` (the iteration number and condition of `dims`) and giving
    /// `outputs`.
    fn body(dims: &[i64], nodes: Vec<NodeProto>, outputs: &[&str]) -> NodeProto {
        let inputs: Vec<ValueInfoProto> = vec![
            value_info("i", DataType::Int64, dims),
            value_info("c", DataType::Bool, dims),
            untyped("y"),
        ];
        let results = &["y_final", "scan"][..outputs.len() - 1];
        let outputs = outputs.iter().map(|o| untyped(o)).collect();
        node(
            "Loop",
            &["m", "", "x"],
            results,
            vec![graph_attr("body", subgraph("body", inputs, nodes, outputs))],
        )
    }

    /// A loop adding `w` to `x` on each iteration (and stacking the sums when `scan`), its
    /// trip count `m` a graph input.
    fn accumulate(scan: bool) -> ModelBuilder {
        let outputs: &[&str] = if scan {
            &["c", "y_next", "y_next"]
        } else {
            &["c", "y_next"]
        };
        ModelBuilder::new(13)
            .input("m", DataType::Int64, &[])
            .input("x", DataType::Float, &[2])
            .input("w", DataType::Float, &[2])
            .node(body(&[], vec![node("Add", &["y", "w"], &["y_next"], vec![])], outputs))
            .output("y_final")
    }

    #[test]
    fn a_trip_count_known_at_run_time_leaves_the_iterations_open() {
        let text = accumulate(false).text();
        // w is read by the body: an operand after x, and an input of the body after y
        let head = "mx.loop %arg0, %0, %arg1, %arg2 {body = graph \"body\" (%arg0: tensor<i64> \"i\", \
                    %arg1: tensor<bool> \"c\", %arg2: tensor<2xf32> \"y\", %arg3: tensor<2xf32> \"w\") {";
        assert!(text.contains(head), "{text}");
        assert!(
            text.contains("}, carried = 1, iterations = -1} : tensor<2xf32>"),
            "{text}"
        );
        let g = accumulate(false).import().unwrap();
        let y = run(&g, &[i64s(&[3]), f32s(&[2], &[1., 2.]), f32s(&[2], &[0.5, 1.])]);
        assert_eq!(y[0].to_f64_vec(), [2.5, 5.]);
    }

    #[test]
    fn scan_outputs_need_a_trip_count_known_at_compile_time() {
        let err = accumulate(true).error();
        assert_eq!(
            err,
            "node #0 (output \"y_final\") (Loop): the loop has scan outputs but its number of iterations is not \
             known at compile time (M is not known at compile time): scan outputs of a loop whose length is known \
             only at run time are not supported (they need dynamic shapes)"
        );
    }

    /// `accumulate` with the trip count the constant `m`.
    fn accumulate_times(m: i64, scan: bool) -> ModelBuilder {
        let mut model = accumulate(scan);
        model.graph.input.remove(0);
        model.init(i64_tensor("m", &[], &[m])).output("scan")
    }

    #[test]
    fn a_known_trip_count_fixes_the_iterations_and_the_scan_length() {
        let text = accumulate_times(3, true).text();
        assert!(
            text.contains("carried = 1, iterations = 3} : tensor<2xf32>, tensor<3x2xf32>"),
            "{text}"
        );
        let g = accumulate_times(3, true).import().unwrap();
        let out = run(&g, &[f32s(&[2], &[1., 2.]), f32s(&[2], &[0.5, 1.])]);
        assert_eq!(out[1].to_f64_vec(), [1.5, 3., 2., 4., 2.5, 5.]);
    }

    /// A loop of at most `m` iterations adding 3 to `x` while the sum is below 10.
    fn until_ten(m: Option<i64>, scan: bool) -> ModelBuilder {
        let nodes = vec![
            node("Add", &["y", "three"], &["y_next"], vec![]),
            node("Less", &["y_next", "ten"], &["c_next"], vec![]),
        ];
        let outputs: &[&str] = if scan {
            &["c_next", "y_next", "y_next"]
        } else {
            &["c_next", "y_next"]
        };
        let model = ModelBuilder::new(13)
            .input("x", DataType::Float, &[])
            .init(f32_tensor("three", &[], &[3.]))
            .init(f32_tensor("ten", &[], &[10.]))
            .node(body(&[], nodes, outputs))
            .output("y_final");
        match m {
            Some(m) => model.init(i64_tensor("m", &[], &[m])),
            None => model.input("m", DataType::Int64, &[]),
        }
    }

    #[test]
    fn a_condition_from_the_body_can_stop_the_loop() {
        let text = until_ten(Some(100), false).text();
        assert!(text.contains("iterations = -1"), "{text}");
        let g = until_ten(None, false).import().unwrap();
        assert_eq!(run(&g, &[f32s(&[], &[0.]), i64s(&[100])])[0].to_f64_vec(), [12.]);
        assert_eq!(run(&g, &[f32s(&[], &[0.]), i64s(&[2])])[0].to_f64_vec(), [6.]);
        // with scan outputs, the known trip count is the length the run must reach
        let text = until_ten(Some(3), true).output("scan").text();
        assert!(text.contains("iterations = 3} : tensor<f32>, tensor<3xf32>"), "{text}");
    }

    #[test]
    fn a_condition_known_to_be_false_runs_no_iteration() {
        let mut model = accumulate_times(3, true);
        model.graph.node[0].input[1] = "never".into();
        let text = model.init(bool_tensor("never", &[], &[false])).text();
        assert!(
            text.contains("iterations = 0} : tensor<2xf32>, tensor<0x2xf32>"),
            "{text}"
        );
    }

    #[test]
    fn an_iteration_number_and_condition_of_one_element_are_reshaped_in_the_body() {
        let nodes = vec![
            node("Cast", &["i"], &["fi"], vec![int_attr("to", DataType::Float as i64)]),
            node("Add", &["y", "fi"], &["y_next"], vec![]),
        ];
        let model = || {
            ModelBuilder::new(13)
                .init(i64_tensor("m", &[], &[3]))
                .input("x", DataType::Float, &[1])
                .node(body(&[1], nodes.clone(), &["c", "y_next", "y_next"]))
                .output("y_final")
                .output("scan")
        };
        let text = model().text();
        assert!(
            text.contains("(%arg0: tensor<i64> \"i\", %arg1: tensor<bool> \"c\", %arg2: tensor<1xf32> \"y\")"),
            "{text}"
        );
        assert!(
            text.contains("mx.reshape %arg0 {shape = [1]} : tensor<1xi64>"),
            "{text}"
        );
        assert!(text.contains("iterations = 3}"), "{text}");
        let out = run(&model().import().unwrap(), &[f32s(&[1], &[1.])]);
        assert_eq!(out[1].to_f64_vec(), [1., 2., 4.]);
    }

    #[test]
    fn a_carried_value_must_keep_its_type() {
        let nodes = vec![node("Concat", &["y", "y"], &["y_next"], vec![int_attr("axis", 0)])];
        let err = ModelBuilder::new(13)
            .input("m", DataType::Int64, &[])
            .input("x", DataType::Float, &[2])
            .node(body(&[], nodes, &["c", "y_next"]))
            .output("y_final")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y_final\") (Loop): mx.loop: carried value 0 starts as tensor<2xf32> but the body makes \
             it tensor<4xf32>; a shape that changes between iterations needs dynamic shapes"
        );
    }

    #[test]
    fn an_if_in_the_body_reads_a_value_from_the_main_graph() {
        // y + w on the first two iterations, y * w on the others
        let branch = |name: &str, op: &str| {
            let out = format!("{name}_out");
            let nodes = vec![node(op, &["y", "w"], &[&out], vec![])];
            graph_attr(name, subgraph(name, vec![], nodes, vec![untyped(&out)]))
        };
        let nodes = vec![
            node("Less", &["i", "two"], &["early"], vec![]),
            node(
                "If",
                &["early"],
                &["y_next"],
                vec![branch("then_branch", "Add"), branch("else_branch", "Mul")],
            ),
        ];
        let model = ModelBuilder::new(13)
            .input("m", DataType::Int64, &[])
            .input("x", DataType::Float, &[2])
            .input("w", DataType::Float, &[2])
            .init(i64_tensor("two", &[], &[2]))
            .node(body(&[], nodes, &["c", "y_next"]))
            .output("y_final");
        let g = model.import().unwrap();
        let op = g.ops.iter().find(|op| op.kind == OpKind::Loop).unwrap();
        // w is passed into the body, which passes it into both branches
        assert_eq!(op.operands[3], g.inputs[2].value);
        let body = op.attrs.graph("body").unwrap();
        let inner = body.ops.iter().find(|op| op.kind == OpKind::If).unwrap();
        assert_eq!(inner.operands[1..], [body.inputs[2].value, body.inputs[3].value]);
        let y = run(&g, &[i64s(&[4]), f32s(&[2], &[1., 2.]), f32s(&[2], &[2., 3.])]);
        assert_eq!(y[0].to_f64_vec(), [20., 72.]);
    }

    #[test]
    fn a_body_slicing_at_the_iteration_number_is_unrolled_when_the_trips_are_known() {
        // y += x[i : i + 1] over x = [1, 2, 3, 4]
        let nodes = vec![
            node("Add", &["i", "one"], &["end"], vec![]),
            node("Unsqueeze", &["i", "zero"], &["starts"], vec![]),
            node("Unsqueeze", &["end", "zero"], &["ends"], vec![]),
            node("Slice", &["v", "starts", "ends"], &["piece"], vec![]),
            node("Add", &["y", "piece"], &["y_next"], vec![]),
        ];
        let model = |m: Option<i64>| {
            let b = ModelBuilder::new(13)
                .input("x", DataType::Float, &[1])
                .init(i64_tensor("one", &[], &[1]))
                .init(i64_tensor("zero", &[1], &[0]))
                .init(f32_tensor("v", &[4], &[1., 2., 3., 4.]));
            match m {
                Some(m) => b.init(i64_tensor("m", &[], &[m])),
                None => b.input("m", DataType::Int64, &[]),
            }
            .node(body(&[], nodes.clone(), &["c", "y_next"]))
            .output("y_final")
        };
        let g = model(Some(3)).import().unwrap();
        assert!(g.ops.iter().all(|op| op.kind != OpKind::Loop));
        assert_eq!(run(&g, &[f32s(&[1], &[10.])])[0].to_f64_vec(), [16.]);
        let err = model(None).error();
        assert!(
            err.ends_with("(Slice): input \"starts\" must be known at compile time"),
            "{err}"
        );
    }

    #[test]
    fn a_loop_carrying_a_sequence_is_unrolled_at_import() {
        // each iteration appends t + i to the sequence [t]; the scan output stacks i
        let nodes = vec![
            node("Cast", &["i"], &["f"], vec![int_attr("to", DataType::Float as i64)]),
            node("Add", &["t", "f"], &["u"], vec![]),
            node("SequenceInsert", &["y", "u"], &["y_next"], vec![]),
        ];
        let model = |m: Option<i64>| {
            let b = ModelBuilder::new(13).input("t", DataType::Float, &[2]);
            let b = match m {
                Some(m) => b.init(i64_tensor("m", &[], &[m])),
                None => b.input("m", DataType::Int64, &[]),
            };
            b.node(node("SequenceConstruct", &["t"], &["x"], vec![]))
                .node(body(&[], nodes.clone(), &["c", "y_next", "i"]))
                .node(node(
                    "ConcatFromSequence",
                    &["y_final"],
                    &["all"],
                    vec![int_attr("axis", 0)],
                ))
                .output("all")
                .output("scan")
        };
        let g = model(Some(3)).import().unwrap();
        assert!(g.ops.iter().all(|op| op.kind != OpKind::Loop));
        let out = run(&g, &[f32s(&[2], &[1., 5.])]);
        assert_eq!(out[0].to_f64_vec(), [1., 5., 1., 5., 2., 6., 3., 7.]);
        assert_eq!(out[1].to_i64_vec(), [0, 1, 2]);
        assert_eq!(
            model(None).error(),
            "node #1 (output \"y_final\") (Loop): M must be known at compile time: the loop carries sequences or \
             optionals, so it is unrolled at import"
        );
    }
}
