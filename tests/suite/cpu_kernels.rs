//! The cpu target's vector kernels against `ref`'s scalar ones, on shapes chosen to reach their
//! edges: convolutions with constant weights (packed implicit GEMM, kernel-row runs for few
//! channels, depthwise, Winograd), products with constant weights (packed panels, the last
//! panel partial, rows not a multiple of the micro-tile), channels-last pooling, softmax, layer
//! norm and reductions over rows that are not a multiple of the vector width, and the vector
//! forms of `exp`, `tanh`, `erf` and the functions built on them, whose error against libm is
//! bounded here (and documented in docs/performance.md). Each case also checks that the cpu
//! program holds the kernel form it is there to test.

use crate::common::mismatch;
use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

pub(crate) fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// Values of `shape` spread over [-1, 1) (deterministic).
pub(crate) fn values(shape: &[usize], seed: usize) -> Tensor {
    scaled(shape, seed, 1.0)
}

/// `values` times `scale`.
fn scaled(shape: &[usize], seed: usize, scale: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f64 / 1001.5 - 1.0) * scale)
        .collect();
    Tensor::from_f64s(DType::F32, shape.to_vec(), &v)
}

/// Compiles `g` for `target` and runs it on `inputs`; returns the outputs and, on cpu, the
/// op kinds of the compiled program (fused bodies included).
pub(crate) fn run(g: &Graph, target: Target, inputs: &HashMap<String, Tensor>) -> (Vec<Tensor>, Vec<OpKind>) {
    let compiled = compile(g, target, &CompileOptions::default()).unwrap_or_else(|e| panic!("{target}: {e}"));
    let mut kinds = Vec::new();
    for op in &compiled.graph.ops {
        kinds.push(op.kind);
        kinds.extend(op.body.iter().flat_map(|b| b.ops.iter().map(|o| o.kind)));
    }
    let exe = Executable::load(compiled.program, &compiled.library).expect("loads");
    let outputs = exe.run(inputs).expect("runs").into_iter().map(|(_, t)| t).collect();
    (outputs, kinds)
}

/// Runs `g` (inputs filled with `values`) on ref and cpu, asserts the outputs agree within
/// `rtol`/`atol` and returns the kinds of the cpu program.
pub(crate) fn cpu_against_ref(g: &Graph, rtol: f64, atol: f64) -> Vec<OpKind> {
    let inputs: HashMap<String, Tensor> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), values(&g.ty(p.value).shape, i + 1)))
        .collect();
    let (want, _) = run(g, Target::Ref, &inputs);
    let (got, kinds) = run(g, Target::Cpu, &inputs);
    for (w, o) in want.iter().zip(&got) {
        if let Some(why) = mismatch(o, w, rtol, atol) {
            panic!("{}: cpu differs from ref: {why}", g.name);
        }
    }
    kinds
}

struct ConvCase {
    x: [usize; 4],
    out_channels: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
    group: usize,
}

/// `relu(conv(x, w) + b)`, NCHW, with constant weights and bias; the weights scaled by one over
/// the square root of their fan-in, as trained networks' are, so the results stay near 1.
fn conv_graph(c: &ConvCase) -> Graph {
    let mut g = Graph::new("conv");
    let x = g.add_input("x", f32s(&c.x));
    let w_shape = [c.out_channels, c.x[1] / c.group, c.kernel, c.kernel];
    let fan_in = (w_shape[1] * c.kernel * c.kernel) as f64;
    let w = g.constant(scaled(&w_shape, 7, 1.0 / fan_in.sqrt()));
    let b = g.constant(values(&[c.out_channels], 8));
    let attrs = Attrs::new()
        .with("dilations", Attr::Ints(vec![c.dilation as i64; 2]))
        .with("group", Attr::Int(c.group as i64))
        .with("pads", Attr::Ints(vec![c.pad as i64; 4]))
        .with("strides", Attr::Ints(vec![c.stride as i64; 2]));
    let y = g.build1(OpKind::Conv, vec![x, w, b], attrs).unwrap();
    let y = g.build1(OpKind::Relu, vec![y], Attrs::new()).unwrap();
    g.add_output("y", y);
    g
}

#[test]
fn convolutions_with_constant_weights_match_ref_in_every_form() {
    let case = |x: [usize; 4], out_channels, kernel, stride, pad, dilation, group| ConvCase {
        x,
        out_channels,
        kernel,
        stride,
        pad,
        dilation,
        group,
    };
    let cases = [
        // pointwise, channels and pixels not multiples of the tile, batch 2
        case([2, 5, 7, 9], 20, 1, 1, 0, 1, 1),
        // 3x3 padded, large enough for Winograd, the last tiles partial
        case([1, 64, 30, 29], 64, 3, 1, 1, 1, 1),
        // 3x3 padded, an odd number of output channels and a ragged last tile
        case([1, 7, 9, 10], 19, 3, 1, 1, 1, 1),
        // strided, dilated
        case([1, 8, 11, 11], 24, 3, 2, 1, 1, 1),
        case([1, 6, 12, 12], 10, 3, 1, 2, 2, 1),
        // the first layer of an image net: 3 channels, 7x7, stride 2 (kernel-row runs)
        case([1, 3, 30, 28], 16, 7, 2, 3, 1, 1),
        // depthwise, stride 1 and 2, channels not a multiple of the vector width
        case([1, 24, 13, 13], 24, 3, 1, 1, 1, 24),
        case([1, 36, 14, 15], 36, 5, 2, 2, 1, 36),
        // two groups of several channels: the scalar form
        case([1, 8, 6, 6], 8, 3, 1, 1, 1, 2),
    ];
    let mut seen = Vec::new();
    for c in &cases {
        seen.extend(cpu_against_ref(&conv_graph(c), RTOL, ATOL));
    }
    for form in [OpKind::ConvNhwcPacked, OpKind::WinogradOutput, OpKind::ConvNhwc] {
        assert!(seen.contains(&form), "no case ran {form} on cpu: {seen:?}");
    }
}

#[test]
fn products_with_constant_weights_match_ref() {
    let mut seen = Vec::new();
    // (A's shape, B's shape): a single row, ragged panels and micro-tiles, a batch
    for (a, b) in [
        (vec![1, 7], vec![7, 3]),
        (vec![7, 33], vec![33, 19]),
        (vec![13, 64], vec![64, 40]),
        (vec![2, 5, 16], vec![16, 33]),
        (vec![50, 300], vec![300, 70]),
    ] {
        let mut g = Graph::new("matmul");
        let x = g.add_input("a", f32s(&a));
        let w = g.constant(values(&b, 3));
        let y = g.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
        let y = g.build1(OpKind::Tanh, vec![y], Attrs::new()).unwrap();
        g.add_output("y", y);
        seen.extend(cpu_against_ref(&g, RTOL, ATOL));
    }
    // a Linear layer: Gemm with weights [N, K] and a bias
    let mut g = Graph::new("linear");
    let x = g.add_input("x", f32s(&[3, 40]));
    let w = g.constant(values(&[25, 40], 4));
    let b = g.constant(values(&[25], 5));
    let attrs = Attrs::new()
        .with("alpha", Attr::Float(1.0))
        .with("beta", Attr::Float(1.0))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(1));
    let y = g.build1(OpKind::Gemm, vec![x, w, b], attrs).unwrap();
    g.add_output("y", y);
    seen.extend(cpu_against_ref(&g, RTOL, ATOL));
    assert!(seen.contains(&OpKind::MatMulPacked), "{seen:?}");
}

#[test]
fn products_of_activations_match_ref() {
    // both operands computed (attention's products): B read where it lies, batched
    let mut g = Graph::new("scores");
    let q = g.add_input("q", f32s(&[2, 3, 10, 24]));
    let k = g.add_input("k", f32s(&[2, 3, 24, 17]));
    let s = g.build1(OpKind::MatMul, vec![q, k], Attrs::new()).unwrap();
    g.add_output("s", s);
    let kinds = cpu_against_ref(&g, RTOL, ATOL);
    assert!(kinds.contains(&OpKind::MatMul), "{kinds:?}");
}

#[test]
fn channels_last_pooling_matches_ref() {
    // a conv puts the tensor channels last; the pools follow it there
    for (kind, extra) in [
        (OpKind::MaxPool, None),
        (OpKind::AveragePool, Some(0)),
        (OpKind::AveragePool, Some(1)),
    ] {
        let mut g = conv_graph(&ConvCase {
            x: [1, 4, 11, 10],
            out_channels: 12,
            kernel: 3,
            stride: 1,
            pad: 1,
            dilation: 1,
            group: 1,
        });
        let y = g.outputs.pop().unwrap().value;
        let mut attrs = Attrs::new()
            .with("ceil_mode", Attr::Int(1))
            .with("dilations", Attr::Ints(vec![1, 1]))
            .with("kernel", Attr::Ints(vec![3, 3]))
            .with("pads", Attr::Ints(vec![1, 1, 1, 1]))
            .with("strides", Attr::Ints(vec![2, 2]));
        if let Some(include) = extra {
            attrs = attrs.with("count_include_pad", Attr::Int(include));
        }
        let p = g.build1(kind, vec![y], attrs).unwrap();
        let p = g.build1(OpKind::GlobalAveragePool, vec![p], Attrs::new()).unwrap();
        g.add_output("p", p);
        let kinds = cpu_against_ref(&g, RTOL, ATOL);
        let nhwc = [OpKind::MaxPoolNhwc, OpKind::AveragePoolNhwc];
        assert!(kinds.iter().any(|k| nhwc.contains(k)), "{kind}: {kinds:?}");
    }
}

/// `op` on an input of `shape`, with `attrs`.
fn one_op(kind: OpKind, shape: &[usize], attrs: Attrs) -> Graph {
    let mut g = Graph::new(kind.name());
    let x = g.add_input("x", f32s(shape));
    let y = g.build(kind, vec![x], attrs).unwrap()[0];
    g.add_output("y", y);
    g
}

#[test]
fn row_kernels_match_ref_on_rows_of_any_width() {
    for width in [5, 13, 37, 64] {
        let shape = [3, 4, width];
        let softmax = one_op(OpKind::Softmax, &shape, Attrs::new().with("axis", Attr::Int(2)));
        cpu_against_ref(&softmax, RTOL, ATOL);
        for kind in [OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceSum] {
            let last = Attrs::new()
                .with("axes", Attr::Ints(vec![2]))
                .with("keepdims", Attr::Int(1));
            cpu_against_ref(&one_op(kind, &shape, last), RTOL, ATOL);
            let kept = Attrs::new()
                .with("axes", Attr::Ints(vec![0, 1]))
                .with("keepdims", Attr::Int(0));
            cpu_against_ref(&one_op(kind, &shape, kept), RTOL, ATOL);
            // trailing dimensions reduced, folded as one row each: a spatial mean, and all
            // of them to one scalar
            for (axes, keep) in [(vec![1, 2], 1), (vec![0, 1, 2], 0), (vec![0, 1, 2], 1)] {
                let trailing = Attrs::new()
                    .with("axes", Attr::Ints(axes))
                    .with("keepdims", Attr::Int(keep));
                cpu_against_ref(&one_op(kind, &shape, trailing), RTOL, ATOL);
            }
        }
        let mut g = Graph::new("layer_norm");
        let x = g.add_input("x", f32s(&shape));
        let scale = g.constant(values(&[width], 2));
        let bias = g.constant(values(&[width], 3));
        let attrs = Attrs::new()
            .with("axis", Attr::Int(2))
            .with("epsilon", Attr::Float(1e-5));
        let y = g.build(OpKind::LayerNorm, vec![x, scale, bias], attrs).unwrap();
        g.add_output("y", y[0]);
        cpu_against_ref(&g, RTOL, ATOL);
    }
}

/// A dense grid of `n` inputs over `[lo, hi]`.
fn grid(lo: f64, hi: f64, n: usize) -> Tensor {
    let v: Vec<f64> = (0..n).map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64).collect();
    Tensor::from_f64s(DType::F32, vec![n], &v)
}

/// The largest error of the cpu's `kind` against ref's (libm's) on `x`: absolute, and relative
/// where the reference is at least 1e-3 in magnitude.
fn function_error(kind: OpKind, attrs: Attrs, x: &Tensor) -> (f64, f64) {
    let g = one_op(kind, &x.ty.shape, attrs);
    let inputs = HashMap::from([("x".to_string(), x.clone())]);
    let (want, _) = run(&g, Target::Ref, &inputs);
    let (got, _) = run(&g, Target::Cpu, &inputs);
    let (mut abs, mut rel) = (0.0f64, 0.0f64);
    for i in 0..x.len() {
        let (w, o) = (want[0].get_f64(i), got[0].get_f64(i));
        assert_eq!(w.is_finite(), o.is_finite(), "{kind} at {}: {o} for {w}", x.get_f64(i));
        abs = abs.max((w - o).abs());
        if w.abs() >= 1e-3 {
            rel = rel.max(((w - o) / w).abs());
        }
    }
    (abs, rel)
}

#[test]
fn vector_math_functions_stay_within_their_documented_error() {
    // up to where f32 exp overflows (ln of the largest float is 88.72)
    let wide = grid(-100.0, 88.0, 20_001);
    let near = grid(-8.0, 8.0, 16_001);
    // (op, attributes, inputs, largest absolute error, largest relative error)
    let none = Attrs::new;
    let cases: Vec<(OpKind, Attrs, &Tensor, f64, f64)> = vec![
        (OpKind::Exp, none(), &near, 1e-2, 3e-7),
        (OpKind::Exp, none(), &wide, f64::INFINITY, 3e-7),
        (OpKind::Tanh, none(), &near, 3e-7, 3e-7),
        (OpKind::Tanh, none(), &wide, 3e-7, 3e-7),
        (OpKind::Erf, none(), &near, 5e-7, 5e-7),
        (OpKind::Sigmoid, none(), &near, 3e-7, 2e-4),
        (OpKind::Sigmoid, none(), &wide, 3e-7, 2e-4),
        // 1 + erf(x / sqrt 2) cancels for x near -3: erf's absolute error, relative to that
        (
            OpKind::Gelu,
            Attrs::new().with("approximate", Attr::Str("none".into())),
            &near,
            2e-6,
            3e-4,
        ),
    ];
    for (kind, attrs, x, abs_bound, rel_bound) in cases {
        let (abs, rel) = function_error(kind, attrs, x);
        // the figures docs/performance.md quotes (`-- --nocapture`)
        println!(
            "{kind} on [{}, {}]: absolute error {abs:.2e}, relative {rel:.2e}",
            x.get_f64(0),
            x.get_f64(x.len() - 1)
        );
        assert!(
            abs <= abs_bound && rel <= rel_bound,
            "{kind}: absolute error {abs:e} (bound {abs_bound:e}), relative {rel:e} (bound {rel_bound:e})"
        );
    }
}

#[test]
fn vector_math_functions_keep_nan_and_the_infinities() {
    // whole vectors of them (16 elements), where the clamps compare and select
    let values = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0].repeat(4);
    let special = Tensor::from_f64s(DType::F32, vec![16], &values);
    for kind in [OpKind::Exp, OpKind::Tanh, OpKind::Erf, OpKind::Sigmoid, OpKind::Relu] {
        let g = one_op(kind, &[16], Attrs::new());
        let inputs = HashMap::from([("x".to_string(), special.clone())]);
        let (want, _) = run(&g, Target::Ref, &inputs);
        let (got, _) = run(&g, Target::Cpu, &inputs);
        if let Some(why) = mismatch(&got[0], &want[0], 0.0, 1e-30) {
            panic!("{kind}: {why}");
        }
    }
}

#[test]
fn a_kept_arena_gives_each_run_its_own_results() {
    // the runtime keeps the arena between runs: a second input must not see the first's values
    let g = conv_graph(&ConvCase {
        x: [1, 4, 9, 9],
        out_channels: 8,
        kernel: 3,
        stride: 1,
        pad: 1,
        dilation: 1,
        group: 1,
    });
    let compiled = compile(&g, Target::Cpu, &CompileOptions::default()).unwrap();
    let exe = Executable::load(compiled.program, &compiled.library).unwrap();
    let input = |seed| HashMap::from([("x".to_string(), values(&[1, 4, 9, 9], seed))]);
    let first = exe.run(&input(1)).unwrap();
    let second = exe.run(&input(2)).unwrap();
    assert_ne!(first, second);
    assert_eq!(exe.run(&input(1)).unwrap(), first);
    assert_eq!(exe.run(&input(2)).unwrap(), second);
}

/// bf16 products with constant bf16 weights: on a machine with AMX tiles the cpu target packs
/// the weights as bf16 pairs and multiplies on the tiles (`amx.rs`); elsewhere the cost model
/// weighs the pairs widened in the micro-tile against f32 panels behind casts (small products
/// may take either; a large one takes f32). Whichever form it picks agrees with ref within a
/// bf16 rounding of the result (the sums' order differs), on shapes that reach the tiles'
/// edges: rows not a multiple of 16 or 32 (a last block of 17: tiles of 16 and 1 rows,
/// zero-padded to one shape), the last panel partial, depths not a multiple of 32 and an odd
/// depth (the pairs' scalar form), a batch of matrices.
#[test]
fn bf16_products_with_constant_weights_match_ref() {
    let bf16s = |shape: &[usize]| TensorType::new(DType::BF16, shape.to_vec());
    let amx = mxc_kernels::amx::tiles_usable();
    let mut paired = 0;
    for (x_shape, n) in [
        (vec![64, 128], 64),
        (vec![64, 70], 64),
        (vec![49, 40], 240),
        (vec![45, 96], 40),
        (vec![7, 70], 17),
        (vec![20, 33], 16),
        (vec![2, 3, 40, 64], 48),
    ] {
        let k = x_shape[x_shape.len() - 1];
        let mut g = Graph::new("bf16_matmul");
        let x = g.add_input("x", bf16s(&x_shape));
        let w = g.constant(scaled(&[k, n], 3, 1.0 / (k as f64).sqrt()).cast(DType::BF16));
        let y = g.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
        g.add_output("y", y);
        let inputs = HashMap::from([("x".to_string(), values(&x_shape, 1).cast(DType::BF16))]);
        let (want, _) = run(&g, Target::Ref, &inputs);
        let compiled = compile(&g, Target::Cpu, &CompileOptions::default()).unwrap();
        let pairs = compiled
            .graph
            .ops
            .iter()
            .any(|op| op.kind == OpKind::Constant && compiled.graph.ty(op.results[0]).dtype == DType::BF16);
        paired += usize::from(pairs);
        let (got, kinds) = run(&g, Target::Cpu, &inputs);
        assert!(
            kinds.contains(&OpKind::MatMulPacked) || kinds.contains(&OpKind::MatMul),
            "{x_shape:?} x [{k}, {n}]: no product kernel in {kinds:?}"
        );
        if let Some(why) = mismatch(&got[0], &want[0], 1.0 / 128.0, 1e-3) {
            panic!("{x_shape:?} x [{k}, {n}]: cpu differs from ref: {why}");
        }
    }
    match amx {
        true => assert!(paired >= 4, "AMX machine, but only {paired} products packed bf16 pairs"),
        false => assert!(
            !large_bf16_product_pairs(),
            "a 128 x 1024 x 256 bf16 product packed bf16 pairs on a machine without AMX tiles"
        ),
    }
}

/// Whether the cpu target packs bf16 pairs for a 128 x 1024 x 256 bf16 product, large enough
/// that its FLOPs, not the casts around the f32 form, decide.
fn large_bf16_product_pairs() -> bool {
    let mut g = Graph::new("bf16_matmul");
    let x = g.add_input("x", TensorType::new(DType::BF16, vec![128, 1024]));
    let w = g.constant(scaled(&[1024, 256], 3, 1.0 / 32.0).cast(DType::BF16));
    let y = g.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
    g.add_output("y", y);
    let compiled = compile(&g, Target::Cpu, &CompileOptions::default()).unwrap();
    compiled
        .graph
        .ops
        .iter()
        .any(|op| op.kind == OpKind::Constant && compiled.graph.ty(op.results[0]).dtype == DType::BF16)
}

/// bf16 convolutions of one group with constant bf16 weights: on a machine with AMX tiles the
/// cpu target packs the weights as bf16 pairs and runs them on the tiles (`amx.rs`: pointwise
/// ones as a product, the others gathering each window tap's rows), elsewhere as the cost model
/// weighs pairs against f32 (these small ones may pair: the casts of the f32 form cost more than
/// the pairs' widening); either
/// way within a bf16 rounding of ref's, on windows with padding, strides, dilation, channels
/// not a multiple of 32, images whose rows are not a multiple of the tiles', and a batch.
#[test]
fn bf16_convolutions_with_constant_weights_match_ref() {
    let amx = mxc_kernels::amx::tiles_usable();
    let case = |x: [usize; 4], out_channels, kernel, stride, pad, dilation| ConvCase {
        x,
        out_channels,
        kernel,
        stride,
        pad,
        dilation,
        group: 1,
    };
    let cases = [
        case([2, 64, 7, 9], 40, 1, 1, 0, 1),
        case([1, 64, 13, 11], 48, 3, 1, 1, 1),
        case([1, 34, 9, 10], 19, 3, 2, 1, 1),
        case([2, 32, 8, 8], 32, 3, 1, 2, 2),
        case([1, 96, 6, 5], 16, 1, 2, 0, 1),
    ];
    let mut paired = 0;
    for c in &cases {
        let f32_graph = conv_graph(c);
        let g = bf16_copy(&f32_graph);
        let inputs = HashMap::from([("x".to_string(), values(&c.x, 1).cast(DType::BF16))]);
        let (want, _) = run(&g, Target::Ref, &inputs);
        let compiled = compile(&g, Target::Cpu, &CompileOptions::default()).unwrap();
        paired += usize::from(compiled.graph.ops.iter().any(|op| {
            op.kind == OpKind::Constant
                && compiled.graph.ty(op.results[0]).dtype == DType::BF16
                && compiled.graph.ty(op.results[0]).rank() == 3
        }));
        let (got, _) = run(&g, Target::Cpu, &inputs);
        if let Some(why) = mismatch(&got[0], &want[0], 1.0 / 64.0, 1e-2) {
            panic!(
                "{:?} {}x{} stride {}: cpu differs from ref: {why}",
                c.x, c.kernel, c.kernel, c.stride
            );
        }
    }
    if amx {
        assert!(
            paired >= 4,
            "AMX machine, but only {paired} convolutions packed bf16 pairs"
        );
    }
}

/// `g` with every f32 input and constant in bf16 (its ops typed again by their rules).
fn bf16_copy(g: &Graph) -> Graph {
    let mut h = Graph::new(&g.name);
    let mut map = HashMap::new();
    for p in &g.inputs {
        let ty = g.ty(p.value);
        map.insert(
            p.value,
            h.add_input(&p.name, TensorType::new(DType::BF16, ty.shape.clone())),
        );
    }
    for op in &g.ops {
        let v = match op.kind {
            OpKind::Constant => {
                let t = op.attrs.tensor("value").expect("a constant holds its value");
                h.constant(t.cast(DType::BF16))
            }
            kind => {
                let operands = op.operands.iter().map(|v| map[v]).collect();
                h.build1(kind, operands, op.attrs.clone()).unwrap()
            }
        };
        map.insert(op.results[0], v);
    }
    for o in &g.outputs {
        h.add_output(&o.name, map[&o.value]);
    }
    h
}

/// Casts of f32 and f64 vectors to u8 and i8 (every `QuantizeLinear` ends in one) take the
/// values' low byte as `ref`'s scalar cast through i64 does, on the lanes' edges too: halves
/// and values past 255 or 127 (which wrap), magnitudes from 2^31 on, infinities and NaN (whose
/// low byte is 0). f32 takes x86's `cvttps2dq`, f64 the portable form.
#[test]
fn float_to_byte_casts_on_vectors_match_ref_to_the_bit() {
    let specials = [
        0.0,
        -0.7,
        0.7,
        127.9,
        128.0,
        -128.5,
        -129.0,
        255.9,
        256.5,
        300.0,
        -300.0,
        65543.0,
        2_147_483_520.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        3.0e9,
        -3.0e9,
        1.0e20,
        -1.0e20,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    // 3 vectors and a partial one, each lane a different value
    let data: Vec<f32> = (0..53)
        .map(|i| specials[i % specials.len()] * if i >= 22 { -1.5 } else { 1.0 })
        .collect();
    let mut g = Graph::new("float_to_byte");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![data.len()]));
    let wide = g.add_input("wide", TensorType::new(DType::F64, vec![data.len()]));
    for (from, input) in [("f32", x), ("f64", wide)] {
        for to in [DType::U8, DType::I8] {
            let y = g
                .build1(OpKind::Cast, vec![input], Attrs::new().with("to", Attr::DType(to)))
                .unwrap();
            g.add_output(&format!("{from}_{to}"), y);
        }
    }
    let x = Tensor::from_f32s(vec![data.len()], &data);
    let inputs = HashMap::from([("x".to_string(), x.clone()), ("wide".to_string(), x.cast(DType::F64))]);
    let (want, _) = run(&g, Target::Ref, &inputs);
    let (got, _) = run(&g, Target::Cpu, &inputs);
    for (got, want) in got.iter().zip(&want) {
        assert_eq!(got, want, "inputs {data:?}");
    }
}

/// A dequantised SiLU of the bytes `x` (`to` u8: requantised), as a model's QDQ graph writes it.
fn silu_of_bytes(g: &mut Graph, x: mxc_dialects::ValueId, to: DType) -> mxc_dialects::ValueId {
    let scale = g.constant(Tensor::from_f64s(DType::F32, vec![], &[0.06]));
    let zero = g.constant(Tensor::from_f64s(DType::U8, vec![], &[133.0]));
    let dq = g
        .build1(OpKind::DequantizeLinear, vec![x, scale, zero], Attrs::new())
        .unwrap();
    let sigmoid = g.build1(OpKind::Sigmoid, vec![dq], Attrs::new()).unwrap();
    let y = g.build1(OpKind::Mul, vec![dq, sigmoid], Attrs::new()).unwrap();
    if to != DType::U8 {
        return y;
    }
    let step = g.constant(Tensor::from_f64s(DType::F32, vec![], &[0.03]));
    let q = g.build1(OpKind::Div, vec![y, step], Attrs::new()).unwrap();
    let r = g.build1(OpKind::Round, vec![q], Attrs::new()).unwrap();
    g.build1(OpKind::Cast, vec![r], Attrs::new().with("to", Attr::DType(to)))
        .unwrap()
}

/// The SiLU of `n` bytes (`silu_of_bytes`).
fn byte_silu(n: usize, to: DType) -> Graph {
    let mut g = Graph::new("byte_silu");
    let x = g.add_input("x", TensorType::new(DType::U8, vec![n]));
    let y = silu_of_bytes(&mut g, x, to);
    g.add_output("y", y);
    g
}

/// A product of `a` by constant weights, requantised to bytes, and (`silu`) the SiLU of them.
fn requantised_product(rows: usize, silu: Option<DType>) -> Graph {
    let mut g = Graph::new("requantised_product");
    let a = g.add_input("a", f32s(&[rows, 8]));
    let b = g.constant(values(&[8, 128], 3));
    let y = g.build1(OpKind::MatMul, vec![a, b], Attrs::new()).unwrap();
    let step = g.constant(Tensor::from_f64s(DType::F32, vec![], &[0.02]));
    let q = g.build1(OpKind::Div, vec![y, step], Attrs::new()).unwrap();
    let r = g.build1(OpKind::Round, vec![q], Attrs::new()).unwrap();
    let lo = g.constant(Tensor::from_f64s(DType::F32, vec![], &[0.0]));
    let hi = g.constant(Tensor::from_f64s(DType::F32, vec![], &[255.0]));
    let clamped = g.build1(OpKind::Clip, vec![r, lo, hi], Attrs::new()).unwrap();
    let bytes = g
        .build1(
            OpKind::Cast,
            vec![clamped],
            Attrs::new().with("to", Attr::DType(DType::U8)),
        )
        .unwrap();
    let out = match silu {
        Some(to) => silu_of_bytes(&mut g, bytes, to),
        None => bytes,
    };
    g.add_output("y", out);
    g
}

#[test]
fn a_function_of_one_byte_after_a_product_is_looked_up_and_gives_what_it_computes_per_element() {
    // 64 x 128 results: the product's kernel looks the SiLU of its requantised bytes up in a
    // table it makes first; each value must be the one the SiLU's own kernel computes for
    // that byte (256 elements: too few for a table, so computed per element)
    let inputs = HashMap::from([("a".to_string(), scaled(&[64, 8], 5, 2.0))]);
    let (bytes, _) = run(&requantised_product(64, None), Target::Cpu, &inputs);
    let every_byte = Tensor::from_i64s(DType::U8, vec![256], &(0..256).collect::<Vec<_>>());
    for to in [DType::U8, DType::F32] {
        let (silu, kinds) = run(&requantised_product(64, Some(to)), Target::Cpu, &inputs);
        let kernels = kinds.iter().filter(|&&k| k == OpKind::Fused).count();
        assert_eq!(kernels, 1, "one kernel: {kinds:?}");
        let per_byte = HashMap::from([("x".to_string(), every_byte.clone())]);
        let (per_element, _) = run(&byte_silu(256, to), Target::Cpu, &per_byte);
        let distinct: std::collections::HashSet<i64> = (0..bytes[0].len()).map(|i| bytes[0].get_i64(i)).collect();
        assert!(
            distinct.len() > 100,
            "the product's bytes cover the table: {}",
            distinct.len()
        );
        for i in 0..bytes[0].len() {
            let byte = bytes[0].get_i64(i) as usize;
            assert_eq!(
                silu[0].get_f64(i).to_bits(),
                per_element[0].get_f64(byte).to_bits(),
                "{to}: byte {byte} at {i}"
            );
        }
    }
}

#[test]
fn a_function_of_one_byte_looked_up_in_a_table_gives_what_the_kernel_computes_per_element() {
    // 256 elements (every byte once) are too few for a table, so that kernel computes each
    // element; 8256 (every byte 32 times and 64 more: a partial vector at the end) are looked
    // up in the table the kernel makes of its own code
    let bytes = |n: usize| {
        Tensor::from_i64s(
            DType::U8,
            vec![n],
            &(0..n as i64).map(|i| (i * 7) % 256).collect::<Vec<_>>(),
        )
    };
    for to in [DType::U8, DType::F32] {
        let each = |n: usize| {
            let inputs = HashMap::from([("x".to_string(), bytes(n))]);
            let (outputs, kinds) = run(&byte_silu(n, to), Target::Cpu, &inputs);
            assert!(kinds.contains(&OpKind::Fused), "{kinds:?}");
            outputs.into_iter().next().unwrap()
        };
        let (per_element, looked_up) = (each(256), each(8256));
        for i in 0..8256 {
            let byte = (i * 7) % 256;
            let at = (0..256).find(|&j| (j * 7) % 256 == byte).unwrap();
            assert_eq!(
                looked_up.get_f64(i).to_bits(),
                per_element.get_f64(at).to_bits(),
                "{to}: byte {byte} at {i}"
            );
        }
    }
}

#[test]
fn a_quantisation_to_bytes_gives_refs_bytes_for_every_float() {
    // QuantizeLinear's ops (scale 0.25, so that halves divide exactly; zero point 7): the cpu
    // kernel rounds in its conversion and clamps in i32 (`saturate.rs`); every half from -5
    // to 260 (ties to even), the values it lowers or raises, the infinities, NaN and values
    // beyond i32, in vectors and in the rest after them
    let mut floats: Vec<f64> = (-10..=520).map(|k| (k as f64 / 2.0 + 0.25) * 0.25).collect();
    floats.extend((-10..=520).map(|k| k as f64 / 2.0 * 0.25));
    floats.extend([
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e30,
        -1e30,
        3e9,
        -3e9,
        -0.0,
        63.0,
        62.0,
    ]);
    let n = floats.len();
    let mut g = Graph::new("quantise");
    let x = g.add_input("x", f32s(&[n]));
    let scalar = |g: &mut Graph, v: f64| g.constant(Tensor::from_f64s(DType::F32, vec![], &[v]));
    let scale = scalar(&mut g, 0.25);
    let mut v = g.build1(OpKind::Div, vec![x, scale], Attrs::new()).unwrap();
    v = g.build1(OpKind::Round, vec![v], Attrs::new()).unwrap();
    let zero = scalar(&mut g, 7.0);
    v = g.build1(OpKind::Add, vec![v, zero], Attrs::new()).unwrap();
    let (lo, hi) = (scalar(&mut g, 0.0), scalar(&mut g, 255.0));
    v = g.build1(OpKind::Max, vec![v, lo], Attrs::new()).unwrap();
    v = g.build1(OpKind::Min, vec![v, hi], Attrs::new()).unwrap();
    let y = g
        .build1(OpKind::Cast, vec![v], Attrs::new().with("to", Attr::DType(DType::U8)))
        .unwrap();
    g.add_output("y", y);
    let inputs = HashMap::from([("x".to_string(), Tensor::from_f64s(DType::F32, vec![n], &floats))]);
    let (want, _) = run(&g, Target::Ref, &inputs);
    let (got, kinds) = run(&g, Target::Cpu, &inputs);
    assert!(kinds.contains(&OpKind::Fused), "{kinds:?}");
    for (i, x) in floats.iter().enumerate() {
        assert_eq!(got[0].get_i64(i), want[0].get_i64(i), "{x}");
    }
}

/// The i32 convolution of a u8 image (channels last, less its zero point) with constant i8
/// weights: what `integer.rules` makes `conv_nhwc_integer_packed` (one group) or
/// `conv_nhwc_integer_depthwise` (a group per channel) of.
fn integer_conv_graph(c: &ConvCase, zero_point: u8) -> Graph {
    let mut g = Graph::new("integer_conv");
    let [n, channels, h, w] = c.x;
    let x = g.add_input("x", TensorType::new(DType::U8, vec![n, h, w, channels]));
    let wide = g
        .build1(OpKind::Cast, vec![x], Attrs::new().with("to", Attr::DType(DType::I32)))
        .unwrap();
    let zero = g.constant(Tensor::from_i64s(DType::I32, vec![], &[zero_point as i64]));
    let centred = g.build1(OpKind::Sub, vec![wide, zero], Attrs::new()).unwrap();
    let w_shape = vec![c.out_channels, c.kernel, c.kernel, channels / c.group];
    let count: usize = w_shape.iter().product();
    let weights: Vec<i64> = (0..count as i64).map(|i| (i * 37 % 255) - 127).collect();
    let weights = g.constant(Tensor::from_i64s(DType::I32, w_shape, &weights));
    let attrs = Attrs::new()
        .with("dilations", Attr::Ints(vec![c.dilation as i64; 2]))
        .with("group", Attr::Int(c.group as i64))
        .with("pads", Attr::Ints(vec![c.pad as i64; 4]))
        .with("strides", Attr::Ints(vec![c.stride as i64; 2]));
    let y = g.build1(OpKind::ConvNhwc, vec![centred, weights], attrs).unwrap();
    g.add_output("y", y);
    g
}

/// Runs `integer_conv_graph(case, zero_point)` on ref and cpu over bytes that cover 0..255,
/// and asserts the cpu program holds `kernel` and equals ref to the bit.
fn integer_conv_matches_ref(case: &ConvCase, zero_point: u8, kernel: OpKind) {
    let g = integer_conv_graph(case, zero_point);
    let [n, c, h, w] = case.x;
    let count = n * h * w * c;
    let bytes: Vec<i64> = (0..count as i64).map(|i| (i * 91 + 13) % 256).collect();
    let x = Tensor::from_i64s(DType::U8, vec![n, h, w, c], &bytes);
    let inputs = HashMap::from([("x".to_string(), x)]);
    let (want, _) = run(&g, Target::Ref, &inputs);
    let (got, kinds) = run(&g, Target::Cpu, &inputs);
    assert!(kinds.contains(&kernel), "{c} channels: {kinds:?}");
    assert_eq!(
        got, want,
        "{c} channels, kernel {}, stride {}, zero point {zero_point}",
        case.kernel, case.stride
    );
}

#[test]
fn integer_depthwise_convolutions_sum_in_f32_lanes_and_match_ref_to_the_bit() {
    // 20 channels (a vector and a partial one), 48 (three), strided, dilated, 5 x 5, a batch
    // of 2, with zero points the border pixels subtract and the inner ones start from
    let case = |c: usize, hw: usize, kernel: usize, stride: usize, pad: usize, dilation: usize, n: usize| ConvCase {
        x: [n, c, hw, hw],
        out_channels: c,
        kernel,
        stride,
        pad,
        dilation,
        group: c,
    };
    let cases = [
        (case(20, 13, 3, 1, 1, 1, 1), 133),
        (case(48, 12, 3, 2, 1, 1, 2), 0),
        (case(32, 15, 5, 1, 2, 1, 1), 255),
        (case(16, 11, 3, 1, 2, 2, 1), 7),
        (case(24, 9, 3, 1, 0, 1, 1), 128),
    ];
    for (case, zero_point) in cases {
        integer_conv_matches_ref(&case, zero_point, OpKind::ConvNhwcIntegerDepthwise);
    }
}

#[test]
fn integer_convolutions_of_few_channels_or_short_kernel_rows_read_kernel_rows_and_match_ref_to_the_bit() {
    // 3 channels by 7 (21 bytes a kernel row: 5 groups and 1 byte), 3 by 3 (9: 2 and 1), 1 by
    // 2 (2 bytes: a masked group alone), 6 by 3 (18: 4 and 2), 16 by 3 and 64 by 3 (whole
    // groups: 48 and 192 bytes), padded and strided, with a zero point the padding must read;
    // and 96 by 3 (288 bytes: window positions again)
    let whole = |c: usize, stride: usize| ConvCase {
        x: [1, c, 9, 9],
        out_channels: 20,
        kernel: 3,
        stride,
        pad: 1,
        dilation: 1,
        group: 1,
    };
    let cases = [
        (whole(16, 1), 133),
        (whole(64, 2), 9),
        (whole(96, 1), 200),
        (
            ConvCase {
                x: [1, 3, 23, 23],
                out_channels: 64,
                kernel: 7,
                stride: 2,
                pad: 3,
                dilation: 1,
                group: 1,
            },
            128,
        ),
        (
            ConvCase {
                x: [2, 3, 17, 17],
                out_channels: 20,
                kernel: 3,
                stride: 2,
                pad: 1,
                dilation: 1,
                group: 1,
            },
            7,
        ),
        (
            ConvCase {
                x: [1, 1, 9, 9],
                out_channels: 5,
                kernel: 2,
                stride: 1,
                pad: 1,
                dilation: 1,
                group: 1,
            },
            255,
        ),
        (
            ConvCase {
                x: [1, 6, 11, 11],
                out_channels: 33,
                kernel: 3,
                stride: 1,
                pad: 0,
                dilation: 1,
                group: 1,
            },
            0,
        ),
    ];
    for (case, zero_point) in cases {
        integer_conv_matches_ref(&case, zero_point, OpKind::ConvNhwcIntegerPacked);
    }
}
