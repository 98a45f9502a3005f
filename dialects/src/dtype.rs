//! Element types of tensors, with their byte sizes and textual names.

use crate::narrow::MiniFloat;
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    /// 8-bit floats (OCP FP8): 4 exponent and 3 mantissa bits, no infinities.
    F8E4M3FN,
    /// Like `F8E4M3FN` with bias 8, no negative zero, and 0x80 its only NaN.
    F8E4M3FNUZ,
    /// 8-bit floats: 5 exponent and 2 mantissa bits, IEEE infinities and NaNs.
    F8E5M2,
    /// Like `F8E5M2` with bias 16, no infinities or negative zero, and 0x80 its only NaN.
    F8E5M2FNUZ,
    /// Powers of two 2^-127 ..= 2^127 (a biased exponent; 0xff is NaN), for block scales.
    F8E8M0FNU,
    /// 4-bit floats: 2 exponent bits, 1 mantissa bit, no infinities or NaNs (±0.5 .. ±6).
    F4E2M1FN,
    /// 4-bit and 2-bit integers, one byte per element in memory.
    I4,
    U4,
    I2,
    U2,
    /// UTF-8 strings: an element is an 8-byte handle into the strings of a run (a constant
    /// `Tensor` holds the strings themselves, `tensor.rs`). Only data movement and the string
    /// ops apply, run on the host rather than in kernels.
    Str,
}

impl DType {
    pub const ALL: [DType; 23] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0FNU,
        DType::F4E2M1FN,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// Bytes one element takes in memory (bool and the types narrower than 8 bits take one).
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F8E8M0FNU => 1,
            DType::F4E2M1FN | DType::I4 | DType::U4 | DType::I2 | DType::U2 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::Str => 8,
        }
    }

    /// Bits in an element's ONNX encoding: what `mx.bitcast` keeps (bool is a byte; the narrow
    /// types their width, though mxc keeps them one per byte).
    pub fn bits(self) -> usize {
        match self {
            DType::F4E2M1FN | DType::I4 | DType::U4 => 4,
            DType::I2 | DType::U2 => 2,
            d => 8 * d.size(),
        }
    }

    /// The name used in the textual IR (`f32`, `i64`, `bool`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0FNU => "f8e8m0fnu",
            DType::F4E2M1FN => "f4e2m1fn",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
            DType::Str => "string",
        }
    }

    /// The type named `name` (`ALL` and `Str`).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().chain([DType::Str]).find(|d| d.name() == name)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64) || self.is_narrow_float()
    }

    /// The floats narrower than 16 bits (stored as bytes, computed on in f32).
    pub fn is_narrow_float(self) -> bool {
        self.minifloat().is_some() || self == DType::F8E8M0FNU
    }

    /// The format of the 8- and 4-bit floats with sign, exponent and mantissa (all but E8M0).
    pub fn minifloat(self) -> Option<MiniFloat> {
        Some(match self {
            DType::F8E4M3FN => MiniFloat::E4M3FN,
            DType::F8E4M3FNUZ => MiniFloat::E4M3FNUZ,
            DType::F8E5M2 => MiniFloat::E5M2,
            DType::F8E5M2FNUZ => MiniFloat::E5M2FNUZ,
            DType::F4E2M1FN => MiniFloat::E2M1,
            _ => return None,
        })
    }

    /// The width and signedness of the integers narrower than a byte (kept one per byte).
    pub fn narrow_int(self) -> Option<(u32, bool)> {
        match self {
            DType::I4 => Some((4, true)),
            DType::U4 => Some((4, false)),
            DType::I2 => Some((2, true)),
            DType::U2 => Some((2, false)),
            _ => None,
        }
    }

    /// The type numpy files hold this one's bytes as, numpy having no bf16 and no narrow
    /// types: bf16 as its bits (u16), the narrow floats as their codes (u8), the narrow
    /// integers as the byte mxc keeps each in (i8 or u8); every other type is its own.
    pub fn numpy_stand_in(self) -> DType {
        match self {
            DType::BF16 => DType::U16,
            DType::I4 | DType::I2 => DType::I8,
            DType::U4 | DType::U2 => DType::U8,
            d if d.is_narrow_float() => DType::U8,
            d => d,
        }
    }

    /// f16 and bf16: 16 bits in memory, computed on in f32 by every kernel, rounded once per
    /// op result (`docs/quantisation.md`).
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// Whether every value of this type is a value of `wider` too, so that a cast to `wider`
    /// and back is the identity (f16 in f32, f32 in f64, u8 in i16, i8 in f16, ...).
    pub fn fits_exactly_in(self, wider: DType) -> bool {
        match (
            self.float_format(),
            wider.float_format(),
            self.int_range(),
            wider.int_range(),
        ) {
            (Some(a), Some(b), _, _) => {
                let smallest = |f: FloatFormat| f.min_normal_exp - f.precision + 1;
                a.precision <= b.precision && a.max_exp <= b.max_exp && smallest(a) >= smallest(b)
            }
            (None, Some(b), Some((lo, hi)), _) => {
                let exact = 1i128 << b.precision.min(120);
                lo.abs() <= exact && hi <= exact && b.max_exp >= b.precision
            }
            (None, None, Some((lo, hi)), Some((wlo, whi))) => wlo <= lo && hi <= whi,
            _ => false,
        }
    }

    /// A float type's significand bits (with the implicit one) and its normal exponents.
    fn float_format(self) -> Option<FloatFormat> {
        let f = |precision, min_normal_exp, max_exp| {
            Some(FloatFormat {
                precision,
                min_normal_exp,
                max_exp,
            })
        };
        match self {
            DType::F64 => f(53, -1022, 1023),
            DType::F32 => f(24, -126, 127),
            DType::BF16 => f(8, -126, 127),
            DType::F16 => f(11, -14, 15),
            DType::F8E4M3FN => f(4, -6, 8),
            DType::F8E4M3FNUZ => f(4, -7, 7),
            DType::F8E5M2 => f(3, -14, 15),
            DType::F8E5M2FNUZ => f(3, -15, 15),
            DType::F4E2M1FN => f(2, 0, 2),
            // powers of two from 2^-127 to 2^127
            DType::F8E8M0FNU => f(1, -127, 127),
            _ => None,
        }
    }

    /// An integer type's least and greatest values.
    fn int_range(self) -> Option<(i128, i128)> {
        let bits = self.bits() as u32;
        match self {
            d if d.is_signed_int() => Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)),
            d if d.is_unsigned_int() => Some((0, (1i128 << bits) - 1)),
            _ => None,
        }
    }

    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::I4 | DType::I2
        )
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::U4 | DType::U2
        )
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }
}

/// The numbers a float type holds: `precision` significand bits (the implicit one counted),
/// normal exponents `min_normal_exp..=max_exp`, subnormals below.
#[derive(Clone, Copy)]
struct FloatFormat {
    precision: i32,
    min_normal_exp: i32,
    max_exp: i32,
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn which_types_hold_every_value_of_another() {
        use DType::*;
        for (narrow, wide) in [
            (F16, F32),
            (BF16, F32),
            (F16, F64),
            (F32, F64),
            (F8E4M3FN, F16),
            (F8E5M2, F16),
            (F8E4M3FN, BF16),
            (F8E8M0FNU, F32),
            (U8, I16),
            (I8, I32),
            (U8, F16),
            (I16, F32),
            (I32, F64),
            (U4, F8E4M3FN),
        ] {
            assert!(narrow.fits_exactly_in(wide), "{narrow} in {wide}");
        }
        for (narrow, wide) in [
            (F32, F16),
            (F16, BF16),
            (BF16, F16),
            (F8E8M0FNU, F16),
            (I8, U16),
            (U16, I16),
            (I16, F16),
            (I32, F32),
            (F16, I32),
            (Bool, F32),
        ] {
            assert!(!narrow.fits_exactly_in(wide), "{narrow} in {wide}");
        }
        assert!(F16.is_half() && BF16.is_half() && !F32.is_half());
    }
}
