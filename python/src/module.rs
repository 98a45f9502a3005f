//! Building a program without ONNX: a `module` (a program's main graph) takes parameters,
//! literals and instructions, each an `instruction` naming the value it defines, and returns
//! some of them. Ops are mx's (`mxc.op("add")`, `mxc.op("transpose", perm=[1, 0])`), each
//! typed by its own rule as it is added, so a wrong operand is refused where it is added.

use crate::argument::Argument;
use crate::errors::{raise, refuse};
use crate::program::Program;
use crate::shape::{dtype_of, Shape};
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

/// The main module of a program not compiled yet.
#[pyclass(name = "module", module = "mxc")]
pub struct Module {
    program: Py<Program>,
}

/// A value of a module: a parameter, a literal or an instruction's result.
#[pyclass(name = "instruction", module = "mxc", frozen)]
pub struct Instruction {
    value: ValueId,
    program: Py<Program>,
}

/// An mx op with its attributes, to add with `module.add_instruction`.
#[pyclass(name = "op", module = "mxc", frozen)]
pub struct Operation {
    kind: OpKind,
    attrs: Attrs,
}

impl Module {
    pub fn of(program: Py<Program>) -> Module {
        Module { program }
    }

    /// The values of `args`, each an instruction of this module.
    fn values(&self, args: &[Bound<'_, Instruction>], what: &str) -> PyResult<Vec<ValueId>> {
        (args.iter())
            .map(|a| {
                let a = a.get();
                match a.program.is(&self.program) {
                    true => Ok(a.value),
                    false => Err(refuse(format!(
                        "{what}: an argument is an instruction of another program"
                    ))),
                }
            })
            .collect()
    }

    fn instruction(&self, py: Python<'_>, value: ValueId) -> Instruction {
        Instruction {
            value,
            program: self.program.clone_ref(py),
        }
    }
}

#[pymethods]
impl Module {
    /// Adds an input called `name` of the fixed shape `shape`.
    fn add_parameter(&self, py: Python<'_>, name: &str, shape: &Shape) -> PyResult<Instruction> {
        let ty = shape.tensor_type(&format!("add_parameter(`{name}`)"))?;
        let mut program = self.program.borrow_mut(py);
        let g = program.graph_mut("add_parameter")?;
        if g.inputs.iter().any(|p| p.name == name) {
            return Err(refuse(format!(
                "add_parameter: the module has a parameter `{name}` already"
            )));
        }
        let v = g.add_input(name, ty);
        Ok(self.instruction(py, v))
    }

    /// Adds a constant holding `data` (a numpy array, list or argument), copied.
    fn add_literal(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Instruction> {
        let t = Argument::tensor_of(data)?;
        // the module keeps its own bytes, not a view of the caller's array
        let owned = Tensor::from_bytes(t.ty.clone(), t.bytes().to_vec())
            .ok_or_else(|| refuse("add_literal: the value's bytes"))?;
        let mut program = self.program.borrow_mut(py);
        let v = program.graph_mut("add_literal")?.constant(owned);
        Ok(self.instruction(py, v))
    }

    /// Adds `op` applied to `args`; its result type comes from the op's rule. `mod_args`
    /// (modules as operands) are not supported: regions are built from ONNX only.
    #[pyo3(signature = (op, args, mod_args = None))]
    fn add_instruction(
        &self,
        py: Python<'_>,
        op: &Operation,
        args: Vec<Bound<'_, Instruction>>,
        mod_args: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<Instruction> {
        if mod_args.is_some_and(|m| !m.is_empty()) {
            return Err(refuse(
                "add_instruction(mod_args=...): ops with regions are imported from ONNX, not built",
            ));
        }
        let operands = self.values(&args, "add_instruction")?;
        let mut program = self.program.borrow_mut(py);
        let g = program.graph_mut("add_instruction")?;
        let v = g
            .build1(op.kind, operands, op.attrs.clone())
            .map_err(|e| refuse(format!("add_instruction(mx.{}): {e}", op.kind.name())))?;
        Ok(self.instruction(py, v))
    }

    /// Makes `args` the module's outputs, named `main:#output_0`, ... as MIGraphX names them.
    fn add_return(&self, py: Python<'_>, args: Vec<Bound<'_, Instruction>>) -> PyResult<()> {
        let values = self.values(&args, "add_return")?;
        let mut program = self.program.borrow_mut(py);
        let g = program.graph_mut("add_return")?;
        if !g.outputs.is_empty() {
            return Err(refuse("add_return: the module returns already"));
        }
        for (i, v) in values.into_iter().enumerate() {
            g.add_output(&format!("main:#output_{i}"), v);
        }
        Ok(())
    }

    /// Prints the module in mx text.
    fn print(&self, py: Python<'_>) -> PyResult<()> {
        println!("{}", self.program.borrow(py).__str__()?);
        Ok(())
    }

    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        self.program.borrow(py).__str__()
    }
}

#[pymethods]
impl Instruction {
    /// The shape of the value.
    fn shape(&self, py: Python<'_>) -> PyResult<Shape> {
        let program = self.program.borrow(py);
        let g = program
            .graph()
            .ok_or_else(|| refuse("instruction.shape: the program is compiled; its instructions are gone"))?;
        Ok(Shape::of(g.ty(self.value)))
    }

    fn __repr__(&self) -> String {
        format!("<mxc.instruction %{}>", self.value.0)
    }
}

#[pymethods]
impl Operation {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn __repr__(&self) -> String {
        format!(
            "mxc.op(\"{}\", {:?})",
            self.kind.name(),
            self.attrs.0.keys().collect::<Vec<_>>()
        )
    }
}

/// The mx op `name` (`add`, `matmul`, `transpose`, ...: docs/ops.md, or `mxc read`'s
/// output) with its attributes as keyword arguments: ints, floats, strings, lists of either,
/// element types (`to="float_type"`) and arrays (tensor attributes).
#[pyfunction]
#[pyo3(signature = (name, **attrs))]
pub fn op(name: &str, attrs: Option<&Bound<'_, PyDict>>) -> PyResult<Operation> {
    let bare = name.strip_prefix("mx.").unwrap_or(name);
    let kind = OpKind::from_name(bare).ok_or_else(|| refuse(format!("op `{name}`: mx has no such op")))?;
    let mut out = Attrs::new();
    for (key, value) in attrs.into_iter().flat_map(|a| a.iter()) {
        let key: String = key.extract()?;
        if !kind.attr_names().contains(&key.as_str()) {
            return Err(refuse(format!(
                "op `{bare}`: no attribute `{key}` (it takes: {})",
                kind.attr_names().join(", ")
            )));
        }
        let attr = attr_of(&value).map_err(|e| refuse(format!("op `{bare}` attribute `{key}`: {e}")))?;
        out.set(&key, attr);
    }
    Ok(Operation { kind, attrs: out })
}

/// The attribute value a Python value stands for.
fn attr_of(value: &Bound<'_, PyAny>) -> PyResult<Attr> {
    if value.is_instance_of::<PyBool>() {
        return Ok(Attr::Int(value.extract::<bool>()? as i64));
    }
    if value.is_instance_of::<PyInt>() {
        return Ok(Attr::Int(value.extract()?));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(Attr::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        return Ok(match dtype_of(value) {
            Ok(d) if d != DType::Str || text == "string_type" => Attr::DType(d),
            _ => Attr::Str(text),
        });
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<pyo3::types::PyTuple>() {
        if let Ok(ints) = value.extract::<Vec<i64>>() {
            return Ok(Attr::Ints(ints));
        }
        if let Ok(floats) = value.extract::<Vec<f64>>() {
            return Ok(Attr::Floats(floats));
        }
    }
    let t = Argument::tensor_of(value).map_err(|e| refuse(format!("not an attribute value: {e}")))?;
    let owned = Tensor::from_bytes(TensorType::new(t.dtype(), t.shape().to_vec()), t.bytes().to_vec());
    owned.map(Attr::Tensor).ok_or_else(|| raise("the array's bytes"))
}
