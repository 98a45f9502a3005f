//! Measurements behind the rewrite engine's default limits (a benchmark, not a test:
//! `cargo bench -p mxc-rewrite`): time per op for whole-graph optimisation with the built-in
//! rules on graphs of 100 to 10,000 ops, and how saturation time grows with the e-node limit
//! under rules that never saturate (commutativity and associativity of `max`).

use mxc_dialects::{Attrs, DType, Graph, OpKind, Tensor, TensorType, ValueId};
use mxc_rewrite::rules::{builtin_rules, parse_rules, rewrites};
use mxc_rewrite::{optimize, OptimizeOptions};
use std::time::{Duration, Instant};

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

fn op(g: &mut Graph, kind: OpKind, operands: &[ValueId]) -> ValueId {
    g.build1(kind, operands.to_vec(), Attrs::new()).expect("well-typed")
}

/// `n` ops in residual blocks `x = x + relu(x * c_i)`, each `x` used twice, with a `* 1`
/// and a double negation in every block for the algebra rules to remove.
fn residual(n: usize) -> Graph {
    let mut g = Graph::new("residual");
    let mut x = g.add_input("x", f32s(&[16, 64]));
    let one = g.constant(Tensor::from_f32s(vec![], &[1.0]));
    for i in 0..n / 6 {
        let c = g.constant(Tensor::from_f32s(vec![64], &[i as f32; 64]));
        let m = op(&mut g, OpKind::Mul, &[x, c]);
        let same = op(&mut g, OpKind::Mul, &[m, one]);
        let n1 = op(&mut g, OpKind::Neg, &[same]);
        let n2 = op(&mut g, OpKind::Neg, &[n1]);
        let r = op(&mut g, OpKind::Relu, &[n2]);
        x = op(&mut g, OpKind::Add, &[x, r]);
    }
    g.add_output("y", x);
    g
}

fn max_chain(n: usize) -> Graph {
    let mut g = Graph::new("chain");
    let inputs: Vec<ValueId> = (0..n).map(|i| g.add_input(&format!("x{i}"), f32s(&[4]))).collect();
    let acc = inputs[1..]
        .iter()
        .fold(inputs[0], |acc, x| op(&mut g, OpKind::Max, &[acc, *x]));
    g.add_output("max", acc);
    g
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let algebra = rewrites(&builtin_rules("algebra").expect("built in").expect("parses"));
    for n in [100, 1_000, 10_000] {
        let g = residual(n);
        let mut times = Vec::new();
        let mut stats = None;
        for _ in 0..3 {
            let t = Instant::now();
            stats = Some(
                optimize(&g, &algebra, &OptimizeOptions::default())
                    .expect("optimises")
                    .stats,
            );
            times.push(t.elapsed());
        }
        let (t, s) = (median(times), stats.expect("ran"));
        println!(
            "algebra, {n:>6} ops: median {:>9.2} ms ({:>5.1} us/op), {} e-nodes, {} iterations, {:?}",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64,
            s.enodes,
            s.iterations,
            s.stop_reason
        );
    }
    let ac = parse_rules(
        "rule max-comm: (max ?a ?b) => (max ?b ?a)\nrule max-assoc: (max (max ?a ?b) ?c) => (max ?a (max ?b ?c))\n",
        "max-ac.rules",
    )
    .expect("parses");
    for limit in [10_000, 100_000] {
        let opts = OptimizeOptions {
            node_limit: limit,
            node_growth: 1,
            time_limit: Duration::from_secs(120),
            ..OptimizeOptions::default()
        };
        let t = Instant::now();
        let s = optimize(&max_chain(24), &rewrites(&ac), &opts)
            .expect("optimises")
            .stats;
        println!(
            "max-ac, e-node limit {limit:>7}: {:>9.1} ms ({:.2} us/e-node), {} e-nodes, {} iterations, {:?}",
            t.elapsed().as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e6 / s.enodes as f64,
            s.enodes,
            s.iterations,
            s.stop_reason
        );
    }
}
