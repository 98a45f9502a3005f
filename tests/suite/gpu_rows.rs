//! The gpu target's row kernels (a block of 256 threads per row: softmax, layer norm and
//! reductions over trailing axes, `lowering/src/loops/gpu_rows.rs`) run on the host in their
//! host form, the same phases and tree of partial results as on the GPU, and give what `ref`
//! gives: rows shorter than the block, of exactly 256 and longer and not a multiple of it.

use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// Values of every sign and a few magnitudes, around `offset` (which layer norm subtracts).
fn values(shape: &[usize], offset: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| offset + ((i * 37 % 101) as f32 - 50.0) / 7.0 * if i % 5 == 0 { 4.0 } else { 1.0 })
        .collect();
    Tensor::from_f32s(shape.to_vec(), &v)
}

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

fn run(g: &Graph, emulate_gpu_rows: bool) -> (Vec<(String, Tensor)>, usize) {
    let options = CompileOptions {
        emulate_gpu_rows,
        ..CompileOptions::default()
    };
    let c = mxc_codegen::compile(g, Target::Ref, &options).unwrap();
    let per_block = c.program.steps.iter().filter(|s| s.per_block).count();
    let exe = Executable::load(c.program, &c.library).unwrap();
    let inputs: HashMap<String, Tensor> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                p.name.clone(),
                values(&g.ty(p.value).shape, if i == 0 { 3.0 } else { 0.5 }),
            )
        })
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
        let name = &g.ops[0].kind;
        let (expected, plain) = run(g, false);
        let (got, per_block) = run(g, true);
        assert_eq!(
            (plain, per_block),
            (0, 1),
            "{name}: one row kernel, in the emulated build only"
        );
        for ((n, want), (_, have)) in expected.iter().zip(&got) {
            // the tree adds in another order than ref's loop
            if let Some(m) = crate::common::mismatch(have, want, 1e-5, 1e-5) {
                panic!("{name} {n}: {m}");
            }
        }
    }
}
