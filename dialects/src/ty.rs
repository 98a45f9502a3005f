//! Tensor types: an element type and a static shape.

use crate::DType;
use std::fmt;

/// The type of an SSA value: element type and shape (a scalar has an empty shape).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorType {
    pub fn new(dtype: DType, shape: Vec<usize>) -> Self {
        TensorType { dtype, shape }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn num_bytes(&self) -> usize {
        self.num_elements() * self.dtype.size()
    }

    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType::new(dtype, self.shape.clone())
    }

    pub fn with_shape(&self, shape: Vec<usize>) -> TensorType {
        TensorType::new(self.dtype, shape)
    }
}

/// Row-major strides (in elements) of a shape.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Prints as `tensor<2x3xf32>` (a scalar is `tensor<f32>`).
impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.dtype)
    }
}
