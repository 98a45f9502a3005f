//! MIGraphX's precision functions: `quantize_fp16` and `quantize_bf16` (the ops named compute
//! in a half precision) and `autocast_fp8` (fp8 inputs and outputs taken and given as f32).
//! Each changes a program not compiled yet: it records `mxc_rewrite::precision::Precision`,
//! which `print()` shows and `compile` applies (docs/quantisation.md).

use crate::argument::Argument;
use crate::errors::{raise, refuse};
use crate::program::{Program, Target};
use mxc_dialects::DType;
use mxc_rewrite::precision::{int8_kinds, op_kinds, Calibration, Int8, Precision, Quantize};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::sync::Arc;

/// The ops of `prog` named by `ins_names` (mx's op names, or MIGraphX's `dot`, `convolution`,
/// `all`) compute in f16; its inputs and outputs keep their types. Replaces an earlier
/// `quantize_fp16` or `quantize_bf16`.
#[pyfunction]
#[pyo3(signature = (prog, ins_names = vec!["all".to_string()]))]
pub fn quantize_fp16(mut prog: PyRefMut<'_, Program>, ins_names: Vec<String>) -> PyResult<()> {
    quantize(&mut prog, "quantize_fp16", DType::F16, &ins_names)
}

/// As `quantize_fp16`, in bf16.
#[pyfunction]
#[pyo3(signature = (prog, ins_names = vec!["all".to_string()]))]
pub fn quantize_bf16(mut prog: PyRefMut<'_, Program>, ins_names: Vec<String>) -> PyResult<()> {
    quantize(&mut prog, "quantize_bf16", DType::BF16, &ins_names)
}

/// The convolutions and products of `prog` named by `ins_names` (MIGraphX's `dot`,
/// `convolution`, or mx's `conv`, `matmul`, `gemm`) compute on int8: `prog` runs on target
/// `t` (cpu or ref) on each `calibration` sample (a dict of inputs by name), and the ranges of
/// those ops' activations decide their u8 scales; weights are s8 per output channel.
#[pyfunction]
#[pyo3(signature = (prog, t, calibration = Vec::new(), ins_names = vec!["dot".to_string(), "convolution".to_string()]))]
pub fn quantize_int8(
    py: Python<'_>,
    mut prog: PyRefMut<'_, Program>,
    t: PyRef<'_, Target>,
    calibration: Vec<Bound<'_, PyDict>>,
    ins_names: Vec<String>,
) -> PyResult<()> {
    prog.not_compiled_yet("quantize_int8")?;
    let names: Vec<&str> = ins_names.iter().map(String::as_str).collect();
    let ops = int8_kinds(&names).map_err(|e| refuse(format!("quantize_int8: {e}")))?;
    if calibration.is_empty() {
        return Err(refuse(
            "quantize_int8: no calibration samples (give a list of dicts of inputs, as run takes)",
        ));
    }
    let mut samples = Vec::with_capacity(calibration.len());
    for (n, sample) in calibration.iter().enumerate() {
        let mut values = HashMap::new();
        for (name, value) in sample.iter() {
            let name: String = name.extract()?;
            let tensor = Argument::tensor_of(&value)
                .map_err(|e| refuse(format!("quantize_int8: calibration sample {n}, input `{name}`: {e}")))?;
            values.insert(name, tensor);
        }
        samples.push(values);
    }
    let graph = prog.graph().cloned().ok_or_else(|| {
        refuse("quantize_int8: only a program not compiled yet, built or imported with fixed shapes, can be quantised")
    })?;
    let target = t.0;
    let calibrated = py
        .detach(|| mxc_codegen::calibrate(&graph, &ops, &samples, target))
        .map_err(raise)?;
    let precision = Precision {
        int8: Some(Int8 {
            ops,
            calibration: Calibration::Ranges(Arc::new(calibrated)),
        }),
        ..prog.precision().clone()
    };
    prog.set_precision("quantize_int8", precision)
}

/// `prog`'s 8-bit float inputs and outputs become f32, converted to and from fp8 inside.
#[pyfunction]
pub fn autocast_fp8(mut prog: PyRefMut<'_, Program>) -> PyResult<()> {
    let precision = Precision {
        autocast_fp8: true,
        ..prog.precision().clone()
    };
    prog.set_precision("autocast_fp8", precision)
}

/// `prog` asked to compute the ops `names` in `to`; `what` names the function in an error.
fn quantize(prog: &mut Program, what: &str, to: DType, names: &[String]) -> PyResult<()> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let ops = op_kinds(&names).map_err(|e| refuse(format!("{what}: {e}")))?;
    let precision = Precision {
        quantize: Some(Quantize { to, ops }),
        ..prog.precision().clone()
    };
    prog.set_precision(what, precision)
}
