//! The gpu target's block kernels run on the host in their host form, the same phases, shared
//! arrays and order of operations as on the GPU, and give what `ref` gives: row kernels (a
//! block of 256 threads per row: softmax, layer norm and reductions over trailing axes,
//! `lowering/src/loops/gpu_rows.rs`) on rows shorter than the block, of exactly 256 and longer
//! and not a multiple of it; the tiled GEMM (a block per 64x64 tile of a product,
//! `lowering/src/loops/gpu_gemm.rs`) on products whose sides are and are not multiples of the
//! tile and of its depth slices, batched and broadcast, `gemm` with its transposes and
//! scaling, and anchoring a fused kernel.

use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;
use std::sync::Arc;

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// Values for input `input` of a row kernel: of every sign and a few magnitudes, the first
/// input's around 3 (which layer norm subtracts).
fn row_values(shape: &[usize], input: usize) -> Tensor {
    let offset = if input == 0 { 3.0 } else { 0.5 };
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| offset + ((i * 37 % 101) as f32 - 50.0) / 7.0 * if i % 5 == 0 { 4.0 } else { 1.0 })
        .collect();
    Tensor::from_f32s(shape.to_vec(), &v)
}

/// Values for input `input` of a product: eighths from -3.75 to 3.75, whose products and their
/// sums f32 holds exactly, so that any order of adding them (and a fused multiply-add) gives
/// ref's result.
fn exact_values(shape: &[usize], input: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 37 + input * 11) % 61) as f32 / 8.0 - 3.75)
        .collect();
    Tensor::from_f32s(shape.to_vec(), &v)
}

/// How a test makes the values of an input of a shape.
type Values = fn(&[usize], usize) -> Tensor;

/// A graph of one op on inputs of `shapes`, all its results outputs.
fn one_op(kind: OpKind, shapes: &[&[usize]], attrs: Attrs) -> Graph {
    let mut g = Graph::new("g");
    let ins: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| g.add_input(&format!("x{i}"), f32s(s)))
        .collect();
    for (i, r) in g.build(kind, ins, attrs).unwrap().into_iter().enumerate() {
        g.add_output(&format!("y{i}"), r);
    }
    g
}

fn run(g: &Graph, values: Values, emulate_gpu_blocks: bool) -> (Vec<(String, Tensor)>, usize) {
    let options = CompileOptions {
        emulate_gpu_blocks,
        ..CompileOptions::default()
    };
    let c = mxc_codegen::compile(g, Target::Ref, &options).unwrap();
    let per_block = c.program.steps.iter().filter(|s| s.per_block).count();
    let exe = Executable::load(c.program, &c.library).unwrap();
    let inputs: HashMap<String, Tensor> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), values(&g.ty(p.value).shape, i)))
        .collect();
    (exe.run(&inputs).unwrap(), per_block)
}

#[test]
fn row_kernels_run_the_gpu_algorithm_on_the_host_and_give_what_ref_gives() {
    let axis = |a: i64| Attrs::new().with("axis", Attr::Int(a));
    let norm = |a: i64| axis(a).with("epsilon", Attr::Float(1e-5));
    let reduce = |axes: &[i64], keep: i64| {
        Attrs::new()
            .with("axes", Attr::Ints(axes.to_vec()))
            .with("keepdims", Attr::Int(keep))
    };
    let cases = [
        one_op(OpKind::Softmax, &[&[3, 300]], axis(1)),
        one_op(OpKind::Softmax, &[&[2, 4, 37]], axis(2)),
        one_op(OpKind::Softmax, &[&[5, 256]], axis(1)),
        one_op(OpKind::LayerNorm, &[&[5, 8, 40], &[8, 40], &[8, 40]], norm(1)),
        one_op(OpKind::LayerNorm, &[&[7, 1000], &[1000]], norm(1)),
        one_op(OpKind::ReduceSum, &[&[6, 50]], reduce(&[1], 1)),
        one_op(OpKind::ReduceMean, &[&[3, 4, 5, 20]], reduce(&[2, 3], 0)),
        one_op(OpKind::ReduceMax, &[&[4, 513]], reduce(&[1], 0)),
    ];
    for g in &cases {
        matches_ref(g, row_values, 1);
    }
}

/// Each output of `g` run with its block kernels in their host form matches `ref`'s, and
/// `blocks` steps ran a block per iteration (none without the emulation).
fn matches_ref(g: &Graph, values: Values, blocks: usize) {
    let name = g.ops.last().unwrap().kind;
    let (expected, plain) = run(g, values, false);
    let (got, per_block) = run(g, values, true);
    assert_eq!(
        (plain, per_block),
        (0, blocks),
        "{name}: block kernels in the emulated build only"
    );
    for ((n, want), (_, have)) in expected.iter().zip(&got) {
        // a row kernel's tree adds in another order than ref's loop
        if let Some(m) = crate::common::mismatch(have, want, 1e-5, 1e-5) {
            panic!("{name} {n}: {m}");
        }
    }
}

#[test]
fn the_tiled_gemm_runs_the_gpu_algorithm_on_the_host_and_gives_what_ref_gives() {
    let none = Attrs::new;
    // whole tiles and slices; ragged edges everywhere; batches, B shared by them and broadcast
    for shapes in [
        [&[64, 64][..], &[64, 64][..]],
        [&[70, 100], &[100, 90]],
        [&[3, 40, 33], &[33, 130]],
        [&[2, 1, 17, 20], &[3, 20, 16]],
    ] {
        matches_ref(&one_op(OpKind::MatMul, &shapes, none()), exact_values, 1);
    }
    let gemm = |trans_a: i64, trans_b: i64| {
        Attrs::new()
            .with("alpha", Attr::Float(0.5))
            .with("beta", Attr::Float(2.0))
            .with("trans_a", Attr::Int(trans_a))
            .with("trans_b", Attr::Int(trans_b))
    };
    matches_ref(
        &one_op(OpKind::Gemm, &[&[50, 30], &[30, 80], &[80]], gemm(0, 0)),
        exact_values,
        1,
    );
    matches_ref(
        &one_op(OpKind::Gemm, &[&[30, 50], &[80, 30], &[50, 1]], gemm(1, 1)),
        exact_values,
        1,
    );
    // too few rows: the loop level's form
    matches_ref(
        &one_op(OpKind::MatMul, &[&[8, 100], &[100, 90]], none()),
        exact_values,
        0,
    );
}

#[test]
fn convolutions_run_as_implicit_gemms_on_the_tiles_and_give_what_ref_gives() {
    let conv = |strides: [i64; 2], pads: [i64; 4], dilations: [i64; 2], group: i64| {
        Attrs::new()
            .with("strides", Attr::Ints(strides.to_vec()))
            .with("pads", Attr::Ints(pads.to_vec()))
            .with("dilations", Attr::Ints(dilations.to_vec()))
            .with("group", Attr::Int(group))
    };
    // 3x3 padded, with a bias (64 output channels: one tile row); 7x7 strided, 3 input
    // channels; dilated and padded unevenly; two groups; a 1x1 over two images
    let conv_op = |shapes: &[&[usize]], attrs| one_op(OpKind::Conv, shapes, attrs);
    let cases = [
        conv_op(
            &[&[1, 8, 12, 12], &[64, 8, 3, 3], &[64]],
            conv([1, 1], [1, 1, 1, 1], [1, 1], 1),
        ),
        conv_op(
            &[&[1, 3, 30, 30], &[20, 3, 7, 7]],
            conv([2, 2], [3, 3, 3, 3], [1, 1], 1),
        ),
        conv_op(
            &[&[1, 5, 11, 13], &[17, 5, 3, 2]],
            conv([1, 2], [2, 0, 1, 1], [2, 1], 1),
        ),
        conv_op(
            &[&[1, 6, 9, 9], &[36, 3, 3, 3], &[36]],
            conv([1, 1], [1, 1, 1, 1], [1, 1], 2),
        ),
        conv_op(
            &[&[2, 24, 5, 5], &[70, 24, 1, 1]],
            conv([1, 1], [0, 0, 0, 0], [1, 1], 1),
        ),
    ];
    for g in &cases {
        matches_ref(g, exact_values, 1);
    }
    // one output channel a group (depthwise): the loop level's form
    let depthwise = one_op(
        OpKind::Conv,
        &[&[1, 32, 9, 9], &[32, 1, 3, 3]],
        conv([1, 1], [1, 1, 1, 1], [1, 1], 32),
    );
    matches_ref(&depthwise, exact_values, 0);
}

#[test]
fn a_fused_kernel_anchored_on_a_product_runs_as_a_tiled_gemm_with_its_epilogue() {
    let mut body = Graph::new("kernel");
    let x = body.add_input("in0", f32s(&[2, 72, 48]));
    let w = body.add_input("in1", f32s(&[48, 100]));
    let b = body.add_input("in2", f32s(&[100]));
    let residual = body.add_input("in3", f32s(&[2, 72, 100]));
    let y = body.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
    let y = body.build1(OpKind::Add, vec![y, b], Attrs::new()).unwrap();
    let y = body.build1(OpKind::Relu, vec![y], Attrs::new()).unwrap();
    let y = body.build1(OpKind::Add, vec![y, residual], Attrs::new()).unwrap();
    body.add_output("out0", y);
    let mut g = Graph::new("g");
    let ins = [&[2, 72, 48][..], &[48, 100], &[100], &[2, 72, 100]]
        .iter()
        .enumerate()
        .map(|(i, s)| g.add_input(&format!("x{i}"), f32s(s)))
        .collect();
    let y = g.build_fused(Arc::new(body), ins).unwrap();
    g.add_output("y", y);
    matches_ref(&g, exact_values, 1);
}
