//! The cpu target's matrix product against the machine's peak and against onnxruntime (a
//! benchmark, not a test: `cargo bench --bench gemm`). It measures the machine's fused
//! multiply-add peak with a small probe (independent FMA chains in registers, one core), then
//! for square sizes and the shapes the benchmark models use, compiles `A [M, K] x B [K, N]`
//! with B a constant (so the packing rules put it in the microkernel's panels at compile time),
//! times the product's kernel on 1 and 2 threads, and times onnxruntime on a one-node MatMul
//! model of the same shape (`.cache/venv`, made by `scripts/setup.sh`), the three in alternating
//! rounds. Figures are the medians of the rounds' medians.
//!
//! The same products on f16 and on bf16 operands (A an input, B a constant, the result in the
//! operands' type) are timed on one thread beside them, whichever form the cost model picks:
//! f32 panels with the operands widened (and the result rounded) by the kernels around the
//! product, or for bf16 on a machine with AMX tiles, bf16 pairs on the tiles
//! (docs/quantisation.md).
//!
//! Then the integer products (u8 `A` input times a constant of i8 values, summed in i32: the
//! form `MatMulInteger` and quantised models' products take, `integer.rules`) on one thread,
//! against the machine's VNNI peak (a probe of independent `vpdpbusd` chains, four u8 x i8
//! multiply-adds per 32-bit lane) and onnxruntime's `MatMulInteger` of the same shape.
//!
//! `MXC_GEMM_SHAPES=MxKxN,...` replaces the shapes.

use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::{Executable, Parallelism};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Square sizes, BERT-mini's products (sequence 128, hidden 256, feed-forward 1024) and a
/// ResNet 1x1 convolution as a product (56 x 56 pixels, 64 to 256 channels).
const SHAPES: &[(usize, usize, usize)] = &[
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (128, 256, 256),
    (128, 256, 1024),
    (128, 1024, 256),
    (3136, 64, 256),
];

fn main() {
    let peak = fma_peak();
    match peak {
        Some(p) => println!("FMA peak, one core: {p:.1} GFLOP/s (f32, {} lanes)\n", lanes()),
        None => println!("FMA peak: no probe for this CPU (it needs x86-64 with FMA)\n"),
    }
    let shapes = std::env::var("MXC_GEMM_SHAPES").map_or_else(|_| SHAPES.to_vec(), |s| parse_shapes(&s));
    println!(
        "{:>16}  {:>9} {:>7}  {:>9} {:>7}  {:>9} {:>9}  {:>9} {:>9}",
        "M x K x N", "mxc 1t", "% peak", "mxc 2t", "% peak", "ort 1t", "mxc/ort", "f16 1t", "bf16 1t"
    );
    for &(m, k, n) in &shapes {
        let flops = 2.0 * (m * k * n) as f64;
        // rounds alternate the three, so that a slow spell of a shared machine falls on all
        let mut product = Product::compile(m, k, n, DType::F32);
        let mut halves = [DType::F16, DType::BF16].map(|d| Product::compile(m, k, n, d));
        let (mut ones, mut twos, mut orts) = (Vec::new(), Vec::new(), Vec::new());
        let mut half_times = [Vec::new(), Vec::new()];
        for _ in 0..ROUNDS {
            ones.push(product.median_time(1));
            twos.push(product.median_time(2));
            orts.extend(onnxruntime_time(m, k, n, false));
            for (times, half) in half_times.iter_mut().zip(&mut halves) {
                times.push(half.median_time(1));
            }
        }
        let one = gflops(flops, median(ones));
        let two = gflops(flops, median(twos));
        let [f16, bf16] = half_times.map(|t| gflops(flops, median(t)));
        let ort = (!orts.is_empty()).then(|| median(orts));
        let of_peak = |g: f64, cores: f64| peak.map_or("-".to_string(), |p| format!("{:.0}%", 100.0 * g / (p * cores)));
        let ort_text = ort.map_or("-".to_string(), |t| format!("{:.1}", gflops(flops, t)));
        let ratio = ort.map_or("-".to_string(), |t| format!("{:.2}", gflops(flops, t) / one));
        println!(
            "{:>16}  {one:>9.1} {:>7}  {two:>9.1} {:>7}  {ort_text:>9} {ratio:>9}  {f16:>9.1} {bf16:>9.1}",
            format!("{m}x{k}x{n}"),
            of_peak(one, 1.0),
            of_peak(two, 2.0),
        );
    }
    println!("\nGFLOP/s (2 M K N / time, medians); % peak of one core (2 threads: of two cores); mxc/ort: time ratio");
    println!(
        "f16, bf16: the product on half operands, the casts around it included; bf16 on bf16 pairs (AMX tiles): {}",
        mxc_kernels::amx::tiles_usable()
    );
    integer_table(&shapes);
}

/// The integer products' table: GOP/s on one thread against the VNNI peak and onnxruntime.
fn integer_table(shapes: &[(usize, usize, usize)]) {
    let peak = vnni_peak();
    match peak {
        Some(p) => println!(
            "\nVNNI peak, one core: {p:.1} GOP/s (u8 x i8, {} lanes of i32)",
            lanes()
        ),
        None => println!("\nVNNI peak: no probe for this CPU (it needs AVX-512 VNNI or AVX-VNNI)"),
    }
    println!(
        "{:>16}  {:>9} {:>7}  {:>9} {:>9}",
        "M x K x N", "mxc 1t", "% peak", "ort 1t", "mxc/ort"
    );
    for &(m, k, n) in shapes {
        let ops = 2.0 * (m * k * n) as f64;
        let mut product = Product::integer(m, k, n);
        let (mut ones, mut orts) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            ones.push(product.median_time(1));
            orts.extend(onnxruntime_time(m, k, n, true));
        }
        let one = gflops(ops, median(ones));
        let ort = (!orts.is_empty()).then(|| median(orts));
        let of_peak = peak.map_or("-".to_string(), |p| format!("{:.0}%", 100.0 * one / p));
        let ort_text = ort.map_or("-".to_string(), |t| format!("{:.1}", gflops(ops, t)));
        let ratio = ort.map_or("-".to_string(), |t| format!("{:.2}", gflops(ops, t) / one));
        println!(
            "{:>16}  {one:>9.1} {of_peak:>7}  {ort_text:>9} {ratio:>9}",
            format!("{m}x{k}x{n}")
        );
    }
    println!("GOP/s (2 M K N / time, medians; a multiply-add counts 2); % peak of one core");
}

fn gflops(flops: f64, t: Duration) -> f64 {
    flops / t.as_secs_f64() / 1e9
}

fn parse_shapes(text: &str) -> Vec<(usize, usize, usize)> {
    text.split(',')
        .map(|s| {
            let d: Vec<usize> = s.split('x').map(|d| d.trim().parse().expect("MxKxN")).collect();
            (d[0], d[1], d[2])
        })
        .collect()
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7919 + seed) % 2003) as f64 / 1001.5 - 1.0)
        .collect()
}

/// Rounds of each measurement; the figures are the medians of the rounds' medians.
const ROUNDS: usize = 5;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The product's kernels, `A [M, K]` input times a constant `B [K, N]`, both of `dtype`,
/// compiled and loaded.
struct Product {
    exe: Executable,
    inputs: HashMap<String, Tensor>,
}

impl Product {
    fn compile(m: usize, k: usize, n: usize, dtype: DType) -> Product {
        let mut g = Graph::new("gemm");
        let a = g.add_input("a", TensorType::new(dtype, vec![m, k]));
        let b = g.constant(Tensor::from_f64s(DType::F32, vec![k, n], &values(k * n, 1)).cast(dtype));
        let y = g
            .build1(OpKind::MatMul, vec![a, b], Default::default())
            .expect("a valid product");
        g.add_output("y", y);
        let a = Tensor::from_f64s(DType::F32, vec![m, k], &values(m * k, 2)).cast(dtype);
        Product::load(&g, a, OpKind::MatMulPacked)
    }

    /// `(A - 3) x B` summed in i32, `A [M, K]` u8 and `B [K, N]` i8 values held as i32 (how
    /// `MatMulInteger` imports), which the cpu target makes `matmul_integer_packed`.
    fn integer(m: usize, k: usize, n: usize) -> Product {
        let mut g = Graph::new("gemm_integer");
        let a = g.add_input("a", TensorType::new(DType::U8, vec![m, k]));
        let to_i32 = Attrs::new().with("to", Attr::DType(DType::I32));
        let wide = g.build1(OpKind::Cast, vec![a], to_i32).expect("a cast");
        let zero = g.constant(Tensor::from_i64s(DType::I32, vec![], &[3]));
        let centred = g
            .build1(OpKind::Sub, vec![wide, zero], Default::default())
            .expect("a sub");
        let b: Vec<i64> = values(k * n, 1).iter().map(|v| (v * 127.0) as i64).collect();
        let b = g.constant(Tensor::from_i64s(DType::I32, vec![k, n], &b));
        let y = g
            .build1(OpKind::MatMul, vec![centred, b], Default::default())
            .expect("a valid product");
        g.add_output("y", y);
        let a: Vec<i64> = values(m * k, 2).iter().map(|v| ((v + 1.0) * 127.0) as i64).collect();
        Product::load(
            &g,
            Tensor::from_i64s(DType::U8, vec![m, k], &a),
            OpKind::MatMulIntegerPacked,
        )
    }

    /// `g` compiled for the cpu target, which must have made a kernel of `kind`, and loaded
    /// with `a` for its input.
    fn load(g: &Graph, a: Tensor, kind: OpKind) -> Product {
        let compiled = compile(g, Target::Cpu, &CompileOptions::default()).expect("compiles");
        let mut kinds = compiled.graph.ops.iter().flat_map(|op| {
            let body = op.body.iter().flat_map(|b| b.ops.iter().map(|o| o.kind));
            std::iter::once(op.kind).chain(body)
        });
        assert!(kinds.any(|k| k == kind), "no {kind} kernel for {}", g.name);
        let exe = Executable::load(compiled.program, &compiled.library).expect("loads");
        let inputs = HashMap::from([("a".to_string(), a)]);
        Product { exe, inputs }
    }

    /// The median time of the kernel on `threads` threads over about 0.2 s of runs.
    fn median_time(&mut self, threads: usize) -> Duration {
        let parallelism = Parallelism {
            threads,
            ..Parallelism::serial()
        };
        self.exe.set_parallelism(parallelism).expect("threads start");
        let once = Instant::now();
        self.exe.run(&self.inputs).expect("runs");
        let runs = (0.2 / once.elapsed().as_secs_f64().max(1e-6)).clamp(5.0, 200.0) as usize;
        let times = (0..runs)
            .map(|_| self.exe.run_timed(&self.inputs).expect("runs").1.iter().sum())
            .collect();
        median(times)
    }
}

/// onnxruntime's median time on a one-node MatMul model of the shape (`MatMulInteger` of u8 by
/// i8 for `integer`), one thread, or `None` without the test venv.
fn onnxruntime_time(m: usize, k: usize, n: usize, integer: bool) -> Option<Duration> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/venv/bin/python");
    if !python.exists() {
        return None;
    }
    let script = r#"
import sys, time, numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
m, k, n, integer = map(int, sys.argv[1:5])
rng = np.random.default_rng(0)
if integer:
    b = numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "b")
    node, a_type, y_type = helper.make_node("MatMulInteger", ["a", "b"], ["y"]), TensorProto.UINT8, TensorProto.INT32
else:
    b = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "b")
    node, a_type, y_type = helper.make_node("MatMul", ["a", "b"], ["y"]), TensorProto.FLOAT, TensorProto.FLOAT
graph = helper.make_graph([node], "gemm",
    [helper.make_tensor_value_info("a", a_type, [m, k])],
    [helper.make_tensor_value_info("y", y_type, [m, n])], [b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
a = {"a": rng.integers(0, 256, (m, k)).astype(np.uint8) if integer else rng.standard_normal((m, k)).astype(np.float32)}
session.run(None, a)
once = time.perf_counter(); session.run(None, a); once = time.perf_counter() - once
times = []
for _ in range(int(min(200, max(5, 0.2 / max(once, 1e-6))))):
    start = time.perf_counter(); session.run(None, a); times.append(time.perf_counter() - start)
print(sorted(times)[len(times) // 2])
"#;
    let out = Command::new(python)
        .args([
            "-c",
            script,
            &m.to_string(),
            &k.to_string(),
            &n.to_string(),
            &u8::from(integer).to_string(),
        ])
        .output()
        .ok()?;
    let seconds: f64 = String::from_utf8(out.stdout).ok()?.trim().parse().ok()?;
    Some(Duration::from_secs_f64(seconds))
}

/// f32 lanes of the vectors the probe uses.
fn lanes() -> usize {
    if std::arch::is_x86_feature_detected!("avx512f") {
        16
    } else {
        8
    }
}

/// The machine's f32 FMA peak on one core in GFLOP/s: the best of several timings of 12
/// independent FMA chains in vector registers (enough to cover the FMA latency on two pipes).
fn fma_peak() -> Option<f64> {
    if !std::arch::is_x86_feature_detected!("fma") {
        return None;
    }
    // the CPU has FMA, and AVX-512 where the wide probe runs
    let probe = if lanes() == 16 { fma_chains_512 } else { fma_chains_256 };
    Some(peak(probe, 2.0 * lanes() as f64))
}

/// The machine's u8 x i8 peak on one core in GOP/s (a multiply-add counts 2): the best of
/// several timings of 12 independent `vpdpbusd` chains, four multiply-adds per 32-bit lane.
fn vnni_peak() -> Option<f64> {
    let wide = std::arch::is_x86_feature_detected!("avx512vnni") && lanes() == 16;
    if !wide && !std::arch::is_x86_feature_detected!("avxvnni") {
        return None;
    }
    // the CPU has the VNNI form the probe uses (checked above)
    let (probe, lanes): (unsafe fn(u64), f64) = match wide {
        true => (vnni_chains_512, 16.0),
        false => (vnni_chains_256, 8.0),
    };
    Some(peak(probe, 2.0 * 4.0 * lanes))
}

/// Operations per second (in billions) of `probe`, whose each iteration is 12 instructions of
/// `per_instruction` operations: the best of 7 timings. `probe` must be one the CPU runs.
fn peak(probe: unsafe fn(u64), per_instruction: f64) -> f64 {
    let iterations: u64 = 50_000_000;
    let best = (0..7)
        .map(|_| {
            let start = Instant::now();
            // SAFETY: the callers pick a probe whose features the CPU has; a probe only reads
            // and writes registers it declares clobbered.
            unsafe { probe(iterations) };
            start.elapsed()
        })
        .min()
        .expect("seven timings");
    iterations as f64 * 12.0 * per_instruction / best.as_secs_f64() / 1e9
}

macro_rules! fma_probe {
    ($name:ident, $features:literal, $r:literal) => {
        fma_probe!($name, $features, $r, "vfmadd231ps ");
    };
    ($name:ident, $features:literal, $r:literal, $op:literal) => {
        /// `iterations` rounds of 12 independent vector multiply-adds (`$op`).
        #[target_feature(enable = $features)]
        unsafe fn $name(iterations: u64) {
            std::arch::asm!(
                concat!("vxorps ", $r, "14, ", $r, "14, ", $r, "14"),
                concat!("vxorps ", $r, "15, ", $r, "15, ", $r, "15"),
                "2:",
                concat!($op, $r, "0, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "1, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "2, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "3, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "4, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "5, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "6, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "7, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "8, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "9, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "10, ", $r, "14, ", $r, "15"),
                concat!($op, $r, "11, ", $r, "14, ", $r, "15"),
                "dec {n}",
                "jnz 2b",
                n = inout(reg) iterations => _,
                out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                out("xmm14") _, out("xmm15") _,
                options(nostack, nomem),
            );
        }
    };
}

fma_probe!(fma_chains_256, "avx,fma", "ymm");
fma_probe!(fma_chains_512, "avx512f", "zmm");
fma_probe!(vnni_chains_512, "avx512f,avx512vnni", "zmm", "vpdpbusd ");
fma_probe!(vnni_chains_256, "avx,avxvnni", "ymm", "{{vex}} vpdpbusd ");
