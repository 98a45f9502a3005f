//! Kernel arguments as memrefs: their MLIR types, element loads and stores, the conversion
//! between an element's storage type and the type kernels compute in (`half.rs` and
//! `narrow.rs` hold the conversions), numpy-style broadcasting reads, and flat 1-D views.
//!
//! A buffer without elements is declared `memref<0xT>` (MLIR's bare-pointer convention
//! rejects a zero extent after the first dimension) and never touched: no loop around an
//! access to it runs, so its loads are written as a zero constant and its stores dropped.

use super::emit::{fixed, Emitter, Ty, V};
use super::fused::Epilogue;
use super::sizes::Extent;
use super::vector::index_list;
use mxc_dialects::DType;
use std::rc::Rc;

/// The MLIR type an element is stored as (`bool` is `i1`, one byte in memory; the narrow
/// floats are their bytes, the narrow integers one per byte).
pub fn storage_ty(dtype: DType) -> Ty {
    let int = |bits, signed| Ty::Int { bits, signed };
    match dtype {
        DType::Bool => Ty::I1,
        DType::I8 | DType::I4 | DType::I2 => int(8, true),
        DType::U4 | DType::U2 => int(8, false),
        DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0FNU
        | DType::F4E2M1FN => int(8, false),
        DType::I16 => int(16, true),
        DType::I32 => int(32, true),
        // a string's handle (ops on strings run on the host, `DType::Str`)
        DType::I64 | DType::Str => int(64, true),
        DType::U8 => int(8, false),
        DType::U16 => int(16, false),
        DType::U32 => int(32, false),
        DType::U64 => int(64, false),
        DType::F16 => Ty::F16,
        DType::BF16 => Ty::BF16,
        DType::F32 => Ty::F32,
        DType::F64 => Ty::F64,
    }
}

/// The type kernels compute in for elements of `dtype`: f16, bf16 and the narrow floats
/// widen to f32.
pub fn compute_ty(dtype: DType) -> Ty {
    match storage_ty(dtype) {
        Ty::F16 | Ty::BF16 => Ty::F32,
        _ if dtype.is_narrow_float() => Ty::F32,
        t => t,
    }
}

/// A kernel argument: a memref with the identity layout, static-shaped or (in a kernel over
/// symbolic types) with some dimensions known only at run time. A buffer with an epilogue is
/// the result of a fused kernel's anchor: what is written to it goes through the epilogue's
/// element-wise ops to the kernel's result instead (`fused.rs`).
#[derive(Clone, Debug)]
pub struct Buf {
    pub name: String,
    pub dtype: DType,
    /// The sizes (of a symbolic dimension: its size at the cost point, which only estimates
    /// read; code over such a buffer reads `extents`).
    pub shape: Vec<usize>,
    /// The dimensions, where one is known only at run time (`None`: `shape` says them all).
    pub run_dims: Option<Vec<Extent>>,
    pub epilogue: Option<Rc<Epilogue>>,
}

impl Buf {
    pub fn new(name: &str, dtype: DType, shape: &[usize]) -> Buf {
        Buf {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            run_dims: None,
            epilogue: None,
        }
    }

    /// A buffer whose dimensions are `dims`, some known only at run time (`shape` holds their
    /// sizes at the cost point).
    pub fn with_extents(name: &str, dtype: DType, dims: Vec<Extent>) -> Buf {
        let shape: Vec<usize> = dims.iter().map(Extent::at_cost_point).collect();
        let run = dims.iter().any(|d| d.fixed().is_none());
        Buf {
            run_dims: run.then_some(dims),
            ..Buf::new(name, dtype, &shape)
        }
    }

    /// Its dimensions as extents.
    pub fn extents(&self) -> Vec<Extent> {
        match &self.run_dims {
            Some(dims) => dims.clone(),
            None => self.shape.iter().map(|&n| Extent::Fixed(n)).collect(),
        }
    }

    /// Whether some dimension is known only at run time.
    pub fn is_sized_at_run_time(&self) -> bool {
        self.run_dims.is_some()
    }

    /// Whether it has the dimensions of `other` (expressions compared where symbolic).
    pub fn same_dims(&self, other: &Buf) -> bool {
        match (&self.run_dims, &other.run_dims) {
            (None, None) => self.shape == other.shape,
            (Some(a), Some(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.dim() == y.dim()),
            _ => false,
        }
    }

    /// Whether dimension `d` is a fixed 1 (numpy broadcasting reads index 0 there).
    pub fn is_unit(&self, d: usize) -> bool {
        match &self.run_dims {
            Some(dims) => dims[d] == Extent::Fixed(1),
            None => self.shape[d] == 1,
        }
    }

    /// Where an anchor that holds many sums in registers (the depthwise convolution) stores
    /// its values when this buffer's epilogue is long (`Epilogue::is_long`): the kernel's
    /// result, as they are; it then applies the epilogue in a pass of its own
    /// (`Emitter::apply_epilogue`), whose constants stay in registers the sums needed. `None`
    /// where the values go through the epilogue as they are stored.
    /// Only where the result holds the anchor's values exactly (the same element type, or f32
    /// for a half-precision anchor), so that reading them back changes nothing.
    pub fn deferred_store(&self) -> Option<&Buf> {
        let exact = |out: &Buf| out.dtype == self.dtype || (out.dtype == DType::F32 && self.ty() == Ty::F32);
        self.epilogue
            .as_ref()
            .filter(|ep| ep.is_long() && exact(&ep.out))
            .map(|ep| &ep.out)
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The memref type, e.g. `memref<2x3xf32>` or `memref<i1>` (`memref<0xf32>` when empty).
    pub fn memref(&self) -> String {
        if self.is_empty() {
            return memref_type(&["0".to_string()], self.dtype);
        }
        let dims: Vec<String> = self.extents().iter().map(Extent::memref_text).collect();
        memref_type(&dims, self.dtype)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The type kernels compute elements of this buffer in.
    pub fn ty(&self) -> Ty {
        compute_ty(self.dtype)
    }

    /// Whether whole vectors of f32 may be read from or written to this buffer: it holds f32,
    /// f16 or bf16 (computed in f32 vectors, half precision widened as it is read and rounded
    /// as it is written), and every buffer its epilogue reads and writes holds vectors of some
    /// type (`holds_vectors`). What the float kernels (products, convolutions, pooling, rows)
    /// ask of their operands and results.
    pub fn holds_float_vectors(&self) -> bool {
        float_vectors(self.dtype) && self.vectors_throughout()
    }

    /// Whether whole vectors may be read from or written to this buffer: it holds f32, f16,
    /// bf16 or an integer type of 8 to 64 bits (integers as vectors of their own type), and so
    /// does every buffer its epilogue reads and writes. What element-wise code asks.
    pub fn holds_vectors(&self) -> bool {
        vectors(self.dtype) && self.vectors_throughout()
    }

    fn vectors_throughout(&self) -> bool {
        !self.is_empty() && self.epilogue.as_ref().is_none_or(|ep| ep.all_vectors())
    }
}

/// Whether kernels read and write elements of `dtype` as whole vectors of f32.
fn float_vectors(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Whether kernels read and write elements of `dtype` as whole vectors: f32 ones
/// (`float_vectors`), or integers of 8 to 64 bits as vectors of their type.
fn vectors(dtype: DType) -> bool {
    float_vectors(dtype) || (dtype.is_int() && dtype.size() <= 8 && dtype.narrow_int().is_none())
}

fn memref_type(shape: &[String], dtype: DType) -> String {
    let dims: String = shape.iter().map(|d| format!("{d}x")).collect();
    format!("memref<{dims}{}>", storage_ty(dtype).mlir())
}

impl Emitter {
    /// Loads an element in its storage type.
    pub fn load(&mut self, buf: &Buf, idx: &[V]) -> V {
        let ty = storage_ty(buf.dtype);
        if buf.is_empty() {
            return if ty.is_float() {
                self.float(ty, 0.0)
            } else {
                self.int(ty, 0)
            };
        }
        self.op(
            "x",
            ty,
            &format!("memref.load {}[{}] : {}", buf.name, index_list(idx), buf.memref()),
        )
    }

    /// Stores a value of the storage type (a vector: at `idx` and the elements after it).
    pub fn store(&mut self, buf: &Buf, idx: &[V], v: &V) {
        if buf.is_empty() {
            return;
        }
        if v.is_vector() {
            return self.vstore(buf, idx, v);
        }
        self.store_line(&format!(
            "memref.store {v}, {}[{}] : {}",
            buf.name,
            index_list(idx),
            buf.memref()
        ));
    }

    /// Loads an element as its compute type.
    pub fn read(&mut self, buf: &Buf, idx: &[V]) -> V {
        let v = self.load(buf, idx);
        match v.ty {
            Ty::F16 | Ty::BF16 => self.widen_half(&v),
            _ if buf.dtype.is_narrow_float() => self.decode_narrow_float(&v, buf.dtype),
            _ => v,
        }
    }

    /// Stores a value given in any compute type, converting it (ONNX Cast) to the element type;
    /// through the epilogue, when the buffer has one.
    pub fn write(&mut self, buf: &Buf, idx: &[V], v: &V) {
        if let Some(epilogue) = buf.epilogue.clone() {
            let v = self.round_to(v, buf.dtype);
            let y = epilogue.apply(self, idx, v);
            return self.write(&epilogue.out, idx, &y);
        }
        let v = self.convert(v, buf.ty());
        let v = self.as_stored(&v, buf.dtype);
        self.store(buf, idx, &v);
    }

    /// A value of `dtype`'s compute type as `dtype` stores it.
    fn as_stored(&mut self, v: &V, dtype: DType) -> V {
        match storage_ty(dtype) {
            half @ (Ty::F16 | Ty::BF16) => self.narrow_half(v, half),
            _ if dtype.is_narrow_float() => self.encode_narrow_float(v, dtype),
            _ => match dtype.narrow_int() {
                Some(width) => self.wrap_narrow_int(v, width),
                None => v.clone(),
            },
        }
    }

    /// `v` as it would read back after a store as `dtype`: converted (ONNX Cast) to the compute
    /// type, and rounded to f16 or bf16 for those. Fused kernels keep values in registers and
    /// round them here, so they compute the numbers the unfused kernels do.
    pub fn round_to(&mut self, v: &V, dtype: DType) -> V {
        let v = self.convert(v, compute_ty(dtype));
        let stored = self.as_stored(&v, dtype);
        match storage_ty(dtype) {
            Ty::F16 | Ty::BF16 => self.widen_half(&stored),
            _ if dtype.is_narrow_float() => self.decode_narrow_float(&stored, dtype),
            _ => stored,
        }
    }

    /// `acc + a[ai] * b[bi]`, the step of a dot product.
    pub fn multiply_add(&mut self, acc: &V, a: &Buf, ai: &[V], b: &Buf, bi: &[V]) -> V {
        let x = self.read(a, ai);
        let y = self.read(b, bi);
        let p = self.mul(&x, &y);
        self.add(acc, &p)
    }

    /// Reads `buf` at the position numpy broadcasting maps output index `out` to: the
    /// buffer's dimensions align with the trailing output dimensions, size-1 ones read 0.
    pub fn read_bcast(&mut self, buf: &Buf, out: &[V]) -> V {
        let idx = self.bcast_index_of(buf, out);
        self.read(buf, &idx)
    }

    /// `lanes` elements as compute type, from `idx` on along the last index (one element
    /// for `lanes == 1`). Vectors are read from buffers of f32, f16 or bf16 (widened to f32).
    pub fn read_lanes(&mut self, buf: &Buf, idx: &[V], lanes: usize) -> V {
        if lanes == 1 {
            return self.read(buf, idx);
        }
        assert!(
            vectors(buf.dtype),
            "vectors are read from buffers of f32, f16, bf16 or integers"
        );
        let v = self.vload(buf, idx, lanes);
        self.widen_half(&v)
    }

    /// The epilogue of `buf` applied at `idx` (`lanes` elements) to the value stored there
    /// before, in `buf.deferred_store()`.
    pub fn apply_epilogue(&mut self, buf: &Buf, idx: &[V], lanes: usize) {
        let stored = buf
            .deferred_store()
            .expect("an epilogue is applied where it was deferred");
        let v = self.read_lanes(stored, idx, lanes);
        self.write(buf, idx, &v);
    }

    /// `read_bcast` of the `lanes` output elements from index `out` on along the output's
    /// last dimension: a vector where the buffer runs along that dimension, else its one
    /// element splat.
    pub fn read_bcast_lanes(&mut self, buf: &Buf, out: &[V], lanes: usize) -> V {
        let idx = self.bcast_index_of(buf, out);
        let along = buf.rank() > 0 && !buf.is_unit(buf.rank() - 1);
        if lanes > 1 && along {
            return self.read_lanes(buf, &idx, lanes);
        }
        let v = self.read(buf, &idx);
        self.splat(&v, lanes)
    }

    /// The index into a tensor of `shape` that output index `out` broadcasts from.
    pub fn bcast_index(&mut self, shape: &[usize], out: &[V]) -> Vec<V> {
        let skip = out.len() - shape.len();
        shape
            .iter()
            .zip(&out[skip..])
            .map(|(&d, i)| if d == 1 { self.idx(0) } else { i.clone() })
            .collect()
    }

    /// The index into `buf` that output index `out` broadcasts from (a dimension known only
    /// at run time is never a broadcast one: the type rules proved it equal to the output's).
    pub fn bcast_index_of(&mut self, buf: &Buf, out: &[V]) -> Vec<V> {
        let skip = out.len() - buf.rank();
        (0..buf.rank())
            .map(|d| match buf.is_unit(d) {
                true => self.idx(0),
                false => out[skip + d].clone(),
            })
            .collect()
    }

    /// The index into the first `dims` dimensions of `buf` (a product's batch dimensions)
    /// that batch index `batch` broadcasts from (numpy: trailing dimensions align).
    pub fn bcast_prefix(&mut self, buf: &Buf, dims: usize, batch: &[V]) -> Vec<V> {
        let skip = batch.len() - dims;
        (0..dims)
            .map(|d| match buf.is_unit(d) {
                true => self.idx(0),
                false => batch[skip + d].clone(),
            })
            .collect()
    }

    /// `buf` viewed with another shape of as many elements (`memref.reinterpret_cast`, row-major),
    /// without an epilogue.
    pub fn view(&mut self, buf: &Buf, shape: &[usize]) -> Buf {
        self.view_over(buf, fixed(shape))
    }

    /// `view` with dimensions some of which may be known only at run time.
    pub fn view_over(&mut self, buf: &Buf, dims: Vec<Extent>) -> Buf {
        let strides: Vec<String> = (0..dims.len())
            .map(|d| self.extent_product(&dims[d + 1..]).operand())
            .collect();
        let sizes: Vec<String> = dims.iter().map(Extent::operand).collect();
        let view = Buf::with_extents(&self.fresh("view"), buf.dtype, dims);
        self.line(&format!(
            "{} = memref.reinterpret_cast {} to offset: [0], sizes: [{}], strides: [{}] : {} to {}",
            view.name,
            buf.name,
            sizes.join(", "),
            strides.join(", "),
            buf.memref(),
            view.memref()
        ));
        view
    }

    /// `buf` as the matrix `[rows, its last dimension]`, its epilogue too (its operands as
    /// matrices or rows): `None` when an operand of the epilogue broadcasts in a way a matrix
    /// cannot say (along a dimension before the last).
    pub fn as_matrix(&mut self, buf: &Buf) -> Option<Buf> {
        let cols = *buf.shape.last()?;
        if buf.is_empty() || buf.rank() < 2 {
            return None;
        }
        let shape = [buf.len() / cols, cols];
        match &buf.epilogue {
            // an anchor's result is never stored to as it is (its values go through the
            // epilogue to the kernel's result, of its own element type), so only the epilogue
            // is viewed
            Some(ep) => {
                let mut matrix = Buf::new(&buf.name, buf.dtype, &shape);
                matrix.epilogue = Some(Rc::new(ep.as_matrix(self, buf)?));
                Some(matrix)
            }
            None => Some(self.view(buf, &shape)),
        }
    }

    /// A 1-D view of a whole buffer (`memref.reinterpret_cast`), for element-order loops.
    pub fn flat(&mut self, buf: &Buf) -> Buf {
        if buf.is_empty() {
            return Buf::new(&buf.name, buf.dtype, &[0]);
        }
        if buf.rank() == 1 {
            return buf.clone();
        }
        let len = self.extent_product(&buf.extents());
        let view = Buf::with_extents(&self.fresh("flat"), buf.dtype, vec![len.clone()]);
        let len = len.operand();
        self.line(&format!(
            "{} = memref.reinterpret_cast {} to offset: [0], sizes: [{len}], strides: [1] : {} to {}",
            view.name,
            buf.name,
            buf.memref(),
            view.memref()
        ));
        view
    }
}
