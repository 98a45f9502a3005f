//! Tensor types: an element type and a static shape, with checked size arithmetic.

use crate::DType;
use std::fmt;

/// The type of an SSA value: element type and shape (a scalar has an empty shape).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Why a tensor type is refused: its size is not a number of bytes memory can have, or it is
/// over a limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("shape {shape:?} of {dtype} is too large: its size overflows")]
    Overflow { dtype: DType, shape: Vec<usize> },
    #[error(
        "shape {shape:?} of {dtype} takes {bytes} bytes, more than the tensor-size limit of {limit} bytes \
         ({LIMIT_VAR}, the memory and the process's limits set it)"
    )]
    OverLimit {
        dtype: DType,
        shape: Vec<usize>,
        bytes: usize,
        limit: usize,
    },
    #[error("{LIMIT_VAR}={value}: not a number of bytes")]
    BadLimit { value: String },
}

/// The environment variable that sets the tensor-size limit, in bytes.
pub const LIMIT_VAR: &str = "MXC_MAX_TENSOR_BYTES";

/// The limit when neither the environment nor the system says: 64 GiB.
const FALLBACK_LIMIT: usize = 64 << 30;

/// The most bytes one tensor that is computed (not a constant) may take: the smallest of
/// `MXC_MAX_TENSOR_BYTES` (when set), the machine's physical memory, the process's
/// address-space and data-segment limits and its cgroup's memory limit (`memory.rs`); 64 GiB
/// when none of them is known.
pub fn max_tensor_bytes() -> Result<usize, SizeError> {
    let given = match std::env::var(LIMIT_VAR) {
        Ok(value) => Some(value.trim().parse().map_err(|_| SizeError::BadLimit { value })?),
        Err(_) => None,
    };
    let system = crate::memory::memory_bounds().into_iter().map(|(_, bytes)| bytes);
    Ok(given.into_iter().chain(system).min().unwrap_or(FALLBACK_LIMIT))
}

impl TensorType {
    pub fn new(dtype: DType, shape: Vec<usize>) -> Self {
        TensorType { dtype, shape }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The element count; saturates at `usize::MAX` for a shape `check_size` refuses (never a
    /// wrapped, small count).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().fold(1usize, |n, &d| n.saturating_mul(d))
    }

    /// The byte count; saturates like `num_elements`.
    pub fn num_bytes(&self) -> usize {
        self.num_elements().saturating_mul(self.dtype.size())
    }

    /// The byte count, or `None` when the shape's extent (the product of its dims, a zero dim
    /// counted as one) in bytes exceeds `isize::MAX`: then strides and offsets inside a tensor
    /// of an accepted type never overflow, even when it has no elements.
    pub fn checked_num_bytes(&self) -> Option<usize> {
        let extent = self
            .shape
            .iter()
            .try_fold(self.dtype.size(), |bytes, &d| bytes.checked_mul(d.max(1)))
            .filter(|&bytes| bytes <= isize::MAX as usize)?;
        Some(if self.shape.contains(&0) { 0 } else { extent })
    }

    /// The element count, or `None` where `checked_num_bytes` is.
    pub fn checked_num_elements(&self) -> Option<usize> {
        self.checked_num_bytes().map(|bytes| bytes / self.dtype.size())
    }

    /// The byte count, or an error naming the shape when it overflows (see `checked_num_bytes`).
    pub fn check_size(&self) -> Result<usize, SizeError> {
        self.checked_num_bytes().ok_or_else(|| SizeError::Overflow {
            dtype: self.dtype,
            shape: self.shape.clone(),
        })
    }

    /// Like `check_size`, also refusing more than `limit` bytes.
    pub fn check_limit(&self, limit: usize) -> Result<usize, SizeError> {
        let bytes = self.check_size()?;
        if bytes > limit {
            return Err(SizeError::OverLimit {
                dtype: self.dtype,
                shape: self.shape.clone(),
                bytes,
                limit,
            });
        }
        Ok(bytes)
    }

    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType::new(dtype, self.shape.clone())
    }

    pub fn with_shape(&self, shape: Vec<usize>) -> TensorType {
        TensorType::new(self.dtype, shape)
    }
}

/// Row-major strides (in elements) of a shape; they saturate like `num_elements`.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(f32s(&[2, 3]).checked_num_bytes(), Some(24));
        assert_eq!(f32s(&[2, 3]).checked_num_elements(), Some(6));
        assert_eq!(f32s(&[]).checked_num_bytes(), Some(4));
        assert_eq!(f32s(&[0, 5]).checked_num_bytes(), Some(0));
        // 2^62 * 4 elements wrap to 0 in unchecked arithmetic
        let huge = f32s(&[1 << 62, 4]);
        assert_eq!(huge.checked_num_bytes(), None);
        assert_eq!(huge.num_elements(), usize::MAX, "saturates, never wraps");
        assert_eq!(huge.num_bytes(), usize::MAX);
        // bytes overflow though the elements do not; an empty tensor with a huge extent
        assert_eq!(f32s(&[1 << 62]).checked_num_bytes(), None);
        assert_eq!(f32s(&[0, 1 << 40, 1 << 40]).checked_num_bytes(), None);
        assert_eq!(
            huge.check_size().unwrap_err().to_string(),
            "shape [4611686018427387904, 4] of f32 is too large: its size overflows"
        );
    }

    #[test]
    fn the_default_limit_is_the_smallest_bound_the_system_gives() {
        if std::env::var_os(LIMIT_VAR).is_none() && cfg!(target_os = "linux") {
            let limit = max_tensor_bytes().unwrap();
            let bounds = crate::memory::memory_bounds();
            assert!(
                bounds.iter().any(|(what, _)| *what == "the machine's memory"),
                "{bounds:?}"
            );
            assert_eq!(Some(limit), bounds.iter().map(|b| b.1).min());
            assert!(limit > 1 << 20, "{limit}");
        }
    }

    #[test]
    fn a_limit_is_checked_in_bytes() {
        let t = f32s(&[1024, 1024]);
        assert_eq!(t.check_limit(1 << 22), Ok(1 << 22));
        assert_eq!(
            t.check_limit((1 << 22) - 1).unwrap_err().to_string(),
            "shape [1024, 1024] of f32 takes 4194304 bytes, more than the tensor-size limit of 4194303 bytes \
             (MXC_MAX_TENSOR_BYTES, the memory and the process's limits set it)"
        );
    }
}
