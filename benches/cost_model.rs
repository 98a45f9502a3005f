//! Calibration of the `cpu` cost model against this machine (a benchmark, not a test:
//! `cargo bench --bench cost_model`). It times kernels whose cost one parameter dominates —
//! a chain of one-element ops (the per-kernel launch), a large `add` (bytes), and a kernel of
//! each form whose arithmetic has its own cost (`FlopCost`: products reading B where it lies or
//! packed, direct and packed convolutions, depthwise, Winograd's transforms, attention, `exp` for the
//! rest) — fits `LinearCost`'s parameters to them, then checks the model's
//! fusion decisions on the repo's models: the measured time of the fused program against the
//! unfused one, next to the ratio the model predicted. Figures are medians of repeated runs.

use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::eval::eval;
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use mxc_onnx::{import_file, ImportOptions};
use mxc_rewrite::cost::{bytes_moved, flops, graph_cost, weight_bytes, with_site, FlopCost};
use mxc_rewrite::LinearCost;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// Deterministic inputs: floats in [-1, 1), integers 0 or 1 (valid as indices and masks).
fn fill(ty: &TensorType) -> Tensor {
    let n = ty.num_elements();
    let values: Vec<f64> = (0..n).map(|i| ((i * 7919 % 2003) as f64 / 1001.5) - 1.0).collect();
    match ty.dtype.is_float() {
        true => Tensor::from_f64s(ty.dtype, ty.shape.clone(), &values),
        false => Tensor::from_i64s(
            ty.dtype,
            ty.shape.clone(),
            &(0..n).map(|i| (i % 2) as i64).collect::<Vec<_>>(),
        ),
    }
}

/// A compiled program ready to time, with its inputs.
struct Timed {
    exe: Executable,
    inputs: HashMap<String, Tensor>,
    graph: Graph,
}

fn prepare(g: &Graph, fusion: bool) -> Timed {
    let options = CompileOptions {
        fusion,
        ..CompileOptions::default()
    };
    let compiled = compile(g, Target::Cpu, &options).expect("compiles");
    let inputs = g.inputs.iter().map(|p| (p.name.clone(), fill(g.ty(p.value)))).collect();
    Timed {
        exe: Executable::load(compiled.program, &compiled.library).expect("loads"),
        inputs,
        graph: compiled.graph,
    }
}

/// Medians over enough runs to fill about `budget`: of a whole run, and of the kernels' own
/// time (the sum of the steps' times, without copying inputs and outputs).
fn median_run(t: &Timed, budget: Duration) -> (Duration, Duration) {
    let once = Instant::now();
    t.exe.run(&t.inputs).expect("runs");
    let runs = (budget.as_secs_f64() / once.elapsed().as_secs_f64().max(1e-7)).clamp(5.0, 2000.0) as usize;
    let (mut whole, mut kernels): (Vec<Duration>, Vec<Duration>) = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let (_, steps) = t.exe.run_timed(&t.inputs).expect("runs");
            (start.elapsed(), steps.iter().sum::<Duration>())
        })
        .unzip();
    whole.sort();
    kernels.sort();
    (whole[whole.len() / 2], kernels[kernels.len() / 2])
}

fn ns(d: Duration) -> f64 {
    d.as_secs_f64() * 1e9
}

/// `n` dependent one-element ops: the cost of a kernel call with nothing to do.
fn launches(n: usize) -> Graph {
    let mut g = Graph::new("launches");
    let mut x = g.add_input("x", f32s(&[1]));
    for _ in 0..n {
        x = g.build1(OpKind::Sqrt, vec![x], Attrs::new()).expect("typed");
    }
    g.add_output("y", x);
    g
}

fn binary(kind: OpKind, a: TensorType, b: TensorType, attrs: Attrs) -> Graph {
    let mut g = Graph::new(kind.name());
    let (x, y) = (g.add_input("a", a), g.add_input("b", b));
    let r = g.build1(kind, vec![x, y], attrs).expect("typed");
    g.add_output("y", r);
    g
}

fn unary(kind: OpKind, ty: TensorType) -> Graph {
    let mut g = Graph::new(kind.name());
    let x = g.add_input("x", ty);
    let r = g.build1(kind, vec![x], Attrs::new()).expect("typed");
    g.add_output("y", r);
    g
}

fn conv_attrs() -> Attrs {
    Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(1))
        .with("pads", Attr::Ints(vec![1, 1, 1, 1]))
        .with("strides", Attr::Ints(vec![1, 1]))
}

/// The kernels taking most of a run: (symbol, median time) for the `n` slowest.
fn slowest(t: &Timed, n: usize) -> Vec<(String, Duration)> {
    let runs: Vec<Vec<Duration>> = (0..25).map(|_| t.exe.run_timed(&t.inputs).expect("runs").1).collect();
    let steps = &t.exe.program().steps;
    let mut per_step: Vec<(String, Duration)> = (0..steps.len())
        .map(|i| {
            let mut ts: Vec<Duration> = runs.iter().map(|r| r[i]).collect();
            ts.sort();
            (steps[i].symbol.clone(), ts[ts.len() / 2])
        })
        .collect();
    per_step.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
    per_step.truncate(n);
    per_step
}

/// `A [256, 256] x B [256, 256]`, B an input or a constant (which the rules pack).
fn matmul(constant: bool) -> Graph {
    let mut g = Graph::new("matmul");
    let a = g.add_input("a", f32s(&[256, 256]));
    let b = match constant {
        true => g.constant(fill(&f32s(&[256, 256]))),
        false => g.add_input("b", f32s(&[256, 256])),
    };
    let y = g.build1(OpKind::MatMul, vec![a, b], Attrs::new()).expect("typed");
    g.add_output("y", y);
    g
}

/// Attention over 4 heads of 128 queries and keys of depth 64 with a mask, as BERT's layers
/// run it (`[batch, sequence, heads, depth]`).
fn attention() -> Graph {
    let mut g = Graph::new("attention");
    let qkv: Vec<_> = ["q", "k", "v"]
        .iter()
        .map(|name| g.add_input(name, f32s(&[1, 128, 4, 64])))
        .collect();
    let mask = g.add_input("mask", f32s(&[1, 1, 128, 128]));
    let attrs = Attrs::new()
        .with("layout", Attr::Str("bshd".into()))
        .with("scale", Attr::Float(0.125))
        .with("zero_nan_rows", Attr::Int(0));
    let y = g
        .build1(OpKind::Attention, [qkv, vec![mask]].concat(), attrs)
        .expect("typed");
    g.add_output("y", y);
    g
}

/// `op` evaluated on constants (`pack`, `winograd_weights`).
fn evaluated(kind: OpKind, x: &Tensor, attrs: &Attrs) -> Tensor {
    let out = eval(kind, &[x], attrs).expect("evaluable").expect("typed");
    out.into_iter().next().expect("one result")
}

/// A channels-last 3x3 convolution with packed weights at `size` x `size`: `groups` 1 (the
/// implicit GEMM) or one per channel (depthwise).
fn packed_conv(size: usize, channels: usize, out: usize, groups: usize) -> Graph {
    let mut g = Graph::new("conv_nhwc_packed");
    let x = g.add_input("x", f32s(&[1, size, size, channels]));
    let depth = 9 * channels / groups;
    // the weights as the matrix [kh * kw * C / group, M], packed
    let matrix = fill(&f32s(&[depth, out]));
    let wp = g.constant(evaluated(
        OpKind::Pack,
        &matrix,
        &Attrs::new().with("panel", Attr::Int(16)),
    ));
    let attrs = conv_attrs()
        .with("group", Attr::Int(groups as i64))
        .with("kernel", Attr::Ints(vec![3, 3]))
        .with("out_channels", Attr::Int(out as i64));
    let y = g.build1(OpKind::ConvNhwcPacked, vec![x, wp], attrs).expect("typed");
    g.add_output("y", y);
    g
}

/// One Winograd transform of 64 channels at 56x56: the input's (`input`) or the output's.
fn winograd(input: bool) -> Graph {
    let mut g = Graph::new("winograd");
    let y = match input {
        true => {
            let x = g.add_input("x", f32s(&[1, 56, 56, 64]));
            let pads = Attrs::new().with("pads", Attr::Ints(vec![1, 1, 1, 1]));
            g.build1(OpKind::WinogradInput, vec![x], pads)
        }
        false => {
            let m = g.add_input("m", f32s(&[36, 196, 64]));
            let shape = Attrs::new().with("shape", Attr::Ints(vec![1, 56, 56, 64]));
            g.build1(OpKind::WinogradOutput, vec![m], shape)
        }
    };
    g.add_output("y", y.expect("typed"));
    g
}

/// The direct (scalar) convolution: weights an input, so nothing packs them.
fn direct_conv() -> Graph {
    binary(
        OpKind::Conv,
        f32s(&[1, 16, 32, 32]),
        f32s(&[16, 16, 3, 3]),
        conv_attrs(),
    )
}

/// The slowest kernel of a run (medians): its time in ns, and its FLOPs, bytes and weight
/// bytes as the cost model counts them.
fn slowest_kernel(t: &Timed, budget: Duration) -> (f64, f64, f64, f64) {
    let runs = (budget.as_millis() as usize / 20).clamp(10, 200);
    let all: Vec<Vec<Duration>> = (0..runs).map(|_| t.exe.run_timed(&t.inputs).expect("runs").1).collect();
    let kernels: Vec<&mxc_dialects::Op> = t.graph.ops.iter().filter(|op| op.kind != OpKind::Constant).collect();
    let medians: Vec<f64> = (0..kernels.len())
        .map(|i| {
            let mut ts: Vec<Duration> = all.iter().map(|r| r[i]).collect();
            ts.sort();
            ns(ts[ts.len() / 2])
        })
        .collect();
    let (i, time) = medians
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a kernel");
    let (flops, bytes, weights) = with_site(&t.graph, kernels[i], |s| (flops(s), bytes_moved(s), weight_bytes(s)));
    (time, flops, bytes, weights)
}

fn main() {
    let budget = Duration::from_millis(1500);
    let now = LinearCost::cpu();
    println!("cpu cost model calibration (medians; current model: {now:?})\n");

    // a kernel's launch: the call and its result buffer (allocated and zeroed per run)
    let chain = 400;
    let (one, many) = (prepare(&launches(1), false), prepare(&launches(chain + 1), false));
    let launch = (ns(median_run(&many, budget).0) - ns(median_run(&one, budget).0)) / chain as f64;
    println!("launch     {chain} one-element kernels: {launch:.1} ns per kernel");

    // bytes between kernels: an add whose operands and result (3 MB) stay in the caches, as
    // a kernel's do between the one writing them and the one reading them
    let n = 1 << 18;
    let add = prepare(&binary(OpKind::Add, f32s(&[n]), f32s(&[n]), Attrs::new()), false);
    let bytes = 3.0 * 4.0 * n as f64;
    let per_byte = ns(median_run(&add, budget).1) / bytes;
    println!(
        "bytes      add of 2 x {n} f32: {:.2} GB/s, {per_byte:.4} ns per byte",
        1.0 / per_byte
    );
    // bytes of weights: a row times 64 MB of packed weights (more than the caches hold), which
    // each run reads from memory
    let (k, m) = (4096, 4096);
    let mut row = Graph::new("weights");
    let a = row.add_input("a", f32s(&[1, k]));
    let w = row.constant(fill(&f32s(&[k, m])));
    let y = row.build1(OpKind::MatMul, vec![a, w], Attrs::new()).expect("typed");
    row.add_output("y", y);
    let (time, _, _, weights) = slowest_kernel(&prepare(&row, false), budget);
    let per_weight_byte = time / weights;
    println!(
        "weights    a row times {} MB of packed weights: {:.2} GB/s, {per_weight_byte:.4} ns per byte",
        weights / 1e6,
        1.0 / per_weight_byte
    );

    // each kernel form's cost per FLOP, its bytes at the current rates taken out
    let forms = [
        ("matmul", "matmul 256x256x256, B computed", matmul(false)),
        ("packed", "matmul 256x256x256, B constant (packed)", matmul(true)),
        (
            "packed",
            "conv_nhwc_packed 64->64 3x3 at 28x28",
            packed_conv(28, 64, 64, 1),
        ),
        ("conv", "conv 16->16 3x3 at 32x32, weights computed", direct_conv()),
        (
            "depthwise",
            "conv_nhwc_packed depthwise 96 3x3 at 56x56",
            packed_conv(56, 96, 96, 96),
        ),
        ("winograd", "winograd_input of 64 channels at 56x56", winograd(true)),
        ("winograd", "winograd_output of 64 channels at 56x56", winograd(false)),
        ("attention", "attention 4 heads x 128 x 128, depth 64", attention()),
        ("other", "exp of 2^20 f32", unary(OpKind::Exp, f32s(&[1 << 20]))),
    ];
    let mut fitted_flop = HashMap::<&str, Vec<f64>>::new();
    for (form, name, g) in forms {
        let t = prepare(&g, false);
        let (time, flops, bytes, weights) = slowest_kernel(&t, budget);
        let f = (time - per_byte * (bytes - weights) - per_weight_byte * weights) / flops;
        println!(
            "flops      {form:<9} {name}: {:.2} GFLOP/s, {f:.4} ns per flop",
            flops / time
        );
        fitted_flop.entry(form).or_default().push(f);
    }
    let mean = |form: &str| {
        let v = &fitted_flop[form];
        v.iter().sum::<f64>() / v.len() as f64
    };
    let per_flop = FlopCost {
        matmul: mean("matmul"),
        conv: mean("conv"),
        packed: mean("packed"),
        depthwise: mean("depthwise"),
        winograd: mean("winograd"),
        attention: mean("attention"),
        other: mean("other"),
        // not fitted here: the half-precision factor measured with `mxc perf` (cost.rs)
        ..LinearCost::cpu().per_flop
    };
    let fitted = LinearCost {
        launch,
        per_byte,
        per_weight_byte,
        per_flop,
        ..LinearCost::cpu()
    };
    println!("\nfitted     {fitted:?}\n");

    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut models: Vec<PathBuf> = ["convnet", "encoder"]
        .iter()
        .map(|m| repo.join(".cache/models").join(m).join("model.onnx"))
        .collect();
    // more models (static shapes), e.g. the shared bench models: MXC_BENCH_MODELS=a.onnx:b.onnx
    if let Some(more) = std::env::var_os("MXC_BENCH_MODELS") {
        models.extend(std::env::split_paths(&more));
    }
    for path in models {
        let model = path
            .parent()
            .and_then(|p| p.file_name())
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let Ok(g) = import_file(&path, &ImportOptions::default()) else {
            println!("{model}: cannot import {} (run scripts/setup.sh)", path.display());
            continue;
        };
        let (plain, fused) = (prepare(&g, false), prepare(&g, true));
        let (tp, tf) = (median_run(&plain, budget), median_run(&fused, budget));
        let predicted = |m: &LinearCost| graph_cost(&fused.graph, m) / graph_cost(&plain.graph, m);
        println!(
            "{model:<8} unfused {:.3} ms ({:.3} in kernels), fused {:.3} ms ({:.3}): measured {:.3}, predicted {:.3} (current model), {:.3} (fitted)",
            ns(tp.0) / 1e6,
            ns(tp.1) / 1e6,
            ns(tf.0) / 1e6,
            ns(tf.1) / 1e6,
            ns(tf.0) / ns(tp.0),
            predicted(&now),
            predicted(&fitted)
        );
        if std::env::var_os("MXC_BENCH_KERNELS").is_some() {
            for (label, t) in [("unfused", &plain), ("fused", &fused)] {
                let list: Vec<String> = slowest(t, 8)
                    .iter()
                    .map(|(s, d)| format!("{s} {:.1} us", ns(*d) / 1e3))
                    .collect();
                println!("  {label:<8} slowest: {}", list.join(", "));
            }
        }
    }
}
