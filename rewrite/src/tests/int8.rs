//! `precision::int8`: which ops int8 quantisation makes QDQ, the scales it chooses, and that
//! its ranges are not applied to another graph.

use super::{f32s, op};
use crate::precision::int8::{self, activation_params, Calibrated};
use crate::precision::{int8_kinds, Calibration, Int8, Precision};
use mxc_dialects::{eval, verify, Attr, Attrs, DType, Graph, OpKind, Tensor, ValueId};
use std::collections::HashMap;
use std::sync::Arc;

fn conv_attrs(group: i64) -> Attrs {
    Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(group))
        .with("pads", Attr::Ints(vec![1, 1, 1, 1]))
        .with("strides", Attr::Ints(vec![1, 1]))
}

/// Weights whose filters' largest magnitudes differ: filter m holds `(m + 1) * (i - 17) / 7`.
fn weights(shape: &[usize]) -> Tensor {
    let per: usize = shape[1..].iter().product();
    let values: Vec<f64> = (0..shape.iter().product::<usize>())
        .map(|i| ((i / per) as f64 + 1.0) * ((i % per) as f64 - 17.0) / 7.0)
        .collect();
    Tensor::from_f64s(DType::F32, shape.to_vec(), &values)
}

/// x [1, 8, 6, 6] -> conv 3x3 (8 -> 4, bias) -> depthwise conv (group 4) -> matmul by a
/// constant [6, 5] -> matmul of the result by itself transposed (two activations).
fn model() -> (Graph, ValueId, ValueId) {
    let mut g = Graph::new("m");
    let x = g.add_input("x", f32s(&[1, 8, 6, 6]));
    let w = g.constant(weights(&[4, 8, 3, 3]));
    let b = g.constant(Tensor::from_f32s(vec![4], &[0.5, -0.5, 0.25, 0.0]));
    let c = op(&mut g, OpKind::Conv, &[x, w, b], conv_attrs(1));
    let dw = g.constant(weights(&[4, 1, 3, 3]));
    let d = op(&mut g, OpKind::Conv, &[c, dw], conv_attrs(4));
    let m = g.constant(weights(&[6, 5]));
    let p = op(&mut g, OpKind::MatMul, &[d, m], Attrs::new());
    let t = op(
        &mut g,
        OpKind::Transpose,
        &[p],
        Attrs::new().with("perm", Attr::Ints(vec![0, 1, 3, 2])),
    );
    let q = op(&mut g, OpKind::MatMul, &[p, t], Attrs::new());
    g.add_output("y", q);
    (g, x, d)
}

fn calibrated(g: &Graph, ranges: &[(ValueId, (f32, f32))]) -> Calibrated {
    Calibrated {
        ranges: ranges.iter().cloned().collect(),
        samples: 1,
        fingerprint: Calibrated::fingerprint_of(g),
        chosen: 0,
        quantisable: 0,
    }
}

#[test]
fn activation_scales_split_the_range_holding_zero_into_255_steps() {
    let (s, z) = activation_params(-1.0, 3.0);
    assert!((s - 4.0 / 255.0).abs() < 1e-9);
    assert_eq!(z, 64, "-(-1) / (4/255) = 63.75 rounds to 64");
    // a range above zero is widened to start at zero
    let (s, z) = activation_params(2.0, 5.1);
    assert!((s - 5.1 / 255.0).abs() < 1e-7);
    assert_eq!(z, 0);
    // below zero: zero is the top
    assert_eq!(activation_params(-2.0, -1.0).1, 255);
    assert_eq!(activation_params(0.0, 0.0), (1.0, 0));
}

#[test]
fn only_ops_with_an_integer_kernel_are_observed() {
    let (g, x, d) = model();
    let all = int8::observed(&g, &None);
    // the 3x3 convolution's image and the product's left operand; the depthwise convolution
    // and the product of two activations have no integer kernel
    assert_eq!(all, vec![x, d]);
    assert_eq!(int8::counts(&g, &None), (4, 2));
    let convs = int8_kinds(&["convolution"]).unwrap();
    assert_eq!(int8::observed(&g, &convs), vec![x]);
    assert_eq!(int8::counts(&g, &convs), (2, 1));
    assert!(int8_kinds(&["add"]).unwrap_err().contains("no int8 form"));
    assert_eq!(int8_kinds(&["dot"]).unwrap(), Some(vec![OpKind::MatMul, OpKind::Gemm]));
}

#[test]
fn quantised_ops_read_dequantised_u8_activations_and_s8_weights_per_channel() {
    let (g, x, d) = model();
    let precision = Precision {
        int8: Some(Int8 {
            ops: None,
            calibration: Calibration::Ranges(Arc::new(calibrated(&g, &[(x, (-1.0, 3.0)), (d, (0.5, 2.0))]))),
        }),
        ..Precision::default()
    };
    let q = precision.apply(&g).unwrap();
    verify(&q).unwrap();
    assert_eq!(q.ty(q.outputs[0].value), g.ty(g.outputs[0].value));
    let dequantised: Vec<_> = q.ops.iter().filter(|o| o.kind == OpKind::DequantizeLinear).collect();
    assert_eq!(dequantised.len(), 4, "two activations and two weights");
    let conv = q
        .ops
        .iter()
        .find(|o| o.kind == OpKind::Conv && o.attrs.int("group") == Ok(1))
        .unwrap();
    let image = q.producer(conv.operands[0]).unwrap();
    assert_eq!(image.kind, OpKind::DequantizeLinear);
    assert_eq!(q.ty(image.operands[0]).dtype, DType::U8);
    assert_eq!(q.constant_value(image.operands[2]).unwrap().get_i64(0), 64);
    // the weights: s8 integers, a scale per filter that maps its largest magnitude to 127
    let filter = q.producer(conv.operands[1]).unwrap();
    let ints = q.constant_value(filter.operands[0]).unwrap();
    let scales = q.constant_value(filter.operands[1]).unwrap();
    assert_eq!(ints.dtype(), DType::I8);
    assert_eq!(scales.shape(), &[4, 1, 1, 1]);
    for m in 0..4 {
        let filter: Vec<i64> = ints.to_i64_vec()[m * 72..(m + 1) * 72].to_vec();
        assert_eq!(filter.iter().map(|v| v.abs()).max(), Some(127), "filter {m}");
        let largest = (m as f64 + 1.0) * 54.0 / 7.0;
        assert!((scales.get_f64(m) - largest / 127.0).abs() < 1e-6);
    }
    // dequantised, the weights are the originals within half a step
    let back = &eval::eval(
        OpKind::DequantizeLinear,
        &[ints, scales, q.constant_value(filter.operands[2]).unwrap()],
        &Attrs::new(),
    )
    .unwrap()
    .unwrap()[0];
    for (i, (a, b)) in weights(&[4, 8, 3, 3])
        .to_f64_vec()
        .iter()
        .zip(back.to_f64_vec())
        .enumerate()
    {
        assert!((a - b).abs() <= scales.get_f64(i / 72) / 2.0 + 1e-6, "{i}: {a} {b}");
    }
    // the product's weights have a scale per column; the depthwise convolution and the
    // product of two activations are as they were
    let product = q
        .ops
        .iter()
        .find(|o| o.kind == OpKind::MatMul && q.producer(o.operands[1]).unwrap().kind == OpKind::DequantizeLinear);
    let columns = q.producer(product.unwrap().operands[1]).unwrap();
    assert_eq!(q.constant_value(columns.operands[1]).unwrap().shape(), &[5]);
    let depthwise = q
        .ops
        .iter()
        .find(|o| o.kind == OpKind::Conv && o.attrs.int("group") == Ok(4))
        .unwrap();
    assert_eq!(q.producer(depthwise.operands[1]).unwrap().kind, OpKind::Constant);
}

#[test]
fn an_op_without_a_finite_range_stays_f32() {
    let (g, x, d) = model();
    let c = calibrated(&g, &[(x, (f32::NEG_INFINITY, 1.0)), (d, (0.0, 1.0))]);
    let q = int8::quantize(&g, &None, &c).unwrap();
    let conv = q
        .ops
        .iter()
        .find(|o| o.kind == OpKind::Conv && o.attrs.int("group") == Ok(1))
        .unwrap();
    assert!(q.producer(conv.operands[0]).is_none(), "the image is the input itself");
    assert_eq!(q.ops.iter().filter(|o| o.kind == OpKind::DequantizeLinear).count(), 2);
}

#[test]
fn ranges_of_another_graph_are_refused() {
    let (g, x, _) = model();
    let c = calibrated(&g, &[(x, (0.0, 1.0))]);
    let mut other = g.clone();
    let extra = other.constant(Tensor::from_f32s(vec![], &[1.0]));
    other.add_output("extra", extra);
    let e = int8::quantize(&other, &None, &c).unwrap_err().to_string();
    assert!(e.contains("calibrated on another program"), "{e}");
    // and samples not yet run are refused by `apply` (codegen calibrates them first)
    let p = Precision {
        int8: Some(Int8 {
            ops: None,
            calibration: Calibration::samples(vec![HashMap::new()]),
        }),
        ..Precision::default()
    };
    assert!(p.apply(&g).unwrap_err().to_string().contains("not calibrated"));
    assert_eq!(p.describe(), "int8 (1 calibration sample)");
}
