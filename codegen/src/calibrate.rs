//! Calibration for int8 quantisation (`--int8 --calibration`, MIGraphX's `quantize_int8`):
//! the f32 program, with the activation operands of the ops to quantise added to its outputs,
//! compiled for a host target and run on each sample; each operand's least and greatest value
//! over all samples is its range (onnxruntime's `MinMax` calibration).

use crate::{compile, CodegenError, CompileOptions, Target};
use mxc_dialects::{Def, Graph, OpKind, Tensor, ValueId};
use mxc_kernels::{Executable, Parallelism};
use mxc_rewrite::precision::int8::{self, Calibrated};
use std::collections::HashMap;

/// The ranges of `graph`'s operands that int8 quantisation of the op kinds `kinds` needs,
/// from running it on `target` (`cpu` or `ref`) on `samples`.
pub fn calibrate(
    graph: &Graph,
    kinds: &Option<Vec<OpKind>>,
    samples: &[HashMap<String, Tensor>],
    target: Target,
) -> Result<Calibrated, CodegenError> {
    let fail = |message: String| CodegenError::Calibration(message);
    if samples.is_empty() {
        return Err(fail("no samples to calibrate on".into()));
    }
    if !matches!(target, Target::Cpu | Target::Ref) {
        return Err(fail(format!(
            "calibration runs on the cpu or ref target, not {}",
            target.name()
        )));
    }
    let observed = int8::observed(graph, kinds);
    // the observed values that are not inputs become outputs of their own
    let mut probe = graph.clone();
    let mut outputs: HashMap<String, ValueId> = HashMap::new();
    for (i, v) in observed.iter().enumerate() {
        if let Def::Op { .. } = graph.def(*v) {
            let name = format!("mxc.calibration.{i}");
            probe.add_output(&name, *v);
            outputs.insert(name, *v);
        }
    }
    let options = CompileOptions::default();
    let compiled = compile(&probe, target, &options)?;
    let mut run = Executable::load(compiled.program, &compiled.library).map_err(|e| fail(e.to_string()))?;
    run.set_parallelism(Parallelism::all_cores())
        .map_err(|e| fail(e.to_string()))?;
    let mut ranges: HashMap<ValueId, (f32, f32)> = HashMap::new();
    for (n, sample) in samples.iter().enumerate() {
        let sample = inputs_of(graph, sample).map_err(|e| fail(format!("sample {n}: {e}")))?;
        let results = run.run(&sample).map_err(|e| fail(format!("sample {n}: {e}")))?;
        for (name, tensor) in &results {
            if let Some(v) = outputs.get(name) {
                widen(&mut ranges, *v, tensor);
            }
        }
        for p in &graph.inputs {
            if let (true, Some(t)) = (observed.contains(&p.value), sample.get(&p.name)) {
                widen(&mut ranges, p.value, t);
            }
        }
    }
    let (chosen, quantisable) = int8::counts(graph, kinds);
    Ok(Calibrated {
        ranges,
        samples: samples.len(),
        fingerprint: Calibrated::fingerprint_of(graph),
        chosen,
        quantisable,
    })
}

/// `sample`'s value of each of `graph`'s inputs, found by its name or by its file's stem
/// (`mxc_kernels::npy::file_name_for`: what `--save-inputs` writes it as).
fn inputs_of(graph: &Graph, sample: &HashMap<String, Tensor>) -> Result<HashMap<String, Tensor>, String> {
    let stem = |name: &str| {
        let file = mxc_kernels::npy::file_name_for(name);
        file.trim_end_matches(".npy").to_string()
    };
    for key in sample.keys() {
        if !graph.inputs.iter().any(|p| &p.name == key || &stem(&p.name) == key) {
            let names: Vec<&str> = graph.inputs.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "`{key}` is not an input of the model (its inputs: {})",
                names.join(", ")
            ));
        }
    }
    let mut out = HashMap::new();
    for p in &graph.inputs {
        let value = (sample.get(&p.name).or_else(|| sample.get(&stem(&p.name)))).ok_or_else(|| {
            format!(
                "no value for input `{}` ({})",
                p.name,
                mxc_kernels::npy::file_name_for(&p.name)
            )
        })?;
        out.insert(p.name.clone(), value.clone());
    }
    Ok(out)
}

/// `ranges[v]` widened to hold `t`'s finite values (a NaN is left out; an infinity makes the
/// range infinite, and the op stays f32).
fn widen(ranges: &mut HashMap<ValueId, (f32, f32)>, v: ValueId, t: &Tensor) {
    let range = ranges.entry(v).or_insert((f32::INFINITY, f32::NEG_INFINITY));
    for x in t.to_f64_vec() {
        let x = x as f32;
        if !x.is_nan() {
            range.0 = range.0.min(x);
            range.1 = range.1.max(x);
        }
    }
}
