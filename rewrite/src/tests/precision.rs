//! `precision`: quantising chosen ops to f16 or bf16 and computing half precision in f32, on
//! small graphs run by the evaluator.

use super::{f32s, op};
use crate::precision::{op_kinds, Precision, Quantize};
use mxc_dialects::{eval, verify, Attrs, DType, Graph, OpKind, Tensor, TensorType};

/// `relu(x * w) + x * w`, x [2, 4] an input, w [4] a constant (the evaluator has no products).
fn product_graph() -> Graph {
    let mut g = Graph::new("p");
    let x = g.add_input("x", f32s(&[2, 4]));
    let values: Vec<f64> = (0..4).map(|i| (i as f64 - 7.3) / 3.1).collect();
    let w = g.constant(Tensor::from_f64s(DType::F32, vec![4], &values));
    let y = op(&mut g, OpKind::Mul, &[x, w], Attrs::new());
    let r = op(&mut g, OpKind::Relu, &[y], Attrs::new());
    let s = op(&mut g, OpKind::Add, &[r, y], Attrs::new());
    g.add_output("s", s);
    g
}

fn input() -> Tensor {
    let values: Vec<f64> = (0..8).map(|i| (i as f64) * 0.37 - 1.1).collect();
    Tensor::from_f64s(DType::F32, vec![2, 4], &values)
}

fn dtypes_of(g: &Graph, kind: OpKind) -> Vec<DType> {
    g.ops
        .iter()
        .filter(|o| o.kind == kind)
        .map(|o| g.ty(o.results[0]).dtype)
        .collect()
}

fn fp16(ops: Option<Vec<OpKind>>) -> Precision {
    Precision {
        quantize: Some(Quantize { to: DType::F16, ops }),
        ..Precision::default()
    }
}

#[test]
fn quantising_every_op_computes_it_in_half_and_keeps_the_programs_types() {
    let g = product_graph();
    let q = fp16(None).apply(&g).unwrap();
    verify(&q).unwrap();
    assert_eq!(q.ty(q.outputs[0].value), &f32s(&[2, 4]));
    assert_eq!(dtypes_of(&q, OpKind::Mul), vec![DType::F16]);
    assert_eq!(dtypes_of(&q, OpKind::Relu), vec![DType::F16]);
    assert_eq!(dtypes_of(&q, OpKind::Add), vec![DType::F16]);
    // one cast in, one out: the quantised ops read each other's half results directly
    assert_eq!(dtypes_of(&q, OpKind::Cast), vec![DType::F16, DType::F32]);
    // the weight is converted once, at compile time: no cast reads a constant
    let consts = q.ops.iter().filter(|o| o.kind == OpKind::Constant);
    assert!(consts.clone().all(|o| q.ty(o.results[0]).dtype == DType::F16));
    // the answer is the f32 one within f16's rounding, and not the same numbers
    let exact = eval::run(&g, &[input()]).unwrap()[0].to_f64_vec();
    let half = eval::run(&q, &[input()]).unwrap()[0].to_f64_vec();
    assert_ne!(exact, half);
    for (a, b) in exact.iter().zip(&half) {
        assert!((a - b).abs() <= 4e-3 * a.abs().max(1.0), "{a} {b}");
    }
}

#[test]
fn quantising_named_ops_leaves_the_others_in_f32() {
    let g = product_graph();
    let q = fp16(op_kinds(&["mul"]).unwrap()).apply(&g).unwrap();
    verify(&q).unwrap();
    assert_eq!(dtypes_of(&q, OpKind::Mul), vec![DType::F16]);
    assert_eq!(dtypes_of(&q, OpKind::Relu), vec![DType::F32]);
    assert_eq!(dtypes_of(&q, OpKind::Add), vec![DType::F32]);
    // the half product is rounded once and read back in f32 by both its readers: one cast
    assert_eq!(dtypes_of(&q, OpKind::Cast), vec![DType::F16, DType::F32]);
}

#[test]
fn op_names_are_mx_names_or_migraphx_ones_and_unknown_ones_are_refused() {
    assert_eq!(op_kinds(&["all"]).unwrap(), None);
    assert_eq!(
        op_kinds(&["convolution", "softmax"]).unwrap(),
        Some(vec![OpKind::Conv, OpKind::ConvTranspose, OpKind::Softmax])
    );
    assert!(op_kinds(&["convolutoin"]).unwrap_err().contains("`convolutoin`"));
    assert!(op_kinds(&["cast"]).unwrap_err().contains("`cast`"));
    assert!(op_kinds(&[]).unwrap_err().contains("`all`"));
}

#[test]
fn half_as_f32_computes_a_half_program_in_f32_from_its_half_weights() {
    let mut h = Graph::new("h");
    let x = h.add_input("x", TensorType::new(DType::F16, vec![2, 4]));
    let values: Vec<f64> = (0..4).map(|i| (i as f64 - 7.3) / 3.1).collect();
    let w = h.constant(Tensor::from_f64s(DType::F16, vec![4], &values));
    let y = op(&mut h, OpKind::Mul, &[x, w], Attrs::new());
    let r = op(&mut h, OpKind::Relu, &[y], Attrs::new());
    let s = op(&mut h, OpKind::Add, &[r, y], Attrs::new());
    h.add_output("s", s);
    let p = Precision {
        half_as_f32: true,
        ..Precision::default()
    };
    let wide = p.apply(&h).unwrap();
    verify(&wide).unwrap();
    assert_eq!(wide.ty(wide.inputs[0].value).dtype, DType::F16);
    assert_eq!(wide.ty(wide.outputs[0].value).dtype, DType::F16);
    assert_eq!(dtypes_of(&wide, OpKind::Mul), vec![DType::F32]);
    assert_eq!(dtypes_of(&wide, OpKind::Add), vec![DType::F32]);
    // the same as the f32 program on the half weights and input, rounded once at the end
    let x16 = input().cast(DType::F16);
    let got = eval::run(&wide, std::slice::from_ref(&x16)).unwrap()[0].to_f64_vec();
    let mut f = Graph::new("f");
    let xf = f.add_input("x", f32s(&[2, 4]));
    let wf = f.constant(Tensor::from_f64s(DType::F16, vec![4], &values).cast(DType::F32));
    let yf = op(&mut f, OpKind::Mul, &[xf, wf], Attrs::new());
    let rf = op(&mut f, OpKind::Relu, &[yf], Attrs::new());
    let sf = op(&mut f, OpKind::Add, &[rf, yf], Attrs::new());
    f.add_output("s", sf);
    let want = eval::run(&f, &[x16.cast(DType::F32)]).unwrap()[0]
        .cast(DType::F16)
        .to_f64_vec();
    assert_eq!(got, want);
    assert_eq!(p.describe(), "half as f32");
    assert_eq!(fp16(op_kinds(&["conv"]).unwrap()).describe(), "fp16 (conv)");
}

#[test]
fn autocast_fp8_gives_and_takes_f32_at_the_boundary_and_rounds_inputs_to_fp8() {
    let mut g = Graph::new("f8");
    let x = g.add_input("x", TensorType::new(DType::F8E4M3FN, vec![3]));
    let y = op(&mut g, OpKind::Neg, &[x], Attrs::new());
    g.add_output("y", y);
    let p = Precision {
        autocast_fp8: true,
        ..Precision::default()
    };
    let wide = p.apply(&g).unwrap();
    verify(&wide).unwrap();
    assert_eq!(wide.ty(wide.inputs[0].value).dtype, DType::F32);
    assert_eq!(wide.ty(wide.outputs[0].value).dtype, DType::F32);
    // 1.1 is not an e4m3 value: it enters rounded to 1.125, the nearest one
    let x = Tensor::from_f64s(DType::F32, vec![3], &[1.1, -2.0, 0.0]);
    let out = eval::run(&wide, &[x]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![-1.125, 2.0, 0.0]);
    assert_eq!(p.describe(), "autocast fp8");
}
