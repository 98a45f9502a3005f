//! The element types narrower than 16 bits in kernels: 8- and 4-bit floats are stored as bytes
//! and computed on in f32, 4- and 2-bit integers are stored one per byte and computed on as
//! 8-bit integers. A read decodes a byte, a write rounds a value back to one, in integer
//! arithmetic that gives the bits `mxc_dialects::narrow` (the evaluator's encoding) gives.

use super::emit::{Emitter, Ty, V};
use super::scalar::Cmp;
use mxc_dialects::narrow::{MiniFloat, Specials};
use mxc_dialects::DType;

const I32: Ty = Ty::Int {
    bits: 32,
    signed: false,
};
const BYTE: Ty = Ty::Int { bits: 8, signed: false };
const F32_NAN: i64 = 0x7fc0_0000;
const F32_INF: i64 = 0x7f80_0000;

impl Emitter {
    /// A stored byte of the narrow float type `dtype` as f32 (exact).
    pub fn decode_narrow_float(&mut self, byte: &V, dtype: DType) -> V {
        let code = self.convert(byte, I32);
        let bits = match dtype.minifloat() {
            Some(format) => self.decode_minifloat(&code, &format),
            None => self.decode_e8m0(&code),
        };
        self.bitcast(&bits, Ty::F32)
    }

    /// An f32 value rounded to the byte that stores it as the narrow float type `dtype`.
    pub fn encode_narrow_float(&mut self, f: &V, dtype: DType) -> V {
        let bits = self.bitcast(f, I32);
        let code = match dtype.minifloat() {
            Some(format) => self.encode_minifloat(&bits, &format),
            None => self.encode_e8m0(&bits),
        };
        self.convert(&code, BYTE)
    }

    /// An 8-bit integer wrapped to the `bits`-wide integer type it is stored as.
    pub fn wrap_narrow_int(&mut self, v: &V, (bits, signed): (u32, bool)) -> V {
        if signed {
            let high = self.bits_const("shli", v, 8 - bits);
            self.bits_const("shrsi", &high, 8 - bits)
        } else {
            self.bits_const("andi", v, (1 << bits) - 1)
        }
    }

    fn decode_minifloat(&mut self, code: &V, f: &MiniFloat) -> V {
        let width = f.exp_bits + f.man_bits;
        let sign = self.bits_const("andi", code, f.sign_bit());
        let sign = self.bits_const("shli", &sign, 31 - width);
        let magnitude = self.bits_const("andi", code, f.sign_bit() - 1);
        // normal values: the fields moved into place, the exponent rebiased
        let shifted = self.bits_const("shli", &magnitude, 23 - f.man_bits);
        let normal = self.bits_const("addi", &shifted, ((127 - f.bias) as u32) << 23);
        // subnormal values: the mantissa times the subnormal spacing
        let m = self.convert(&magnitude, Ty::F32);
        let spacing = self.float(Ty::F32, 2f64.powi(f.min_normal_exponent() - f.man_bits as i32));
        let small = self.mul(&m, &spacing);
        let small = self.bitcast(&small, I32);
        let first_normal = self.int(I32, 1 << f.man_bits);
        let is_small = self.cmp(Cmp::Lt, &magnitude, &first_normal);
        let value = self.select(&is_small, &small, &normal);
        let value = self.bits_op("ori", &value, &sign);
        let nan = self.int(I32, F32_NAN);
        match f.specials {
            Specials::Finite => value,
            Specials::Fnuz => {
                let nan_code = self.int(I32, f.sign_bit() as i64);
                let is_nan = self.cmp(Cmp::Eq, code, &nan_code);
                self.select(&is_nan, &nan, &value)
            }
            Specials::Fn => {
                let all_ones = self.int(I32, (f.sign_bit() - 1) as i64);
                let is_nan = self.cmp(Cmp::Eq, &magnitude, &all_ones);
                let signed_nan = self.bits_op("ori", &nan, &sign);
                self.select(&is_nan, &signed_nan, &value)
            }
            Specials::Ieee => {
                // the top exponent: infinity, or NaN with the mantissa in place
                let top = self.int(I32, (f.max_code() + 1) as i64);
                let is_special = self.cmp(Cmp::Ge, &magnitude, &top);
                let mantissa = self.bits_const("andi", &shifted, 0x7f_ffff);
                let special = self.bits_const("ori", &mantissa, F32_INF as u32);
                let special = self.bits_op("ori", &special, &sign);
                self.select(&is_special, &special, &value)
            }
        }
    }

    fn encode_minifloat(&mut self, bits: &V, f: &MiniFloat) -> V {
        let width = f.exp_bits + f.man_bits;
        let sign = self.bits_const("shrui", bits, 31);
        let sign = self.bits_const("shli", &sign, width);
        let a = self.bits_const("andi", bits, 0x7fff_ffff);
        // below the smallest normal: an addition rounds to the subnormal spacing
        let offset = self.float(Ty::F32, f.subnormal_offset() as f64);
        let af = self.bitcast(&a, Ty::F32);
        let sum = self.add(&af, &offset);
        let sum = self.bitcast(&sum, I32);
        let small = self.bits_const("subi", &sum, f.subnormal_offset().to_bits());
        // normal: rebias, round to nearest even, shift
        let shift = 23 - f.man_bits;
        let odd = self.bits_const("shrui", &a, shift);
        let odd = self.bits_const("andi", &odd, 1);
        let rebias = (((1u32 << (shift - 1)) - 1) as i64 - (((127 - f.bias) as i64) << 23)) as u32;
        let rebiased = self.bits_const("addi", &a, rebias);
        let rounded = self.bits_op("addi", &rebiased, &odd);
        let normal = self.bits_const("shrui", &rounded, shift);
        let min_normal = self.int(I32, ((127 + f.min_normal_exponent()) as i64) << 23);
        let is_small = self.cmp(Cmp::Lt, &a, &min_normal);
        let magnitude = self.select(&is_small, &small, &normal);
        let mut code = self.bits_op("ori", &magnitude, &sign);
        if f.specials == Specials::Fnuz {
            // no negative zero
            let zero = self.int(I32, 0);
            let is_zero = self.cmp(Cmp::Eq, &magnitude, &zero);
            code = self.select(&is_zero, &zero, &code);
        }
        let max = self.int(I32, f.max_code() as i64);
        let too_big = self.cmp(Cmp::Gt, &magnitude, &max);
        let overflow = self.signed_code(f.overflow_code(0), f.overflow_code(1), &sign);
        let code = self.select(&too_big, &overflow, &code);
        let inf = self.int(I32, F32_INF);
        let is_nan = self.cmp(Cmp::Gt, &a, &inf);
        let nan = self.signed_code(f.nan_code(0), f.nan_code(1), &sign);
        self.select(&is_nan, &nan, &code)
    }

    /// `positive`, or `negative` where `sign` (the code's sign bit, in place) is set.
    fn signed_code(&mut self, positive: u32, negative: u32, sign: &V) -> V {
        if positive == negative {
            return self.int(I32, positive as i64);
        }
        let flip = self.int(I32, (positive ^ negative) as i64);
        let flip = self.bits_op("andi", &flip, sign);
        self.bits_const("xori", &flip, positive)
    }

    fn decode_e8m0(&mut self, code: &V) -> V {
        let value = self.bits_const("shli", code, 23);
        // 2^-127 is an f32 subnormal
        let (zero, smallest) = (self.int(I32, 0), self.int(I32, 1 << 22));
        let is_zero = self.cmp(Cmp::Eq, code, &zero);
        let value = self.select(&is_zero, &smallest, &value);
        let (all_ones, nan) = (self.int(I32, 0xff), self.int(I32, F32_NAN));
        let is_nan = self.cmp(Cmp::Eq, code, &all_ones);
        self.select(&is_nan, &nan, &value)
    }

    fn encode_e8m0(&mut self, bits: &V) -> V {
        let exponent = self.bits_const("shrui", bits, 23);
        let exponent = self.bits_const("andi", &exponent, 0xff);
        let fraction = self.bits_const("andi", bits, 0x7f_ffff);
        let zero = self.int(I32, 0);
        let inexact = self.cmp(Cmp::Ne, &fraction, &zero);
        let step = self.convert(&inexact, I32);
        let up = self.bits_op("addi", &exponent, &step);
        // 2^127 saturates, NaN and infinity stay 0xff
        let largest = self.int(I32, 0xfe);
        let at_top = self.cmp(Cmp::Ge, &exponent, &largest);
        let code = self.select(&at_top, &exponent, &up);
        // f32's subnormals: up to 2^-127 (code 0), else up to 2^-126
        let half = self.int(I32, 1 << 22);
        let above_smallest = self.cmp(Cmp::Gt, &fraction, &half);
        let subnormal_code = self.convert(&above_smallest, I32);
        let is_subnormal = self.cmp(Cmp::Eq, &exponent, &zero);
        self.select(&is_subnormal, &subnormal_code, &code)
    }
}
