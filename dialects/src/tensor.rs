//! Constant tensor data: a type plus little-endian element bytes, shared cheaply.

use crate::narrow::{decode_float, encode_float, wrap_int};
use crate::{DType, TensorType};
use std::sync::{Arc, OnceLock};

/// A tensor value known at compile time (weights, folded shapes, test inputs and outputs).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub ty: TensorType,
    data: Data,
}

/// Read-only bytes that tensors share: a tensor's own, or a range of a larger buffer such as a
/// memory-mapped `.mxr` file, which stays mapped while a tensor uses it.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Computes a deferred tensor's value (`Tensor::deferred`).
pub type Compute = Box<dyn Fn() -> Tensor + Send + Sync>;

/// A tensor's bytes; for strings, each element's bytes are a little-endian u64 index into
/// `strings`.
#[derive(Clone)]
struct Data {
    source: Source,
    strings: Option<Arc<Vec<String>>>,
}

/// Where a tensor's bytes are.
#[derive(Clone)]
enum Source {
    /// `len` bytes of `owner` from `start`.
    Bytes {
        owner: SharedBytes,
        start: usize,
        len: usize,
    },
    /// Bytes computed when first asked for, then kept.
    Deferred(Arc<Deferred>),
}

/// A value computed on demand: folded weights (a transposed, packed or Winograd-transformed
/// filter) that the compiler may never pick, or that the file writer computes one at a time
/// (`Tensor::materialized`) so that they are never all in memory together.
struct Deferred {
    compute: Compute,
    len: usize,
    kept: OnceLock<Tensor>,
}

impl Data {
    fn owned(bytes: Vec<u8>) -> Data {
        let len = bytes.len();
        Data {
            source: Source::Bytes {
                owner: Arc::new(bytes),
                start: 0,
                len,
            },
            strings: None,
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.source {
            Source::Bytes { owner, start, len } => &(**owner).as_ref()[*start..*start + *len],
            Source::Deferred(d) => d.kept.get_or_init(|| (d.compute)()).bytes(),
        }
    }

    fn len(&self) -> usize {
        match &self.source {
            Source::Bytes { len, .. } => *len,
            Source::Deferred(d) => d.len,
        }
    }

    /// The strings of the elements, in order, when they are strings.
    fn resolved(&self) -> Option<Vec<&str>> {
        let table = self.strings.as_ref()?;
        let handles = self.bytes().chunks_exact(8);
        Some(
            handles
                .map(|h| table[u64::from_le_bytes(h.try_into().expect("8 bytes")) as usize].as_str())
                .collect(),
        )
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        match (self.resolved(), other.resolved()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self.bytes() == other.bytes(),
            _ => false,
        }
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.len())
    }
}

impl Tensor {
    /// Wraps raw little-endian bytes; `None` if the byte count does not match the type (or
    /// the type's size overflows).
    pub fn from_bytes(ty: TensorType, data: Vec<u8>) -> Option<Tensor> {
        (ty.checked_num_bytes() == Some(data.len())).then(|| Tensor {
            ty,
            data: Data::owned(data),
        })
    }

    /// A tensor whose bytes are those of `owner` from `start`, shared rather than copied;
    /// `None` if they do not fit in `owner`.
    pub fn view(ty: TensorType, owner: SharedBytes, start: usize) -> Option<Tensor> {
        let len = ty.checked_num_bytes()?;
        let fits = start.checked_add(len).is_some_and(|end| end <= (*owner).as_ref().len());
        fits.then_some(Tensor {
            ty,
            data: Data {
                source: Source::Bytes { owner, start, len },
                strings: None,
            },
        })
    }

    /// A tensor of strings.
    pub fn from_strings(shape: Vec<usize>, strings: Vec<String>) -> Tensor {
        let handles: Vec<u64> = (0..strings.len() as u64).collect();
        Tensor::from_string_handles(shape, &handles, Arc::new(strings)).expect("one handle per string")
    }

    /// A tensor of strings whose elements are `table[handles[i]]`; `None` when the counts
    /// disagree or a handle is outside the table.
    pub fn from_string_handles(shape: Vec<usize>, handles: &[u64], table: Arc<Vec<String>>) -> Option<Tensor> {
        let ty = TensorType::new(DType::Str, shape);
        let fits = ty.num_elements() == handles.len() && handles.iter().all(|&h| (h as usize) < table.len());
        fits.then(|| {
            let bytes: Vec<u8> = handles.iter().flat_map(|h| h.to_le_bytes()).collect();
            let mut data = Data::owned(bytes);
            data.strings = Some(table);
            Tensor { ty, data }
        })
    }

    /// The strings of a string tensor, in order (`None` for other types).
    pub fn strings(&self) -> Option<Vec<&str>> {
        self.data.resolved()
    }

    /// A string tensor's handles, as i64 (`None` for other types), and the table they index.
    pub fn string_handles(&self) -> Option<(Tensor, Arc<Vec<String>>)> {
        let table = self.data.strings.clone()?;
        let ty = TensorType::new(DType::I64, self.ty.shape.clone());
        Some((Tensor::from_bytes(ty, self.bytes().to_vec())?, table))
    }

    /// Zeros (empty strings for a string type).
    pub fn zeros(ty: TensorType) -> Tensor {
        if ty.dtype == DType::Str {
            let handles = vec![0; ty.num_elements()];
            return Tensor::from_string_handles(ty.shape, &handles, Arc::new(vec![String::new()]))
                .expect("handle 0 of one string");
        }
        let n = ty.num_bytes();
        Tensor {
            ty,
            data: Data::owned(vec![0; n]),
        }
    }

    /// A tensor of `ty` whose bytes `compute` gives when they are first asked for (and are
    /// then kept); `compute` must return a tensor of `ty`. Copies share the computed bytes.
    pub fn deferred(ty: TensorType, compute: Compute) -> Tensor {
        assert!(ty.dtype != DType::Str, "strings are never deferred");
        let len = ty.num_bytes();
        let deferred = Deferred {
            compute,
            len,
            kept: OnceLock::new(),
        };
        Tensor {
            ty,
            data: Data {
                source: Source::Deferred(Arc::new(deferred)),
                strings: None,
            },
        }
    }

    /// Whether its bytes are still to be computed.
    pub fn is_deferred(&self) -> bool {
        matches!(&self.data.source, Source::Deferred(d) if d.kept.get().is_none())
    }

    /// For a deferred tensor whose bytes are not computed yet, what identifies them (the
    /// same for its copies and reshapes).
    pub fn deferred_id(&self) -> Option<usize> {
        match &self.data.source {
            Source::Deferred(d) if d.kept.get().is_none() => Some(Arc::as_ptr(d) as *const () as usize),
            _ => None,
        }
    }

    /// The tensor with its bytes at hand: itself, or for a deferred tensor whose bytes are
    /// not kept yet, a computed copy that this tensor does not keep (the file writer
    /// computes folded weights one at a time this way, each dropped once written).
    pub fn materialized(&self) -> Tensor {
        match &self.data.source {
            Source::Deferred(d) if d.kept.get().is_none() => {
                let value = (d.compute)();
                debug_assert_eq!(value.bytes().len(), d.len, "a deferred tensor computed to its type");
                Tensor {
                    ty: self.ty.clone(),
                    data: value.data,
                }
            }
            _ => self.clone(),
        }
    }

    /// Its bytes (a deferred tensor's are computed now and kept).
    pub fn bytes(&self) -> &[u8] {
        self.data.bytes()
    }

    /// How many bytes it holds, without computing a deferred tensor's.
    pub fn num_bytes(&self) -> usize {
        self.data.len()
    }

    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.ty.shape
    }

    pub fn len(&self) -> usize {
        self.ty.num_elements()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Builds a tensor of `dtype` from values given as f64 (rounded/truncated as a cast would).
    pub fn from_f64s(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Tensor {
        let ty = TensorType::new(dtype, shape);
        assert_eq!(ty.num_elements(), values.len(), "value count must match the shape");
        let data = if dtype.is_float() {
            // stored in place (weights folded at compile time are floats, often millions)
            let mut data = vec![0u8; ty.num_bytes()];
            for (element, &v) in data.chunks_exact_mut(dtype.size()).zip(values) {
                store_float(dtype, v, element);
            }
            data
        } else {
            let mut data = Vec::with_capacity(ty.num_bytes());
            for &v in values {
                encode_f64(dtype, v, &mut data);
            }
            data
        };
        Tensor {
            ty,
            data: Data::owned(data),
        }
    }

    /// A tensor of `ty` (not of strings) whose elements are `value()` in order, each stored as
    /// `from_f64s` stores it; `None` when its bytes cannot be allocated (no intermediate
    /// vector of f64: a model's input may be as large as the memory allows).
    pub fn try_from_fn(ty: TensorType, mut value: impl FnMut() -> f64) -> Option<Tensor> {
        let mut data = Vec::new();
        data.try_reserve_exact(ty.num_bytes()).ok()?;
        for _ in 0..ty.num_elements() {
            encode_f64(ty.dtype, value(), &mut data);
        }
        Some(Tensor {
            ty,
            data: Data::owned(data),
        })
    }

    /// Builds a tensor of `dtype` from integer values.
    pub fn from_i64s(dtype: DType, shape: Vec<usize>, values: &[i64]) -> Tensor {
        let ty = TensorType::new(dtype, shape);
        assert_eq!(ty.num_elements(), values.len(), "value count must match the shape");
        let mut data = Vec::with_capacity(ty.num_bytes());
        for &v in values {
            encode_i64(dtype, v, &mut data);
        }
        Tensor {
            ty,
            data: Data::owned(data),
        }
    }

    pub fn from_f32s(shape: Vec<usize>, values: &[f32]) -> Tensor {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::from_bytes(TensorType::new(DType::F32, shape), data).expect("shape matches values")
    }

    /// Element `i` as f64 (exact for every integer up to 2^53 and for f32/f16/bf16).
    pub fn get_f64(&self, i: usize) -> f64 {
        let s = self.dtype().size();
        let b = &self.bytes()[i * s..(i + 1) * s];
        match self.dtype() {
            DType::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
            DType::F64 => f64::from_le_bytes(b.try_into().unwrap()),
            DType::F16 => f16_to_f32(u16::from_le_bytes(b.try_into().unwrap())) as f64,
            DType::BF16 => f32::from_bits((u16::from_le_bytes(b.try_into().unwrap()) as u32) << 16) as f64,
            d if d.is_narrow_float() => decode_float(d, b[0]) as f64,
            _ => self.get_i64(i) as f64,
        }
    }

    /// Element `i` as i64 (floats truncate toward zero; u64 above i64::MAX wraps).
    pub fn get_i64(&self, i: usize) -> i64 {
        let s = self.dtype().size();
        let b = &self.bytes()[i * s..(i + 1) * s];
        match self.dtype() {
            DType::Bool | DType::U8 | DType::U4 | DType::U2 => b[0] as i64,
            DType::I8 | DType::I4 | DType::I2 => b[0] as i8 as i64,
            DType::I16 => i16::from_le_bytes(b.try_into().unwrap()) as i64,
            DType::U16 => u16::from_le_bytes(b.try_into().unwrap()) as i64,
            DType::I32 => i32::from_le_bytes(b.try_into().unwrap()) as i64,
            DType::U32 => u32::from_le_bytes(b.try_into().unwrap()) as i64,
            DType::I64 => i64::from_le_bytes(b.try_into().unwrap()),
            DType::U64 => u64::from_le_bytes(b.try_into().unwrap()) as i64,
            DType::Str => panic!("element {i} is a string, not a number"),
            _ => self.get_f64(i) as i64,
        }
    }

    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.dtype() {
            DType::F32 => self
                .bytes()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64)
                .collect(),
            _ => (0..self.len()).map(|i| self.get_f64(i)).collect(),
        }
    }

    pub fn to_i64_vec(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.get_i64(i)).collect()
    }

    /// The same bytes as a tensor of `dtype`, where `dtype` is the type this tensor's stands in
    /// for in numpy files (`DType::numpy_stand_in`): a bf16 or narrow-typed value read from
    /// `.npy`. `None` for any other pair of types.
    pub fn as_stood_in_for(&self, dtype: DType) -> Option<Tensor> {
        (dtype != self.dtype() && dtype.numpy_stand_in() == self.dtype()).then(|| Tensor {
            ty: TensorType::new(dtype, self.shape().to_vec()),
            data: self.data.clone(),
        })
    }

    /// Same data under another shape with the same element count.
    pub fn reshaped(&self, shape: Vec<usize>) -> Tensor {
        assert_eq!(shape.iter().product::<usize>(), self.len());
        Tensor {
            ty: TensorType::new(self.dtype(), shape),
            data: self.data.clone(),
        }
    }

    /// Element-wise conversion to another element type, with the semantics of ONNX Cast
    /// for the values shape arithmetic meets (integers and ordinary floats).
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype.is_float() || self.dtype().is_float() {
            let v: Vec<f64> = self.to_f64_vec();
            let v: Vec<f64> = if dtype == DType::Bool {
                v.iter().map(|x| (*x != 0.0) as i64 as f64).collect()
            } else {
                v
            };
            Tensor::from_f64s(dtype, self.shape().to_vec(), &v)
        } else {
            let v: Vec<i64> = self.to_i64_vec();
            let v: Vec<i64> = if dtype == DType::Bool {
                v.iter().map(|x| (*x != 0) as i64).collect()
            } else {
                v
            };
            Tensor::from_i64s(dtype, self.shape().to_vec(), &v)
        }
    }
}

/// Writes `v` as one element of the float type `dtype` at the start of `out` (rounded to
/// nearest), as `encode_f64` appends it.
pub fn store_float(dtype: DType, v: f64, out: &mut [u8]) {
    match dtype {
        DType::F32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out[..8].copy_from_slice(&v.to_le_bytes()),
        DType::F16 => out[..2].copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
        DType::BF16 => out[..2].copy_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
        d if d.is_narrow_float() => out[0] = encode_float(d, v as f32),
        other => panic!("{other} is not a float type"),
    }
}

fn encode_f64(dtype: DType, v: f64, out: &mut Vec<u8>) {
    match dtype {
        d if d.is_float() => {
            let at = out.len();
            out.resize(at + dtype.size(), 0);
            store_float(dtype, v, &mut out[at..]);
        }
        DType::Bool => out.push((v != 0.0) as u8),
        _ => encode_i64(dtype, v as i64, out),
    }
}

fn encode_i64(dtype: DType, v: i64, out: &mut Vec<u8>) {
    match dtype {
        DType::Bool => out.push((v != 0) as u8),
        DType::I8 | DType::U8 => out.push(v as u8),
        DType::I16 | DType::U16 => out.extend((v as u16).to_le_bytes()),
        DType::I32 | DType::U32 => out.extend((v as u32).to_le_bytes()),
        DType::I64 | DType::U64 => out.extend(v.to_le_bytes()),
        DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
            let (bits, signed) = dtype.narrow_int().expect("a narrow integer type");
            out.push(wrap_int(v, bits, signed) as u8)
        }
        DType::Str => panic!("a string tensor holds no numbers"),
        _ => encode_f64(dtype, v as f64, out),
    }
}

/// IEEE half to single precision.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // subnormal: normalise the mantissa
            let shift = man.leading_zeros() - 21;
            let man = (man << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (man << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Single to IEEE half precision, rounding to nearest even.
pub fn f32_to_f16(f: f32) -> u16 {
    let bits = f.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let man = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rounded = (man + half - 1 + ((man >> shift) & 1)) >> shift;
        return sign | rounded as u16;
    }
    let rounded = man + 0xfff + ((man >> 13) & 1);
    let (e, man) = if rounded & 0x80_0000 != 0 {
        (e + 1, 0)
    } else {
        (e, rounded >> 13)
    };
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    sign | ((e as u16) << 10) | man as u16
}

/// Single to bfloat16, rounding to nearest even.
pub fn f32_to_bf16(f: f32) -> u16 {
    let bits = f.to_bits();
    if f.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferred_tensor_is_computed_once_when_asked_and_its_reshapes_share_the_result() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let t = Tensor::deferred(
            TensorType::new(DType::F32, vec![2, 3]),
            Box::new(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Tensor::from_f32s(vec![2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            }),
        );
        let flat = t.reshaped(vec![6]);
        assert_eq!((t.num_bytes(), flat.deferred_id()), (24, t.deferred_id()));
        let calls_now = || calls.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(calls_now(), 0, "nothing computed yet");
        // computed for the caller, kept by no one
        let once = flat.materialized();
        assert_eq!((once.shape(), once.get_f64(4)), (&[6][..], 5.0));
        assert!(t.is_deferred() && flat.is_deferred());
        // computed and kept: the reshape sees the same bytes, with no second computation
        assert_eq!(t.get_f64(5), 6.0);
        assert_eq!(flat.get_f64(5), 6.0);
        assert_eq!(calls_now(), 2);
        assert!(!flat.is_deferred() && flat.deferred_id().is_none());
    }

    #[test]
    fn f16_round_trips_representable_values() {
        for v in [0.0f32, 1.0, -2.5, 65504.0, 2f32.powi(-14), 2f32.powi(-24), 0.333_251_95] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert!(f16_to_f32(f32_to_f16(1e6)).is_infinite());
    }

    #[test]
    fn typed_access_reads_what_was_written() {
        let t = Tensor::from_i64s(DType::I32, vec![3], &[-1, 0, 7]);
        assert_eq!(t.to_i64_vec(), vec![-1, 0, 7]);
        assert_eq!(t.cast(DType::F32).to_f64_vec(), vec![-1.0, 0.0, 7.0]);
        assert_eq!(t.cast(DType::Bool).to_i64_vec(), vec![1, 0, 1]);
    }
}
