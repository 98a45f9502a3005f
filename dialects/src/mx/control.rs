//! Control flow: ops that own regions (graph attributes) and run them on the host.
//!
//! Regions are isolated from above: a region sees only its own inputs, which the op binds to
//! its operands, so every value a branch or a loop body reads from around it is an operand.
//!
//! - `mx.if %cond, %c... {then_branch, else_branch}`: `cond` is a `tensor<bool>`; both branches take
//!   the captured values `%c...` as inputs and give results of the same types, which are the
//!   op's. The branch `cond` names runs and its outputs become the results.
//! - `mx.loop %max_trips, %cond, %v..., %c... {body, carried = N, iterations = K}`: `max_trips`
//!   is a `tensor<i64>`, `cond` a `tensor<bool>`, `%v...` the `N` loop-carried values' initial values and
//!   `%c...` captured values. The body takes `(iteration: tensor<i64>, cond: tensor<bool>, v..., c...)` and
//!   gives `(cond: tensor<bool>, v'..., s...)`: the next condition, the next carried values (of the
//!   same types) and one value per scan output. The loop runs while the iteration number is
//!   below `max_trips` and the condition holds; its results are the last carried values, then
//!   each scan output's values of every iteration stacked on a new first axis. Static shapes
//!   fix that axis: `iterations` is how many times the loop runs if it is known when compiling,
//!   `-1` if not, and scan outputs need it known (the run fails if the loop ends earlier).

use crate::{Attrs, DType, Graph, TensorType};

fn scalar(dtype: DType) -> TensorType {
    TensorType::new(dtype, Vec::new())
}

/// Verifies `region` and checks it takes inputs of types `inputs`.
fn check_region(name: &str, region: &Graph, inputs: &[TensorType]) -> Result<(), String> {
    crate::verify(region).map_err(|e| format!("region `{name}`: {e}"))?;
    if region.inputs.len() != inputs.len() {
        return Err(format!(
            "region `{name}` takes {} inputs, the op binds {}",
            region.inputs.len(),
            inputs.len()
        ));
    }
    for (i, (p, t)) in region.inputs.iter().zip(inputs).enumerate() {
        if region.ty(p.value) != t {
            return Err(format!(
                "region `{name}` input {i} (`{}`) is {}, the op binds {t}",
                p.name,
                region.ty(p.value)
            ));
        }
    }
    Ok(())
}

fn output_types(region: &Graph) -> Vec<TensorType> {
    region.outputs.iter().map(|p| region.ty(p.value).clone()).collect()
}

fn expect(what: &str, got: &TensorType, want: &TensorType) -> Result<(), String> {
    match got == want {
        true => Ok(()),
        false => Err(format!("{what} must be {want}, got {got}")),
    }
}

pub fn if_types(operands: &[TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
    expect("the condition", &operands[0], &scalar(DType::Bool))?;
    let captured = &operands[1..];
    let then_branch = attrs.graph("then_branch")?;
    let else_branch = attrs.graph("else_branch")?;
    check_region("then_branch", then_branch, captured)?;
    check_region("else_branch", else_branch, captured)?;
    let (then_types, else_types) = (output_types(then_branch), output_types(else_branch));
    if then_types != else_types {
        let show = |ts: &[TensorType]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
        return Err(format!(
            "the branches give different types: then ({}), else ({})",
            show(&then_types),
            show(&else_types)
        ));
    }
    if then_types.is_empty() {
        return Err("the branches give no results".into());
    }
    Ok(then_types)
}

pub fn loop_types(operands: &[TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
    expect("the trip count", &operands[0], &scalar(DType::I64))?;
    expect("the condition", &operands[1], &scalar(DType::Bool))?;
    let carried = usize::try_from(attrs.int("carried")?)
        .ok()
        .filter(|n| 2 + n <= operands.len())
        .ok_or_else(|| format!("`carried` must be 0 to {}", operands.len() - 2))?;
    let iterations = match attrs.int("iterations")? {
        -1 => None,
        n => Some(usize::try_from(n).map_err(|_| format!("`iterations` must be -1 or at least 0, got {n}"))?),
    };
    let body = attrs.graph("body")?;
    let mut inputs = vec![scalar(DType::I64), scalar(DType::Bool)];
    inputs.extend_from_slice(&operands[2..]);
    check_region("body", body, &inputs)?;
    let outputs = output_types(body);
    if outputs.len() < 1 + carried {
        return Err(format!(
            "the body gives {} outputs, fewer than the condition and {carried} carried values",
            outputs.len()
        ));
    }
    expect(
        "the body's first output (the next condition)",
        &outputs[0],
        &scalar(DType::Bool),
    )?;
    for (i, (next, initial)) in outputs[1..=carried].iter().zip(&operands[2..2 + carried]).enumerate() {
        if next != initial {
            return Err(format!(
                "carried value {i} starts as {initial} but the body makes it {next}; a shape that changes between iterations needs dynamic shapes"
            ));
        }
    }
    let mut results = outputs[1..=carried].to_vec();
    let scans = &outputs[1 + carried..];
    if !scans.is_empty() {
        let n = iterations.ok_or(
            "scan outputs need the number of iterations known when compiling (`iterations` is -1); a length known only at run time needs dynamic shapes",
        )?;
        for t in scans {
            let mut shape = vec![n];
            shape.extend_from_slice(&t.shape);
            results.push(TensorType::new(t.dtype, shape));
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attr, OpKind};
    use std::sync::Arc;

    fn f32s(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    /// A body that adds its captured value to its one carried value and scans the sum.
    fn accumulate() -> Graph {
        let mut g = Graph::new("body");
        g.add_input("i", scalar(DType::I64));
        let cond = g.add_input("cond", scalar(DType::Bool));
        let acc = g.add_input("acc", f32s(&[2]));
        let x = g.add_input("x", f32s(&[2]));
        let sum = g.build1(OpKind::Add, vec![acc, x], Attrs::new()).unwrap();
        g.add_output("cond", cond);
        g.add_output("acc", sum);
        g.add_output("scan", sum);
        g
    }

    fn loop_attrs(body: Graph, iterations: i64) -> Attrs {
        Attrs::new()
            .with("body", Attr::Graph(Arc::new(body)))
            .with("carried", Attr::Int(1))
            .with("iterations", Attr::Int(iterations))
    }

    #[test]
    fn a_loop_gives_carried_values_then_stacked_scans() {
        let operands = [scalar(DType::I64), scalar(DType::Bool), f32s(&[2]), f32s(&[2])];
        let types = loop_types(&operands, &loop_attrs(accumulate(), 5)).unwrap();
        assert_eq!(types, [f32s(&[2]), f32s(&[5, 2])]);
        let err = loop_types(&operands, &loop_attrs(accumulate(), -1)).unwrap_err();
        assert!(err.starts_with("scan outputs need the number of iterations"), "{err}");
        let err = loop_types(
            &[scalar(DType::I64), scalar(DType::Bool), f32s(&[3]), f32s(&[2])],
            &loop_attrs(accumulate(), 5),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "region `body` input 2 (`acc`) is tensor<2xf32>, the op binds tensor<3xf32>"
        );
    }

    #[test]
    fn branches_must_agree() {
        let branch = |kind: Option<OpKind>, shape: &[usize]| {
            let mut g = Graph::new("b");
            let x = g.add_input("x", f32s(shape));
            let y = match kind {
                Some(k) => g.build1(k, vec![x], Attrs::new()).unwrap(),
                None => x,
            };
            g.add_output("y", y);
            Arc::new(g)
        };
        let attrs = |t, e| {
            Attrs::new()
                .with("then_branch", Attr::Graph(t))
                .with("else_branch", Attr::Graph(e))
        };
        let ok = attrs(branch(Some(OpKind::Relu), &[2]), branch(None, &[2]));
        assert_eq!(if_types(&[scalar(DType::Bool), f32s(&[2])], &ok).unwrap(), [f32s(&[2])]);
        let err = if_types(&[f32s(&[]), f32s(&[2])], &ok).unwrap_err();
        assert_eq!(err, "the condition must be tensor<bool>, got tensor<f32>");
    }
}
