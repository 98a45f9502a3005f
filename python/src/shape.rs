//! `shape` and `dynamic_dimension`: a tensor's element type and dimensions, fixed or symbolic
//! (`n[1..8]{2, 4}`, the notation of docs/shapes.md), as MIGraphX's Python API has them.

use crate::errors::{raise, refuse};
use mxc_dialects::dim::{self, Dim, Symbol};
use mxc_dialects::{DType, TensorType};
use pyo3::prelude::*;
use pyo3::types::PySet;

/// Each element type with its MIGraphX name; `shape.type()` is the index here.
const TYPES: &[(DType, &str)] = &[
    (DType::Bool, "bool_type"),
    (DType::F16, "half_type"),
    (DType::F32, "float_type"),
    (DType::F64, "double_type"),
    (DType::U8, "uint8_type"),
    (DType::I8, "int8_type"),
    (DType::U16, "uint16_type"),
    (DType::I16, "int16_type"),
    (DType::I32, "int32_type"),
    (DType::I64, "int64_type"),
    (DType::U32, "uint32_type"),
    (DType::U64, "uint64_type"),
    (DType::F8E4M3FNUZ, "fp8e4m3fnuz_type"),
    (DType::F8E4M3FN, "fp8e4m3fn_type"),
    (DType::F8E5M2, "fp8e5m2_type"),
    (DType::BF16, "bf16_type"),
    (DType::F8E5M2FNUZ, "fp8e5m2fnuz_type"),
    (DType::F8E8M0FNU, "fp8e8m0fnu_type"),
    (DType::F4E2M1FN, "fp4e2m1fn_type"),
    (DType::I4, "int4_type"),
    (DType::U4, "uint4_type"),
    (DType::I2, "int2_type"),
    (DType::U2, "uint2_type"),
    (DType::Str, "string_type"),
];

/// The MIGraphX name of `dtype`.
pub fn type_name(dtype: DType) -> &'static str {
    TYPES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map_or("string_type", |(_, n)| n)
}

/// The element type `value` names: a MIGraphX name (`float_type`), an mx one (`f32`) or
/// `shape.type()`'s number.
pub fn dtype_of(value: &Bound<'_, PyAny>) -> PyResult<DType> {
    if let Ok(n) = value.extract::<usize>() {
        return TYPES
            .get(n)
            .map(|(d, _)| *d)
            .ok_or_else(|| refuse(format!("type {n}: there are {} element types", TYPES.len())));
    }
    let name: String = value.extract()?;
    let found = TYPES.iter().find(|(_, n)| *n == name).map(|(d, _)| *d);
    found.or_else(|| DType::from_name(&name)).ok_or_else(|| {
        let names: Vec<&str> = TYPES.iter().map(|(_, n)| *n).collect();
        refuse(format!("type `{name}`: not an element type ({})", names.join(", ")))
    })
}

/// The shape of a tensor: its element type and dimensions, each a size or a symbolic
/// expression; strides, when given, for a fixed layout other than the packed row-major one.
#[pyclass(name = "shape", module = "mxc", frozen, eq)]
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub dtype: DType,
    pub dims: Vec<Dim>,
    pub strides: Option<Vec<usize>>,
}

impl Shape {
    /// The shape of a tensor type (fixed or symbolic: a program for every size takes and gives
    /// symbolic ones; packed).
    pub fn of(ty: &TensorType) -> Shape {
        Shape {
            dtype: ty.dtype,
            dims: ty.dims(),
            strides: None,
        }
    }

    /// The sizes, when every dimension is fixed; else an error naming what asked.
    pub fn fixed(&self, what: &str) -> PyResult<Vec<usize>> {
        let sizes: Option<Vec<usize>> = self.dims.iter().map(|d| d.as_constant().map(|n| n as usize)).collect();
        sizes.ok_or_else(|| {
            refuse(format!(
                "{what}: the shape {} is dynamic (its sizes are known when a value is given)",
                self.text()
            ))
        })
    }

    /// The fixed tensor type, packed row-major (what arguments hold).
    pub fn tensor_type(&self, what: &str) -> PyResult<TensorType> {
        let ty = TensorType::new(self.dtype, self.fixed(what)?);
        if self
            .strides
            .as_ref()
            .is_some_and(|s| *s != mxc_dialects::strides_of(&ty.shape))
        {
            return Err(refuse(format!(
                "{what}: the shape {} has strides {:?}; values are packed row-major",
                self.text(),
                self.strides.as_deref().unwrap_or_default()
            )));
        }
        Ok(ty)
    }

    /// As mx prints a type: `tensor<n[1..8]x3xf32>`.
    fn text(&self) -> String {
        let dims: String = self.dims.iter().map(|d| format!("{d}x")).collect();
        format!("tensor<{dims}{}>", self.dtype)
    }

    /// The strides the shape has: those given, else packed row-major.
    fn layout(&self, what: &str) -> PyResult<Vec<usize>> {
        match &self.strides {
            Some(s) => Ok(s.clone()),
            None => Ok(mxc_dialects::strides_of(&self.fixed(what)?)),
        }
    }
}

#[pymethods]
impl Shape {
    /// `shape(type="float_type", lens=[1, 3], strides=None)` for a fixed shape, or
    /// `shape(type="float_type", dyn_dims=["n[1..8]{2, 4}", "3"])` for a symbolic one
    /// (each dimension an expression, a `dynamic_dimension` or a size).
    #[new]
    #[pyo3(signature = (r#type = None, lens = None, strides = None, dyn_dims = None, dyn_strides = None))]
    fn new(
        r#type: Option<&Bound<'_, PyAny>>,
        lens: Option<Vec<usize>>,
        strides: Option<Vec<usize>>,
        dyn_dims: Option<Vec<Bound<'_, PyAny>>>,
        dyn_strides: Option<Vec<String>>,
    ) -> PyResult<Shape> {
        let dtype = match r#type {
            Some(t) => dtype_of(t)?,
            None => DType::F32,
        };
        if dyn_strides.is_some() {
            return Err(refuse(
                "shape(dyn_strides=...): mxc's symbolic shapes are packed row-major; strides of symbols are not supported",
            ));
        }
        let dims = match (lens, dyn_dims) {
            (Some(_), Some(_)) => return Err(refuse("shape(): give lens or dyn_dims, not both")),
            (Some(lens), None) => lens.iter().map(|&d| Dim::constant(d as u64)).collect(),
            (None, Some(dyn_dims)) => (dyn_dims.iter().enumerate())
                .map(|(axis, d)| dim_of(d, || format!("_d{axis}")))
                .collect::<PyResult<_>>()?,
            (None, None) => Vec::new(),
        };
        if let Some(s) = &strides {
            if s.len() != dims.len() {
                return Err(refuse(format!(
                    "shape(): {} strides for {} dimensions",
                    s.len(),
                    dims.len()
                )));
            }
        }
        Ok(Shape { dtype, dims, strides })
    }

    /// The element type's number (an index into mxc's list of types; `type_string()` names it).
    fn r#type(&self) -> usize {
        TYPES
            .iter()
            .position(|(d, _)| *d == self.dtype)
            .unwrap_or(TYPES.len() - 1)
    }

    /// The element type's MIGraphX name: `float_type`.
    fn type_string(&self) -> &'static str {
        type_name(self.dtype)
    }

    /// The sizes of the dimensions (a dynamic shape has none: `min_lens`, `max_lens`).
    fn lens(&self) -> PyResult<Vec<usize>> {
        self.fixed("lens()")
    }

    /// Each dimension's least size.
    fn min_lens(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.bounds().0.max(0) as u64).collect()
    }

    /// Each dimension's largest size.
    fn max_lens(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.bounds().1.max(0) as u64).collect()
    }

    fn strides(&self) -> PyResult<Vec<usize>> {
        self.layout("strides()")
    }

    fn elements(&self) -> PyResult<usize> {
        Ok(self.fixed("elements()")?.iter().product())
    }

    fn bytes(&self) -> PyResult<usize> {
        Ok(self.elements()? * self.dtype.size())
    }

    fn type_size(&self) -> usize {
        self.dtype.size()
    }

    fn ndim(&self) -> usize {
        self.dims.len()
    }

    /// Whether the elements fill their memory without gaps (in some order of the axes).
    fn packed(&self) -> PyResult<bool> {
        if self.dynamic() {
            return Ok(true);
        }
        let (lens, strides) = (self.fixed("packed()")?, self.layout("packed()")?);
        let mut axes: Vec<usize> = (0..lens.len()).filter(|&a| lens[a] != 1).collect();
        axes.sort_by_key(|&a| std::cmp::Reverse(strides[a]));
        let mut expected = 1;
        for &a in axes.iter().rev() {
            if strides[a] != expected {
                return Ok(false);
            }
            expected *= lens[a];
        }
        Ok(true)
    }

    /// Whether the axes are laid out in an order other than row-major.
    fn transposed(&self) -> PyResult<bool> {
        if self.dynamic() || self.broadcasted()? {
            return Ok(false);
        }
        let (lens, strides) = (self.fixed("transposed()")?, self.layout("transposed()")?);
        let kept: Vec<usize> = (0..lens.len()).filter(|&a| lens[a] != 1).map(|a| strides[a]).collect();
        Ok(kept.windows(2).any(|w| w[0] < w[1]))
    }

    /// Whether some axis repeats its elements (stride 0).
    fn broadcasted(&self) -> PyResult<bool> {
        match self.dynamic() {
            true => Ok(false),
            false => Ok(self.layout("broadcasted()")?.contains(&0)),
        }
    }

    /// Packed, row-major and not broadcast.
    fn standard(&self) -> PyResult<bool> {
        Ok(self.packed()? && !self.transposed()? && !self.broadcasted()?)
    }

    /// Every stride 0: one element seen everywhere.
    fn scalar(&self) -> PyResult<bool> {
        match self.dynamic() {
            true => Ok(false),
            false => Ok(self.layout("scalar()")?.iter().all(|&s| s == 0)),
        }
    }

    /// Whether some dimension is symbolic.
    fn dynamic(&self) -> bool {
        self.dims.iter().any(|d| d.as_constant().is_none())
    }

    /// Whether the shape is symbolic: in mxc a dynamic shape is always symbolic expressions
    /// (its fixed dimensions constant ones).
    fn symbolic(&self) -> bool {
        self.dynamic()
    }

    fn dyn_dims(&self) -> Vec<DynamicDimension> {
        self.dims.iter().map(|d| DynamicDimension { dim: d.clone() }).collect()
    }

    /// The strides of a symbolic shape as expressions (packed row-major); empty for a fixed one.
    fn dyn_strides(&self) -> PyResult<Vec<String>> {
        if !self.dynamic() {
            return Ok(Vec::new());
        }
        let mut strides = vec![Dim::constant(1); self.dims.len()];
        for a in (0..self.dims.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1].mul(&self.dims[a + 1]).map_err(raise)?;
        }
        Ok(strides.iter().map(Dim::to_string).collect())
    }

    pub fn __str__(&self) -> String {
        self.text()
    }

    fn __repr__(&self) -> String {
        format!("mxc.shape({})", self.text())
    }
}

/// One dimension of a shape given in Python: a size, an expression (`n[1..8] * 3 + 1`) or a
/// `dynamic_dimension` (a range-based one becomes a symbol named by `name`).
pub fn dim_of(value: &Bound<'_, PyAny>, name: impl FnOnce() -> String) -> PyResult<Dim> {
    if let Ok(n) = value.extract::<u64>() {
        return Ok(Dim::constant(n));
    }
    if let Ok(text) = value.extract::<String>() {
        return dim::parse(&text).map_err(|e| refuse(format!("dimension `{text}`: {e}")));
    }
    match value.cast::<DynamicDimension>() {
        Ok(d) => d.get().named(&name()),
        Err(_) => Err(refuse(format!(
            "a dimension is a size, an expression such as \"n[1..8]\" or a dynamic_dimension, not {}",
            value.get_type().name()?
        ))),
    }
}

/// A dimension: a fixed size, a range with optimal sizes (`dynamic_dimension(1, 8, {2, 4})`)
/// or a symbolic expression (`dynamic_dimension("n[1..8]{2, 4}")`).
#[pyclass(name = "dynamic_dimension", module = "mxc", frozen, eq)]
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicDimension {
    /// A range-based dimension is a symbol named `?` until it is bound to an axis (`named`).
    pub dim: Dim,
}

/// The name a range-based dimension has until it is given one.
const UNNAMED: &str = "_";

impl DynamicDimension {
    /// The dimension, a range-based one as a symbol called `name`.
    pub fn named(&self, name: &str) -> PyResult<Dim> {
        match self.dim.as_symbol() {
            Some(s) if s.name == UNNAMED => {
                let symbol = Symbol::new(name, s.ranges.clone(), s.optimals.clone()).map_err(raise)?;
                Ok(Dim::symbol(symbol))
            }
            _ => Ok(self.dim.clone()),
        }
    }

    /// Whether it is a range rather than an expression of named symbols.
    fn range_based(&self) -> bool {
        self.dim.as_symbol().is_some_and(|s| s.name == UNNAMED)
    }
}

#[pymethods]
impl DynamicDimension {
    /// `dynamic_dimension(min, max, optimals=set())`, or `dynamic_dimension("n[1..8]{2, 4}")`.
    #[new]
    #[pyo3(signature = (min, max = None, optimals = None))]
    fn new(min: &Bound<'_, PyAny>, max: Option<u64>, optimals: Option<Vec<u64>>) -> PyResult<DynamicDimension> {
        if let Ok(text) = min.extract::<String>() {
            if max.is_some() || optimals.is_some() {
                return Err(refuse(
                    "dynamic_dimension(expression): the expression holds the ranges and optimals",
                ));
            }
            let dim = dim::parse(&text).map_err(|e| refuse(format!("dynamic_dimension(\"{text}\"): {e}")))?;
            return Ok(DynamicDimension { dim });
        }
        let min: u64 = min.extract()?;
        let max = max.unwrap_or(min);
        let optimals = optimals.unwrap_or_default();
        if min == max && optimals.iter().all(|&o| o == min) {
            return Ok(DynamicDimension {
                dim: Dim::constant(min),
            });
        }
        let symbol = Symbol::new(UNNAMED, vec![(min, max)], optimals)
            .map_err(|e| refuse(format!("dynamic_dimension({min}, {max}): {e}")))?;
        Ok(DynamicDimension {
            dim: Dim::symbol(symbol),
        })
    }

    fn is_fixed(&self) -> bool {
        self.dim.as_constant().is_some()
    }

    fn is_symbolic(&self) -> bool {
        !self.is_fixed() && !self.range_based()
    }

    #[getter]
    fn min(&self) -> u64 {
        self.dim.bounds().0.max(0) as u64
    }

    #[getter]
    fn max(&self) -> u64 {
        self.dim.bounds().1.max(0) as u64
    }

    #[getter]
    fn optimals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PySet>> {
        let optimals = match self.dim.as_symbol() {
            Some(s) => s.optimals.clone(),
            None => self.dim.as_constant().into_iter().collect(),
        };
        PySet::new(py, optimals)
    }

    /// The expression (`n[1..8] * 3 + 1`), or `None` for a size or a range.
    #[getter]
    fn expression(&self) -> Option<String> {
        self.is_symbolic().then(|| self.dim.to_string())
    }

    fn __str__(&self) -> String {
        match (self.range_based(), self.dim.as_symbol()) {
            (true, Some(s)) => {
                let (lo, hi) = s.bounds();
                format!("[{lo}..{hi}]{:?}", s.optimals)
            }
            _ => self.dim.to_string(),
        }
    }

    fn __repr__(&self) -> String {
        format!("mxc.dynamic_dimension({})", self.__str__())
    }
}
