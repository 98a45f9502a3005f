//! The import-time constant evaluator (`mxc_dialects::eval`) against the `ref` target: the
//! same op on the same operands must give the same values, so folding never changes what a
//! program computes (DESIGN: one definition of an op's meaning).

use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{eval::eval, Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;

/// Seeded operand data: floats in [-4, 4) on a 1/8 grid (plus zeros), small signed integers.
fn data(ty: &TensorType, seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n = ty.num_elements();
    match ty.dtype {
        DType::Bool => Tensor::from_i64s(
            DType::Bool,
            ty.shape.clone(),
            &(0..n).map(|_| (next() & 1) as i64).collect::<Vec<_>>(),
        ),
        d if d.is_float() => {
            let v: Vec<f64> = (0..n).map(|_| (next() % 64) as f64 / 8.0 - 4.0).collect();
            Tensor::from_f64s(d, ty.shape.clone(), &v)
        }
        d => Tensor::from_i64s(
            d,
            ty.shape.clone(),
            &(0..n).map(|_| (next() % 13) as i64 - 6).collect::<Vec<_>>(),
        ),
    }
}

/// `kind` on `operands` as folded by the evaluator and as run by the `ref` target.
fn fold_and_run(kind: OpKind, operands: &[Tensor], attrs: Attrs) -> (Tensor, Tensor) {
    let refs: Vec<&Tensor> = operands.iter().collect();
    let folded = eval(kind, &refs, &attrs)
        .expect("evaluable")
        .unwrap_or_else(|e| panic!("{kind}: {e}"))
        .remove(0);
    let mut g = Graph::new("case");
    let inputs: Vec<_> = operands
        .iter()
        .enumerate()
        .map(|(i, t)| g.add_input(&format!("x{i}"), t.ty.clone()))
        .collect();
    let result = g.build1(kind, inputs, attrs).unwrap();
    g.add_output("y", result);
    let compiled = compile(&g, Target::Ref, &CompileOptions::default()).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let exe = Executable::load(compiled.program, &compiled.library).unwrap();
    let values: HashMap<String, Tensor> = operands
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("x{i}"), t.clone()))
        .collect();
    let ran = exe.run(&values).unwrap().remove(0).1;
    assert_eq!(ran.ty, folded.ty, "{kind}");
    (folded, ran)
}

fn check(kind: OpKind, operands: Vec<Tensor>, attrs: Attrs) {
    let (folded, ran) = fold_and_run(kind, &operands, attrs);
    for i in 0..ran.len() {
        let (r, f) = (ran.get_f64(i), folded.get_f64(i));
        let close = r == f || (r.is_nan() && f.is_nan()) || (r - f).abs() <= 1e-6 * f.abs();
        assert!(
            close,
            "{kind} on {:?}: element {i} is {r} on ref, {f} folded",
            operands.iter().map(|t| t.ty.to_string()).collect::<Vec<_>>()
        );
    }
}

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[test]
fn elementwise_ops_fold_as_ref_computes_them() {
    use OpKind::*;
    for dtype in [DType::F32, DType::I64, DType::I32] {
        for kind in [Add, Sub, Mul, Div, Max, Min] {
            check(
                kind,
                vec![data(&ty(dtype, &[2, 3]), 1), data(&ty(dtype, &[3]), 2)],
                Attrs::new(),
            );
        }
        for kind in [Equal, Less, Greater] {
            check(
                kind,
                vec![data(&ty(dtype, &[4, 1]), 3), data(&ty(dtype, &[3]), 4)],
                Attrs::new(),
            );
        }
        for kind in [Neg, Abs] {
            check(kind, vec![data(&ty(dtype, &[5]), 5)], Attrs::new());
        }
    }
    for kind in [Sqrt, Reciprocal, Floor, Ceil] {
        check(kind, vec![data(&ty(DType::F32, &[7]), 6)], Attrs::new());
    }
    check(Not, vec![data(&ty(DType::Bool, &[6]), 7)], Attrs::new());
    check(
        Where,
        vec![
            data(&ty(DType::Bool, &[2, 1]), 8),
            data(&ty(DType::F32, &[3]), 9),
            data(&ty(DType::F32, &[2, 3]), 10),
        ],
        Attrs::new(),
    );
    for (from, to) in [
        (DType::F32, DType::I64),
        (DType::I64, DType::F32),
        (DType::F32, DType::Bool),
        (DType::Bool, DType::F32),
        (DType::I32, DType::I8),
    ] {
        check(
            Cast,
            vec![data(&ty(from, &[9]), 11)],
            Attrs::new().with("to", Attr::DType(to)),
        );
    }
}

#[test]
fn data_movement_ops_fold_as_ref_computes_them() {
    use OpKind::*;
    let x = data(&ty(DType::F32, &[2, 3, 4]), 12);
    check(Reshape, vec![x.clone()], Attrs::new().with("shape", ints(&[6, 4])));
    check(Transpose, vec![x.clone()], Attrs::new().with("perm", ints(&[2, 0, 1])));
    check(
        Concat,
        vec![x.clone(), data(&ty(DType::F32, &[2, 1, 4]), 13)],
        Attrs::new().with("axis", Attr::Int(1)),
    );
    check(
        Slice,
        vec![x.clone()],
        Attrs::new()
            .with("starts", ints(&[1, 0, 3]))
            .with("ends", ints(&[2, 3, -1]))
            .with("steps", ints(&[1, 2, -2])),
    );
    let indices = Tensor::from_i64s(DType::I64, vec![2, 2], &[0, -1, 2, -3]);
    check(
        Gather,
        vec![x.clone(), indices],
        Attrs::new().with("axis", Attr::Int(1)),
    );
    check(
        Expand,
        vec![data(&ty(DType::I64, &[3, 1]), 14)],
        Attrs::new().with("shape", ints(&[2, 3, 4])),
    );
    check(Identity, vec![x], Attrs::new());
}

#[test]
fn reductions_fold_as_ref_computes_them() {
    use OpKind::*;
    for dtype in [DType::F32, DType::I64] {
        for kind in [ReduceSum, ReduceMean, ReduceMax] {
            for keep in [0, 1] {
                let attrs = Attrs::new()
                    .with("axes", ints(&[0, 2]))
                    .with("keepdims", Attr::Int(keep));
                check(kind, vec![data(&ty(dtype, &[3, 2, 5]), 15)], attrs);
            }
        }
    }
}

/// The element types narrower than 8 bits of precision (`mxc_dialects::narrow`).
fn narrow_types() -> impl Iterator<Item = DType> {
    DType::ALL
        .into_iter()
        .filter(|d| d.is_narrow_float() || d.narrow_int().is_some())
}

/// f32 values that probe a narrow type's rounding: each of its values, the points halfway
/// between neighbours and just either side of them, beyond its largest value, f32's
/// subnormals, the zeros, the infinities and NaN (for integers, the values in their range).
fn probes(dtype: DType) -> Vec<f32> {
    let codes = Tensor::from_bytes(TensorType::new(DType::U8, vec![256]), (0..=255).collect()).unwrap();
    let values = eval(OpKind::BitCast, &[&codes], &Attrs::new().with("to", Attr::DType(dtype)));
    let mut exact: Vec<f32> = match dtype.bits() {
        8 => values.unwrap().unwrap()[0]
            .to_f64_vec()
            .iter()
            .map(|&v| v as f32)
            .collect(),
        _ => (-8..16).map(|v| v as f32).collect(),
    };
    exact.retain(|v| v.is_finite());
    exact.sort_by(f32::total_cmp);
    let mut out = exact.clone();
    for w in exact.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        out.extend([mid, mid.next_up(), mid.next_down(), w[0] * 0.9 + w[1] * 0.1]);
    }
    let top = exact.last().copied().unwrap_or(1.0);
    out.extend([
        top * 1.01,
        top * 1.1,
        -top * 1.2,
        1e30,
        -1e30,
        f32::from_bits(1),
        f32::from_bits(0x40_0001),
    ]);
    out.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        2.5,
        -2.5,
        7.6,
    ]);
    if dtype.is_int() {
        // a float beyond the integers' range has no defined conversion (ONNX Cast)
        out.retain(|v| v.abs() < 1e9);
    }
    out
}

#[test]
fn narrow_types_convert_as_the_evaluator_does_bit_for_bit() {
    for dtype in narrow_types() {
        let x = probes(dtype);
        let x = Tensor::from_f32s(vec![x.len()], &x);
        let to = Attrs::new().with("to", Attr::DType(dtype));
        let (folded, ran) = fold_and_run(OpKind::Cast, std::slice::from_ref(&x), to);
        let differ = (0..x.len()).find(|&i| folded.bytes()[i] != ran.bytes()[i]);
        if let Some(i) = differ {
            panic!(
                "f32 {} as {dtype}: code {:#x} on ref, {:#x} folded",
                x.get_f64(i),
                ran.bytes()[i],
                folded.bytes()[i]
            );
        }
        // and back: every code decodes to the same f32 bits
        let back = Attrs::new().with("to", Attr::DType(DType::F32));
        let (folded, ran) = fold_and_run(OpKind::Cast, std::slice::from_ref(&folded), back);
        assert_same_bytes(&folded, &ran, &format!("{dtype} to f32"));
    }
}

#[test]
fn bitcasts_keep_the_bits_as_the_evaluator_does() {
    let codes = Tensor::from_bytes(TensorType::new(DType::U8, vec![256]), (0..=255).collect()).unwrap();
    for to in narrow_types().chain([DType::I8, DType::Bool]).filter(|d| d.bits() == 8) {
        let (folded, ran) = fold_and_run(
            OpKind::BitCast,
            std::slice::from_ref(&codes),
            Attrs::new().with("to", Attr::DType(to)),
        );
        assert_same_bytes(&folded, &ran, &format!("u8 as {to}"));
    }
    let nibbles = Tensor::from_i64s(DType::I4, vec![16], &(-8..8).collect::<Vec<_>>());
    for to in [DType::U4, DType::F4E2M1FN] {
        let (folded, ran) = fold_and_run(
            OpKind::BitCast,
            std::slice::from_ref(&nibbles),
            Attrs::new().with("to", Attr::DType(to)),
        );
        assert_same_bytes(&folded, &ran, &format!("i4 as {to}"));
    }
    let (unsigned, _) = fold_and_run(
        OpKind::BitCast,
        std::slice::from_ref(&nibbles),
        Attrs::new().with("to", Attr::DType(DType::U4)),
    );
    assert_eq!(unsigned.to_i64_vec()[..2], [8, 9]);
    let x = data(&ty(DType::F32, &[2, 3]), 16);
    let (folded, ran) = fold_and_run(
        OpKind::BitCast,
        std::slice::from_ref(&x),
        Attrs::new().with("to", Attr::DType(DType::I32)),
    );
    assert_same_bytes(&folded, &ran, "f32 as i32");
    assert_same_bytes(&x, &ran, "f32 as i32");
}

/// Panics naming the first element whose bytes differ.
fn assert_same_bytes(folded: &Tensor, ran: &Tensor, what: &str) {
    let size = folded.dtype().size();
    let chunks = folded.bytes().chunks(size).zip(ran.bytes().chunks(size));
    if let Some((i, (f, r))) = chunks.enumerate().find(|(_, (f, r))| f != r) {
        panic!("{what}: element {i} is {r:x?} on ref, {f:x?} folded");
    }
}
