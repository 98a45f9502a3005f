//! MIGraphX's precision functions: `quantize_fp16` and `quantize_bf16` (the ops named compute
//! in a half precision) and `autocast_fp8` (fp8 inputs and outputs taken and given as f32).
//! Each changes a program not compiled yet: it records `mxc_rewrite::precision::Precision`,
//! which `print()` shows and `compile` applies (docs/quantisation.md).

use crate::errors::refuse;
use crate::program::Program;
use mxc_dialects::DType;
use mxc_rewrite::precision::{op_kinds, Precision, Quantize};
use pyo3::prelude::*;

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
