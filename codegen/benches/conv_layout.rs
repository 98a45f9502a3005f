//! Channels first against channels last with our own kernels (a benchmark, not a test:
//! `cargo bench -p mxc-codegen --bench conv_layout`): one convolution per shape of the repo's
//! conv net and of a ResNet stage, compiled for `cpu` as `conv` on NCHW operands and as
//! `conv_nhwc` on operands already in NHWC (the kernel alone, no transposes), each run 25
//! times after a warm-up run; prints the median kernel time of each and the NHWC/NCHW ratio.
//! The outputs are compared as a check that both compute the same convolution.
//!
//! `MXC_BENCH_RUNS=N` changes the number of runs, `MXC_BENCH_DUMP=DIR` writes each kernel's
//! shared object there (to read its code); an argument filters the shapes by name.

use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::eval::eval;
use mxc_dialects::{Attr, Attrs, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;
use std::time::Duration;

/// One convolution: batch 1, `c` -> `m` channels, a `k` x `k` kernel, `hw` x `hw` input.
struct Shape {
    name: &'static str,
    c: usize,
    m: usize,
    k: usize,
    hw: usize,
    stride: i64,
    pad: i64,
}

const fn shape(name: &'static str, c: usize, m: usize, k: usize, hw: usize, stride: i64, pad: i64) -> Shape {
    Shape {
        name,
        c,
        m,
        k,
        hw,
        stride,
        pad,
    }
}

const SHAPES: &[Shape] = &[
    // the repo's conv net (.cache/models/convnet)
    shape("convnet stem 3->16 3x3 @32", 3, 16, 3, 32, 1, 1),
    shape("convnet 16->16 3x3 @32", 16, 16, 3, 32, 1, 1),
    shape("convnet 16->32 3x3 /2 @32", 16, 32, 3, 32, 2, 1),
    shape("convnet 16->32 1x1 /2 @32", 16, 32, 1, 32, 2, 0),
    shape("convnet 32->32 3x3 @16", 32, 32, 3, 16, 1, 1),
    shape("convnet 32->64 3x3 /2 @16", 32, 64, 3, 16, 2, 1),
    shape("convnet 32->64 1x1 /2 @16", 32, 64, 1, 16, 2, 0),
    shape("convnet 64->64 3x3 @8", 64, 64, 3, 8, 1, 1),
    // a ResNet-18/50 first stage
    shape("resnet 64->64 3x3 @56", 64, 64, 3, 56, 1, 1),
    shape("resnet 64->64 1x1 @56", 64, 64, 1, 56, 1, 0),
];

/// Seeded values in [-1, 1).
fn data(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2048) as f32 / 1024.0 - 1.0
        })
        .collect();
    Tensor::from_f32s(shape.to_vec(), &values)
}

fn transpose(t: &Tensor, perm: &[i64]) -> Tensor {
    let attrs = Attrs::new().with("perm", Attr::Ints(perm.to_vec()));
    eval(OpKind::Transpose, &[t], &attrs)
        .expect("transpose is evaluable")
        .expect("a valid permutation")
        .remove(0)
}

/// A graph of one `kind` convolution of input `x` with constant weights and bias.
fn conv_graph(kind: OpKind, s: &Shape, x: &TensorType, w: Tensor, b: Tensor) -> Graph {
    let mut g = Graph::new(&format!("c{}m{}k{}hw{}s{}", s.c, s.m, s.k, s.hw, s.stride));
    let input = g.add_input("x", x.clone());
    let (w, b) = (g.constant(w), g.constant(b));
    let attrs = Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(1))
        .with("pads", Attr::Ints(vec![s.pad; 4]))
        .with("strides", Attr::Ints(vec![s.stride; 2]));
    let y = g.build1(kind, vec![input, w, b], attrs).expect("a valid convolution");
    g.add_output("y", y);
    g
}

/// The output and the median time of the graph's one kernel over `runs` runs.
fn time_kernel(g: &Graph, x: &Tensor, runs: usize) -> (Tensor, Duration) {
    let compiled = compile(g, Target::Cpu, &CompileOptions::default()).expect("compiles");
    if let Ok(dir) = std::env::var("MXC_BENCH_DUMP") {
        let file = format!("{dir}/{}_{}.so", g.name, compiled.program.steps[0].symbol);
        std::fs::write(&file, &compiled.library).expect("writes the shared object");
    }
    assert_eq!(compiled.program.steps.len(), 1, "one kernel");
    let exe = Executable::load(compiled.program, &compiled.library).expect("loads");
    let inputs = HashMap::from([("x".to_string(), x.clone())]);
    let mut out = None;
    let mut times: Vec<Duration> = (0..runs + 1)
        .map(|_| {
            let (outputs, steps) = exe.run_timed(&inputs).expect("runs");
            out = Some(outputs.into_iter().next().expect("one output").1);
            steps[0]
        })
        .skip(1) // a warm-up run
        .collect();
    times.sort();
    (out.expect("ran"), times[times.len() / 2])
}

fn main() {
    let runs: usize = std::env::var("MXC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    println!("conv kernels on cpu, median of {runs} runs (NHWC: operands already channels last)");
    println!("{:<30} {:>12} {:>12} {:>10}", "shape", "NCHW", "NHWC", "NHWC/NCHW");
    for s in SHAPES {
        if filter.as_ref().is_some_and(|f| !s.name.contains(f.as_str())) {
            continue;
        }
        let x = data(&[1, s.c, s.hw, s.hw], 1);
        let w = data(&[s.m, s.c, s.k, s.k], 2);
        let b = data(&[s.m], 3);
        let nchw = conv_graph(OpKind::Conv, s, &x.ty, w.clone(), b.clone());
        let x_nhwc = transpose(&x, &[0, 2, 3, 1]);
        let nhwc = conv_graph(OpKind::ConvNhwc, s, &x_nhwc.ty, transpose(&w, &[0, 2, 3, 1]), b);
        let (y1, t1) = time_kernel(&nchw, &x, runs);
        let (y2, t2) = time_kernel(&nhwc, &x_nhwc, runs);
        let y2 = transpose(&y2, &[0, 3, 1, 2]);
        let worst = (0..y1.len())
            .map(|i| (y1.get_f64(i) - y2.get_f64(i)).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-3, "{}: the layouts differ by {worst}", s.name);
        println!(
            "{:<30} {:>9.1} us {:>9.1} us {:>10.2}",
            s.name,
            t1.as_secs_f64() * 1e6,
            t2.as_secs_f64() * 1e6,
            t2.as_secs_f64() / t1.as_secs_f64()
        );
    }
}
