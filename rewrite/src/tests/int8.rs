//! `precision::int8`: which ops int8 quantisation makes QDQ, the scales it chooses, and that
//! its ranges are not applied to another graph.

use super::{f32s, op};
use crate::precision::int8::{self, activation_params, Calibrated};
use crate::precision::{int8_kinds, Calibration, Int8, Precision};
use mxc_dialects::{eval, verify, Attr, Attrs, DType, Graph, Op, OpKind, Tensor, ValueId};
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

/// The values a test calibrates: the 3x3 convolution's image, the depthwise convolution's (the
/// first's result) and the product's left operand (a ReLU6 of the depthwise result plus its
/// image: a residual join).
struct Observed {
    x: ValueId,
    image: ValueId,
    relu6: ValueId,
}

/// x [1, 8, 6, 6] -> conv 3x3 (8 -> 4, bias) -> depthwise conv (group 4), added to its image
/// -> clip to [0, 6] -> matmul by a constant [6, 5] -> matmul of the result by itself
/// transposed (two activations).
fn model() -> (Graph, Observed) {
    let mut g = Graph::new("m");
    let x = g.add_input("x", f32s(&[1, 8, 6, 6]));
    let w = g.constant(weights(&[4, 8, 3, 3]));
    let b = g.constant(Tensor::from_f32s(vec![4], &[0.5, -0.5, 0.25, 0.0]));
    let image = op(&mut g, OpKind::Conv, &[x, w, b], conv_attrs(1));
    let dw = g.constant(weights(&[4, 1, 3, 3]));
    let d = op(&mut g, OpKind::Conv, &[image, dw], conv_attrs(4));
    let joined = op(&mut g, OpKind::Add, &[d, image], Attrs::new());
    let bounds = [0.0, 6.0].map(|v| g.constant(Tensor::from_f32s(vec![], &[v])));
    let relu6 = op(&mut g, OpKind::Clip, &[joined, bounds[0], bounds[1]], Attrs::new());
    let m = g.constant(weights(&[6, 5]));
    let p = op(&mut g, OpKind::MatMul, &[relu6, m], Attrs::new());
    let t = op(
        &mut g,
        OpKind::Transpose,
        &[p],
        Attrs::new().with("perm", Attr::Ints(vec![0, 1, 3, 2])),
    );
    let q = op(&mut g, OpKind::MatMul, &[p, t], Attrs::new());
    g.add_output("y", q);
    (g, Observed { x, image, relu6 })
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
    let (g, o) = model();
    let all = int8::observed(&g, &None);
    // the convolutions' images and the product's left operand; the product of two
    // activations has no integer kernel
    assert_eq!(all, vec![o.x, o.image, o.relu6]);
    assert_eq!(int8::counts(&g, &None), (4, 3));
    let convs = int8_kinds(&["convolution"]).unwrap();
    assert_eq!(int8::observed(&g, &convs), vec![o.x, o.image]);
    assert_eq!(int8::counts(&g, &convs), (2, 2));
    assert!(int8_kinds(&["add"]).unwrap_err().contains("no int8 form"));
    assert_eq!(int8_kinds(&["dot"]).unwrap(), Some(vec![OpKind::MatMul, OpKind::Gemm]));
}

/// `g` quantised with `ranges`.
fn quantised(g: &Graph, ranges: &[(ValueId, (f32, f32))]) -> Graph {
    let precision = Precision {
        int8: Some(Int8 {
            ops: None,
            calibration: Calibration::Ranges(Arc::new(calibrated(g, ranges))),
        }),
        ..Precision::default()
    };
    let q = precision.apply(g).unwrap();
    verify(&q).unwrap();
    q
}

/// The convolution of `group` groups in `q`.
fn conv(q: &Graph, group: i64) -> &Op {
    q.ops
        .iter()
        .find(|o| o.kind == OpKind::Conv && o.attrs.int("group") == Ok(group))
        .unwrap()
}

#[test]
fn quantised_ops_read_dequantised_u8_activations_and_s8_weights_per_channel() {
    let (g, o) = model();
    let q = quantised(&g, &[(o.x, (-1.0, 3.0)), (o.image, (-2.0, 2.0)), (o.relu6, (0.0, 6.0))]);
    assert_eq!(q.ty(q.outputs[0].value), g.ty(g.outputs[0].value));
    let dequantised: Vec<_> = q.ops.iter().filter(|o| o.kind == OpKind::DequantizeLinear).collect();
    assert_eq!(dequantised.len(), 6, "three activations and three weights");
    let dense = conv(&q, 1);
    let image = q.producer(dense.operands[0]).unwrap();
    assert_eq!(image.kind, OpKind::DequantizeLinear);
    assert_eq!(q.ty(image.operands[0]).dtype, DType::U8);
    assert_eq!(q.constant_value(image.operands[2]).unwrap().get_i64(0), 64);
    // the weights: s8 integers, a scale per filter that maps its largest magnitude to 127
    let filter = q.producer(dense.operands[1]).unwrap();
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
    // the depthwise filters have a scale each too, the product's weights one per column; the
    // product of two activations is as it was
    let depthwise = q.producer(conv(&q, 4).operands[1]).unwrap();
    assert_eq!(q.constant_value(depthwise.operands[1]).unwrap().shape(), &[4, 1, 1, 1]);
    let product = q
        .ops
        .iter()
        .find(|o| o.kind == OpKind::MatMul && q.producer(o.operands[1]).unwrap().kind == OpKind::DequantizeLinear);
    let columns = q.producer(product.unwrap().operands[1]).unwrap();
    assert_eq!(q.constant_value(columns.operands[1]).unwrap().shape(), &[5]);
    let last = q.producer(q.outputs[0].value).unwrap();
    assert!(last
        .operands
        .iter()
        .all(|v| q.producer(*v).unwrap().kind != OpKind::DequantizeLinear));
}

/// The value `quantised` divides by its scale (the start of `QuantizeLinear`'s ops) to give
/// the dequantised `v`.
fn quantised_from(q: &Graph, v: ValueId) -> ValueId {
    let mut at = q.producer(v).unwrap().operands[0];
    loop {
        let op = q.producer(at).unwrap();
        if op.kind == OpKind::Div {
            return op.operands[0];
        }
        at = op.operands[0];
    }
}

#[test]
fn a_clip_the_quantisation_saturates_at_anyway_is_left_out_and_a_join_adds_the_quantised_value() {
    let (g, o) = model();
    // [0, 6] in 255 steps: 0 and 6 quantise to 0 and 255, where the bytes saturate anyway
    let q = quantised(&g, &[(o.x, (-1.0, 3.0)), (o.image, (-2.0, 2.0)), (o.relu6, (0.0, 6.0))]);
    let product = (q.ops.iter())
        .find(|op| op.kind == OpKind::MatMul && q.producer(op.operands[1]).unwrap().kind == OpKind::DequantizeLinear)
        .unwrap();
    let from = quantised_from(&q, product.operands[0]);
    assert_eq!(
        q.producer(from).unwrap().kind,
        OpKind::Add,
        "the clip's operand is quantised"
    );
    // the residual join adds the image the depthwise convolution reads as bytes (the first
    // convolution's result), dequantised, not its floats
    let image = conv(&q, 4).operands[0];
    let join = q.producer(from).unwrap();
    assert!(join.operands.contains(&image), "{q:?}");
    // [0, 8]: 6 quantises to 191, so the clip stays
    let q = quantised(&g, &[(o.x, (-1.0, 3.0)), (o.image, (-2.0, 2.0)), (o.relu6, (0.0, 8.0))]);
    let product = (q.ops.iter())
        .find(|op| op.kind == OpKind::MatMul && q.producer(op.operands[1]).unwrap().kind == OpKind::DequantizeLinear)
        .unwrap();
    assert_eq!(
        q.producer(quantised_from(&q, product.operands[0])).unwrap().kind,
        OpKind::Clip
    );
}

#[test]
fn an_op_without_a_finite_range_stays_f32() {
    let (g, o) = model();
    let c = calibrated(
        &g,
        &[
            (o.x, (f32::NEG_INFINITY, 1.0)),
            (o.image, (0.0, 1.0)),
            (o.relu6, (0.0, 1.0)),
        ],
    );
    let q = int8::quantize(&g, &None, &c).unwrap();
    assert!(
        q.producer(conv(&q, 1).operands[0]).is_none(),
        "the image is the input itself"
    );
    assert_eq!(q.ops.iter().filter(|o| o.kind == OpKind::DequantizeLinear).count(), 4);
}

#[test]
fn ranges_of_another_graph_are_refused() {
    let (g, o) = model();
    let c = calibrated(&g, &[(o.x, (0.0, 1.0))]);
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
