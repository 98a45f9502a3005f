//! Channels-last convolution end to end: `mx.conv_nhwc` computes what `mx.conv` computes
//! between transposes (NHWC -> NCHW, conv, back), on `ref` and on `cpu`; and the repo's conv
//! net rewritten by the built-in rules under a cost model that prefers `conv_nhwc` runs every
//! convolution channels last and still computes what the unrewritten program computes.

use crate::common::{cache_dir, mismatch};
use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType, ValueId};
use mxc_kernels::Executable;
use mxc_rewrite::cost::ChannelsLast;
use mxc_rewrite::rules::{builtin_rules, rewrites, BUILTIN_FILES};
use mxc_rewrite::{optimize, LinearCost, OptimizeOptions};
use std::collections::HashMap;
use std::sync::Arc;

/// Seeded data: `exact` on a grid of quarters in [-2, 2] (every product and sum of a small
/// convolution is exact in f32, so any summation order gives the same bits), else uniform in
/// [-4, 4).
fn data(ty: &TensorType, seed: u64, exact: bool) -> Tensor {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let values: Vec<f64> = (0..ty.num_elements())
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match exact {
                true => (s % 17) as f64 / 4.0 - 2.0,
                false => (s % 65_536) as f64 / 8_192.0 - 4.0,
            }
        })
        .collect();
    Tensor::from_f64s(ty.dtype, ty.shape.clone(), &values)
}

fn transpose(g: &mut Graph, x: ValueId, perm: &[i64]) -> ValueId {
    let attrs = Attrs::new().with("perm", Attr::Ints(perm.to_vec()));
    g.build1(OpKind::Transpose, vec![x], attrs).unwrap()
}

fn conv_attrs(group: i64, pads: [i64; 4], strides: [i64; 2], dilations: [i64; 2]) -> Attrs {
    Attrs::new()
        .with("dilations", Attr::Ints(dilations.to_vec()))
        .with("group", Attr::Int(group))
        .with("pads", Attr::Ints(pads.to_vec()))
        .with("strides", Attr::Ints(strides.to_vec()))
}

/// `x` (NHWC), `w` (`[M, kh, kw, C/G]`) and maybe a bias, convolved by `kind`: `conv_nhwc`
/// itself, or `conv` on the operands transposed to NCHW with the result transposed back.
fn nhwc_graph(kind: OpKind, operands: &[TensorType], attrs: &Attrs) -> Graph {
    let mut g = Graph::new("conv");
    let ins: Vec<ValueId> = operands
        .iter()
        .enumerate()
        .map(|(i, t)| g.add_input(&format!("in{i}"), t.clone()))
        .collect();
    let y = if kind == OpKind::ConvNhwc {
        g.build1(kind, ins, attrs.clone()).unwrap()
    } else {
        let mut nchw = vec![
            transpose(&mut g, ins[0], &[0, 3, 1, 2]),
            transpose(&mut g, ins[1], &[0, 3, 1, 2]),
        ];
        nchw.extend(ins.get(2));
        let y = g.build1(OpKind::Conv, nchw, attrs.clone()).unwrap();
        transpose(&mut g, y, &[0, 2, 3, 1])
    };
    g.add_output("y", y);
    g
}

fn run(g: &Graph, target: Target, inputs: &HashMap<String, Tensor>) -> Tensor {
    let compiled = compile(g, target, &CompileOptions::default()).unwrap_or_else(|e| panic!("{target}: {e}"));
    let exe = Executable::load(compiled.program, &compiled.library).expect("kernels load");
    exe.run(inputs).expect("runs").remove(0).1
}

#[test]
fn conv_nhwc_computes_what_conv_between_transposes_computes() {
    let t = |d: DType, s: &[usize]| TensorType::new(d, s.to_vec());
    let cases = [
        // the conv net's stem: 3 -> 16 channels, pad 1, with bias
        (
            vec![
                t(DType::F32, &[1, 9, 9, 3]),
                t(DType::F32, &[16, 3, 3, 3]),
                t(DType::F32, &[16]),
            ],
            conv_attrs(1, [1; 4], [1, 1], [1, 1]),
        ),
        // strided, dilated, uneven pads, two images, no bias; 5 output channels (no block of 4)
        (
            vec![t(DType::F32, &[2, 7, 8, 4]), t(DType::F32, &[5, 2, 3, 4])],
            conv_attrs(1, [0, 1, 2, 0], [2, 1], [2, 1]),
        ),
        // grouped: 3 output channels per group
        (
            vec![
                t(DType::F32, &[1, 6, 6, 4]),
                t(DType::F32, &[6, 3, 3, 2]),
                t(DType::F32, &[6]),
            ],
            conv_attrs(2, [1; 4], [1, 2], [1, 1]),
        ),
        // depthwise
        (
            vec![t(DType::F32, &[1, 5, 5, 8]), t(DType::F32, &[8, 3, 3, 1])],
            conv_attrs(8, [1; 4], [1, 1], [1, 1]),
        ),
        // 1x1, stride 2, 8 output channels (two blocks), f64 and f16
        (
            vec![t(DType::F64, &[1, 6, 6, 8]), t(DType::F64, &[8, 1, 1, 8])],
            conv_attrs(1, [0; 4], [2, 2], [1, 1]),
        ),
        (
            vec![
                t(DType::F16, &[1, 5, 5, 4]),
                t(DType::F16, &[8, 3, 3, 4]),
                t(DType::F16, &[8]),
            ],
            conv_attrs(1, [1; 4], [1, 1], [1, 1]),
        ),
    ];
    for (operands, attrs) in &cases {
        let (nhwc, reference) = (
            nhwc_graph(OpKind::ConvNhwc, operands, attrs),
            nhwc_graph(OpKind::Conv, operands, attrs),
        );
        for exact in [true, false] {
            let inputs: HashMap<String, Tensor> = operands
                .iter()
                .enumerate()
                .map(|(i, ty)| (format!("in{i}"), data(ty, i as u64 + 1, exact)))
                .collect();
            let want = run(&reference, Target::Ref, &inputs);
            for target in [Target::Ref, Target::Cpu] {
                let got = run(&nhwc, target, &inputs);
                assert_eq!(got.ty, want.ty);
                let what = format!("{operands:?} {attrs:?} on {target}");
                if exact {
                    assert_eq!(got.bytes(), want.bytes(), "{what}: not the same bits");
                } else if let Some(why) = mismatch(&got, &want, 1e-5, 1e-5) {
                    panic!("{what}: {why}");
                }
            }
        }
    }
}

/// The cpu model with `conv_nhwc` at 0.6 times the cost of `conv` for every kind of
/// convolution (what `cargo bench -p mxc-codegen --bench conv_layout` measured for the conv
/// net's 3x3 convs before the channels-first kernel got its output-channel blocking).
fn prefers_nhwc() -> LinearCost {
    let channels_last = ChannelsLast {
        window: 0.6,
        pointwise: 0.6,
        strided: 0.6,
    };
    LinearCost {
        channels_last,
        ..LinearCost::cpu()
    }
}

#[test]
fn the_conv_net_runs_channels_last_where_the_cost_model_prefers_it() {
    let model = cache_dir("models/convnet").join("model.onnx");
    let g = mxc_onnx::import_file(&model, &Default::default()).unwrap();
    // the layout decisions alone: the convs keep their form and their weights as they are
    // (no packing, no Winograd)
    let mut rules = Vec::new();
    let layout_only = |set: &&str| !["packing", "winograd"].contains(set);
    for (set, _, _) in BUILTIN_FILES.iter().filter(|(set, _, _)| layout_only(set)) {
        rules.extend(builtin_rules(set).expect("listed").expect("parses"));
    }
    let opts = OptimizeOptions {
        cost_model: Arc::new(prefers_nhwc()),
        fuse: true,
        ..OptimizeOptions::default()
    };
    let nhwc = optimize(&g, &rewrites(&rules), &opts).unwrap().graph;
    let text = mxc_dialects::text::print(&nhwc);
    assert_eq!(text.matches("mx.conv ").count(), 0, "{text}");
    assert_eq!(text.matches("mx.conv_nhwc ").count(), 21, "{text}");
    // into the first convolution, and out after the global average pool (a mean over the
    // spatial axes channels last): everything between, the max pool too, runs channels last
    let transposes = text.matches("mx.transpose ").count();
    assert_eq!(transposes, 2, "{text}");
    assert_eq!(text.matches("mx.max_pool_nhwc ").count(), 1, "{text}");

    // the rewritten program (compiled for ref, which rewrites nothing more) against ref's
    let input = &g.inputs[0];
    let inputs = HashMap::from([(input.name.clone(), data(g.ty(input.value), 7, false))]);
    let (want, got) = (run(&g, Target::Ref, &inputs), run(&nhwc, Target::Ref, &inputs));
    if let Some(why) = mismatch(&got, &want, 1e-4, 1e-5) {
        panic!("channels last differs from ref: {why}");
    }
}
