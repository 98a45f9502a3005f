//! The end of a quantisation to u8 as one step: `cast<u8>(min(max(round(x) + zero, 0), high))`,
//! what `QuantizeLinear` imports as after its division (and the requantising epilogues
//! `integer.rules` make end in), op by op a rounding (two micro-ops on x86), an add, two
//! clamps with their NaN fix-ups and a truncation. On a vector unit it is instead: `x` lowered
//! to `high - zero` (NaN stays NaN), converted to i32 rounding half to even (`cvtps2dq`),
//! `zero` added and raised to 0 in i32, and the low byte kept: about half the instructions,
//! on every element a quantised model's kernels store.
//!
//! It gives the op-by-op bytes for every `x`. `high - zero` is an integer and rounding is
//! monotonic, so lowering `x` there before rounding lowers the rounded value there after;
//! below 2^31 in magnitude the conversion is the rounding, and the i32 sum is exact; a value
//! below -2^31, -inf and NaN convert to the indefinite integer 0x80000000, which the raise
//! makes 0, the byte the op-by-op form gives them (see `Emitter::convert`); +inf is lowered
//! to `high - zero` first.

use super::elementwise;
use super::emit::{Emitter, Ty, V};
use super::scalar::ToI32;
use mxc_dialects::{Attr, Attrs, DType, Def, Graph, OpKind, ValueId};

/// A saturating conversion in a fused body: the byte `to` computed from the f32 value `from`.
#[derive(Clone, Debug)]
pub(super) struct Saturation {
    pub from: ValueId,
    pub to: ValueId,
    zero: f64,
    high: f64,
}

/// The saturating conversions to u8 in `body` whose steps nothing else reads.
pub(super) fn saturations(body: &Graph) -> Vec<Saturation> {
    body.ops
        .iter()
        .filter(|op| op.kind == OpKind::Cast && body.ty(op.results[0]).dtype == DType::U8)
        .filter_map(|cast| saturation(body, cast.results[0], cast.operands[0]))
        .collect()
}

/// The saturation ending in `to = cast(clamped)`, if `clamped` is one's last step.
fn saturation(body: &Graph, to: ValueId, clamped: ValueId) -> Option<Saturation> {
    let read_once = |v: ValueId| {
        let reads: usize = body
            .ops
            .iter()
            .map(|op| op.operands.iter().filter(|&&o| o == v).count())
            .sum();
        reads == 1 && body.outputs.iter().all(|o| o.value != v)
    };
    let constant = |v: ValueId| match body.def(v) {
        Def::Op { op, .. } if body.ops[op].kind == OpKind::Constant && body.ty(v).num_elements() == 1 => {
            body.constant_value(v).map(|t| t.get_f64(0))
        }
        _ => None,
    };
    // `op(v, constant)` in either order: (v, the constant)
    let with_constant = |v: ValueId, kind: OpKind| -> Option<(ValueId, f64)> {
        let Def::Op { op, .. } = body.def(v) else { return None };
        let op = &body.ops[op];
        if op.kind != kind || !read_once(v) {
            return None;
        }
        match (constant(op.operands[0]), constant(op.operands[1])) {
            (None, Some(c)) => Some((op.operands[0], c)),
            (Some(c), None) => Some((op.operands[1], c)),
            _ => None,
        }
    };
    let (raised, high) = with_constant(clamped, OpKind::Min)?;
    let (shifted, low) = with_constant(raised, OpKind::Max)?;
    let (rounded, zero) = with_constant(shifted, OpKind::Add).unwrap_or((shifted, 0.0));
    let Def::Op { op, .. } = body.def(rounded) else {
        return None;
    };
    let round = &body.ops[op];
    let byte_bound = |v: f64| v.fract() == 0.0 && (0.0..=255.0).contains(&v);
    let from = round.operands[0];
    (round.kind == OpKind::Round
        && read_once(rounded)
        && body.ty(from).dtype == DType::F32
        && low == 0.0
        && byte_bound(high)
        && byte_bound(zero))
    .then_some(Saturation { from, to, zero, high })
}

impl Emitter {
    /// The byte `s` computes from the f32 value `x` (lanes of it).
    pub(super) fn saturate(&mut self, s: &Saturation, x: &V) -> V {
        if !self.x86_converts_to_i32(x) {
            return self.saturate_op_by_op(s, x);
        }
        let ceiling = self.float(Ty::F32, s.high - s.zero);
        let lowered = self.at_most(x, &ceiling);
        let whole = self.x86_to_i32(&lowered, ToI32::Nearest).expect("a width x86 converts");
        let i32_ty = Ty::Int { bits: 32, signed: true };
        let shifted = match s.zero {
            0.0 => whole,
            z => {
                let zero = self.int(i32_ty, z as i64);
                self.add(&whole, &zero)
            }
        };
        let floor = self.zero(i32_ty);
        let raised = self.max(&shifted, &floor);
        self.convert(&raised, Ty::Int { bits: 8, signed: false })
    }

    /// The saturation's ops one by one (scalar code, or a width without `cvtps2dq`).
    fn saturate_op_by_op(&mut self, s: &Saturation, x: &V) -> V {
        let f32_const = |e: &mut Emitter, v: f64| e.float(Ty::F32, v);
        let apply = |e: &mut Emitter, kind: OpKind, attrs: &Attrs, x: &[V]| {
            elementwise::apply(e, kind, attrs, x).expect("an element-wise op")
        };
        let none = Attrs::new();
        let mut v = apply(self, OpKind::Round, &none, std::slice::from_ref(x));
        let zero = f32_const(self, s.zero);
        v = apply(self, OpKind::Add, &none, &[v, zero]);
        let low = f32_const(self, 0.0);
        v = apply(self, OpKind::Max, &none, &[v, low]);
        let high = f32_const(self, s.high);
        v = apply(self, OpKind::Min, &none, &[v, high]);
        apply(
            self,
            OpKind::Cast,
            &Attrs::new().with("to", Attr::DType(DType::U8)),
            &[v],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{t, AVX2, AVX512};
    use super::super::{lower_graph, to_llvm_ir, VectorIsa};
    use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor};
    use std::sync::Arc;

    /// The MLIR of a fused `QuantizeLinear` to u8 of an f32 `[2, 40]` (scale 0.05, zero point
    /// `zero`) whose lower clamp is `low`, for `isa`.
    fn quantise(isa: Option<VectorIsa>, zero: f64, low: f64) -> String {
        let mut body = Graph::new("kernel");
        let x = body.add_input("in0", t(DType::F32, &[2, 40]));
        let scalar = |b: &mut Graph, v: f64| b.constant(Tensor::from_f64s(DType::F32, vec![], &[v]));
        let mut v = {
            let scale = scalar(&mut body, 0.05);
            body.build1(OpKind::Div, vec![x, scale], Attrs::new()).unwrap()
        };
        v = body.build1(OpKind::Round, vec![v], Attrs::new()).unwrap();
        let z = scalar(&mut body, zero);
        v = body.build1(OpKind::Add, vec![v, z], Attrs::new()).unwrap();
        let lo = scalar(&mut body, low);
        v = body.build1(OpKind::Max, vec![v, lo], Attrs::new()).unwrap();
        let hi = scalar(&mut body, 255.0);
        v = body.build1(OpKind::Min, vec![hi, v], Attrs::new()).unwrap();
        let to_u8 = Attrs::new().with("to", Attr::DType(DType::U8));
        v = body.build1(OpKind::Cast, vec![v], to_u8).unwrap();
        body.add_output("out0", v);
        let mut g = Graph::new("quantise");
        let x = g.add_input("x", t(DType::F32, &[2, 40]));
        let y = g.build_fused(Arc::new(body), vec![x]).unwrap();
        g.add_output("y", y);
        let m = lower_graph(&g, isa).unwrap().mlir;
        to_llvm_ir(&m).unwrap();
        m
    }

    #[test]
    fn a_quantisation_to_bytes_rounds_in_its_conversion_and_clamps_in_i32() {
        for (isa, conversion) in [(AVX512, "mask.cvtps2dq.512"), (AVX2, "avx.cvt.ps2dq.256")] {
            let m = quantise(Some(isa), 3.0, 0.0);
            // lowered to 252 (255 less the zero point), converted rounding to even, the zero
            // point added and raised to 0 as i32: no rounding op, no float clamp from below
            assert!(m.contains(conversion) && m.contains("2.52e2"), "{m}");
            assert!(m.contains("arith.maxsi") && m.contains("arith.addi"), "{m}");
            assert!(!m.contains("math.roundeven") && !m.contains("arith.maximumf"), "{m}");
        }
        // a lower clamp other than 0 (NaN would not become its byte), and scalar code, keep
        // the ops as they are
        let m = quantise(Some(AVX512), 3.0, 1.0);
        assert!(m.contains("math.roundeven") && !m.contains("cvtps2dq"), "{m}");
        let m = quantise(None, 3.0, 0.0);
        assert!(m.contains("math.roundeven") && !m.contains("ps2dq"), "{m}");
    }
}
