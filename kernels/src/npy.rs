//! Reading and writing NumPy `.npy` files (format versions 1 to 3, little-endian, C order).
//! Strings are numpy's fixed-width unicode arrays (`<U`n: n UTF-32 code units per element,
//! NUL-padded).

use crate::RunError;
use mxc_dialects::{DType, Tensor, TensorType};
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The descriptor of the numpy type that holds `dtype` (`DType::numpy_stand_in`: numpy has no
/// bf16 and no narrow types; such a tensor is written as the bytes mxc holds it in).
fn descr(dtype: DType) -> &'static str {
    numpy_descr(dtype.numpy_stand_in()).expect("every type has a numpy stand-in")
}

/// numpy's descriptor (type string) of `dtype`, where numpy has the type itself.
pub fn numpy_descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "|b1",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        _ => return None,
    })
}

/// The element type of numpy's little-endian (or single-byte) descriptor `descr`.
pub fn dtype_of_descr(descr: &str) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| numpy_descr(d) == Some(descr))
}

/// The bytes of a version-1 `.npy` file holding `t`; `what` names it in errors. A tensor
/// whose bytes are not those its type's shape needs is refused: the header never disagrees
/// with the data.
pub fn encode(t: &Tensor, what: &str) -> Result<Vec<u8>, RunError> {
    let (descr, data) = match t.strings() {
        Some(strings) => {
            let (width, data) = utf32(&strings);
            (format!("<U{width}"), data)
        }
        None => (descr(t.dtype()).to_string(), t.bytes().to_vec()),
    };
    if t.dtype() != DType::Str && t.ty.checked_num_bytes() != Some(t.bytes().len()) {
        return Err(RunError::Io(format!(
            "{what}: cannot write {} as .npy: it holds {} bytes, which is not the size of its shape",
            t.ty,
            t.bytes().len()
        )));
    }
    let shape: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
    let shape = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // pad so that the data starts on a 64-byte boundary; the header ends with a newline
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data.len());
    out.extend(MAGIC);
    out.extend([1, 0]);
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    Ok(out)
}

/// The width of the longest string (in code points, at least 1: numpy has no `<U0` arrays
/// in files) and the strings as UTF-32 elements of that width.
fn utf32(strings: &[&str]) -> (usize, Vec<u8>) {
    let width = strings.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
    let mut data = Vec::with_capacity(strings.len() * width * 4);
    for s in strings {
        let n = s.chars().count();
        data.extend(s.chars().flat_map(|c| u32::from(c).to_le_bytes()));
        data.extend(std::iter::repeat_n(0u8, (width - n) * 4));
    }
    (width, data)
}

/// The strings of UTF-32 elements `width` code units wide (trailing NULs are padding).
fn from_utf32(data: &[u8], width: usize) -> Result<Vec<String>, String> {
    data.chunks_exact(width * 4)
        .map(|element| {
            let units = element
                .chunks_exact(4)
                .map(|u| u32::from_le_bytes(u.try_into().expect("4 bytes")));
            let units: Vec<u32> = units.collect();
            let end = units.iter().rposition(|&u| u != 0).map_or(0, |p| p + 1);
            units[..end]
                .iter()
                .map(|&u| char::from_u32(u).ok_or_else(|| format!("{u:#x} is not a unicode character")))
                .collect()
        })
        .collect()
}

/// Parses the bytes of a `.npy` file; `what` names it in errors.
pub fn decode(bytes: &[u8], what: &str) -> Result<Tensor, RunError> {
    let bad = |m: &str| RunError::Io(format!("{what}: not a valid .npy file: {m}"));
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize, 12),
        v => return Err(bad(&format!("unsupported format version {v}"))),
    };
    let header = start
        .checked_add(header_len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        Some(header[at..].trim_start_matches([':', ' ']))
    };
    let descr = field("descr")
        .and_then(|s| s.strip_prefix('\''))
        .and_then(|s| s.split('\'').next())
        .ok_or_else(|| bad("no descr"))?;
    let unicode_width = match descr.strip_prefix("<U") {
        Some(n) => Some(
            n.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| bad(&format!("bad string width '{descr}'")))?,
        ),
        None => None,
    };
    let dtype = match unicode_width {
        Some(_) => DType::Str,
        None => dtype_of_descr(descr).ok_or_else(|| bad(&format!("unsupported element type '{descr}'")))?,
    };
    if field("fortran_order").is_some_and(|s| s.starts_with("True")) {
        return Err(bad("Fortran-ordered arrays are not supported"));
    }
    let shape_text = field("shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("no shape"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad(&format!("bad dimension '{s}'"))))
        .collect::<Result<Vec<_>, _>>()?;
    let ty = TensorType::new(dtype, shape);
    let checked = ty.check_size().map_err(|e| bad(&e.to_string()))?;
    // a string element is `width` UTF-32 code units in the file, not a handle
    let needed = match unicode_width {
        Some(width) => (checked / 8)
            .checked_mul(width * 4)
            .ok_or_else(|| bad(&format!("{ty} of strings {width} wide is too large")))?,
        None => checked,
    };
    let data = &bytes[start + header_len..];
    if data.len() != needed {
        return Err(bad(&format!(
            "{ty} needs {needed} bytes of data, the file has {}",
            data.len()
        )));
    }
    match unicode_width {
        Some(width) => Ok(Tensor::from_strings(
            ty.shape,
            from_utf32(data, width).map_err(|e| bad(&e))?,
        )),
        None => Ok(Tensor::from_bytes(ty, data.to_vec()).expect("length checked")),
    }
}

/// The file an output called `name` is written to: `<name>.npy` with every character other
/// than ASCII letters, digits, `.`, `_` and `-` made `_` (names like
/// `save_infer_model/scale_0.tmp_1` occur in real models).
pub fn file_name_for(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{stem}.npy")
}

pub fn read(path: &Path) -> Result<Tensor, RunError> {
    let bytes = std::fs::read(path).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))?;
    decode(&bytes, &path.display().to_string())
}

pub fn write(path: &Path, t: &Tensor) -> Result<(), RunError> {
    let bytes = encode(t, &path.display().to_string())?;
    std::fs::write(path, bytes).map_err(|e| RunError::Io(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_bytes() {
        let t = Tensor::from_f32s(vec![2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let bytes = encode(&t, "t").unwrap();
        assert_eq!((bytes.len() - t.bytes().len()) % 64, 0);
        assert_eq!(decode(&bytes, "t").unwrap(), t);
        let scalar = Tensor::from_i64s(DType::I64, vec![], &[7]);
        assert_eq!(decode(&encode(&scalar, "s").unwrap(), "s").unwrap(), scalar);
    }

    #[test]
    fn strings_round_trip_as_numpy_unicode() {
        let t = Tensor::from_strings(vec![3], vec!["héllo".into(), String::new(), "✓ ok".into()]);
        let bytes = encode(&t, "s").unwrap();
        // the header pads to 128 bytes here; each element is 5 UTF-32 code units
        let header = String::from_utf8_lossy(&bytes[10..128]);
        assert!(header.contains("'descr': '<U5'"), "{header}");
        assert_eq!(bytes.len() - 128, 3 * 5 * 4);
        assert_eq!(decode(&bytes, "s").unwrap(), t);
        let mut bad = bytes.clone();
        bad[128..132].copy_from_slice(&0xD800u32.to_le_bytes());
        let err = decode(&bad, "s.npy").unwrap_err().to_string();
        assert!(err.contains("0xd800 is not a unicode character"), "{err}");
    }

    #[test]
    fn output_names_become_safe_file_names() {
        assert_eq!(
            file_name_for("save_infer_model/scale_0.tmp_1"),
            "save_infer_model_scale_0.tmp_1.npy"
        );
        assert_eq!(file_name_for("a:b c-d"), "a_b_c-d.npy");
    }

    #[test]
    fn rejects_truncated_data() {
        let t = Tensor::from_f32s(vec![4], &[1.0, 2.0, 3.0, 4.0]);
        let bytes = encode(&t, "t").unwrap();
        let err = decode(&bytes[..bytes.len() - 1], "x.npy").unwrap_err().to_string();
        assert!(err.contains("x.npy") && err.contains("needs 16 bytes"), "{err}");
    }

    /// A header with the given shape text and `data` after it.
    fn with_shape(shape: &str, data: &[u8]) -> Vec<u8> {
        let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}\n");
        let mut out = MAGIC.to_vec();
        out.extend([1, 0]);
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        out.extend(data);
        out
    }

    #[test]
    fn rejects_shapes_whose_size_overflows() {
        // 2^62 * 4 elements of 4 bytes wrap to 0 bytes in unchecked arithmetic
        for shape in ["(4611686018427387904, 4)", "(0, 4611686018427387904, 4)"] {
            let err = decode(&with_shape(shape, &[]), "x.npy").unwrap_err().to_string();
            assert!(
                err.starts_with("x.npy: not a valid .npy file") && err.contains("too large"),
                "{err}"
            );
        }
        assert_eq!(decode(&with_shape("(2, 0)", &[]), "x.npy").unwrap().shape(), [2, 0]);
        let err = decode(&with_shape("(2,)", &[0; 12]), "x.npy").unwrap_err().to_string();
        assert!(err.contains("needs 8 bytes of data, the file has 12"), "{err}");
    }

    #[test]
    fn never_writes_a_header_that_disagrees_with_the_data() {
        let mut t = Tensor::from_f32s(vec![2], &[1.0, 2.0]);
        t.ty = TensorType::new(DType::F32, vec![1 << 62, 4]);
        let err = encode(&t, "y.npy").unwrap_err().to_string();
        assert!(
            err.starts_with("y.npy: cannot write tensor<4611686018427387904x4xf32>"),
            "{err}"
        );
        let path = std::env::temp_dir().join(format!("mxc-npy-{}.npy", std::process::id()));
        assert!(write(&path, &t).is_err());
        assert!(!path.exists(), "nothing is written");
    }
}
