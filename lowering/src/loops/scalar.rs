//! Scalar arithmetic on typed values: each helper picks the float, signed or unsigned MLIR op
//! for its operands' type, and `convert` implements ONNX Cast between compute types.
//!
//! Compute types are `i1`, the integers, `f32` and `f64` (f16 and bf16 are computed in f32;
//! see `buffer.rs`). Integer division never traps: a zero divisor gives 0 and `MIN / -1`
//! wraps, where LLVM would have undefined behaviour.

use super::emit::{type_with_lanes, Emitter, Ty, V};

/// How an f32 becomes an i32 (`Emitter::x86_to_i32`): toward zero (ONNX Cast), or to the
/// nearest, half to even (the end of a quantisation, `saturate.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToI32 {
    Truncate,
    Nearest,
}

/// Comparison predicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Gt,
    Ge,
}

impl Cmp {
    fn predicate(self, ty: Ty) -> &'static str {
        use Cmp::*;
        if ty.is_float() {
            // ordered comparisons (false with NaN), except `!=`, which is true with NaN
            return match self {
                Eq => "oeq",
                Ne => "une",
                Lt => "olt",
                Gt => "ogt",
                Ge => "oge",
            };
        }
        match (self, ty.is_signed()) {
            (Eq, _) => "eq",
            (Ne, _) => "ne",
            (Lt, true) => "slt",
            (Gt, true) => "sgt",
            (Ge, true) => "sge",
            (Lt, false) => "ult",
            (Gt, false) => "ugt",
            (Ge, false) => "uge",
        }
    }
}

impl Emitter {
    /// `arith.<op> a, b`, a scalar operand splat to the other's lanes.
    fn binary(&mut self, float_op: &str, int_op: &str, a: &V, b: &V) -> V {
        let (a, b) = self.same_lanes(a, b);
        let op = if a.ty.is_float() { float_op } else { int_op };
        self.op_lanes("v", a.ty, a.lanes, &format!("arith.{op} {a}, {b} : {}", a.mlir_ty()))
    }

    pub fn add(&mut self, a: &V, b: &V) -> V {
        self.binary("addf", "addi", a, b)
    }

    pub fn sub(&mut self, a: &V, b: &V) -> V {
        self.binary("subf", "subi", a, b)
    }

    pub fn mul(&mut self, a: &V, b: &V) -> V {
        self.binary("mulf", "muli", a, b)
    }

    /// Division: IEEE for floats, truncating for integers (0 for a zero divisor).
    pub fn div(&mut self, a: &V, b: &V) -> V {
        if a.ty.is_float() {
            return self.binary("divf", "divf", a, b);
        }
        let (zero, one) = (self.zero(a.ty), self.one(a.ty));
        let by_zero = self.cmp(Cmp::Eq, b, &zero);
        if !a.ty.is_signed() {
            let safe = self.select(&by_zero, &one, b);
            let q = self.binary("divui", "divui", a, &safe);
            return self.select(&by_zero, &zero, &q);
        }
        // signed: a zero divisor gives 0 and a divisor of -1 gives the wrapping negation
        let minus_one = self.int(a.ty, -1);
        let by_minus_one = self.cmp(Cmp::Eq, b, &minus_one);
        let special = self.int_op("ori", &by_zero, &by_minus_one);
        let safe = self.select(&special, &one, b);
        let q = self.binary("divsi", "divsi", a, &safe);
        let negated = self.sub(&zero, a);
        let q = self.select(&by_minus_one, &negated, &q);
        self.select(&by_zero, &zero, &q)
    }

    /// The larger value (NaN if either is NaN, as numpy's `maximum`).
    pub fn max(&mut self, a: &V, b: &V) -> V {
        let op = if a.ty.is_signed() { "maxsi" } else { "maxui" };
        self.binary("maximumf", op, a, b)
    }

    /// The smaller value (NaN if either is NaN, as numpy's `minimum`).
    pub fn min(&mut self, a: &V, b: &V) -> V {
        let op = if a.ty.is_signed() { "minsi" } else { "minui" };
        self.binary("minimumf", op, a, b)
    }

    /// `x` raised to `lo` where it is below. On a vector unit (the cpu target): numpy's
    /// `maximum(x, lo)` for a bound that is not NaN, but for the sign of a zero (`-0` stays `-0`
    /// against a bound of `0`); NaN stays NaN. A compare and a select, which x86 does in one
    /// instruction (`vmaxps` with `x` second), where `maximum`'s ordering of signed zeros takes
    /// a compare and a blend more (17% of a SiLU kernel on an AMD Zen machine): Relu, Clip and
    /// the clamps of `approx.rs`, on every element. Scalar code (`ref`) is `maximum` itself.
    pub fn at_least(&mut self, x: &V, lo: &V) -> V {
        self.bounded(x, (lo, Cmp::Lt), Emitter::max)
    }

    /// `x` lowered to `hi` where it is above; the mirror of `at_least`.
    pub fn at_most(&mut self, x: &V, hi: &V) -> V {
        self.bounded(x, (hi, Cmp::Gt), Emitter::min)
    }

    /// `bound` where `x` lies `beyond` it (compares so with it), else `x`, on the vector unit;
    /// `exact` (`max` or `min`) for integers and scalar code.
    fn bounded(&mut self, x: &V, (bound, beyond): (&V, Cmp), exact: fn(&mut Emitter, &V, &V) -> V) -> V {
        if !x.ty.is_float() || self.isa.is_none() {
            return exact(self, x, bound);
        }
        let past = self.cmp(beyond, x, bound);
        self.select(&past, bound, x)
    }

    pub fn neg(&mut self, a: &V) -> V {
        if a.ty.is_float() {
            return self.op_lanes("v", a.ty, a.lanes, &format!("arith.negf {a} : {}", a.mlir_ty()));
        }
        let zero = self.zero(a.ty);
        self.sub(&zero, a)
    }

    /// Absolute value (the identity on unsigned integers).
    pub fn abs(&mut self, a: &V) -> V {
        let (ty, lanes) = (a.ty, a.lanes);
        match ty {
            t if t.is_float() => self.op_lanes("v", t, lanes, &format!("math.absf {a} : {}", a.mlir_ty())),
            t if t.is_signed() => self.op_lanes("v", t, lanes, &format!("math.absi {a} : {}", a.mlir_ty())),
            _ => a.clone(),
        }
    }

    pub fn cmp(&mut self, pred: Cmp, a: &V, b: &V) -> V {
        let (a, b) = self.same_lanes(a, b);
        let p = pred.predicate(a.ty);
        let op = if a.ty.is_float() { "cmpf" } else { "cmpi" };
        self.op_lanes(
            "p",
            Ty::I1,
            a.lanes,
            &format!("arith.{op} {p}, {a}, {b} : {}", a.mlir_ty()),
        )
    }

    /// `cond ? a : b`, element by element when `cond` is a vector.
    pub fn select(&mut self, cond: &V, a: &V, b: &V) -> V {
        let lanes = cond.lanes.max(a.lanes).max(b.lanes);
        let (a, b) = (self.splat(a, lanes), self.splat(b, lanes));
        let cond = self.splat(cond, lanes);
        // a vector condition is spelled out; a scalar one is implied
        let types = match lanes {
            1 => a.mlir_ty(),
            _ => format!("{}, {}", cond.mlir_ty(), a.mlir_ty()),
        };
        self.op_lanes("v", a.ty, lanes, &format!("arith.select {cond}, {a}, {b} : {types}"))
    }

    /// Bitwise and of two integers of the same type.
    pub fn and(&mut self, a: &V, b: &V) -> V {
        self.binary("andi", "andi", a, b)
    }

    /// An integer `arith` op on two integers of the same type (`ori`, `xori`, `shli`, ...).
    pub fn int_op(&mut self, op: &str, a: &V, b: &V) -> V {
        self.binary(op, op, a, b)
    }

    /// Logical not of an `i1`.
    pub fn not(&mut self, a: &V) -> V {
        let t = self.int(Ty::I1, 1);
        self.binary("xori", "xori", a, &t)
    }

    /// A one-operand `math` op (`exp`, `log`, `sqrt`, `erf`, `tanh`, `floor`, `ceil`, ...):
    /// MLIR's (libm's, for scalar code), or on a vector unit this crate's vector forms of
    /// `exp`, `tanh` and `erf` (`approx.rs`).
    pub fn math(&mut self, func: &str, a: &V) -> V {
        if self.isa.is_some() && a.ty == Ty::F32 {
            if let Some(v) = self.approximate(func, a) {
                return v;
            }
        }
        self.op_lanes("v", a.ty, a.lanes, &format!("math.{func} {a} : {}", a.mlir_ty()))
    }

    pub fn zero(&mut self, ty: Ty) -> V {
        self.num(ty, 0.0)
    }

    pub fn one(&mut self, ty: Ty) -> V {
        self.num(ty, 1.0)
    }

    /// A constant of numeric type `ty` (floats exactly, integers truncated toward zero).
    pub fn num(&mut self, ty: Ty, value: f64) -> V {
        if ty.is_float() {
            self.float(ty, value)
        } else {
            self.int(ty, value as i64)
        }
    }

    /// The identity of `max`: -inf, or the least integer of the type.
    pub fn lowest(&mut self, ty: Ty) -> V {
        match ty {
            t if t.is_float() => self.float(t, f64::NEG_INFINITY),
            Ty::Int { bits, signed: true } => self.int(ty, i64::MIN >> (64 - bits)),
            _ => self.int(ty, 0),
        }
    }

    /// Vector `v` of floats to 8-bit integers, as the scalar path through i64 gives them, on
    /// i32 lanes (one conversion instead of two to i64, and a narrowing from 32 bits: what every
    /// `QuantizeLinear` ends in). They agree: below 2^31 in magnitude the i32 is exact; from
    /// there on a float is a multiple of 256, so its low byte is 0, and so is NaN's (x86's
    /// indefinite integer), which the select gives.
    fn float_to_byte(&mut self, v: &V, to: Ty) -> V {
        if let Some(whole) = self.x86_to_i32(v, ToI32::Truncate) {
            return self.convert(&whole, to);
        }
        let i32_ty = Ty::Int { bits: 32, signed: true };
        let (f, t) = (v.mlir_ty(), type_with_lanes(i32_ty, v.lanes));
        let whole = self.op_lanes("v", i32_ty, v.lanes, &format!("arith.fptosi {v} : {f} to {t}"));
        let magnitude = self.abs(v);
        let limit = self.float(v.ty, 2f64.powi(31));
        let in_range = self.cmp(Cmp::Lt, &magnitude, &limit);
        let zero = self.zero(i32_ty);
        let wrapped = self.select(&in_range, &whole, &zero);
        self.convert(&wrapped, to)
    }

    /// Whether the vector unit converts f32 lanes `v` to i32 in one x86 instruction
    /// (`x86_to_i32`): 4, 8 or 16 lanes, no more than a vector holds.
    pub(super) fn x86_converts_to_i32(&self, v: &V) -> bool {
        let fits = self
            .isa
            .is_some_and(|isa| v.lanes <= isa.lanes && matches!(v.lanes, 4 | 8 | 16));
        cfg!(target_arch = "x86_64") && v.ty == Ty::F32 && fits
    }

    /// f32 lanes `v` converted to i32 by x86's `cvttps2dq` (`ToI32::Truncate`) or `cvtps2dq`
    /// (`ToI32::Nearest`, half to even: the 512-bit form whatever the control register says,
    /// the narrower ones as it says, to nearest unless a program changed it), where
    /// `x86_converts_to_i32`: defined for every input (the indefinite integer 0x80000000 out
    /// of range and for NaN), which LLVM's `fptosi` is not.
    pub(super) fn x86_to_i32(&mut self, v: &V, how: ToI32) -> Option<V> {
        if !self.x86_converts_to_i32(v) {
            return None;
        }
        let (wide, narrow, sse, rounding) = match how {
            ToI32::Truncate => ("mask.cvttps2dq.512", "avx.cvtt.ps2dq.256", "cvttps2dq", 4),
            ToI32::Nearest => ("mask.cvtps2dq.512", "avx.cvt.ps2dq.256", "cvtps2dq", 8),
        };
        let i32_ty = Ty::Int { bits: 32, signed: true };
        let (f, t) = (v.mlir_ty(), type_with_lanes(i32_ty, v.lanes));
        let call = match v.lanes {
            16 => {
                let zero = self.zero(i32_ty);
                let passthru = self.splat(&zero, 16);
                let all = self.int(Ty::Int { bits: 16, signed: true }, -1);
                let rounding = self.int(i32_ty, rounding);
                format!(
                    "llvm.call_intrinsic \"llvm.x86.avx512.{wide}\"({v}, {passthru}, {all}, {rounding}) : ({f}, {t}, i16, i32) -> {t}"
                )
            }
            8 => format!("llvm.call_intrinsic \"llvm.x86.{narrow}\"({v}) : ({f}) -> {t}"),
            _ => format!("llvm.call_intrinsic \"llvm.x86.sse2.{sse}\"({v}) : ({f}) -> {t}"),
        };
        Some(self.op_lanes("v", i32_ty, v.lanes, &call))
    }

    /// ONNX Cast between compute types: floats to integers truncate toward zero, anything to
    /// `i1` is `!= 0`, `i1` to numbers is 0 or 1, integers extend by their own signedness.
    pub fn convert(&mut self, v: &V, to: Ty) -> V {
        let from = v.ty;
        if from == to {
            return v.clone();
        }
        let (f, t) = (v.mlir_ty(), type_with_lanes(to, v.lanes));
        if to == Ty::I1 {
            let zero = self.zero(from);
            return self.cmp(Cmp::Ne, v, &zero);
        }
        let op = match (from, to) {
            (Ty::Index, _) | (_, Ty::Index) if from.is_float() || to.is_float() => {
                // through i64
                let mid = self.convert(v, Ty::Int { bits: 64, signed: true });
                return self.convert(&mid, to);
            }
            (Ty::Index, _) | (_, Ty::Index) => {
                if from.is_signed() {
                    "index_cast"
                } else {
                    "index_castui"
                }
            }
            (a, b) if a.is_float() && b.is_float() => {
                if a.bits() < b.bits() {
                    "extf"
                } else {
                    "truncf"
                }
            }
            (a, b) if a.is_float() && b.bits() == 8 && v.lanes > 1 => return self.float_to_byte(v, to),
            (a, b) if a.is_float() && b.bits() < 64 => {
                // through i64, so that out-of-range values wrap as a C cast on x86 does
                let mid = self.convert(v, Ty::Int { bits: 64, signed: true });
                return self.convert(&mid, to);
            }
            (a, b) if a.is_float() => {
                if b.is_signed() {
                    "fptosi"
                } else {
                    "fptoui"
                }
            }
            (a, b) if b.is_float() => {
                if a.is_signed() {
                    "sitofp"
                } else {
                    "uitofp"
                }
            }
            (a, b) if a.bits() == b.bits() => {
                return V { ty: to, ..v.clone() };
            }
            (a, b) if a.bits() > b.bits() => "trunci",
            (a, _) => {
                if a.is_signed() {
                    "extsi"
                } else {
                    "extui"
                }
            }
        };
        self.op_lanes("v", to, v.lanes, &format!("arith.{op} {v} : {f} to {t}"))
    }
}
