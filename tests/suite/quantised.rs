//! Quantised models made with onnxruntime's own tools (`scripts/models/quantised.py`): on the
//! cpu target the QDQ convnet's convolutions and the dynamically quantised perceptron's products
//! become integer kernels (`integer.rules`, docs/quantisation.md). The integer products agree
//! with `ref` (the spec's arithmetic) bit for bit, on AMX tiles, with VNNI and with both turned
//! off (`MXC_CPU_FEATURES_OFF`, the exact fallback); the QDQ model, whose float steps round in
//! another order, is no further from `ref` than onnxruntime is.

use crate::common::{cache_dir, expected_outputs, integer_kernels_pay, read_for_target, run_case, run_file_with_env};
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{DType, OpKind, Tensor};
use std::path::{Path, PathBuf};

/// A quantised model and its test data set.
fn model(name: &str) -> (PathBuf, PathBuf) {
    let dir = cache_dir(&format!("models/quantised/{name}"));
    (dir.join("model.onnx"), dir.join("test_data_set_0"))
}

/// The largest absolute difference of two tensors of one shape.
fn largest_difference(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    (0..a.len())
        .map(|i| (a.get_f64(i) - b.get_f64(i)).abs())
        .fold(0.0, f64::max)
}

fn run(model: &Path, set: &Path, target: &str, vars: &[(&str, &str)]) -> Tensor {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = run_file_with_env(model, model, set, (target, &[]), dir.path(), vars).unwrap();
    assert_eq!(outputs.len(), 1);
    outputs.remove(0)
}

#[test]
fn a_qdq_convnet_convolves_integers_no_further_from_ref_than_onnxruntime() {
    let (model, set) = model("qdq");
    let program = read_for_target(model.to_str().unwrap(), "cpu", &[]);
    // all 21 convolutions: the 20 of 16 channels or more, and the first (3 channels, read by
    // kernel rows), whose requantised bytes fusion offers alongside the f32 kernel
    // (without VNNI the cost model weighs each integer form against f32 on its own)
    if integer_kernels_pay() {
        assert_eq!(
            program.matches("= mx.conv_nhwc_integer_packed").count(),
            21,
            "{program}"
        );
    }
    let (cpu, reference) = (run(&model, &set, "cpu", &[]), run(&model, &set, "ref", &[]));
    let onnxruntime = expected_outputs(&model, &set).unwrap().remove(0).1;
    let ours = largest_difference(&cpu, &reference);
    let theirs = largest_difference(&onnxruntime, &reference);
    assert!(ours <= theirs, "cpu is {ours} from ref, onnxruntime {theirs}");
    assert!(largest_difference(&cpu, &onnxruntime) < 0.05);
}

/// A ResNet bottleneck whose shortcut is a convolution too, quantised by onnxruntime: the
/// residual join (an add of two dequantised tensors) runs in the epilogue of one of the two
/// convolutions it adds, and reads the other's requantised u8 result (`fuse.rs`' cut kernels),
/// rather than both writing their f32 sums to a kernel of its own. It stays no further from
/// `ref` than onnxruntime is.
#[test]
fn a_join_of_two_quantised_convolutions_runs_in_one_of_them() {
    let (model, set) = model("join");
    let graph = mxc_onnx::import_file(&model, &Default::default()).unwrap();
    let program = mxc_codegen::rewrite_for(&graph, Target::Cpu, &CompileOptions::default())
        .unwrap()
        .0;
    let shown = mxc_dialects::text::print(&program);
    let convolution = |op: &mxc_dialects::Op| {
        let kinds = [OpKind::ConvNhwcIntegerPacked, OpKind::ConvNhwcPacked];
        op.body
            .as_ref()
            .is_some_and(|b| b.ops.iter().any(|o| kinds.contains(&o.kind)))
    };
    let joins = |body: &mxc_dialects::Graph| {
        let dequantised = |v: &mxc_dialects::ValueId| {
            (body.ops.iter()).any(|o| o.kind == OpKind::DequantizeLinear && o.results[0] == *v)
        };
        let shape = |v: &mxc_dialects::ValueId| &body.ty(*v).shape;
        (body.ops.iter()).any(|o| {
            o.kind == OpKind::Add
                && o.operands
                    .iter()
                    .all(|v| dequantised(v) && shape(v) == shape(&o.results[0]))
        })
    };
    let join: Vec<_> = (program.ops.iter())
        .filter(|op| op.body.as_ref().is_some_and(|b| joins(b)))
        .collect();
    assert_eq!(join.len(), 1, "{shown}");
    assert!(convolution(join[0]), "the join holds no convolution: {shown}");
    let reads_a_convolution_in_bytes = join[0].operands.iter().any(|v| {
        let producer = program.ops.iter().find(|op| op.results.contains(v));
        program.ty(*v).dtype == DType::U8 && producer.is_some_and(convolution)
    });
    assert!(reads_a_convolution_in_bytes, "{shown}");

    let (cpu, reference) = (run(&model, &set, "cpu", &[]), run(&model, &set, "ref", &[]));
    let onnxruntime = expected_outputs(&model, &set).unwrap().remove(0).1;
    assert!(largest_difference(&cpu, &reference) <= largest_difference(&onnxruntime, &reference));
}

#[test]
fn dynamically_quantised_products_are_integer_kernels_exact_with_or_without_vnni() {
    let (model, set) = model("dynq");
    let program = read_for_target(model.to_str().unwrap(), "cpu", &[]);
    assert_eq!(program.matches("= mx.matmul_integer_packed").count(), 2, "{program}");
    let reference = run(&model, &set, "ref", &[]);
    // AMX tiles where the machine has them, else VNNI; VNNI alone; neither (shifts in i32)
    let best = run(&model, &set, "cpu", &[]);
    let vnni = run(&model, &set, "cpu", &[("MXC_CPU_FEATURES_OFF", "amx-int8")]);
    let neither = run(
        &model,
        &set,
        "cpu",
        &[("MXC_CPU_FEATURES_OFF", "amx-int8,avx512vnni,avxvnni")],
    );
    assert_eq!(best, reference);
    assert_eq!(vnni, reference);
    assert_eq!(neither, reference);
    let onnxruntime = expected_outputs(&model, &set).unwrap().remove(0).1;
    assert!(largest_difference(&best, &onnxruntime) < 1e-3);
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        run_case(&model, &set, "cpu", &["--no-fusion"], dir.path()).unwrap()[0],
        reference
    );
}

/// A quantised pointwise convolution (u8 activations, i8 weights per channel, an f32 bias)
/// whose result, clipped, feeds an f32 depthwise convolution (a QDQ model that leaves its
/// depthwise convolutions in float). Before fusion its f32 form (the bias inside the kernel) looks
/// cheaper than its integer form (sums scaled, bias added: three more ops), and the two
/// channels-last forms lie in different e-classes, joined only through the channels-first
/// value they transpose back to. The integer form must still be found and fused: transposes
/// are bijections (`runner.rs`), and fusion offers kernels of the forms extraction did not
/// pick (`fuse.rs`).
#[test]
fn a_quantised_convolution_before_a_float_one_still_convolves_integers() {
    use mxc_dialects::{Attrs, Graph, TensorType};
    let (c, m, hw) = (16usize, 64usize, 32usize);
    let mut g = Graph::new("expand_then_depthwise");
    let x = g.add_input("x", TensorType::new(DType::U8, vec![1, c, hw, hw]));
    let scalar = |g: &mut Graph, d: DType, v: f64| g.constant(Tensor::from_f64s(d, vec![], &[v]));
    let (sx, zx) = (scalar(&mut g, DType::F32, 0.05), scalar(&mut g, DType::U8, 128.0));
    let dq = g
        .build1(OpKind::DequantizeLinear, vec![x, sx, zx], Attrs::new())
        .unwrap();
    let weights: Vec<i64> = (0..(m * c) as i64).map(|i| (i * 37 % 255) - 127).collect();
    let wq = g.constant(Tensor::from_i64s(DType::I8, vec![m, c, 1, 1], &weights));
    let scales: Vec<f64> = (0..m).map(|i| 0.001 + i as f64 * 1e-5).collect();
    let sw = g.constant(Tensor::from_f64s(DType::F32, vec![m, 1, 1, 1], &scales));
    let zw = g.constant(Tensor::from_i64s(DType::I8, vec![m, 1, 1, 1], &vec![0; m]));
    let w = g
        .build1(OpKind::DequantizeLinear, vec![wq, sw, zw], Attrs::new())
        .unwrap();
    let bias: Vec<f64> = (0..m).map(|i| (i as f64 - 32.0) / 16.0).collect();
    let b = g.constant(Tensor::from_f64s(DType::F32, vec![m], &bias));
    let y = g.build1(OpKind::Conv, vec![dq, w, b], window(1, 0)).unwrap();
    let (lo, hi) = (scalar(&mut g, DType::F32, 0.0), scalar(&mut g, DType::F32, 6.0));
    let clipped = g.build1(OpKind::Clip, vec![y, lo, hi], Attrs::new()).unwrap();
    let taps: Vec<f64> = (0..m * 9).map(|i| ((i * 7 % 13) as f64 - 6.0) / 10.0).collect();
    let wd = g.constant(Tensor::from_f64s(DType::F32, vec![m, 1, 3, 3], &taps));
    let z = g.build1(OpKind::Conv, vec![clipped, wd], window(m, 1)).unwrap();
    g.add_output("z", z);

    let (program, _) = mxc_codegen::rewrite_for(&g, Target::Cpu, &CompileOptions::default()).unwrap();
    let integer = program.ops.iter().any(|op| {
        op.body
            .as_ref()
            .is_some_and(|b| b.ops.iter().any(|o| o.kind == OpKind::ConvNhwcIntegerPacked))
    });
    assert_eq!(
        integer,
        integer_kernels_pay(),
        "{}",
        mxc_dialects::text::print(&program)
    );
    let bytes: Vec<i64> = (0..(c * hw * hw) as i64).map(|i| (i * 91 + 13) % 256).collect();
    let inputs = std::collections::HashMap::from([(
        "x".to_string(),
        Tensor::from_i64s(DType::U8, vec![1, c, hw, hw], &bytes),
    )]);
    let (cpu, _) = crate::cpu_kernels::run(&g, Target::Cpu, &inputs);
    let (reference, _) = crate::cpu_kernels::run(&g, Target::Ref, &inputs);
    let scale = (0..reference[0].len())
        .map(|i| reference[0].get_f64(i).abs())
        .fold(0.0, f64::max);
    assert!(largest_difference(&cpu[0], &reference[0]) <= 1e-4 * scale.max(1.0));
}

/// MobileNetV2's inverted residual block in f32, quantised by `--int8` (`precision::int8`):
/// x [1, 16, 20, 20] -> 1x1 (96) -> ReLU6 -> depthwise 3x3 -> ReLU6 -> 1x1 (16), added to x.
/// Every convolution becomes an integer kernel, the depthwise one too, and the values between
/// them are bytes: the ReLU6s fall within the quantisations' saturation (left out), and the
/// join adds the quantised image the expansion reads rather than its floats, so that nothing
/// is computed twice. The result stays close to the f32 one.
#[test]
fn an_int8_inverted_residual_block_runs_on_bytes_from_end_to_end() {
    use mxc_dialects::{Attrs, Graph, TensorType};
    use mxc_rewrite::precision::{Calibration, Int8, Precision};
    let (c, m, hw) = (16usize, 96usize, 20usize);
    let mut g = Graph::new("inverted_residual");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![1, c, hw, hw]));
    let scalar = |g: &mut Graph, v: f64| g.constant(Tensor::from_f64s(DType::F32, vec![], &[v]));
    let (lo, hi) = (scalar(&mut g, 0.0), scalar(&mut g, 6.0));
    let weights = |g: &mut Graph, shape: &[usize], seed: usize| {
        let count: usize = shape.iter().product();
        let fan_in: usize = shape[1..].iter().product();
        let values: Vec<f64> = (0..count)
            .map(|i| (((i * 7919 + seed) % 2003) as f64 / 1001.5 - 1.0) * (3.0 / fan_in as f64).sqrt())
            .collect();
        g.constant(Tensor::from_f64s(DType::F32, shape.to_vec(), &values))
    };
    let conv = |g: &mut Graph, x, shape: [usize; 4], group: usize, relu6: bool| {
        let w = weights(g, &shape, shape[0] * 31 + group);
        let pad = (shape[2] / 2) as i64;
        let y = g.build1(OpKind::Conv, vec![x, w], window(group, pad)).unwrap();
        match relu6 {
            true => g.build1(OpKind::Clip, vec![y, lo, hi], Attrs::new()).unwrap(),
            false => y,
        }
    };
    let expanded = conv(&mut g, x, [m, c, 1, 1], 1, true);
    let filtered = conv(&mut g, expanded, [m, 1, 3, 3], m, true);
    let projected = conv(&mut g, filtered, [c, m, 1, 1], 1, false);
    let y = g.build1(OpKind::Add, vec![projected, x], Attrs::new()).unwrap();
    g.add_output("y", y);

    let image = |seed: usize| {
        let values: Vec<f64> = (0..c * hw * hw)
            .map(|i| ((i * 104_729 + seed * 7919) % 4001) as f64 / 1000.0 - 2.0)
            .collect();
        Tensor::from_f64s(DType::F32, vec![1, c, hw, hw], &values)
    };
    let samples = (1..5).map(|s| std::collections::HashMap::from([("x".to_string(), image(s))]));
    let options = CompileOptions {
        precision: Precision {
            int8: Some(Int8 {
                ops: None,
                calibration: Calibration::samples(samples.collect()),
            }),
            ..Precision::default()
        },
        ..CompileOptions::default()
    };
    let quantised = mxc_codegen::with_precision(&g, &options.precision).unwrap().unwrap();
    let (program, _) = mxc_codegen::rewrite_for(&quantised, Target::Cpu, &options).unwrap();
    let shown = mxc_dialects::text::print(&program);
    let kinds: Vec<OpKind> = (program.ops.iter())
        .flat_map(|op| {
            op.body
                .iter()
                .flat_map(|b| b.ops.iter().map(|o| o.kind))
                .chain([op.kind])
        })
        .collect();
    // (without VNNI the cost model weighs each integer form against f32 on its own)
    if integer_kernels_pay() {
        let count = |k: OpKind| kinds.iter().filter(|&&o| o == k).count();
        assert_eq!(count(OpKind::ConvNhwcIntegerDepthwise), 1, "{shown}");
        assert_eq!(
            count(OpKind::ConvNhwcIntegerPacked) + count(OpKind::MatMulIntegerPacked),
            2,
            "{shown}"
        );
        assert_eq!(count(OpKind::ConvNhwcPacked) + count(OpKind::Clip), 0, "{shown}");
        // the convolutions' kernels pass bytes to each other
        let anchor = |op: &mxc_dialects::Op| op.kind.is_fusion_anchor();
        let convolutions: Vec<_> = (program.ops.iter())
            .filter(|op| anchor(op) || op.body.as_ref().is_some_and(|b| b.ops.iter().any(anchor)))
            .collect();
        assert_eq!(convolutions.len(), 3, "{shown}");
        for op in &convolutions[..2] {
            assert_eq!(program.ty(op.results[0]).dtype, DType::U8, "{shown}");
        }
    }

    let inputs = std::collections::HashMap::from([("x".to_string(), image(9))]);
    let compiled = mxc_codegen::compile(&g, Target::Cpu, &options).unwrap();
    let exe = mxc_kernels::Executable::load(compiled.program, &compiled.library).unwrap();
    let int8 = exe.run(&inputs).unwrap().remove(0).1;
    let (f32, _) = crate::cpu_kernels::run(&g, Target::Cpu, &inputs);
    let scale = (0..f32[0].len()).map(|i| f32[0].get_f64(i).abs()).fold(0.0, f64::max);
    let error = largest_difference(&int8, &f32[0]) / scale;
    assert!(error > 0.0 && error < 0.05, "{error}");
}

/// A 2-D convolution's attributes: `group` groups, padded by `pad`, stride and dilation 1.
fn window(group: usize, pad: i64) -> mxc_dialects::Attrs {
    use mxc_dialects::{Attr, Attrs};
    Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(group as i64))
        .with("pads", Attr::Ints(vec![pad; 4]))
        .with("strides", Attr::Ints(vec![1, 1]))
}
