//! Building blocks for parsers that decompose an ONNX op into several mx ops: attribute-free
//! ops, scalars, casts, reductions over a list of axes, transposes, index ramps, and the float
//! type computations run in.

use super::super::ctx::Ctx;
use super::super::tensor::check_constant;
use super::axes;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

/// The type a float computation on `dtype` runs in: f64 stays, every other type (the
/// half-precision floats, integers) is computed in f32.
pub fn float_compute_type(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

impl Ctx<'_> {
    /// An op that takes no attributes (element-wise arithmetic, comparisons, `where`, ...).
    pub fn op(&mut self, kind: OpKind, operands: &[ValueId]) -> Result<ValueId, String> {
        self.build1(kind, operands.to_vec(), Attrs::new())
    }

    /// `v` converted to `dtype` (no op when it already has it).
    pub fn cast(&mut self, v: ValueId, dtype: DType) -> Result<ValueId, String> {
        if self.ty(v).dtype == dtype {
            return Ok(v);
        }
        self.build1(OpKind::Cast, vec![v], Attrs::new().with("to", Attr::DType(dtype)))
    }

    /// A reduction (`reduce_sum`, `reduce_mean`, `reduce_max`) of `v` over `over` (sorted
    /// and distinct).
    pub fn reduce(&mut self, kind: OpKind, v: ValueId, over: &[usize], keepdims: bool) -> Result<ValueId, String> {
        let attrs = Attrs::new()
            .with("axes", axes::ints(over))
            .with("keepdims", Attr::Int(keepdims as i64));
        self.build1(kind, vec![v], attrs)
    }

    /// `v` with its axes permuted: result axis `i` is `v`'s axis `perm[i]`.
    pub fn transpose(&mut self, v: ValueId, perm: &[usize]) -> Result<ValueId, String> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(v);
        }
        self.build1(OpKind::Transpose, vec![v], Attrs::new().with("perm", axes::ints(perm)))
    }

    /// A constant of `ty` whose every element is `value`, sized before it is made
    /// (`check_constant`).
    pub fn filled(&mut self, ty: TensorType, value: f64) -> Result<ValueId, String> {
        check_constant(&ty)?;
        let values = vec![value; ty.num_elements()];
        Ok(self.constant(Tensor::from_f64s(ty.dtype, ty.shape, &values)))
    }

    /// The zero of `dtype` as a scalar constant: the empty string for strings.
    pub fn zero(&mut self, dtype: DType) -> ValueId {
        match dtype {
            DType::Str => self.constant(Tensor::from_strings(vec![], vec![String::new()])),
            dtype => self.scalar(dtype, 0.0),
        }
    }

    /// The indices `0..n` of `dtype` laid along `axis` of a rank-`rank` shape whose other
    /// dims are 1, so that they broadcast against a tensor with `n` entries on that axis.
    pub fn ramp(&mut self, n: usize, axis: usize, rank: usize, dtype: DType) -> Result<ValueId, String> {
        let mut shape = vec![1; rank];
        shape[axis] = n;
        check_constant(&TensorType::new(dtype, shape.clone()))?;
        let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
        Ok(self.constant(Tensor::from_f64s(dtype, shape, &values)))
    }

    /// `v` where it is not negative, `v + extent` where it is: an ONNX index counted from the
    /// end made non-negative (`extent` broadcasts against `v`).
    pub fn wrap_negative(&mut self, v: ValueId, extent: ValueId) -> Result<ValueId, String> {
        let zero = self.scalar(self.ty(v).dtype, 0.0);
        let negative = self.op(OpKind::Less, &[v, zero])?;
        let wrapped = self.op(OpKind::Add, &[v, extent])?;
        self.op(OpKind::Where, &[negative, wrapped, v])
    }
}
