//! The compile-and-run pipeline through the library API, without ONNX: graphs built in code,
//! compiled for each target, loaded by the runtime, checked against values computed here.

use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::mxr::{self, Mxr};
use mxc_kernels::Executable;
use std::collections::HashMap;

fn run(g: &Graph, target: Target, inputs: &[(&str, Tensor)]) -> Vec<Tensor> {
    let compiled =
        compile(g, target, &CompileOptions::default()).unwrap_or_else(|e| panic!("compiling for {target}: {e}"));
    let exe = Executable::load(compiled.program, &compiled.library).expect("kernels load");
    let inputs: HashMap<String, Tensor> = inputs.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    exe.run(&inputs).expect("runs").into_iter().map(|(_, t)| t).collect()
}

/// y = relu(x * 2 + b), with b broadcast along rows.
fn small_graph() -> Graph {
    let mut g = Graph::new("small");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![2, 3]));
    let two = g.constant(Tensor::from_f32s(vec![], &[2.0]));
    let b = g.constant(Tensor::from_f32s(vec![3], &[-1.0, 0.0, 1.0]));
    let m = g.build1(OpKind::Mul, vec![x, two], Attrs::new()).unwrap();
    let a = g.build1(OpKind::Add, vec![m, b], Attrs::new()).unwrap();
    let y = g.build1(OpKind::Relu, vec![a], Attrs::new()).unwrap();
    g.add_output("y", y);
    g
}

#[test]
fn elementwise_chain_runs_on_both_targets() {
    let x = Tensor::from_f32s(vec![2, 3], &[0.0, 1.0, -2.0, 3.0, -0.25, 0.5]);
    for target in [Target::Ref, Target::Cpu] {
        let y = run(&small_graph(), target, &[("x", x.clone())]);
        assert_eq!(y[0].to_f64_vec(), vec![0.0, 2.0, 0.0, 5.0, 0.0, 2.0], "{target}");
    }
}

#[test]
fn matmul_matches_a_direct_product() {
    let mut g = Graph::new("mm");
    let a = g.add_input("a", TensorType::new(DType::F32, vec![3, 4]));
    let b = g.add_input("b", TensorType::new(DType::F32, vec![4, 5]));
    let c = g.build1(OpKind::MatMul, vec![a, b], Attrs::new()).unwrap();
    g.add_output("c", c);
    let av: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let bv: Vec<f32> = (0..20).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut expected = vec![0.0f64; 15];
    for i in 0..3 {
        for j in 0..5 {
            expected[i * 5 + j] = (0..4).map(|k| av[i * 4 + k] as f64 * bv[k * 5 + j] as f64).sum();
        }
    }
    let inputs = [
        ("a", Tensor::from_f32s(vec![3, 4], &av)),
        ("b", Tensor::from_f32s(vec![4, 5], &bv)),
    ];
    for target in [Target::Ref, Target::Cpu] {
        assert_eq!(run(&g, target, &inputs)[0].to_f64_vec(), expected, "{target}");
    }
}

#[test]
fn integer_and_bool_ops_run() {
    let mut g = Graph::new("ints");
    let x = g.add_input("x", TensorType::new(DType::I64, vec![4]));
    let three = g.constant(Tensor::from_i64s(DType::I64, vec![], &[3]));
    let q = g.build1(OpKind::Div, vec![x, three], Attrs::new()).unwrap();
    let eq = g.build1(OpKind::Equal, vec![q, three], Attrs::new()).unwrap();
    let f = g
        .build1(OpKind::Cast, vec![eq], Attrs::new().with("to", Attr::DType(DType::F32)))
        .unwrap();
    g.add_output("q", q);
    g.add_output("f", f);
    let x = Tensor::from_i64s(DType::I64, vec![4], &[-7, 9, 10, 2]);
    for target in [Target::Ref, Target::Cpu] {
        let out = run(&g, target, &[("x", x.clone())]);
        assert_eq!(
            out[0].to_i64_vec(),
            vec![-2, 3, 3, 0],
            "integer division truncates on {target}"
        );
        assert_eq!(out[1].to_f64_vec(), vec![0.0, 1.0, 1.0, 0.0], "{target}");
    }
}

#[test]
fn compiled_file_runs_like_the_graph() {
    let compiled = compile(&small_graph(), Target::Cpu, &CompileOptions::default()).unwrap();
    let cpu = mxc_codegen::code_cpu(Target::Cpu);
    let file = Mxr::new("cpu", &cpu.name, &cpu.features, compiled.program, compiled.library);
    let bytes = mxr::encode(&file, None);
    let back = mxr::decode(&bytes, "small.mxr", Some("cpu"), &Default::default()).unwrap();
    assert_eq!(back, file);
    let exe = Executable::load_planned(back.program, back.memory, &back.library).unwrap();
    let x = Tensor::from_f32s(vec![2, 3], &[1.0; 6]);
    let out = exe.run(&HashMap::from([("x".to_string(), x)])).unwrap();
    assert_eq!(out[0].1.to_f64_vec(), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
}
