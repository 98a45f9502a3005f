//! Tensor types: an element type and a shape, with checked size arithmetic. A shape is fixed
//! sizes, or symbolic: dimensions that are expressions over named sizes (`dim::Dim`), kept
//! beside the sizes they take at the cost point, where code that needs numbers (the cost model,
//! estimates) reads them.

use crate::dim::Dim;
use crate::DType;
use std::fmt;

/// The type of an SSA value: element type and shape (a scalar has an empty shape).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    /// The sizes; of a symbolic type, the sizes at its symbols' cost point (each symbol at its
    /// first optimal size, else the middle of its range: `Dim::cost_point`).
    pub shape: Vec<usize>,
    /// The dimensions as expressions, where some dimension is symbolic; `None` for a fixed
    /// type (so a fixed type is one way only).
    pub symbolic: Option<Vec<Dim>>,
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
        TensorType {
            dtype,
            shape,
            symbolic: None,
        }
    }

    /// The type of dimensions `dims`: fixed where every one is a constant, else symbolic with
    /// its sizes at the cost point.
    pub fn of_dims(dtype: DType, dims: Vec<Dim>) -> Self {
        let shape = dims.iter().map(|d| d.at_cost_point() as usize).collect();
        let symbolic = dims.iter().any(|d| d.as_constant().is_none()).then_some(dims);
        TensorType { dtype, shape, symbolic }
    }

    /// Whether some dimension is symbolic.
    pub fn is_symbolic(&self) -> bool {
        self.symbolic.is_some()
    }

    /// The dimensions as expressions (constants for a fixed type).
    pub fn dims(&self) -> Vec<Dim> {
        match &self.symbolic {
            Some(dims) => dims.clone(),
            None => self.shape.iter().map(|&d| Dim::constant(d as u64)).collect(),
        }
    }

    /// Whether the two have the same dimensions (the same expressions, where symbolic).
    pub fn same_shape(&self, other: &TensorType) -> bool {
        self.shape == other.shape && self.symbolic == other.symbolic
    }

    /// The sizes, where every dimension is fixed.
    pub fn fixed_shape(&self) -> Option<&[usize]> {
        self.symbolic.is_none().then_some(&self.shape[..])
    }

    /// The size of dimension `axis`, where it is fixed (a symbolic type may have fixed ones).
    pub fn fixed_dim(&self, axis: usize) -> Option<usize> {
        match &self.symbolic {
            Some(dims) => dims.get(axis)?.as_constant().map(|d| d as usize),
            None => self.shape.get(axis).copied(),
        }
    }

    /// The largest sizes its dimensions take in range (its sizes, for a fixed type).
    pub fn largest_shape(&self) -> Vec<usize> {
        match &self.symbolic {
            Some(dims) => dims
                .iter()
                .map(|d| usize::try_from(d.bounds().1).unwrap_or(usize::MAX))
                .collect(),
            None => self.shape.clone(),
        }
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
    /// A symbolic type is measured at its largest sizes.
    pub fn checked_num_bytes(&self) -> Option<usize> {
        let largest = self.largest_shape();
        let extent = largest
            .iter()
            .try_fold(self.dtype.size(), |bytes, &d| bytes.checked_mul(d.max(1)))
            .filter(|&bytes| bytes <= isize::MAX as usize)?;
        Some(if largest.contains(&0) { 0 } else { extent })
    }

    /// The element count, or `None` where `checked_num_bytes` is.
    pub fn checked_num_elements(&self) -> Option<usize> {
        self.checked_num_bytes().map(|bytes| bytes / self.dtype.size())
    }

    /// The byte count, or an error naming the shape when it overflows (see `checked_num_bytes`).
    pub fn check_size(&self) -> Result<usize, SizeError> {
        self.checked_num_bytes().ok_or_else(|| SizeError::Overflow {
            dtype: self.dtype,
            shape: self.largest_shape(),
        })
    }

    /// Like `check_size`, also refusing more than `limit` bytes, for a fixed type: a symbolic
    /// one only has to be a size (nothing of its sizes is made before a run binds them, and
    /// what the largest sizes in range take is the memory plan's to weigh).
    pub fn check_limit(&self, limit: usize) -> Result<usize, SizeError> {
        let bytes = self.check_size()?;
        if bytes > limit && !self.is_symbolic() {
            return Err(SizeError::OverLimit {
                dtype: self.dtype,
                shape: self.shape.clone(),
                bytes,
                limit,
            });
        }
        Ok(bytes)
    }

    /// The same shape (symbolic or not) of element type `dtype`.
    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType { dtype, ..self.clone() }
    }

    /// A fixed type of this element type.
    pub fn with_shape(&self, shape: Vec<usize>) -> TensorType {
        TensorType::new(self.dtype, shape)
    }
}

/// `expr` in parentheses, unless it is one parenthesised whole already (`(h + 1) / 2` is
/// written `((h + 1) / 2)`, and so is the atom `((h + 1) / 2)`).
fn parenthesised(expr: &str) -> String {
    let mut depth = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return match i + 1 == expr.len() && c == ')' {
                true => expr.to_string(),
                false => format!("({expr})"),
            };
        }
    }
    format!("({expr})")
}

/// Row-major strides (in elements) of a shape; they saturate like `num_elements`.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}

/// Prints as `tensor<2x3xf32>` (a scalar is `tensor<f32>`), a symbolic dimension as its
/// expression in parentheses with bare names (`tensor<(b)x(s * 2)xf32>`): the mx text
/// declares the symbols' constraints once per graph.
impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        match &self.symbolic {
            Some(dims) => {
                for d in dims {
                    write!(f, "{}x", dim_text(d))?;
                }
            }
            None => {
                for d in &self.shape {
                    write!(f, "{d}x")?;
                }
            }
        }
        write!(f, "{}>", self.dtype)
    }
}

/// A dimension as a type writes it: a size, or its expression in parentheses (`(s * 2)`).
pub fn dim_text(d: &Dim) -> String {
    match d.as_constant() {
        Some(n) => n.to_string(),
        None => parenthesised(&d.expression()),
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
