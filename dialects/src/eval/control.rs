//! Running control ops in the evaluator's graph interpreter (`run_with`): `mx.if` runs the
//! region its condition names, `mx.loop` its body while the trip count and condition allow,
//! as `mx::control` defines them and the runtime runs them.

use crate::{Graph, Op, Tensor};

/// Runs a region of `op` on `inputs` (`run_with` with the caller's fallback).
pub(super) type Region<'a> = dyn Fn(&Graph, &[Tensor]) -> Result<Vec<Tensor>, String> + 'a;

pub(super) fn run_if(op: &Op, args: &[Tensor], region: &Region) -> Result<Vec<Tensor>, String> {
    let branch = if args[0].get_i64(0) != 0 {
        "then_branch"
    } else {
        "else_branch"
    };
    region(op.attrs.graph(branch)?, &args[1..])
}

/// The loop's results; a loop whose `iterations` is known must run that many times.
pub(super) fn run_loop(
    op: &Op,
    args: &[Tensor],
    result_types: &[crate::TensorType],
    region: &Region,
) -> Result<Vec<Tensor>, String> {
    let body = op.attrs.graph("body")?;
    let carried = op.attrs.int("carried")? as usize;
    let (max_trips, mut going) = (args[0].get_i64(0), args[1].get_i64(0) != 0);
    let mut values = args[2..2 + carried].to_vec();
    let mut scanned: Vec<Vec<u8>> = vec![Vec::new(); result_types.len() - carried];
    let mut i = 0;
    while i < max_trips && going {
        let mut inputs = vec![
            Tensor::from_i64s(crate::DType::I64, vec![], &[i]),
            Tensor::from_i64s(crate::DType::Bool, vec![], &[going as i64]),
        ];
        inputs.extend(values);
        inputs.extend_from_slice(&args[2 + carried..]);
        let outputs = region(body, &inputs)?;
        going = outputs[0].get_i64(0) != 0;
        values = outputs[1..=carried].to_vec();
        for (bytes, t) in scanned.iter_mut().zip(&outputs[1 + carried..]) {
            bytes.extend_from_slice(t.bytes());
        }
        i += 1;
    }
    let iterations = op.attrs.int("iterations")?;
    if iterations != -1 && iterations != i {
        return Err(format!("the loop ran {i} iterations, but `iterations` is {iterations}"));
    }
    let stacked = scanned.into_iter().zip(&result_types[carried..]).map(|(bytes, ty)| {
        Tensor::from_bytes(ty.clone(), bytes).ok_or_else(|| "a scan output's length is not the loop's".to_string())
    });
    values.into_iter().map(Ok).chain(stacked).collect()
}

#[cfg(test)]
mod tests {
    use crate::{eval, text, DType, Tensor};

    /// Doubles `acc` while the trip count allows, scanning each value.
    const LOOP: &str = r#"graph "double" (%arg0: tensor<i64> "n", %arg1: tensor<2xf32> "x") {
  %0 = mx.constant {value = dense<[1]> : tensor<bool>} : tensor<bool>
  %1, %2 = mx.loop %arg0, %0, %arg1 {body = graph "body" (%arg0: tensor<i64> "i", %arg1: tensor<bool> "cond", %arg2: tensor<2xf32> "acc") {
    %0 = mx.add %arg2, %arg2 : tensor<2xf32>
    return "cond" = %arg1, "acc" = %0, "scan" = %0
  }, carried = 1, iterations = 3} : tensor<2xf32>, tensor<3x2xf32>
  return "acc" = %1, "scans" = %2
}
"#;

    #[test]
    fn a_loop_runs_its_body_and_checks_its_iterations() {
        let g = text::parse(LOOP).unwrap();
        let x = Tensor::from_f32s(vec![2], &[1.0, -0.5]);
        let n = |k| Tensor::from_i64s(DType::I64, vec![], &[k]);
        let out = eval::run(&g, &[n(3), x.clone()]).unwrap();
        assert_eq!(out[0].to_f64_vec(), [8.0, -4.0]);
        assert_eq!(out[1].to_f64_vec(), [2.0, -1.0, 4.0, -2.0, 8.0, -4.0]);
        let err = eval::run(&g, &[n(2), x]).unwrap_err();
        assert_eq!(err, "the loop ran 2 iterations, but `iterations` is 3");
    }
}
