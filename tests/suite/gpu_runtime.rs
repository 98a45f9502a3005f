//! The GPU runtime without a GPU: `gpu` programs loaded and run through a vendor's API
//! (`mxc_kernels::device`, `Executable::load_gpu`) as implemented by a stand-in runtime
//! compiled here with `cc`: the CUDA driver (`tests/fixtures/fake_cuda.c`) here, HIP
//! (`fake_hip.c`) in `gpu_amd.rs`, both on `fake_gpu.c`, which keeps "device" memory in host
//! memory and runs each launch's threads with the host build of the same kernels, after
//! checking the launch against the kernel's code (block size, parameter count). The outputs
//! must be those of the same kernels run by the host runtime, bit for bit, and match the
//! models' reference outputs; every allocation is freed when the program is dropped. Library
//! calls run through a stand-in BLASLt (`fake_blaslt.c`, cuBLASLt's and hipBLASLt's names) and
//! MIOpen (`fake_miopen.c`) where `$MXC_BLASLT` and `$MXC_MIOPEN` name them, and as their
//! kernels where they name no library. The checks are written once here, for either vendor's
//! stand-in (`StandIn`).

use crate::common::{cache_dir, data_files, mismatch, model_io_names, read_pb, repo};
use mxc_codegen::{CompileOptions, Compiled, Target};
use mxc_dialects::mx::call::{Callee, LibraryCall};
use mxc_dialects::program::GpuArch;
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::device::{Gpu, Vendor};
use mxc_kernels::{CallRoute, Executable};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_long, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// `sources` (stand-in libraries' C files) compiled into `dir` as `name`, linked with `libs`.
pub(crate) fn build(dir: &Path, sources: &[&str], name: &str, libs: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .args(sources.iter().map(|s| repo().join("tests/fixtures").join(s)))
        .args(libs)
        .output()
        .expect("cc (a C compiler) is needed to build the stand-in libraries");
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    out
}

/// A counter a stand-in library keeps.
pub(crate) fn counter(library: &libloading::Library, name: &str) -> c_long {
    // SAFETY: the stand-ins' counters take nothing and return a long.
    unsafe {
        library
            .get::<unsafe extern "C" fn() -> c_long>(name.as_bytes())
            .unwrap()()
    }
}

/// `$MXC_BLASLT` and `$MXC_MIOPEN` set to `blaslt` and `miopen` for as long as the guard is
/// held: loading a program with library calls opens the libraries they name, so the tests that
/// load one hold this.
pub(crate) fn libraries_named(blaslt: &Path, miopen: &Path) -> MutexGuard<'static, ()> {
    static LIBRARIES: Mutex<()> = Mutex::new(());
    let guard = LIBRARIES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    std::env::set_var("MXC_BLASLT", blaslt);
    std::env::set_var("MXC_MIOPEN", miopen);
    guard
}

/// Neither library call's library: `libraries_named` with files that do not exist in `dir`.
fn no_libraries(dir: &Path) -> MutexGuard<'static, ()> {
    libraries_named(&dir.join("no-blaslt.so"), &dir.join("no-miopen.so"))
}

/// A stand-in GPU runtime, compiled into a folder of its own (where the tests put the other
/// stand-ins too) and opened here for its counters and to be told where the host kernels are.
pub(crate) struct StandIn {
    pub vendor: Vendor,
    /// What the device says it is, which programs are compiled for.
    pub arch: GpuArch,
    pub name: &'static str,
    pub path: PathBuf,
    pub library: libloading::Library,
    pub dir: tempfile::TempDir,
    /// Host builds written so far (each is a file of its own: a loaded one stays loaded).
    host_builds: AtomicUsize,
}

impl StandIn {
    /// The stand-in CUDA driver: device "mxc fake GPU 0", an sm_90.
    pub fn cuda() -> StandIn {
        StandIn::build(
            Vendor::Nvidia,
            "fake_cuda.c",
            "libcuda-fake.so",
            "sm_90",
            "mxc fake GPU 0",
        )
    }

    /// The stand-in HIP: device "mxc fake AMD GPU 0", a gfx90a.
    pub fn hip() -> StandIn {
        let name = "mxc fake AMD GPU 0";
        StandIn::build(Vendor::Amd, "fake_hip.c", "libamdhip64-fake.so", "gfx90a", name)
    }

    fn build(vendor: Vendor, source: &str, file: &str, arch: &str, name: &'static str) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let path = build(dir.path(), &[source, "fake_gpu.c"], file, &["-ldl"]);
        // SAFETY: the stand-ins have no initialisers.
        let library = unsafe { libloading::Library::new(&path) }.unwrap();
        StandIn {
            vendor,
            arch: arch.parse().unwrap(),
            name,
            path,
            library,
            dir,
            host_builds: AtomicUsize::new(0),
        }
    }

    pub fn counter(&self, name: &str) -> c_long {
        counter(&self.library, name)
    }

    /// The device, opened as mxc opens a runtime, of the stand-in's vendor.
    pub fn open(&self) -> Gpu {
        Gpu::open_library(self.path.to_str().unwrap(), self.vendor).unwrap()
    }

    /// `compiled`'s program loaded on the device: an error where it does not load.
    pub fn load(&self, compiled: &Compiled) -> Result<Executable, String> {
        let memory = compiled.program.memory_plan();
        Executable::load_gpu(compiled.program.clone(), memory, &compiled.code_objects, self.open())
            .map_err(|e| e.to_string())
    }

    /// `graph` compiled for the stand-in's device and for the host, whose kernels (`ref`
    /// rewrites nothing and lowers as `gpu` does) the stand-in is told to run; the two plans
    /// make the same calls on the same buffers.
    pub fn compile(&self, graph: &Graph) -> (Compiled, Compiled) {
        self.compile_for(graph, std::slice::from_ref(&self.arch))
    }

    /// `compile`, with code objects for `archs`.
    pub fn compile_for(&self, graph: &Graph, archs: &[GpuArch]) -> (Compiled, Compiled) {
        let options = CompileOptions {
            gpu_archs: archs.to_vec(),
            ..CompileOptions::default()
        };
        let gpu = mxc_codegen::compile(graph, Target::Gpu, &options).unwrap();
        // the host build runs the GPU's block kernels in their host form, with the gpu plan's ranges
        let emulated = CompileOptions {
            emulate_gpu_blocks: true,
            ..CompileOptions::default()
        };
        let host = mxc_codegen::compile(&gpu.graph, Target::Ref, &emulated).unwrap();
        assert_eq!(gpu.program.steps.len(), host.program.steps.len());
        for (g, h) in gpu.program.steps.iter().zip(&host.program.steps) {
            assert_eq!(g.symbol.strip_suffix("_kernel"), h.symbol.strip_suffix("_entry"));
            assert_eq!(
                (&g.args, g.range, g.splittable, g.per_block),
                (&h.args, h.range, h.splittable, h.per_block)
            );
        }
        let n = self.host_builds.fetch_add(1, Ordering::Relaxed);
        let host_kernels = self.dir.path().join(format!("host{n}.so"));
        std::fs::write(&host_kernels, &host.library).unwrap();
        let path = CString::new(host_kernels.to_str().unwrap()).unwrap();
        // SAFETY: the stand-in's function takes a C string and returns an int.
        let status = unsafe {
            self.library
                .get::<unsafe extern "C" fn(*const c_char) -> c_int>(b"fake_gpu_use_host_kernels")
                .unwrap()(path.as_ptr())
        };
        assert_eq!(status, 0, "the host kernels load");
        (gpu, host)
    }
}

/// The inputs and reference outputs of `model`'s first data set.
fn data_set(model: &Path) -> (HashMap<String, Tensor>, Vec<Tensor>) {
    let set = model.parent().unwrap().join("test_data_set_0");
    let (names, _) = model_io_names(model).unwrap();
    let inputs = names
        .into_iter()
        .zip(data_files(&set, "input_"))
        .map(|(name, f)| (name, read_pb(&f).unwrap().1))
        .collect();
    let outputs = data_files(&set, "output_")
        .iter()
        .map(|f| read_pb(f).unwrap().1)
        .collect();
    (inputs, outputs)
}

/// The repo's models (a conv net, an encoder, a loop and a branch taken at run time) compiled
/// for the stand-in's device and run through it give what their kernels give on the host, bit
/// for bit, and their reference outputs; kernels whose threads share a block run a block at a
/// time; everything is freed with the program.
pub(crate) fn models_run_as_their_kernels_on_the_host(s: &StandIn) {
    // no libraries: library calls run as their kernels, bit for bit the host's
    let _libraries = no_libraries(s.dir.path());
    let models = [
        "convnet",
        "encoder",
        "control_flow/loop_runtime",
        "control_flow/if_runtime_then",
    ];
    for name in models {
        let model = cache_dir("models").join(name).join("model.onnx");
        let graph = mxc_onnx::import_file(&model, &Default::default()).unwrap();
        let (gpu, host) = s.compile(&graph);
        // the encoder's layer norms and softmax run a block per row, its products and the
        // convnet's convolutions a block per tile
        let blocks = gpu.program.steps.iter().filter(|s| s.per_block).count();
        let expected = matches!(name, "encoder" | "convnet");
        assert_eq!(blocks > 0, expected, "{name}: {blocks} block kernels");

        let exe = s.load(&gpu).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            exe.device().map(|(g, arch)| (g.name.as_str(), arch)),
            Some((s.name, &s.arch))
        );
        assert!(
            exe.memory_use().weights_copied >= exe.memory_use().weights,
            "{name}: weights uploaded"
        );
        let on_host = Executable::load(host.program, &host.library).unwrap();

        let (inputs, expected) = data_set(&model);
        let (launches, block_launches) = (s.counter("fake_gpu_launches"), s.counter("fake_gpu_block_launches"));
        let on_gpu = exe.run(&inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            s.counter("fake_gpu_launches") > launches,
            "{name}: kernels were launched"
        );
        assert_eq!(
            s.counter("fake_gpu_block_launches") - block_launches,
            blocks as c_long,
            "{name}: the stand-in ran each block kernel, and no other, a block at a time"
        );
        assert_eq!(on_gpu, on_host.run(&inputs).unwrap(), "{name}: the same as on the host");
        for ((out, actual), expected) in on_gpu.iter().zip(&expected) {
            if let Some(m) = mismatch(actual, expected, 1e-3, 1e-4) {
                panic!("{name}: output {out}: {m}");
            }
        }
        // timed, each launch waited for; and again, with the memory the first run left
        let (again, times) = exe.run_timed(&inputs).unwrap();
        assert_eq!(again, on_gpu, "{name}: a second run");
        assert_eq!(times.len(), exe.program().steps.len());
        drop(exe);
        assert_eq!(s.counter("fake_gpu_live_allocations"), 0, "{name}: everything freed");
    }
}

/// A program whose only code is for `arch`, which the stand-in's device is not, is refused
/// naming the device, the program's code and the architecture to compile for.
pub(crate) fn a_program_for_another_gpu_is_refused(s: &StandIn, arch: &str) {
    let model = cache_dir("models").join("convnet").join("model.onnx");
    let graph = mxc_onnx::import_file(&model, &Default::default()).unwrap();
    let options = CompileOptions {
        gpu_archs: vec![arch.parse().unwrap()],
        ..CompileOptions::default()
    };
    let gpu = mxc_codegen::compile(&graph, Target::Gpu, &options).unwrap();
    let err = s.load(&gpu).err().expect("refused");
    let device = format!("{} ({}, through {})", s.name, s.arch, s.path.display());
    let code = format!(
        "runs none of the program's code, which is for {arch} (compile it with --gpu-arch {})",
        s.arch
    );
    assert!(err.contains(&format!("{device} {code}")), "{err}");
}

#[test]
fn gpu_programs_run_through_the_cuda_driver_api_as_their_kernels_run_on_the_host() {
    models_run_as_their_kernels_on_the_host(&StandIn::cuda());
}

#[test]
fn a_gpu_that_runs_none_of_the_code_is_refused_naming_it() {
    a_program_for_another_gpu_is_refused(&StandIn::cuda(), "gfx90a");
}

/// f32 values of `shape`, different for each `seed`: multiples of 1/16 from -0.875 to 1. Each
/// product of two is a multiple of 1/256 at most 1 in magnitude, so a sum of up to 2^15 of them
/// needs at most 23 bits: f32 holds every product and partial sum exactly, in any order, and
/// the libraries' sums (in double precision, in the stand-ins, rounded once) and the kernels'
/// (in f32, in another order) are the same numbers.
fn values(shape: &[usize], seed: usize) -> Tensor {
    let n = shape.iter().product::<usize>();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 29 + seed * 13) % 31) as f32 / 16.0 - 0.875)
        .collect();
    Tensor::from_f32s(shape.to_vec(), &v)
}

/// Products of every form a `blaslt.matmul` call takes, each of about 100 MFLOP (where the gpu
/// cost model prefers the call to the generated tiled GEMM): a batched product with a shared
/// B, a bias and relu; a gemm with B transposed, alpha and a row of C, then relu; a batch of
/// products each with its own B. And convolutions of 150 to 170 MFLOP (where it prefers
/// MIOpen's call on AMD GPUs): 3x3 padded with a bias (a relu after it would be fused into the
/// generated kernel rather than run after the call, which does not take one); grouped,
/// strided, dilated and padded differently along each axis, without a bias.
fn library_calls() -> Graph {
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape.to_vec());
    let mut g = Graph::new("library calls");
    let x = g.add_input("x", f32s(&[2, 256, 256]));
    let w1 = g.constant(values(&[256, 384], 1));
    let b1 = g.constant(values(&[384], 2));
    let h = g.build1(OpKind::MatMul, vec![x, w1], Attrs::new()).unwrap();
    let h = g.build1(OpKind::Add, vec![h, b1], Attrs::new()).unwrap();
    let h = g.build1(OpKind::Relu, vec![h], Attrs::new()).unwrap();
    g.add_output("h", h);
    let u = g.add_input("u", f32s(&[384, 256]));
    let w2 = g.constant(values(&[512, 256], 3));
    let c2 = g.constant(values(&[512], 4));
    let gemm = Attrs::new()
        .with("alpha", Attr::Float(0.5))
        .with("beta", Attr::Float(1.0))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(1));
    let y = g.build1(OpKind::Gemm, vec![u, w2, c2], gemm).unwrap();
    let y = g.build1(OpKind::Relu, vec![y], Attrs::new()).unwrap();
    g.add_output("y", y);
    let p = g.add_input("p", f32s(&[3, 256, 256]));
    let q = g.add_input("q", f32s(&[3, 256, 256]));
    let r = g.build1(OpKind::MatMul, vec![p, q], Attrs::new()).unwrap();
    g.add_output("r", r);
    let conv = |pads: [i64; 4], strides: [i64; 2], dilations: [i64; 2], group: i64| {
        Attrs::new()
            .with("pads", Attr::Ints(pads.to_vec()))
            .with("strides", Attr::Ints(strides.to_vec()))
            .with("dilations", Attr::Ints(dilations.to_vec()))
            .with("group", Attr::Int(group))
    };
    let image = g.add_input("image", f32s(&[1, 32, 64, 64]));
    let w3 = g.constant(values(&[64, 32, 3, 3], 5));
    let b3 = g.constant(values(&[64], 6));
    let attrs = conv([1, 1, 1, 1], [1, 1], [1, 1], 1);
    let c = g.build1(OpKind::Conv, vec![image, w3, b3], attrs).unwrap();
    g.add_output("c", c);
    let grouped = g.add_input("grouped", f32s(&[1, 96, 64, 64]));
    let w4 = g.constant(values(&[96, 48, 3, 3], 7));
    let attrs = conv([2, 1, 2, 1], [1, 2], [2, 1], 2);
    let d = g.build1(OpKind::Conv, vec![grouped, w4], attrs).unwrap();
    g.add_output("d", d);
    g
}

/// The library calls of `gpu`'s steps to `callee`.
fn calls(gpu: &Compiled, callee: Callee) -> Vec<&LibraryCall> {
    let calls = gpu.program.steps.iter().filter_map(|s| s.call.as_ref());
    calls.filter(|c| c.callee() == callee).collect()
}

/// `library_calls()` on the stand-in's device through the stand-in libraries: each call step
/// calls its library once and gives what its kernel gives on the host (exactly: `values`);
/// every descriptor and handle is destroyed, the workspaces freed. Then with `$MXC_BLASLT` and
/// `$MXC_MIOPEN` naming no file, the routes say why and the kernels run, bit for bit the host's.
/// MIOpen's convolutions are calls on AMD GPUs only: on NVIDIA GPUs their kernels always run.
pub(crate) fn library_calls_match_the_kernels(s: &StandIn) {
    let dir = s.dir.path();
    let (blaslt_name, blaslt_file) = match s.vendor {
        Vendor::Amd => ("hipBLASLt", "libhipblaslt-fake.so"),
        Vendor::Nvidia => ("cuBLASLt", "libcublasLt-fake.so"),
    };
    let blaslt_path = build(dir, &["fake_blaslt.c"], blaslt_file, &[]);
    let miopen_path = build(dir, &["fake_miopen.c"], "libMIOpen-fake.so", &[]);
    // SAFETY: the stand-ins have no initialisers.
    let (blaslt, miopen) = unsafe {
        (
            libloading::Library::new(&blaslt_path).unwrap(),
            libloading::Library::new(&miopen_path).unwrap(),
        )
    };
    let (gpu, host) = s.compile(&library_calls());
    let (matmuls, convs) = (
        calls(&gpu, Callee::BlasLtMatmul),
        calls(&gpu, Callee::MiopenConvForward),
    );
    let biased = convs
        .iter()
        .filter(|c| matches!(c, LibraryCall::Conv(c) if c.bias.is_some()))
        .count();
    assert!(
        matmuls.len() == 3 && convs.len() == 2 && biased == 1,
        "the products and convolutions are library calls: {:?}",
        gpu.program.steps
    );
    let on_host = Executable::load(host.program, &host.library).unwrap();
    let program = &gpu.program;
    let inputs: HashMap<String, Tensor> = (program.inputs.iter().enumerate())
        .map(|(i, b)| (b.name.clone(), values(&program.buffers[b.buffer].ty.shape, 10 + i)))
        .collect();
    let expected = on_host.run(&inputs).unwrap();
    let route = |callee, steps, library| CallRoute { callee, steps, library };
    let amd = s.vendor == Vendor::Amd;
    let on_nvidia = || Err("MIOpen runs on AMD GPUs only".to_string());
    let counters = || {
        [
            counter(&blaslt, "fake_blaslt_matmuls"),
            counter(&miopen, "fake_miopen_forwards"),
            counter(&miopen, "fake_miopen_biases"),
        ]
    };

    // through the stand-ins
    let guard = libraries_named(&blaslt_path, &miopen_path);
    let exe = s.load(&gpu).unwrap();
    let conv_route = match amd {
        true => Ok(miopen_path.display().to_string()),
        false => on_nvidia(),
    };
    assert_eq!(
        exe.call_routes(),
        [
            route(Callee::BlasLtMatmul, 3, Ok(blaslt_path.display().to_string())),
            route(Callee::MiopenConvForward, 2, conv_route),
        ]
    );
    assert_eq!(
        counter(&miopen, "fake_miopen_finds"),
        2 * amd as c_long,
        "an algorithm found a step"
    );
    let before = counters();
    let outputs = exe.run(&inputs).unwrap();
    let after = counters();
    assert_eq!(
        [0, 1, 2].map(|i| after[i] - before[i]),
        [3, 2 * amd as c_long, amd as c_long],
        "each call step called its library once (products, convolutions, biases)"
    );
    for ((name, actual), (_, want)) in outputs.iter().zip(&expected) {
        if let Some(m) = mismatch(actual, want, 0.0, 0.0) {
            panic!("output {name}: {m}");
        }
    }
    drop(exe);
    for (library, live) in [
        (&blaslt, "fake_blaslt_live_objects"),
        (&miopen, "fake_miopen_live_objects"),
    ] {
        assert_eq!(
            counter(library, live),
            0,
            "{live}: every descriptor and handle destroyed"
        );
    }
    assert_eq!(s.counter("fake_gpu_live_allocations"), 0, "the workspaces freed");
    drop(guard);

    // no library where the variables point: the kernels run, bit for bit the host's
    let missing = |file: &str| dir.join("missing").join(file);
    let _guard = libraries_named(&missing(blaslt_file), &missing("libMIOpen.so"));
    let exe = s.load(&gpu).unwrap();
    let routes = exe.call_routes();
    let why = |variable: &str, what: &str, file: &str| {
        format!(
            "no {what}: ${variable} names {}, which does not open",
            missing(file).display()
        )
    };
    let says = |callee: Callee, why: &str| {
        routes
            .iter()
            .any(|r| r.callee == callee && matches!(&r.library, Err(e) if e.starts_with(why)))
    };
    assert!(
        says(Callee::BlasLtMatmul, &why("MXC_BLASLT", blaslt_name, blaslt_file)),
        "{routes:?}"
    );
    let conv_why = match amd {
        true => why("MXC_MIOPEN", "MIOpen", "libMIOpen.so"),
        false => on_nvidia().unwrap_err(),
    };
    assert!(says(Callee::MiopenConvForward, &conv_why), "{routes:?}");
    let before = counters();
    assert_eq!(exe.run(&inputs).unwrap(), expected);
    assert_eq!(counters(), before, "the libraries were not called");
}

#[test]
fn gpu_library_calls_run_through_blaslt_and_match_the_kernels() {
    library_calls_match_the_kernels(&StandIn::cuda());
}
