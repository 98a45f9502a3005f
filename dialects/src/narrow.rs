//! Element types narrower than a byte's worth of precision: the 8-bit floats (E4M3FN, E4M3FNUZ,
//! E5M2, E5M2FNUZ and the E8M0 scale type), the 4-bit float E2M1, and 4- and 2-bit integers.
//!
//! mxc keeps each of them in one byte per element (ONNX's packed 4- and 2-bit forms are unpacked
//! on import) and computes on them in f32 (the floats) or in 8-bit integers. This module holds
//! their encodings: a byte decoded to f32, and an f32 rounded to a byte as a store does. The
//! loop level's kernels (`lowering/src/loops/narrow.rs`) implement the same functions in
//! integer arithmetic; the evaluator uses these.
//!
//! A store rounds to nearest even and does not saturate: a value beyond the largest finite one
//! becomes infinity (E5M2) or NaN (the types without infinities), as IEEE conversions do.
//! E2M1 has neither and saturates; a NaN stored as E2M1 becomes zero. ONNX `Cast`'s saturating
//! default is a clip before the store (the importer writes it). E8M0 holds powers of two: a
//! store rounds up to the next one and saturates at 2^127, the default of ONNX `Cast`.

use crate::DType;

/// How an 8- or 4-bit float spends its top codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// IEEE style: the top exponent holds the infinities and NaNs (E5M2).
    Ieee,
    /// No infinities; the all-ones code of each sign is NaN (E4M3FN).
    Fn,
    /// No infinities and no negative zero; its code, 0x80, is the one NaN (the FNUZ types).
    Fnuz,
    /// No infinities or NaNs at all (E2M1).
    Finite,
}

/// A small float format: sign, `exp_bits` of exponent with `bias`, `man_bits` of mantissa.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiniFloat {
    pub exp_bits: u32,
    pub man_bits: u32,
    pub bias: i32,
    pub specials: Specials,
}

impl MiniFloat {
    pub const E4M3FN: MiniFloat = MiniFloat::new(4, 3, 7, Specials::Fn);
    pub const E4M3FNUZ: MiniFloat = MiniFloat::new(4, 3, 8, Specials::Fnuz);
    pub const E5M2: MiniFloat = MiniFloat::new(5, 2, 15, Specials::Ieee);
    pub const E5M2FNUZ: MiniFloat = MiniFloat::new(5, 2, 16, Specials::Fnuz);
    pub const E2M1: MiniFloat = MiniFloat::new(2, 1, 1, Specials::Finite);

    const fn new(exp_bits: u32, man_bits: u32, bias: i32, specials: Specials) -> MiniFloat {
        MiniFloat {
            exp_bits,
            man_bits,
            bias,
            specials,
        }
    }

    /// The sign bit of a code.
    pub fn sign_bit(&self) -> u32 {
        1 << (self.exp_bits + self.man_bits)
    }

    /// The largest magnitude code that is a finite number.
    pub fn max_code(&self) -> u32 {
        let all = self.sign_bit() - 1;
        match self.specials {
            Specials::Ieee => all - (1 << self.man_bits),
            Specials::Fn => all - 1,
            Specials::Fnuz | Specials::Finite => all,
        }
    }

    /// The largest finite value.
    pub fn max(&self) -> f32 {
        self.decode(self.max_code() as u8)
    }

    /// The exponent of the smallest normal value, unbiased.
    pub fn min_normal_exponent(&self) -> i32 {
        1 - self.bias
    }

    /// The code of a NaN of sign `sign` (0 or 1), or, for E2M1, what a NaN becomes.
    pub fn nan_code(&self, sign: u32) -> u32 {
        match self.specials {
            // the quiet NaN: all exponent bits and the top mantissa bit
            Specials::Ieee => {
                let quiet = (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1));
                (sign * self.sign_bit()) | quiet
            }
            Specials::Fn => (sign * self.sign_bit()) | (self.sign_bit() - 1),
            Specials::Fnuz => self.sign_bit(),
            Specials::Finite => 0,
        }
    }

    /// What a finite value too large in magnitude becomes (`sign` 0 or 1).
    pub fn overflow_code(&self, sign: u32) -> u32 {
        match self.specials {
            Specials::Ieee => (sign * self.sign_bit()) | (self.max_code() + 1),
            Specials::Finite => (sign * self.sign_bit()) | self.max_code(),
            Specials::Fn | Specials::Fnuz => self.nan_code(sign),
        }
    }

    pub fn decode(&self, code: u8) -> f32 {
        let code = code as u32;
        let sign: f32 = if code & self.sign_bit() != 0 { -1.0 } else { 1.0 };
        let magnitude = code & (self.sign_bit() - 1);
        let (e, m) = (magnitude >> self.man_bits, magnitude & ((1 << self.man_bits) - 1));
        let top = (1 << self.exp_bits) - 1;
        match self.specials {
            Specials::Fnuz if code == self.sign_bit() => return f32::NAN,
            Specials::Fn if magnitude == self.sign_bit() - 1 => return f32::NAN.copysign(sign),
            Specials::Ieee if e == top && m == 0 => return sign * f32::INFINITY,
            Specials::Ieee if e == top => return f32::NAN.copysign(sign),
            _ => {}
        }
        let scale = |exp: i32| 2f32.powi(exp);
        let value = if e == 0 {
            m as f32 * scale(self.min_normal_exponent() - self.man_bits as i32)
        } else {
            (1.0 + m as f32 / (1 << self.man_bits) as f32) * scale(e as i32 - self.bias)
        };
        sign * value
    }

    /// `x` rounded to nearest even, without saturation (see the module comment).
    pub fn encode(&self, x: f32) -> u8 {
        let bits = x.to_bits();
        let sign = bits >> 31;
        let a = bits & 0x7fff_ffff;
        if a > 0x7f80_0000 {
            return self.nan_code(sign) as u8;
        }
        let magnitude = if a < ((127 + self.min_normal_exponent()) as u32) << 23 {
            // below the smallest normal: an addition rounds to the subnormal spacing
            let offset = self.subnormal_offset();
            (f32::from_bits(a) + offset).to_bits() - offset.to_bits()
        } else {
            let shift = 23 - self.man_bits;
            let rebiased = a - (((127 - self.bias) as u32) << 23);
            let round = (1 << (shift - 1)) - 1 + ((rebiased >> shift) & 1);
            // infinity and values beyond the format's exponents land past max_code
            (rebiased + round) >> shift
        };
        let code = if magnitude > self.max_code() {
            self.overflow_code(sign)
        } else if magnitude == 0 && self.specials == Specials::Fnuz {
            0
        } else {
            (sign * self.sign_bit()) | magnitude
        };
        code as u8
    }

    /// The f32 whose spacing is the format's subnormal spacing, 2^(min exponent - man_bits):
    /// adding it to a magnitude below the smallest normal rounds that magnitude to a multiple
    /// of the spacing, and the low bits of the sum count the multiples.
    pub fn subnormal_offset(&self) -> f32 {
        2f32.powi(self.min_normal_exponent() - self.man_bits as i32 + 23)
    }
}

/// A code of the narrow float type `dtype` (`DType::is_narrow_float`) as f32.
pub fn decode_float(dtype: DType, code: u8) -> f32 {
    match dtype.minifloat() {
        Some(format) => format.decode(code),
        None => e8m0_decode(code),
    }
}

/// `x` stored as the narrow float type `dtype` (`DType::is_narrow_float`).
pub fn encode_float(dtype: DType, x: f32) -> u8 {
    match dtype.minifloat() {
        Some(format) => format.encode(x),
        None => e8m0_encode(x),
    }
}

/// E8M0: the byte is a biased exponent (bias 127); 0xff is NaN.
fn e8m0_decode(code: u8) -> f32 {
    match code {
        0xff => f32::NAN,
        // 2^-127 is below f32's normals: built from its bits
        0 => f32::from_bits(1 << 22),
        e => f32::from_bits((e as u32) << 23),
    }
}

/// `x`'s power of two rounded up, saturated at 2^127 (the sign is ignored; infinities and NaN
/// become NaN), as ONNX `Cast` with `round_mode = "up"` and `saturate` does.
fn e8m0_encode(x: f32) -> u8 {
    let bits = x.to_bits();
    let exponent = (bits >> 23) & 0xff;
    let fraction = bits & 0x7f_ffff;
    match exponent {
        0xff => 0xff,
        0xfe => 0xfe,
        // f32's subnormals: up to 2^-127 (code 0), else up to 2^-126
        0 => (fraction > 1 << 22) as u8,
        e => (e + (fraction != 0) as u32) as u8,
    }
}

/// `v` wrapped to a `bits`-wide integer (two's complement when `signed`), as a cast to a
/// narrower integer type discards the high bits.
pub fn wrap_int(v: i64, bits: u32, signed: bool) -> i64 {
    let shift = 64 - bits;
    if signed {
        (v << shift) >> shift
    } else {
        ((v as u64) << shift >> shift) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [MiniFloat; 5] = [
        MiniFloat::E4M3FN,
        MiniFloat::E4M3FNUZ,
        MiniFloat::E5M2,
        MiniFloat::E5M2FNUZ,
        MiniFloat::E2M1,
    ];

    fn codes(f: &MiniFloat) -> std::ops::Range<u32> {
        0..f.sign_bit() * 2
    }

    #[test]
    fn largest_values_are_the_formats_own() {
        let max: Vec<f32> = FORMATS.iter().map(MiniFloat::max).collect();
        assert_eq!(max, [448.0, 240.0, 57344.0, 57344.0, 6.0]);
        assert_eq!(MiniFloat::E4M3FN.decode(1), 2f32.powi(-9));
        assert_eq!(MiniFloat::E5M2FNUZ.decode(1), 2f32.powi(-17));
        assert_eq!(MiniFloat::E2M1.decode(1), 0.5);
    }

    #[test]
    fn every_code_round_trips() {
        for f in FORMATS {
            for code in codes(&f) {
                let x = f.decode(code as u8);
                let back = f.encode(x);
                if x.is_nan() {
                    assert!(f.decode(back).is_nan(), "{f:?} {code:#x}");
                } else if f.specials == Specials::Fnuz && code == 0 {
                    assert_eq!(back, 0);
                } else {
                    assert_eq!(back as u32, code, "{f:?} {code:#x} decodes to {x}");
                }
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_even_and_overflow_follows_the_specials() {
        let f = MiniFloat::E4M3FN;
        // 464 lies halfway between 448 (mantissa 110) and 480 (not a number): the even one
        assert_eq!(f.decode(f.encode(464.0)), 448.0);
        assert!(f.decode(f.encode(470.0)).is_nan());
        assert!(f.decode(f.encode(f32::INFINITY)).is_nan());
        // halfway between the two smallest subnormals, 0 and 2^-9
        assert_eq!(f.encode(2f32.powi(-10)), 0);
        assert_eq!(f.encode(3.0 * 2f32.powi(-10)), 2);
        assert_eq!(MiniFloat::E5M2.decode(MiniFloat::E5M2.encode(1e6)), f32::INFINITY);
        assert_eq!(MiniFloat::E5M2.decode(MiniFloat::E5M2.encode(-1e6)), f32::NEG_INFINITY);
        assert_eq!(MiniFloat::E5M2FNUZ.encode(-0.0), 0);
        assert_eq!(MiniFloat::E4M3FN.encode(-0.0), 0x80);
        let e2m1 = MiniFloat::E2M1;
        assert_eq!(e2m1.decode(e2m1.encode(1e6)), 6.0);
        assert_eq!(e2m1.decode(e2m1.encode(-7.0)), -6.0);
        assert_eq!(e2m1.decode(e2m1.encode(0.25)), 0.0);
        assert_eq!(e2m1.decode(e2m1.encode(f32::NAN)), 0.0);
        assert_eq!(e2m1.decode(e2m1.encode(2.5)), 2.0);
        assert_eq!(e2m1.decode(e2m1.encode(3.5)), 4.0);
    }

    #[test]
    fn e8m0_rounds_up_to_powers_of_two() {
        assert_eq!(e8m0_decode(e8m0_encode(1.1)), 2.0);
        assert_eq!(e8m0_decode(e8m0_encode(0.25)), 0.25);
        assert_eq!(e8m0_decode(e8m0_encode(0.0)), 2f32.powi(-127));
        assert_eq!(e8m0_encode(3e38), 0xfe);
        assert!(e8m0_decode(e8m0_encode(f32::INFINITY)).is_nan());
        for code in 0..=0xfeu8 {
            assert_eq!(e8m0_encode(e8m0_decode(code)), code);
        }
    }

    #[test]
    fn narrow_integers_wrap() {
        assert_eq!(wrap_int(-9, 4, true), 7);
        assert_eq!(wrap_int(9, 4, true), -7);
        assert_eq!(wrap_int(-3, 2, false), 1);
        assert_eq!(wrap_int(2, 2, true), -2);
        assert_eq!(wrap_int(300, 4, false), 12);
    }
}
