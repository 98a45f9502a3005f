//! Element-wise ops: identity, cast, arithmetic, pow, min/max, comparisons, select, logical
//! not, clip, gelu and the unary math functions, with numpy broadcasting of the operands.
//!
//! One loop nest over the result; when no operand broadcasts, a single loop over flat views.

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::rows;
use super::scalar::Cmp;
use mxc_dialects::{Attrs, OpKind};

const F64: Ty = Ty::F64;
const I64: Ty = Ty::Int { bits: 64, signed: true };

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let out = &outs[0];
    // clip's bounds are scalars read once; every other operand is element-wise
    let (args, bounds) = if kind == OpKind::Clip {
        (&ins[..1], &ins[1..])
    } else {
        (ins, &[][..])
    };
    let bounds: Vec<V> = bounds
        .iter()
        .map(|b| {
            let zeros: Vec<V> = b.shape.iter().map(|_| e.idx(0)).collect();
            e.read(b, &zeros)
        })
        .collect();
    let params = params(kind, attrs)?;
    let f = |e: &mut Emitter, x: &[V]| {
        let x: Vec<V> = x.iter().chain(&bounds).cloned().collect();
        scalar(e, kind, &x, params)
    };
    for_each_element(e, args, out, f);
    Ok(())
}

/// The pattern of the op kinds that are element-wise (`lower` writes their kernels).
macro_rules! elementwise_kinds {
    () => {
        mxc_dialects::OpKind::Identity
            | mxc_dialects::OpKind::Cast
            | mxc_dialects::OpKind::Add
            | mxc_dialects::OpKind::Sub
            | mxc_dialects::OpKind::Mul
            | mxc_dialects::OpKind::Div
            | mxc_dialects::OpKind::Pow
            | mxc_dialects::OpKind::Max
            | mxc_dialects::OpKind::Min
            | mxc_dialects::OpKind::Equal
            | mxc_dialects::OpKind::Less
            | mxc_dialects::OpKind::Greater
            | mxc_dialects::OpKind::Where
            | mxc_dialects::OpKind::Not
            | mxc_dialects::OpKind::Sqrt
            | mxc_dialects::OpKind::Exp
            | mxc_dialects::OpKind::Log
            | mxc_dialects::OpKind::Neg
            | mxc_dialects::OpKind::Abs
            | mxc_dialects::OpKind::Reciprocal
            | mxc_dialects::OpKind::Floor
            | mxc_dialects::OpKind::Ceil
            | mxc_dialects::OpKind::Round
            | mxc_dialects::OpKind::Sin
            | mxc_dialects::OpKind::Cos
            | mxc_dialects::OpKind::Tan
            | mxc_dialects::OpKind::Asin
            | mxc_dialects::OpKind::Acos
            | mxc_dialects::OpKind::Atan
            | mxc_dialects::OpKind::BitAnd
            | mxc_dialects::OpKind::BitOr
            | mxc_dialects::OpKind::BitXor
            | mxc_dialects::OpKind::ShiftLeft
            | mxc_dialects::OpKind::ShiftRight
            | mxc_dialects::OpKind::Relu
            | mxc_dialects::OpKind::LeakyRelu
            | mxc_dialects::OpKind::Sigmoid
            | mxc_dialects::OpKind::Tanh
            | mxc_dialects::OpKind::Erf
            | mxc_dialects::OpKind::Gelu
            | mxc_dialects::OpKind::Clip
            | mxc_dialects::OpKind::DequantizeLinear
    };
}
pub(crate) use elementwise_kinds;

/// Whether ops of kind `kind` are element-wise.
pub fn lowers(kind: OpKind) -> bool {
    matches!(kind, elementwise_kinds!())
}

/// Writes `f(operand elements)` at every element of `out`, each operand read where numpy
/// broadcasting maps the element's index: one nest over the result, or one loop over flat
/// views when no operand broadcasts. On a vector unit, f32 kernels run on whole vectors along
/// the result's last dimension (or the flat views), the partial vector at its end masked.
pub fn for_each_element(e: &mut Emitter, args: &[Buf], out: &Buf, f: impl Fn(&mut Emitter, &[V]) -> V) {
    let lanes = vector_lanes(e, args, out);
    if args.iter().all(|b| b.same_dims(out)) {
        let views: Vec<Buf> = args.iter().map(|b| e.flat(b)).collect();
        let flat_out = e.flat(out);
        let n = flat_out.extents().remove(0);
        if let Some(lanes) = lanes.filter(|&l| n.fixed().is_none_or(|n| n >= l)) {
            rows::each(e, (n, lanes), &|e, at, lanes| {
                let at = [at.clone()];
                let x: Vec<V> = views.iter().map(|b| e.read_lanes(b, &at, lanes)).collect();
                let y = f(e, &x);
                e.write(&flat_out, &at, &y);
            });
            return;
        }
        e.for_each(n, |e, i| {
            let idx = [i];
            let x: Vec<V> = views.iter().map(|b| e.read(b, &idx)).collect();
            let y = f(e, &x);
            e.write(&flat_out, &idx, &y);
        });
        return;
    }
    let extents = out.extents();
    let (outer, width) = extents.split_at(out.rank().saturating_sub(1));
    match (lanes, width) {
        (Some(lanes), [n]) if n.fixed().is_none_or(|n| n >= lanes) => e.nest_over(outer, |e, row| {
            rows::each(e, (n.clone(), lanes), &|e, column, lanes| {
                let idx = [row, std::slice::from_ref(column)].concat();
                let x: Vec<V> = args.iter().map(|b| e.read_bcast_lanes(b, &idx, lanes)).collect();
                let y = f(e, &x);
                e.write(out, &idx, &y);
            });
        }),
        _ => e.nest_over(&extents, |e, idx| {
            let x: Vec<V> = args.iter().map(|b| e.read_bcast(b, idx)).collect();
            let y = f(e, &x);
            e.write(out, idx, &y);
        }),
    }
}

/// The lanes element-wise code on `args` and `out` runs with: the vector unit's f32 lanes
/// (integers too, each vector as many elements), when every buffer holds vectors; `None` for
/// scalar code.
fn vector_lanes(e: &Emitter, args: &[Buf], out: &Buf) -> Option<usize> {
    let all = args.iter().chain([out]).all(Buf::holds_vectors);
    e.f32_lanes().filter(|_| all)
}

/// The op of kind `kind` on one element of each operand (clip's bounds included), in their
/// compute types; the caller converts the value to the result's element type (which is all
/// `cast` needs).
pub fn apply(e: &mut Emitter, kind: OpKind, attrs: &Attrs, x: &[V]) -> Result<V, String> {
    let params = params(kind, attrs)?;
    Ok(scalar(e, kind, x, params))
}

/// What an op's scalar code reads from its attributes: leaky_relu's slope, gelu's
/// approximation (unused by the other ops).
#[derive(Clone, Copy, Default)]
struct Params {
    alpha: f64,
    tanh_gelu: bool,
}

fn params(kind: OpKind, attrs: &Attrs) -> Result<Params, String> {
    let mut p = Params::default();
    match kind {
        OpKind::LeakyRelu => p.alpha = attrs.float("alpha")?,
        OpKind::Gelu => {
            p.tanh_gelu = match attrs.str("approximate")? {
                "none" => false,
                "tanh" => true,
                other => return Err(format!("gelu: unknown approximation {other:?}")),
            }
        }
        _ => {}
    }
    Ok(p)
}

fn scalar(e: &mut Emitter, kind: OpKind, x: &[V], params: Params) -> V {
    use OpKind::*;
    let ty = x[0].ty;
    match kind {
        Add => e.add(&x[0], &x[1]),
        Sub => e.sub(&x[0], &x[1]),
        Mul => e.mul(&x[0], &x[1]),
        Div => e.div(&x[0], &x[1]),
        Max => e.max(&x[0], &x[1]),
        Min => e.min(&x[0], &x[1]),
        Pow => pow(e, &x[0], &x[1]),
        Equal => e.cmp(Cmp::Eq, &x[0], &x[1]),
        Less => e.cmp(Cmp::Lt, &x[0], &x[1]),
        Greater => e.cmp(Cmp::Gt, &x[0], &x[1]),
        Where => e.select(&x[0], &x[1], &x[2]),
        Not => e.not(&x[0]),
        Sqrt => e.math("sqrt", &x[0]),
        Exp => e.math("exp", &x[0]),
        Log => e.math("log", &x[0]),
        Erf => e.math("erf", &x[0]),
        Tanh => e.math("tanh", &x[0]),
        Floor => e.math("floor", &x[0]),
        Round => e.math("roundeven", &x[0]),
        Ceil => e.math("ceil", &x[0]),
        Sin => e.math("sin", &x[0]),
        Cos => e.math("cos", &x[0]),
        Tan => e.math("tan", &x[0]),
        Asin => e.math("asin", &x[0]),
        Acos => e.math("acos", &x[0]),
        Atan => e.math("atan", &x[0]),
        BitAnd => e.and(&x[0], &x[1]),
        BitOr => e.int_op("ori", &x[0], &x[1]),
        BitXor => e.int_op("xori", &x[0], &x[1]),
        ShiftLeft => shift(e, true, &x[0], &x[1]),
        ShiftRight => shift(e, false, &x[0], &x[1]),
        Neg => e.neg(&x[0]),
        Abs => e.abs(&x[0]),
        Reciprocal => {
            let one = e.one(ty);
            e.div(&one, &x[0])
        }
        Relu => {
            let zero = e.zero(ty);
            e.at_least(&x[0], &zero)
        }
        LeakyRelu => {
            let zero = e.zero(ty);
            let a = e.float(ty, params.alpha);
            let scaled = e.mul(&x[0], &a);
            let negative = e.cmp(Cmp::Lt, &x[0], &zero);
            e.select(&negative, &scaled, &x[0])
        }
        Sigmoid => sigmoid(e, &x[0]),
        Gelu if params.tanh_gelu => gelu_tanh(e, &x[0]),
        Gelu => gelu(e, &x[0]),
        Clip => {
            let low = e.at_least(&x[0], &x[1]);
            e.at_most(&low, &x[2])
        }
        DequantizeLinear => {
            let wide = if x[1].ty == F64 { F64 } else { Ty::F32 };
            let (v, zero, scale) = (e.convert(&x[0], wide), e.convert(&x[2], wide), e.convert(&x[1], wide));
            let centred = e.sub(&v, &zero);
            e.mul(&centred, &scale)
        }
        // identity and cast: the conversion happens on the store
        _ => x[0].clone(),
    }
}

/// `x` shifted by `amount` bits (left, or right: logically for unsigned types, arithmetically
/// for signed ones). An amount outside `0..width`, which LLVM leaves undefined, shifts every
/// bit out: 0, or the sign's fill for a signed right shift.
fn shift(e: &mut Emitter, left: bool, x: &V, amount: &V) -> V {
    let ty = x.ty;
    let (zero, width) = (e.zero(ty), e.int(ty, ty.bits() as i64));
    let below_width = e.cmp(Cmp::Lt, amount, &width);
    let not_negative = e.cmp(Cmp::Ge, amount, &zero);
    let in_range = e.and(&below_width, &not_negative);
    let top = e.int(ty, ty.bits() as i64 - 1);
    let safe = e.select(&in_range, amount, &top);
    let arithmetic = !left && ty.is_signed();
    let op = match (left, arithmetic) {
        (true, _) => "shli",
        (false, true) => "shrsi",
        (false, false) => "shrui",
    };
    let shifted = e.int_op(op, x, &safe);
    if arithmetic {
        shifted
    } else {
        e.select(&in_range, &shifted, &zero)
    }
}

/// `1 / (1 + exp(-x))` for positive x, `exp(x) / (1 + exp(x))` otherwise (no overflow); on
/// a vector unit, in f32, this crate's rational form (`approx.rs`).
fn sigmoid(e: &mut Emitter, x: &V) -> V {
    if e.isa.is_some() && x.ty == Ty::F32 {
        return e.sigmoid_f32(x);
    }
    let (zero, one) = (e.zero(x.ty), e.one(x.ty));
    let positive = e.cmp(Cmp::Gt, x, &zero);
    let neg_x = e.neg(x);
    let negated = e.select(&positive, &neg_x, x);
    let ex = e.math("exp", &negated);
    let denominator = e.add(&one, &ex);
    let numerator = e.select(&positive, &one, &ex);
    e.div(&numerator, &denominator)
}

/// `x * 0.5 * (1 + erf(x / sqrt(2)))`, the exact (erf) form, in the order exporters write it
/// out, so a recognised chain computes the same numbers.
fn gelu(e: &mut Emitter, x: &V) -> V {
    let root2 = e.float(x.ty, std::f64::consts::SQRT_2);
    let (half, one) = (e.float(x.ty, 0.5), e.one(x.ty));
    let scaled = e.div(x, &root2);
    let erf = e.math("erf", &scaled);
    let one_plus = e.add(&erf, &one);
    let half_x = e.mul(x, &half);
    e.mul(&half_x, &one_plus)
}

/// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`, the tanh approximation, with
/// the constants rounded to the element type, `x^3` as `x * (x * x)` (as PyTorch's exporter
/// writes it out) and the product as `(0.5 * x) * (1 + tanh(..))` (as ONNX's function body
/// does; multiplying by 0.5 is exact, so where the half goes does not change a value).
fn gelu_tanh(e: &mut Emitter, x: &V) -> V {
    let k = e.float(x.ty, (2.0 / std::f64::consts::PI).sqrt());
    let c = e.float(x.ty, 0.044715);
    let (half, one) = (e.float(x.ty, 0.5), e.one(x.ty));
    let square = e.mul(x, x);
    let cube = e.mul(x, &square);
    let c_cube = e.mul(&c, &cube);
    let sum = e.add(x, &c_cube);
    let inner = e.mul(&k, &sum);
    let tanh = e.math("tanh", &inner);
    let one_plus = e.add(&one, &tanh);
    let half_x = e.mul(&half, x);
    e.mul(&half_x, &one_plus)
}

/// numpy `power`: floats with `powf` (in f64 when the exponent is an integer or the base
/// is), integers by repeated squaring (a negative exponent gives `1/base` truncated).
fn pow(e: &mut Emitter, base: &V, exp: &V) -> V {
    if base.ty.is_float() || exp.ty.is_float() {
        let ty = if base.ty == Ty::F32 && exp.ty == Ty::F32 {
            Ty::F32
        } else {
            F64
        };
        let (b, x) = (e.convert(base, ty), e.convert(exp, ty));
        let (b, x) = e.same_lanes(&b, &x);
        let p = e.op_lanes("v", ty, b.lanes, &format!("math.powf {b}, {x} : {}", b.mlir_ty()));
        return e.convert(&p, base.ty);
    }
    let ty = base.ty;
    let x = e.convert(exp, I64);
    let (zero64, one64) = (e.int(I64, 0), e.int(I64, 1));
    let one = e.one(ty);
    let positive = e.cmp(Cmp::Gt, &x, &zero64);
    let x_or_zero = e.select(&positive, &x, &zero64);
    let r = e.while_loop(
        &[one.clone(), base.clone(), x_or_zero],
        |e, v| e.cmp(Cmp::Ne, &v[2], &zero64),
        |e, v| {
            let (r, b, x) = (&v[0], &v[1], &v[2]);
            let bit = e.and(x, &one64);
            let odd = e.cmp(Cmp::Ne, &bit, &zero64);
            let rb = e.mul(r, b);
            let r = e.select(&odd, &rb, r);
            let b = e.mul(b, b);
            let x = e.op("v", I64, &format!("arith.shrui {x}, {one64} : i64"));
            vec![r, b, x]
        },
    );
    let power = r[0].clone();
    if !exp.ty.is_signed() {
        return power;
    }
    // a negative exponent: 1 for base 1, ±1 for base -1, else 0
    let negative = e.cmp(Cmp::Lt, &x, &zero64);
    let zero = e.zero(ty);
    let minus_one = e.int(ty, -1);
    let bit = e.and(&x, &one64);
    let odd = e.cmp(Cmp::Ne, &bit, &zero64);
    let sign = e.select(&odd, &minus_one, &one);
    let is_one = e.cmp(Cmp::Eq, base, &one);
    let is_minus_one = e.cmp(Cmp::Eq, base, &minus_one);
    let r = e.select(&is_minus_one, &sign, &zero);
    let r = e.select(&is_one, &one, &r);
    e.select(&negative, &r, &power)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, loop_depth, lower_one, lower_one_vector, t};
    use mxc_dialects::{Attr, Attrs, DType, OpKind};

    #[test]
    fn broadcasting_operands_get_a_loop_per_result_dimension() {
        let m = lower_one(
            OpKind::Add,
            &[t(DType::F32, &[2, 3]), t(DType::F32, &[3])],
            Attrs::new(),
        );
        assert_eq!(loop_depth(&m.mlir), 2, "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &[
                "the parallel loop over 2x3 of 2x3",
                "arith.divsi",
                "arith.remsi",
                "memref.load %in0[",
                "memref.load %in1[",
                "arith.addf",
                "memref.store",
            ],
        );
    }

    #[test]
    fn same_shaped_operands_use_one_flat_loop() {
        let m = lower_one(
            OpKind::Mul,
            &[t(DType::I32, &[2, 3]), t(DType::I32, &[2, 3])],
            Attrs::new(),
        );
        assert_eq!(loop_depth(&m.mlir), 1, "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &["memref.reinterpret_cast %in0", "to memref<6xi32>", "arith.muli"],
        );
    }

    #[test]
    fn relu_on_a_vector_unit_is_a_compare_and_select_and_ref_keeps_maximum() {
        // `maximumf`'s ordering of signed zeros costs x86 a compare and a blend more per vector
        let x = [t(DType::F32, &[64])];
        let vector = lower_one_vector(OpKind::Relu, &x, Attrs::new());
        check_in_order(&vector, &["arith.cmpf olt", "arith.select"]);
        assert!(!vector.contains("maximumf"), "{vector}");
        let scalar = lower_one(OpKind::Relu, &x, Attrs::new());
        assert!(scalar.mlir.contains("arith.maximumf"), "{}", scalar.mlir);
    }

    #[test]
    fn signedness_picks_the_integer_ops() {
        let signed = lower_one(OpKind::Div, &[t(DType::I8, &[4]), t(DType::I8, &[4])], Attrs::new());
        assert!(signed.mlir.contains("arith.divsi"), "{}", signed.mlir);
        let unsigned = lower_one(OpKind::Less, &[t(DType::U16, &[4]), t(DType::U16, &[4])], Attrs::new());
        assert!(unsigned.mlir.contains("arith.cmpi ult"), "{}", unsigned.mlir);
    }

    #[test]
    fn half_precision_is_computed_in_f32_without_runtime_conversions() {
        let m = lower_one(OpKind::Exp, &[t(DType::F16, &[4])], Attrs::new());
        check_in_order(
            &m.mlir,
            &[
                "memref.load",
                "arith.bitcast",
                "math.exp",
                "f32",
                "arith.bitcast",
                "memref.store",
            ],
        );
        assert!(
            !m.mlir.contains("arith.extf") && !m.mlir.contains("arith.truncf"),
            "{}",
            m.mlir
        );
    }

    #[test]
    fn gelu_computes_the_form_its_approximation_names() {
        let gelu = |a: &str| {
            let m = lower_one(
                OpKind::Gelu,
                &[t(DType::F32, &[4])],
                attrs(&[("approximate", Attr::Str(a.into()))]),
            );
            m.mlir
        };
        let exact = gelu("none");
        check_in_order(
            &exact,
            &["arith.divf", "math.erf", "arith.addf", "arith.mulf", "arith.mulf"],
        );
        assert!(!exact.contains("math.tanh"), "{exact}");
        // x * (x * x), * 0.044715, + x, * sqrt(2 / pi), tanh, 1 +, 0.5 * x, * (1 + tanh)
        let tanh = gelu("tanh");
        check_in_order(
            &tanh,
            &[
                "arith.mulf",
                "arith.mulf",
                "arith.mulf",
                "arith.addf",
                "arith.mulf",
                "math.tanh",
                "arith.addf",
                "arith.mulf",
                "arith.mulf",
                "memref.store",
            ],
        );
        assert!(
            tanh.contains("7.978846e-1 : f32") && tanh.contains("4.4715e-2 : f32"),
            "{tanh}"
        );
        assert!(!tanh.contains("math.erf"), "{tanh}");
    }

    #[test]
    fn cast_to_bool_compares_with_zero() {
        let m = lower_one(
            OpKind::Cast,
            &[t(DType::F32, &[3])],
            attrs(&[("to", Attr::DType(DType::Bool))]),
        );
        check_in_order(&m.mlir, &["arith.cmpf une", "memref.store", "memref<3xi1>"]);
    }
}
