//! `argument`: a tensor value going into or coming out of a program. A numpy array (or
//! anything numpy can take) becomes one without a copy when it is C-contiguous and
//! little-endian; an argument becomes a numpy array through `__array_interface__`, again
//! without a copy (`np.asarray(arg)`; `np.array(arg)` copies, as numpy always does).

use crate::errors::{raise, refuse};
use crate::shape::Shape;
use mxc_dialects::{DType, Tensor, TensorType};
use mxc_driver::fill::{value_of, Fill, SplitMix64};
use mxc_kernels::npy::{dtype_of_descr, numpy_descr};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Arc, OnceLock};

/// A tensor value.
#[pyclass(name = "argument", module = "mxc", frozen)]
pub struct Argument {
    pub tensor: Tensor,
    /// For a type numpy lacks (bf16, the 8-, 4- and 2-bit types): the value numpy sees (floats
    /// as f32, narrow integers as the byte each is kept in), made when first asked for.
    numpy_view: OnceLock<Tensor>,
}

impl Argument {
    pub fn new(tensor: Tensor) -> Argument {
        Argument {
            tensor,
            numpy_view: OnceLock::new(),
        }
    }

    /// The tensor `value` holds: an argument's own, or a numpy array's (or anything
    /// `numpy.asarray` takes) without a copy where its layout allows.
    pub fn tensor_of(value: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        if let Ok(arg) = value.cast::<Argument>() {
            return Ok(arg.get().tensor.clone());
        }
        let py = value.py();
        let numpy = py.import("numpy")?;
        let mut array = numpy.call_method1("asarray", (value,))?;
        let contiguous: bool = array.getattr("flags")?.getattr("c_contiguous")?.extract()?;
        let byte_order: String = array.getattr("dtype")?.getattr("byteorder")?.extract()?;
        if !contiguous || byte_order == ">" {
            array = numpy.call_method1(
                "ascontiguousarray",
                (&array, array.getattr("dtype")?.call_method1("newbyteorder", ("<",))?),
            )?;
        }
        let interface = array.getattr("__array_interface__")?;
        let typestr: String = interface.get_item("typestr")?.extract()?;
        let dtype = dtype_of_descr(&typestr).ok_or_else(|| {
            refuse(format!(
                "a numpy array of dtype {} has no mxc element type",
                array.getattr("dtype").map_or("?".into(), |d| d.to_string())
            ))
        })?;
        let shape: Vec<usize> = interface.get_item("shape")?.extract()?;
        let (address, _readonly): (usize, bool) = interface.get_item("data")?.extract()?;
        let ty = TensorType::new(dtype, shape);
        let len = ty
            .checked_num_bytes()
            .ok_or_else(|| refuse("the array is larger than memory can address"))?;
        let bytes = Borrowed {
            address,
            len,
            _owner: Some(array.unbind()),
        };
        Tensor::view(ty, Arc::new(bytes), 0).ok_or_else(|| refuse("the array's bytes do not match its shape"))
    }

    /// The tensor numpy sees: the value itself, or for a type numpy lacks its stand-in.
    fn numpy_tensor(&self) -> PyResult<&Tensor> {
        let dtype = self.tensor.dtype();
        if dtype == DType::Str {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "an argument of strings has no numpy view: tolist() gives its strings",
            ));
        }
        if numpy_descr(dtype).is_some() {
            return Ok(&self.tensor);
        }
        Ok(self.numpy_view.get_or_init(|| match dtype.is_float() {
            true => self.tensor.cast(DType::F32),
            false => self.tensor.cast(dtype.numpy_stand_in()),
        }))
    }
}

/// Bytes that belong to someone else: a numpy array kept alive while they are used, or (from
/// `argument_from_pointer`) memory the caller promises outlives the argument.
struct Borrowed {
    address: usize,
    len: usize,
    _owner: Option<Py<PyAny>>,
}

impl AsRef<[u8]> for Borrowed {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `address` points at `len` readable bytes that stay put while `_owner` (the
        // numpy array) is alive, or, for `argument_from_pointer`, as long as its caller promised.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }
}

#[pymethods]
impl Argument {
    /// An argument holding `data`: a numpy array (not copied when C-contiguous), a list, a
    /// number or another argument.
    #[new]
    fn py_new(data: &Bound<'_, PyAny>) -> PyResult<Argument> {
        Ok(Argument::new(Argument::tensor_of(data)?))
    }

    fn get_shape(&self) -> Shape {
        Shape::of(&self.tensor.ty)
    }

    /// The address of the first element.
    fn data_ptr(&self) -> usize {
        self.tensor.bytes().as_ptr() as usize
    }

    /// The elements in row-major order, as one flat list (as MIGraphX gives them).
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let t = &self.tensor;
        let d = t.dtype();
        if let Some(strings) = t.strings() {
            return PyList::new(py, strings);
        }
        match (d == DType::Bool, d.is_float()) {
            (true, _) => PyList::new(py, t.to_i64_vec().into_iter().map(|v| v != 0)),
            (_, true) => PyList::new(py, t.to_f64_vec()),
            _ if d == DType::U64 => PyList::new(
                py,
                t.bytes()
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))),
            ),
            _ => PyList::new(py, t.to_i64_vec()),
        }
    }

    /// numpy's array interface (version 3): `np.asarray(arg)` views the argument's bytes.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = self.numpy_tensor()?;
        let typestr = numpy_descr(t.dtype()).expect("a numpy type");
        let dict = PyDict::new(py);
        dict.set_item("shape", PyTuple::new(py, t.shape())?)?;
        dict.set_item("typestr", typestr)?;
        dict.set_item("data", (t.bytes().as_ptr() as usize, true))?;
        dict.set_item("strides", py.None())?;
        dict.set_item("version", 3)?;
        Ok(dict)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Argument>().is_ok_and(|o| o.get().tensor == self.tensor)
    }

    fn __repr__(&self) -> String {
        format!("mxc.argument({})", self.tensor.ty)
    }
}

/// An argument of shape `s` with seeded pseudo-random values: floats uniform in [-1, 1),
/// integers and bools 0 or 1 (what `mxc run` gives inputs not given).
#[pyfunction]
#[pyo3(signature = (s, seed = 0))]
pub fn generate_argument(s: &Shape, seed: u64) -> PyResult<Argument> {
    let ty = s.tensor_type("generate_argument")?;
    let t = value_of(&ty, Fill::Seeded(seed), &mut SplitMix64(seed)).map_err(raise)?;
    Ok(Argument::new(t))
}

/// An argument of shape `s` with every element `value`.
#[pyfunction]
pub fn fill_argument(s: &Shape, value: f64) -> PyResult<Argument> {
    let ty = s.tensor_type("fill_argument")?;
    let t = value_of(&ty, Fill::Constant(value), &mut SplitMix64(0)).map_err(raise)?;
    Ok(Argument::new(t))
}

/// An argument of shape `s` holding `values`, one per element in row-major order.
#[pyfunction]
pub fn create_argument(s: &Shape, values: Vec<f64>) -> PyResult<Argument> {
    let ty = s.tensor_type("create_argument")?;
    let n = ty.num_elements();
    if values.len() != n {
        return Err(refuse(format!(
            "create_argument: {} values for the {n} elements of {}",
            values.len(),
            ty
        )));
    }
    let t = match ty.dtype.is_float() {
        true => Tensor::from_f64s(ty.dtype, ty.shape, &values),
        false => Tensor::from_i64s(
            ty.dtype,
            ty.shape,
            &values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
        ),
    };
    Ok(Argument::new(t))
}

/// An argument over the memory at `address`, not copied: the caller keeps those
/// `shape.bytes()` bytes alive and unchanged while the argument is used.
#[pyfunction]
pub fn argument_from_pointer(shape: &Shape, address: usize) -> PyResult<Argument> {
    let ty = shape.tensor_type("argument_from_pointer")?;
    if address == 0 {
        return Err(refuse("argument_from_pointer: the address is 0"));
    }
    let len = ty.num_bytes();
    let bytes = Borrowed {
        address,
        len,
        _owner: None,
    };
    let t = Tensor::view(ty, Arc::new(bytes), 0).ok_or_else(|| refuse("argument_from_pointer: the shape's bytes"))?;
    Ok(Argument::new(t))
}
