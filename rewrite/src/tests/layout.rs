//! The built-in `layout` rules (with `algebra`, which cancels the transposes that meet) under
//! cost models that price `conv_nhwc` below `conv`: convolutions go channels last, and the
//! transposes between them move through the element-wise ops and cancel. Under the cpu model
//! as it is (conv_nhwc costs what conv costs) nothing changes. Mostly in text: IR in, IR out.

use super::*;
use crate::cost::{ChannelsLast, CostModel, LinearCost, OpSite};
use crate::rules::builtin_rules;
use crate::{optimize, OptimizeOptions};
use mxc_dialects::text::{parse, print};
use std::sync::Arc;

/// Costs by kind: a convolution 100, channels last 40, a transpose 10, anything else 1.
#[derive(Debug)]
struct ByKind;

impl CostModel for ByKind {
    fn op_cost(&self, op: &OpSite) -> f64 {
        match op.kind {
            OpKind::Conv => 100.0,
            OpKind::ConvNhwc => 40.0,
            OpKind::Transpose => 10.0,
            _ => 1.0,
        }
    }
}

/// The cpu model, with `conv_nhwc` at `factor` times what `conv` costs for every kind of
/// convolution.
fn scaled_nhwc(factor: f64) -> Arc<dyn CostModel> {
    let channels_last = ChannelsLast {
        window: factor,
        pointwise: factor,
        strided: factor,
    };
    Arc::new(LinearCost {
        channels_last,
        ..LinearCost::cpu()
    })
}

/// `src` optimised with the `algebra` and `layout` rules under `model`, without fusion.
fn with_layout(src: &str, model: Arc<dyn CostModel>) -> String {
    let g = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let mut rules = builtin_rules("algebra").expect("built in").expect("parses");
    rules.extend(builtin_rules("layout").expect("built in").expect("parses"));
    let opts = OptimizeOptions {
        cost_model: model,
        ..OptimizeOptions::default()
    };
    let out = optimize(&g, &crate::rules::rewrites(&rules), &opts).expect("optimises");
    print(&out.graph)
}

/// Two 2x2-channel convolutions with a relu between them, weights [[[[1, 2], [3, 4]], ...]].
const TWO_CONVS: &str = r#"graph "g" (%arg0: tensor<1x2x6x6xf32> "x") {
  %0 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]> : tensor<2x2x2x2xf32>} : tensor<2x2x2x2xf32>
  %1 = mx.constant {value = dense<[0.5, -0.5]> : tensor<2xf32>} : tensor<2xf32>
  %2 = mx.conv %arg0, %0, %1 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x2x5x5xf32>
  %3 = mx.relu %2 : tensor<1x2x5x5xf32>
  %4 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<2x2x1x1xf32>} : tensor<2x2x1x1xf32>
  %5 = mx.conv %3, %4 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x2x5x5xf32>
  return "y" = %5
}"#;

#[test]
fn two_convs_go_channels_last_and_the_transposes_between_them_cancel() {
    // w[m, c, kh, kw] becomes w[m, kh, kw, c]: [[1, 2], [3, 4]] and [[5, 6], [7, 8]] are the
    // 2x2 windows of m = 0 for c = 0 and 1, so m = 0 reads (1, 5), (2, 6), (3, 7), (4, 8)
    same_ir(
        &with_layout(TWO_CONVS, Arc::new(ByKind)),
        r#"graph "g" (%arg0: tensor<1x2x6x6xf32> "x") {
      %0 = mx.transpose %arg0 {perm = [0, 2, 3, 1]} : tensor<1x6x6x2xf32>
      %1 = mx.constant {value = dense<[1.0, 5.0, 2.0, 6.0, 3.0, 7.0, 4.0, 8.0, 9.0, 13.0, 10.0, 14.0, 11.0, 15.0, 12.0, 16.0]> : tensor<2x2x2x2xf32>} : tensor<2x2x2x2xf32>
      %2 = mx.constant {value = dense<[0.5, -0.5]> : tensor<2xf32>} : tensor<2xf32>
      %3 = mx.conv_nhwc %0, %1, %2 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x5x5x2xf32>
      %4 = mx.relu %3 : tensor<1x5x5x2xf32>
      %5 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<2x1x1x2xf32>} : tensor<2x1x1x2xf32>
      %6 = mx.conv_nhwc %4, %5 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x5x5x2xf32>
      %7 = mx.transpose %6 {perm = [0, 3, 1, 2]} : tensor<1x2x5x5xf32>
      return "y" = %7
    }"#,
    );
}

#[test]
fn a_residual_block_runs_channels_last_from_end_to_end() {
    // r = relu(conv(x)); y = relu(conv(r) + r); z = conv(y): the residual input r is read
    // channels last by the second conv, so the add takes it from there
    let src = r#"graph "g" (%arg0: tensor<1x2x4x4xf32> "x") {
  %0 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<2x2x1x1xf32>} : tensor<2x2x1x1xf32>
  %1 = mx.conv %arg0, %0 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x2x4x4xf32>
  %2 = mx.relu %1 : tensor<1x2x4x4xf32>
  %3 = mx.conv %2, %0 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x2x4x4xf32>
  %4 = mx.add %3, %2 : tensor<1x2x4x4xf32>
  %5 = mx.relu %4 : tensor<1x2x4x4xf32>
  %6 = mx.conv %5, %0 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x2x4x4xf32>
  return "z" = %6
}"#;
    same_ir(
        &with_layout(src, Arc::new(ByKind)),
        r#"graph "g" (%arg0: tensor<1x2x4x4xf32> "x") {
      %0 = mx.transpose %arg0 {perm = [0, 2, 3, 1]} : tensor<1x4x4x2xf32>
      %1 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<2x1x1x2xf32>} : tensor<2x1x1x2xf32>
      %2 = mx.conv_nhwc %0, %1 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x4x4x2xf32>
      %3 = mx.relu %2 : tensor<1x4x4x2xf32>
      %4 = mx.conv_nhwc %3, %1 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x4x4x2xf32>
      %5 = mx.add %4, %3 : tensor<1x4x4x2xf32>
      %6 = mx.relu %5 : tensor<1x4x4x2xf32>
      %7 = mx.conv_nhwc %6, %1 {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : tensor<1x4x4x2xf32>
      %8 = mx.transpose %7 {perm = [0, 3, 1, 2]} : tensor<1x2x4x4xf32>
      return "z" = %8
    }"#,
    );
}

#[test]
fn convs_stay_channels_first_where_the_cost_model_sees_no_gain() {
    // the cpu model as it is: conv_nhwc costs what conv does, and the transposes cost more
    let out = with_layout(TWO_CONVS, Arc::new(LinearCost::cpu()));
    assert_eq!(out, print(&parse(TWO_CONVS).unwrap()));
    // a conv_nhwc a little cheaper does not pay for the transposes around 2x2-channel convs
    let out = with_layout(TWO_CONVS, scaled_nhwc(0.9));
    assert_eq!(out, print(&parse(TWO_CONVS).unwrap()));
}

/// Two 16-channel 3x3 convolutions at 32x32 (the repo's conv net), a per-channel constant
/// added and a relu between them, as an exporter writes a conv without bias: `x * w + b`.
fn convnet_block() -> Graph {
    let mut g = Graph::new("block");
    let x = g.add_input("x", f32s(&[1, 16, 32, 32]));
    let attrs = || {
        Attrs::new()
            .with("dilations", Attr::Ints(vec![1, 1]))
            .with("group", Attr::Int(1))
            .with("pads", Attr::Ints(vec![1; 4]))
            .with("strides", Attr::Ints(vec![1, 1]))
    };
    let weights = |g: &mut Graph, seed: f32| {
        let values: Vec<f32> = (0..16 * 16 * 9).map(|i| ((i % 7) as f32 - 3.0) * seed).collect();
        g.constant(Tensor::from_f32s(vec![16, 16, 3, 3], &values))
    };
    let w1 = weights(&mut g, 0.1);
    let y = op(&mut g, OpKind::Conv, &[x, w1], attrs());
    let bias: Vec<f32> = (0..16).map(|i| i as f32 * 0.25).collect();
    let b = g.constant(Tensor::from_f32s(vec![16, 1, 1], &bias));
    let y = op(&mut g, OpKind::Add, &[y, b], Attrs::new());
    let y = op(&mut g, OpKind::Relu, &[y], Attrs::new());
    let w2 = weights(&mut g, -0.2);
    let z = op(&mut g, OpKind::Conv, &[y, w2], attrs());
    g.add_output("z", z);
    g
}

fn optimised_kinds(g: &Graph, factor: f64) -> (Vec<OpKind>, Graph) {
    let out = with_layout(&print(g), scaled_nhwc(factor));
    let out = parse(&out).unwrap();
    (kinds(&out), out)
}

#[test]
fn a_measured_nhwc_factor_decides_for_the_whole_block() {
    use OpKind::{Add, ConvNhwc, Relu, Transpose};
    let g = convnet_block();
    // a [16, 1, 1] constant becomes [1, 1, 1, 16]: the bias moves with the data
    let (nhwc, out) = optimised_kinds(&g, 0.6);
    assert_eq!(
        nhwc,
        [Transpose, ConvNhwc, Add, Relu, ConvNhwc, Transpose],
        "{}",
        print(&out)
    );
    let add = out.ops.iter().find(|o| o.kind == Add).unwrap();
    assert_eq!(out.ty(add.operands[1]).shape, [1, 1, 1, 16]);
    let inputs = [Tensor::from_f32s(
        vec![1, 16, 32, 32],
        &(0..16 * 32 * 32)
            .map(|i| ((i % 11) as f32 - 5.0) * 0.125)
            .collect::<Vec<_>>(),
    )];
    assert_eq!(interpret_convs(&out, &inputs), interpret_convs(&g, &inputs));
    // under the calibrated cpu model the two transposes cost about 0.4% of the two convs here:
    // a factor of 0.999 on them does not pay for the transposes
    let (nchw, _) = optimised_kinds(&g, 0.999);
    assert_eq!(nchw, kinds(&g));
}

/// `interpret`, with the ops the evaluator leaves alone (3x3 convolutions, relu) computed here.
fn interpret_convs(g: &Graph, inputs: &[Tensor]) -> Vec<Vec<f64>> {
    let mut values: Vec<Option<Tensor>> = vec![None; g.num_values()];
    for (p, t) in g.inputs.iter().zip(inputs) {
        values[p.value.index()] = Some(t.clone());
    }
    for o in &g.ops {
        let args: Vec<&Tensor> = o.operands.iter().map(|v| values[v.index()].as_ref().unwrap()).collect();
        let result = match o.kind {
            OpKind::Constant => o.attrs.tensor("value").unwrap().clone(),
            OpKind::Conv | OpKind::ConvNhwc => direct_conv(o.kind, &args, g.ty(o.results[0]).shape.clone()),
            OpKind::Relu => {
                let v: Vec<f64> = args[0].to_f64_vec().iter().map(|x| x.max(0.0)).collect();
                Tensor::from_f64s(args[0].dtype(), args[0].shape().to_vec(), &v)
            }
            kind => eval::eval(kind, &args, &o.attrs).expect("evaluable").unwrap().remove(0),
        };
        values[o.results[0].index()] = Some(result);
    }
    g.outputs
        .iter()
        .map(|p| values[p.value.index()].as_ref().unwrap().to_f64_vec())
        .collect()
}

/// A 3x3, pad 1, stride 1 convolution without bias in either layout, summed in f64 (the test
/// data make every sum exact).
fn direct_conv(kind: OpKind, args: &[&Tensor], shape: Vec<usize>) -> Tensor {
    let (x, w) = (args[0].to_f64_vec(), args[1].to_f64_vec());
    let last = kind == OpKind::ConvNhwc;
    let (c, h, wd) = if last {
        (args[0].shape()[3], args[0].shape()[1], args[0].shape()[2])
    } else {
        (args[0].shape()[1], args[0].shape()[2], args[0].shape()[3])
    };
    let m = args[1].shape()[0];
    let xi = |ci: usize, i: usize, j: usize| {
        if last {
            (i * wd + j) * c + ci
        } else {
            (ci * h + i) * wd + j
        }
    };
    let wi = |mi: usize, ci: usize, a: usize, b: usize| {
        if last {
            ((mi * 3 + a) * 3 + b) * c + ci
        } else {
            ((mi * c + ci) * 3 + a) * 3 + b
        }
    };
    let mut y = vec![0.0; m * h * wd];
    for mi in 0..m {
        for i in 0..h {
            for j in 0..wd {
                let mut s = 0.0;
                for ci in 0..c {
                    for a in 0..3 {
                        for b in 0..3 {
                            let (p, q) = ((i + a) as i64 - 1, (j + b) as i64 - 1);
                            if p >= 0 && q >= 0 && (p as usize) < h && (q as usize) < wd {
                                s += x[xi(ci, p as usize, q as usize)] * w[wi(mi, ci, a, b)];
                            }
                        }
                    }
                }
                let at = if last {
                    (i * wd + j) * m + mi
                } else {
                    (mi * h + i) * wd + j
                };
                y[at] = s;
            }
        }
    }
    Tensor::from_f64s(args[0].dtype(), shape, &y)
}

#[test]
fn binary_ops_with_both_operands_transposed_keep_one_transpose() {
    let src = r#"graph "g" (%arg0: tensor<2x3x4xf32> "a", %arg1: tensor<2x1x4xf32> "b") {
  %0 = mx.transpose %arg0 {perm = [2, 0, 1]} : tensor<4x2x3xf32>
  %1 = mx.transpose %arg1 {perm = [2, 0, 1]} : tensor<4x2x1xf32>
  %2 = mx.mul %0, %1 : tensor<4x2x3xf32>
  %3 = mx.transpose %2 {perm = [1, 2, 0]} : tensor<2x3x4xf32>
  return "y" = %3
}"#;
    same_ir(
        &with_layout(src, Arc::new(LinearCost::cpu())),
        r#"graph "g" (%arg0: tensor<2x3x4xf32> "a", %arg1: tensor<2x1x4xf32> "b") {
      %0 = mx.mul %arg0, %arg1 : tensor<2x3x4xf32>
      return "y" = %0
    }"#,
    );
}

#[test]
fn shape_at_rank_aligns_a_constant_as_broadcasting_does() {
    use crate::rules::funcs::lookup;
    use crate::rules::value::{TensorFacts, Value};
    let call = |shape: &[usize], rank: i64| {
        let t = Value::Tensor(TensorFacts {
            ty: Some(f32s(shape)),
            constant: None,
        });
        match (lookup("shape_at_rank").unwrap().eval)(&[t, Value::Int(rank)]) {
            Some(Value::Ints(v)) => Some(v),
            _ => None,
        }
    };
    assert_eq!(call(&[16, 1, 1], 4), Some(vec![1, 16, 1, 1]));
    assert_eq!(call(&[], 2), Some(vec![1, 1]));
    assert_eq!(call(&[3, 4], 2), Some(vec![3, 4]));
    assert_eq!(call(&[3, 4], 1), None, "a lower rank does not fire the rule");
}
