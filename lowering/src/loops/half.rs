//! f16 and bf16 to and from f32, scalars and vectors alike. Where the machine has F16C (every
//! cpu with AVX-512, most with AVX2) f16 converts with its instructions (`arith.extf` and
//! `arith.truncf`, which LLVM selects as `vcvtph2ps` and `vcvtps2ph`); elsewhere, and always
//! for bf16, in integer arithmetic (round to nearest even), so that kernels on half-precision
//! data need no conversion routines from a compiler runtime (`__extendhfsf2`,
//! `__truncsfhf2`, ...). bf16 narrows in integers even where AVX-512 BF16 has
//! `vcvtneps2bf16`, since that instruction flushes subnormal inputs to zero and the integer
//! form is exact in every case for a few more instructions.

use super::emit::{type_with_lanes, Emitter, Ty, V};
use super::scalar::Cmp;

const I16: Ty = Ty::Int {
    bits: 16,
    signed: false,
};
const I32: Ty = Ty::Int {
    bits: 32,
    signed: false,
};

impl Emitter {
    /// A half-precision value (f16 or bf16, scalar or vector) widened to f32 (exact); any
    /// other value as it is.
    pub fn widen_half(&mut self, h: &V) -> V {
        match h.ty {
            Ty::F16 if self.has_f16c() => self.convert(h, Ty::F32),
            Ty::F16 => self.f16_to_f32(h),
            Ty::BF16 => self.bf16_to_f32(h),
            _ => h.clone(),
        }
    }

    /// An f32 value (scalar or vector) rounded to `to`, f16 or bf16 (nearest even).
    pub fn narrow_half(&mut self, f: &V, to: Ty) -> V {
        match to {
            Ty::F16 if self.has_f16c() => self.convert(f, Ty::F16),
            Ty::F16 => self.f32_to_f16(f),
            Ty::BF16 => self.f32_to_bf16(f),
            _ => panic!("{} is not a half-precision type", to.mlir()),
        }
    }

    /// `lanes` f32 from bf16 panels that hold pairs of depths side by side (`mx::depth_pairing`):
    /// the `2 * lanes` elements from `idx` on are `lanes` 32-bit pairs, and `which` (an index, 0
    /// or 1) picks the first or the second of each, widened: the low half shifted up, or the
    /// high half with the low one cleared.
    pub fn read_pair_halves(&mut self, buf: &super::buffer::Buf, idx: &[V], lanes: usize, which: &V) -> V {
        let pairs = self.vload(buf, idx, 2 * lanes);
        let to = type_with_lanes(I32, lanes);
        let pairs = self.op_lanes(
            "b",
            I32,
            lanes,
            &format!("vector.bitcast {pairs} : {} to {to}", pairs.mlir_ty()),
        );
        let which = self.convert(which, I32);
        let sixteen = self.int(I32, 16);
        let product = self.mul(&which, &sixteen);
        let shift = self.sub(&sixteen, &product);
        let shifted = self.bits_op("shli", &pairs, &shift);
        let high = self.bits_const("andi", &shifted, 0xffff_0000);
        self.bitcast(&high, Ty::F32)
    }

    fn has_f16c(&self) -> bool {
        self.isa.is_some_and(|isa| isa.f16c)
    }

    /// The same bits as type `to` (of the same width), lane by lane.
    pub(super) fn bitcast(&mut self, v: &V, to: Ty) -> V {
        let to_ty = type_with_lanes(to, v.lanes);
        self.op_lanes(
            "b",
            to,
            v.lanes,
            &format!("arith.bitcast {v} : {} to {to_ty}", v.mlir_ty()),
        )
    }

    /// An integer op (`andi`, `shli`, ...) on two operands, a scalar splat to the other's lanes.
    pub(super) fn bits_op(&mut self, op: &str, a: &V, b: &V) -> V {
        let (a, b) = self.same_lanes(a, b);
        self.op_lanes("b", a.ty, a.lanes, &format!("arith.{op} {a}, {b} : {}", a.mlir_ty()))
    }

    pub(super) fn bits_const(&mut self, op: &str, a: &V, k: u32) -> V {
        let c = self.int(a.ty, k as i32 as i64);
        self.bits_op(op, a, &c)
    }

    /// An f16 value widened to f32 (exact).
    pub fn f16_to_f32(&mut self, h: &V) -> V {
        let h = self.bitcast(h, I16);
        let h = self.convert(&h, I32);
        let sign = self.bits_const("andi", &h, 0x8000);
        let sign = self.bits_const("shli", &sign, 16);
        let magnitude = self.bits_const("andi", &h, 0x7fff);
        let shifted = self.bits_const("shli", &magnitude, 13);
        let exp = self.bits_const("andi", &shifted, 0x0f80_0000);
        // rebias the exponent from 15 to 127
        let normal = self.bits_const("addi", &shifted, 0x3800_0000);
        // infinities and NaN: the exponent field is all ones
        let special = self.bits_const("addi", &normal, 0x3800_0000);
        // zeros and subnormals: renormalise with a float subtraction
        let renorm = self.bits_const("addi", &normal, 0x0080_0000);
        let renorm = self.bitcast(&renorm, Ty::F32);
        let magic = self.int(I32, 0x3880_0000);
        let magic = self.bitcast(&magic, Ty::F32);
        let sub = self.sub(&renorm, &magic);
        let sub = self.bitcast(&sub, I32);
        let all_ones = self.int(I32, 0x0f80_0000);
        let zero = self.int(I32, 0);
        let is_special = self.cmp(Cmp::Eq, &exp, &all_ones);
        let is_small = self.cmp(Cmp::Eq, &exp, &zero);
        let r = self.select(&is_small, &sub, &normal);
        let r = self.select(&is_special, &special, &r);
        let r = self.bits_op("ori", &r, &sign);
        self.bitcast(&r, Ty::F32)
    }

    /// An f32 value rounded to f16 (nearest even; overflow gives infinity).
    pub fn f32_to_f16(&mut self, f: &V) -> V {
        let bits = self.bitcast(f, I32);
        let sign = self.bits_const("andi", &bits, 0x8000_0000);
        let a = self.bits_op("xori", &bits, &sign);
        // too large for f16: infinity, or a quiet NaN
        let f32_inf = self.int(I32, 0x7f80_0000);
        let is_nan = self.cmp(Cmp::Gt, &a, &f32_inf);
        let (qnan, inf) = (self.int(I32, 0x7e00), self.int(I32, 0x7c00));
        let big = self.select(&is_nan, &qnan, &inf);
        // subnormal results: let a float addition do the rounding
        let denorm_magic = self.int(I32, 0x3f00_0000);
        let af = self.bitcast(&a, Ty::F32);
        let mf = self.bitcast(&denorm_magic, Ty::F32);
        let sum = self.add(&af, &mf);
        let sum = self.bitcast(&sum, I32);
        let small = self.bits_op("subi", &sum, &denorm_magic);
        // normal results: rebias, round to nearest even, shift
        let odd = self.bits_const("shrui", &a, 13);
        let odd = self.bits_const("andi", &odd, 1);
        let rebiased = self.bits_const("addi", &a, 0xc800_0fff);
        let rounded = self.bits_op("addi", &rebiased, &odd);
        let normal = self.bits_const("shrui", &rounded, 13);
        let (f16_limit, normal_min) = (self.int(I32, 0x4780_0000), self.int(I32, 0x3880_0000));
        let is_big = self.cmp(Cmp::Ge, &a, &f16_limit);
        let is_small = self.cmp(Cmp::Lt, &a, &normal_min);
        let r = self.select(&is_small, &small, &normal);
        let r = self.select(&is_big, &big, &r);
        let sign16 = self.bits_const("shrui", &sign, 16);
        let r = self.bits_op("ori", &r, &sign16);
        let r = self.convert(&r, I16);
        self.bitcast(&r, Ty::F16)
    }

    /// A bf16 value widened to f32 (exact).
    pub fn bf16_to_f32(&mut self, h: &V) -> V {
        let h = self.bitcast(h, I16);
        let h = self.convert(&h, I32);
        let h = self.bits_const("shli", &h, 16);
        self.bitcast(&h, Ty::F32)
    }

    /// An f32 value rounded to bf16 (nearest even; NaN stays a quiet NaN).
    pub fn f32_to_bf16(&mut self, f: &V) -> V {
        let bits = self.bitcast(f, I32);
        let high = self.bits_const("shrui", &bits, 16);
        let odd = self.bits_const("andi", &high, 1);
        let biased = self.bits_const("addi", &bits, 0x7fff);
        let biased = self.bits_op("addi", &biased, &odd);
        let rounded = self.bits_const("shrui", &biased, 16);
        let quiet = self.bits_const("ori", &high, 0x40);
        let is_nan = self.op_lanes(
            "p",
            Ty::I1,
            f.lanes,
            &format!("arith.cmpf uno, {f}, {f} : {}", f.mlir_ty()),
        );
        let r = self.select(&is_nan, &quiet, &rounded);
        let r = self.convert(&r, I16);
        self.bitcast(&r, Ty::BF16)
    }
}
