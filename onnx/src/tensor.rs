//! ONNX element types and `TensorProto` decoding: every in-file encoding (`raw_data` and the
//! typed fields) and external data, into an mx `Tensor`; and encoding one (as `raw_data`).

use super::external::read_external;
use super::proto::tensor_proto::{DataLocation, DataType};
use super::proto::TensorProto;
use super::ImportError;
use bytes::Bytes;
use mxc_dialects::narrow::wrap_int;
use mxc_dialects::{DType, Tensor, TensorType};
use std::path::Path;
use std::sync::Arc;

/// The mx element type of an ONNX `TensorProto.DataType` code, if mx has one.
pub fn dtype_of(code: i32) -> Option<DType> {
    Some(match DataType::try_from(code).ok()? {
        DataType::Float => DType::F32,
        DataType::Uint8 => DType::U8,
        DataType::Int8 => DType::I8,
        DataType::Uint16 => DType::U16,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Bool => DType::Bool,
        DataType::Float16 => DType::F16,
        DataType::Double => DType::F64,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bfloat16 => DType::BF16,
        DataType::Float8e4m3fn => DType::F8E4M3FN,
        DataType::Float8e4m3fnuz => DType::F8E4M3FNUZ,
        DataType::Float8e5m2 => DType::F8E5M2,
        DataType::Float8e5m2fnuz => DType::F8E5M2FNUZ,
        DataType::Float8e8m0 => DType::F8E8M0FNU,
        DataType::Float4e2m1 => DType::F4E2M1FN,
        DataType::Int4 => DType::I4,
        DataType::Uint4 => DType::U4,
        DataType::Int2 => DType::I2,
        DataType::Uint2 => DType::U2,
        DataType::String => DType::Str,
        _ => return None,
    })
}

/// The ONNX name of a type code (`STRING`, `COMPLEX64`, ...) for messages.
pub fn type_name(code: i32) -> String {
    match DataType::try_from(code) {
        Ok(t) => t.as_str_name().to_string(),
        Err(_) => format!("type code {code}"),
    }
}

/// The element type of an ONNX type code, or a message naming the unsupported type.
pub fn require_dtype(code: i32) -> Result<DType, String> {
    dtype_of(code).ok_or_else(|| format!("element type {} is not supported", type_name(code)))
}

/// The element type of ONNX code `code` for a value that holds numbers (or bools): strings
/// are refused.
pub fn require_numeric_dtype(code: i32) -> Result<DType, String> {
    match require_dtype(code)? {
        DType::Str => Err("element type string is not supported here: the values are numbers".into()),
        dtype => Ok(dtype),
    }
}

/// Checks that a tensor of `shape` could exist (its byte count fits in memory addresses), so
/// that element counts computed from it cannot overflow.
pub fn check_size(shape: &[usize]) -> Result<(), String> {
    let max = isize::MAX as usize / 8;
    let mut nonzero = shape.iter().filter(|&&d| d != 0);
    match nonzero.try_fold(1usize, |n, &d| n.checked_mul(d).filter(|&n| n <= max)) {
        Some(_) => Ok(()),
        None => Err(format!("shape {shape:?} is too large")),
    }
}

/// The largest constant the importer makes from a shape (not from data in the model), counted
/// at 8 bytes an element whatever its type: such constants are computed as `f64` or `i64`
/// values first.
const MAX_CONSTANT_BYTES: usize = 1 << 30;

/// Checks that a constant of `ty` is small enough to make.
pub fn check_constant(ty: &TensorType) -> Result<(), String> {
    check_size(&ty.shape)?;
    if ty.num_elements().saturating_mul(8) > MAX_CONSTANT_BYTES {
        return Err(format!("a constant {ty} is too large to make"));
    }
    Ok(())
}

/// Decodes a tensor; `model_dir` is the folder external data paths are relative to.
pub fn decode_tensor(t: &TensorProto, model_dir: Option<&Path>) -> Result<Tensor, ImportError> {
    let name = t.name().to_string();
    let err = |message: String| ImportError::Tensor {
        tensor: name.clone(),
        message,
    };
    let dtype = require_dtype(t.data_type()).map_err(&err)?;
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(format!("negative dimension {d} in shape {:?}", t.dims))))
        .collect::<Result<Vec<usize>, _>>()?;
    check_size(&shape).map_err(&err)?;
    if dtype == DType::Str {
        return decode_strings(t, shape).map_err(err);
    }
    let ty = TensorType::new(dtype, shape);
    let count = ty.num_elements();
    // 4- and 2-bit elements come packed, the first in the low bits of a byte
    let packed = packed_bits(dtype).map(|bits| (bits, (count * bits as usize).div_ceil(8)));
    let stored = packed.map_or(count, |(_, bytes)| bytes);
    let bytes = if t.data_location() == DataLocation::External {
        read_external(t, model_dir)?
    } else if let Some(raw) = &t.raw_data {
        // shared with the decoded model (a slice of the mapped file)
        raw.clone()
    } else {
        Bytes::from(typed_field_bytes(t, dtype, stored).map_err(&err)?)
    };
    let bytes = match packed {
        Some((_, size)) if bytes.len() != size => {
            return Err(err(format!(
                "holds {} bytes, but {count} elements of {dtype} take {size} packed",
                bytes.len()
            )))
        }
        Some((bits, _)) => Bytes::from(unpack(&bytes, bits, count, dtype.narrow_int())),
        None => bytes,
    };
    if bytes.len() != ty.num_bytes() {
        return Err(err(format!(
            "holds {} bytes, but {count} elements of {dtype} take {}",
            bytes.len(),
            ty.num_bytes()
        )));
    }
    Tensor::view(ty, Arc::new(bytes), 0).ok_or_else(|| err("data does not match its type".into()))
}

/// The ONNX type code of an mx element type.
pub fn type_code(dtype: DType) -> i32 {
    (1..64)
        .find(|&code| dtype_of(code) == Some(dtype))
        .expect("every mx element type has an ONNX code")
}

/// `t` as a `TensorProto` named `name`, its elements in `raw_data` (4- and 2-bit ones packed,
/// the first in the low bits of a byte).
pub fn encode_tensor(name: &str, t: &Tensor) -> TensorProto {
    let dtype = t.dtype();
    if let Some(strings) = t.strings() {
        return TensorProto {
            name: Some(name.to_string()),
            dims: t.shape().iter().map(|&d| d as i64).collect(),
            data_type: Some(type_code(dtype)),
            string_data: strings.iter().map(|s| s.as_bytes().to_vec()).collect(),
            ..Default::default()
        };
    }
    let raw = match packed_bits(dtype) {
        None => t.bytes().to_vec(),
        Some(bits) => {
            let per_byte = (8 / bits) as usize;
            let mut packed = vec![0u8; t.len().div_ceil(per_byte)];
            for (i, &b) in t.bytes().iter().enumerate() {
                packed[i / per_byte] |= (b & ((1 << bits) - 1)) << ((i % per_byte) as u32 * bits);
            }
            packed
        }
    };
    TensorProto {
        name: Some(name.to_string()),
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(type_code(dtype)),
        raw_data: Some(raw.into()),
        ..Default::default()
    }
}

/// A string tensor: its elements in `string_data`, each UTF-8.
fn decode_strings(t: &TensorProto, shape: Vec<usize>) -> Result<Tensor, String> {
    let count: usize = shape.iter().product();
    if t.string_data.len() != count {
        return Err(format!(
            "holds {} strings, but its shape {shape:?} has {count} elements",
            t.string_data.len()
        ));
    }
    let strings = t
        .string_data
        .iter()
        .enumerate()
        .map(|(i, s)| String::from_utf8(s.clone()).map_err(|_| format!("string #{i} is not UTF-8")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Tensor::from_strings(shape, strings))
}

/// The width of the element types ONNX packs several to a byte.
fn packed_bits(dtype: DType) -> Option<u32> {
    match dtype {
        DType::I4 | DType::U4 | DType::F4E2M1FN => Some(4),
        DType::I2 | DType::U2 => Some(2),
        _ => None,
    }
}

/// `count` elements of `bits` each, unpacked from `packed` to one per byte; integers
/// (`int`: their width and signedness) are sign-extended, floats keep their code.
fn unpack(packed: &[u8], bits: u32, count: usize, int: Option<(u32, bool)>) -> Vec<u8> {
    let per_byte = (8 / bits) as usize;
    (0..count)
        .map(|i| {
            let code = (packed[i / per_byte] >> ((i % per_byte) as u32 * bits)) & ((1 << bits) - 1);
            match int {
                Some((bits, signed)) => wrap_int(code as i64, bits, signed) as u8,
                None => code,
            }
        })
        .collect()
}

/// The little-endian bytes of the values held in the typed field that fits `dtype` (for the
/// packed types, the packed bytes, one per entry).
fn typed_field_bytes(t: &TensorProto, dtype: DType, count: usize) -> Result<Vec<u8>, String> {
    let (held, bytes): (usize, Vec<u8>) = match dtype {
        DType::F32 => (
            t.float_data.len(),
            t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        DType::F64 => (
            t.double_data.len(),
            t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        DType::I64 => (
            t.int64_data.len(),
            t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        DType::U32 => (
            t.uint64_data.len(),
            t.uint64_data.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect(),
        ),
        DType::U64 => (
            t.uint64_data.len(),
            t.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        // int32_data holds every type of 32 bits or fewer, f16 and bf16 as their bit patterns
        DType::I32 => (
            t.int32_data.len(),
            t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => (
            t.int32_data.len(),
            t.int32_data.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect(),
        ),
        DType::I8
        | DType::U8
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0FNU
        | DType::F4E2M1FN
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => (t.int32_data.len(), t.int32_data.iter().map(|&v| v as u8).collect()),
        DType::Bool => (
            t.int32_data.len(),
            t.int32_data.iter().map(|&v| (v != 0) as u8).collect(),
        ),
        DType::Str => return Err("strings are in `string_data` (decode_strings)".into()),
    };
    if held != count {
        return Err(format!("holds {held} values for {count} elements"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mxc_dialects::tensor::f32_to_f16;

    fn proto(dtype: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: Some("t".into()),
            dims: dims.to_vec(),
            data_type: Some(dtype as i32),
            ..Default::default()
        }
    }

    fn decode(t: &TensorProto) -> Result<Tensor, String> {
        decode_tensor(t, None).map_err(|e| e.to_string())
    }

    #[test]
    fn typed_fields_decode() {
        let mut t = proto(DataType::Float16, &[2]);
        t.int32_data = vec![f32_to_f16(1.5) as i32, f32_to_f16(-2.0) as i32];
        assert_eq!(decode(&t).map(|t| t.to_f64_vec()), Ok(vec![1.5, -2.0]));
        let mut t = proto(DataType::Bool, &[3]);
        t.int32_data = vec![1, 0, 1];
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![1, 0, 1]));
        let mut t = proto(DataType::Int8, &[2]);
        t.int32_data = vec![-3, 127];
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![-3, 127]));
        let mut t = proto(DataType::Uint16, &[1]);
        t.int32_data = vec![65535];
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![65535]));
        let mut t = proto(DataType::Double, &[]);
        t.double_data = vec![0.25];
        assert_eq!(decode(&t).map(|t| t.to_f64_vec()), Ok(vec![0.25]));
        let mut t = proto(DataType::Uint32, &[1]);
        t.uint64_data = vec![4_000_000_000];
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![4_000_000_000]));
        let mut t = proto(DataType::Int64, &[1, 2]);
        t.int64_data = vec![7, -7];
        assert_eq!(
            decode(&t).map(|t| (t.shape().to_vec(), t.to_i64_vec())),
            Ok((vec![1, 2], vec![7, -7]))
        );
        let mut t = proto(DataType::Bfloat16, &[1]);
        t.int32_data = vec![0x3fc0]; // 1.5
        assert_eq!(decode(&t).map(|t| t.to_f64_vec()), Ok(vec![1.5]));
    }

    #[test]
    fn packed_and_eight_bit_types_decode() {
        // -1, 7, -8 as int4: 0xf, 0x7, 0x8 packed low nibble first
        let mut t = proto(DataType::Int4, &[3]);
        t.raw_data = Some(Bytes::from(vec![0x7f, 0x08]));
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![-1, 7, -8]));
        let mut t = proto(DataType::Uint2, &[5]);
        t.int32_data = vec![0b1110_0100, 0b11];
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![0, 1, 2, 3, 3]));
        let mut t = proto(DataType::Float4e2m1, &[2]);
        t.raw_data = Some(Bytes::from(vec![0xf1]));
        assert_eq!(decode(&t).map(|t| t.to_f64_vec()), Ok(vec![0.5, -6.0]));
        let mut t = proto(DataType::Float8e4m3fn, &[2]);
        t.int32_data = vec![0x7e, 0xb8];
        assert_eq!(decode(&t).map(|t| t.to_f64_vec()), Ok(vec![448.0, -1.0]));
        let mut t = proto(DataType::Int4, &[3]);
        t.raw_data = Some(Bytes::from(vec![0x7f]));
        assert_eq!(
            decode(&t),
            Err("tensor \"t\": holds 1 bytes, but 3 elements of i4 take 2 packed".into())
        );
    }

    #[test]
    fn strings_decode_and_encode() {
        let mut t = proto(DataType::String, &[2]);
        t.string_data = vec![b"mx".to_vec(), "\u{e9}t\u{e9}".as_bytes().to_vec()];
        let decoded = decode(&t).unwrap();
        assert_eq!(decoded.strings().unwrap(), ["mx", "\u{e9}t\u{e9}"]);
        assert_eq!(encode_tensor("t", &decoded).string_data, t.string_data);
    }

    #[test]
    fn raw_data_decodes() {
        let mut t = proto(DataType::Int32, &[2]);
        t.raw_data = Some(
            [5i32, -6]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
        );
        assert_eq!(decode(&t).map(|t| t.to_i64_vec()), Ok(vec![5, -6]));
    }

    #[test]
    fn bad_tensors_are_named() {
        let mut t = proto(DataType::Float, &[3]);
        t.float_data = vec![1.0];
        assert_eq!(decode(&t), Err("tensor \"t\": holds 1 values for 3 elements".into()));
        let mut t = proto(DataType::Float, &[2]);
        t.raw_data = Some(Bytes::from(vec![0; 7]));
        assert_eq!(
            decode(&t),
            Err("tensor \"t\": holds 7 bytes, but 2 elements of f32 take 8".into())
        );
        let t = proto(DataType::Complex64, &[1]);
        assert_eq!(
            decode(&t),
            Err("tensor \"t\": element type COMPLEX64 is not supported".into())
        );
        let mut t = proto(DataType::String, &[2]);
        t.string_data = vec![b"a".to_vec()];
        assert_eq!(
            decode(&t),
            Err("tensor \"t\": holds 1 strings, but its shape [2] has 2 elements".into())
        );
        let t = proto(DataType::Float, &[-1]);
        assert!(decode(&t).is_err());
        let t = proto(DataType::Float, &[1 << 40, 1 << 40]);
        assert_eq!(
            decode(&t),
            Err(format!("tensor \"t\": shape {:?} is too large", [1u64 << 40, 1 << 40]))
        );
    }
}
