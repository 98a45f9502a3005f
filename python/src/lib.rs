//! `mxc` for Python: MIGraphX's Python API (`parse_onnx` -> `program.compile` -> `run`,
//! `shape`, `argument`, building a program with `module`, `save` and `load` of `.mxr` files,
//! `quantize_fp16`, `quantize_bf16`, `quantize_int8` and `autocast_fp8`) over `mxc-driver`, so that a script
//! written for `migraphx` runs with `import mxc as migraphx`. numpy arrays go in and come out
//! without copies where their layout allows (`argument`); the GIL is released while a program
//! compiles or runs; errors are `mxc.Error` with the messages the command line prints.

mod argument;
mod errors;
mod explain;
mod module;
mod program;
mod quantize;
mod shape;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "mxc")]
fn mxc_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<errors::Error>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<shape::Shape>()?;
    m.add_class::<shape::DynamicDimension>()?;
    m.add_class::<argument::Argument>()?;
    m.add_class::<program::Target>()?;
    m.add_class::<program::Program>()?;
    m.add_class::<module::Module>()?;
    m.add_class::<module::Instruction>()?;
    m.add_class::<module::Operation>()?;
    m.add_function(wrap_pyfunction!(argument::generate_argument, m)?)?;
    m.add_function(wrap_pyfunction!(argument::fill_argument, m)?)?;
    m.add_function(wrap_pyfunction!(argument::create_argument, m)?)?;
    m.add_function(wrap_pyfunction!(argument::argument_from_pointer, m)?)?;
    m.add_function(wrap_pyfunction!(program::get_target, m)?)?;
    m.add_function(wrap_pyfunction!(program::parse_onnx, m)?)?;
    m.add_function(wrap_pyfunction!(program::save, m)?)?;
    m.add_function(wrap_pyfunction!(program::load, m)?)?;
    m.add_function(wrap_pyfunction!(module::op, m)?)?;
    m.add_function(wrap_pyfunction!(explain::explain, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quantize_fp16, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quantize_bf16, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quantize_int8, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::autocast_fp8, m)?)?;
    Ok(())
}
