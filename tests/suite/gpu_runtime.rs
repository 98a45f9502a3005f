//! The GPU runtime without a GPU: `gpu` programs loaded and run through the CUDA driver API
//! (`mxc_kernels::device`, `Executable::load_gpu`) as implemented by a stand-in driver
//! (`tests/fixtures/fake_cuda.c`, compiled here with `cc`) that keeps "device" memory in host
//! memory and runs each launch's threads with the host build of the same kernels, after
//! checking the launch against the kernel's PTX (block size, parameter count). The outputs
//! must be those of the same kernels run by the host runtime, bit for bit, and match the
//! models' reference outputs; every allocation is freed when the program is dropped. Library
//! calls run through a stand-in cuBLASLt (`tests/fixtures/fake_cublaslt.c`) where `$MXC_BLASLT`
//! names it, and as their kernels where it names no library.

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
use std::sync::{Mutex, MutexGuard};

/// `fixture` (a stand-in library) compiled into `dir` as `name`, linked with `libs`.
fn build(dir: &Path, fixture: &str, name: &str, libs: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(repo().join("tests/fixtures").join(fixture))
        .args(libs)
        .output()
        .expect("cc (a C compiler) is needed to build the stand-in libraries");
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    out
}

/// The stand-in driver, compiled into `dir`.
fn fake_driver(dir: &Path) -> PathBuf {
    build(dir, "fake_cuda.c", "libcuda-fake.so", &["-ldl"])
}

/// A counter a stand-in library keeps.
fn counter(library: &libloading::Library, name: &str) -> c_long {
    // SAFETY: the stand-ins' counters take nothing and return a long.
    unsafe {
        library
            .get::<unsafe extern "C" fn() -> c_long>(name.as_bytes())
            .unwrap()()
    }
}

/// `$MXC_BLASLT` set to `path` for as long as the guard is held: loading a program with
/// library calls opens the library it names, so the tests that load one hold this.
fn blaslt_named(path: &Path) -> MutexGuard<'static, ()> {
    static BLASLT: Mutex<()> = Mutex::new(());
    let guard = BLASLT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    std::env::set_var("MXC_BLASLT", path);
    guard
}

/// `graph` compiled for the stand-in GPU (`sm_90`) and for the host, whose kernels (`ref`
/// rewrites nothing and lowers as `gpu` does) the stand-in `driver` is told to run; the two
/// plans make the same calls on the same buffers.
fn compile_for_the_stand_in(graph: &Graph, driver: &libloading::Library, host_kernels: &Path) -> (Compiled, Compiled) {
    let options = CompileOptions {
        gpu_archs: vec![GpuArch::Nvidia("sm_90".into())],
        ..CompileOptions::default()
    };
    let gpu = mxc_codegen::compile(graph, Target::Gpu, &options).unwrap();
    // the host build runs the GPU's row kernels in their host form, with the gpu plan's ranges
    let emulated = CompileOptions {
        emulate_gpu_rows: true,
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
    std::fs::write(host_kernels, &host.library).unwrap();
    let path = CString::new(host_kernels.to_str().unwrap()).unwrap();
    // SAFETY: the stand-in's function takes a C string and returns an int.
    let status = unsafe {
        driver
            .get::<unsafe extern "C" fn(*const c_char) -> c_int>(b"fake_cuda_use_host_kernels")
            .unwrap()(path.as_ptr())
    };
    assert_eq!(status, 0, "the host kernels load");
    (gpu, host)
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

#[test]
fn gpu_programs_run_through_the_cuda_driver_api_as_their_kernels_run_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let driver_path = fake_driver(dir.path());
    // SAFETY: the stand-in driver has no initialisers.
    let driver = unsafe { libloading::Library::new(&driver_path) }.unwrap();
    // no BLASLt: library calls run as their kernels, bit for bit the host's
    let _blaslt = blaslt_named(&dir.path().join("no-blaslt.so"));
    let models = [
        "convnet",
        "encoder",
        "control_flow/loop_runtime",
        "control_flow/if_runtime_then",
    ];
    for (n, name) in models.into_iter().enumerate() {
        let model = cache_dir("models").join(name).join("model.onnx");
        let graph = mxc_lowering::onnx::import_file(&model, &Default::default()).unwrap();
        let (gpu, host) = compile_for_the_stand_in(&graph, &driver, &dir.path().join(format!("host{n}.so")));
        // the encoder's layer norms and softmax run a block per row
        let row_kernels = gpu.program.steps.iter().filter(|s| s.per_block).count();
        assert_eq!(row_kernels > 0, name == "encoder", "{name}: {row_kernels} row kernels");

        let device = Gpu::open_library(driver_path.to_str().unwrap(), Vendor::Nvidia).unwrap();
        assert_eq!(device.name, "mxc fake GPU 0");
        assert_eq!(device.arch, Some(GpuArch::Nvidia("sm_90".into())));
        let launches = counter(&driver, "fake_cuda_launches");
        let memory = gpu.program.memory_plan();
        let exe = Executable::load_gpu(gpu.program, memory, &gpu.code_objects, device)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            exe.device().map(|(g, arch)| (g.name.as_str(), arch.name())),
            Some(("mxc fake GPU 0", "sm_90"))
        );
        assert!(
            exe.memory_use().weights_copied >= exe.memory_use().weights,
            "{name}: weights uploaded"
        );
        let on_host = Executable::load(host.program, &host.library).unwrap();

        let (inputs, expected) = data_set(&model);
        let on_gpu = exe.run(&inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            counter(&driver, "fake_cuda_launches") > launches,
            "{name}: kernels were launched"
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
        assert_eq!(
            counter(&driver, "fake_cuda_live_allocations"),
            0,
            "{name}: everything freed"
        );
    }
}

#[test]
fn a_gpu_that_runs_none_of_the_code_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let driver_path = fake_driver(dir.path());
    let model = cache_dir("models").join("convnet").join("model.onnx");
    let graph = mxc_lowering::onnx::import_file(&model, &Default::default()).unwrap();
    let options = CompileOptions {
        gpu_archs: vec![GpuArch::Amd("gfx90a".into())],
        ..CompileOptions::default()
    };
    let gpu = mxc_codegen::compile(&graph, Target::Gpu, &options).unwrap();
    let device = Gpu::open_library(driver_path.to_str().unwrap(), Vendor::Nvidia).unwrap();
    let memory = gpu.program.memory_plan();
    let err = Executable::load_gpu(gpu.program, memory, &gpu.code_objects, device)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("mxc fake GPU 0 (sm_90, through ")
            && err.contains("runs none of the program's code, which is for gfx90a (compile it with --gpu-arch sm_90)"),
        "{err}"
    );
}

/// f32 values of `shape`, different for each `seed`: multiples of 1/16 near [-1, 1), coarser
/// than `cpu_kernels::values`, so that the library's and the kernel's sums in different orders
/// stay within the comparison's 1e-6.
fn values(shape: &[usize], seed: usize) -> Tensor {
    let n = shape.iter().product::<usize>();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 29 + seed * 13) % 31) as f32 / 16.0 - 0.9)
        .collect();
    Tensor::from_f32s(shape.to_vec(), &v)
}

/// Products of every form a `blaslt.matmul` call takes: a batched product with a shared B, a
/// bias and relu; a gemm with B transposed, alpha and a row of C, then relu; a batch of
/// products each with its own B.
fn products() -> Graph {
    let f32s = |shape: &[usize]| TensorType::new(DType::F32, shape.to_vec());
    let mut g = Graph::new("products");
    let x = g.add_input("x", f32s(&[2, 256, 64]));
    let w1 = g.constant(values(&[64, 384], 1));
    let b1 = g.constant(values(&[384], 2));
    let h = g.build1(OpKind::MatMul, vec![x, w1], Attrs::new()).unwrap();
    let h = g.build1(OpKind::Add, vec![h, b1], Attrs::new()).unwrap();
    let h = g.build1(OpKind::Relu, vec![h], Attrs::new()).unwrap();
    g.add_output("h", h);
    let u = g.add_input("u", f32s(&[384, 64]));
    let w2 = g.constant(values(&[512, 64], 3));
    let c2 = g.constant(values(&[512], 4));
    let gemm = Attrs::new()
        .with("alpha", Attr::Float(0.5))
        .with("beta", Attr::Float(1.0))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(1));
    let y = g.build1(OpKind::Gemm, vec![u, w2, c2], gemm).unwrap();
    let y = g.build1(OpKind::Relu, vec![y], Attrs::new()).unwrap();
    g.add_output("y", y);
    let p = g.add_input("p", f32s(&[3, 256, 64]));
    let q = g.add_input("q", f32s(&[3, 64, 256]));
    let r = g.build1(OpKind::MatMul, vec![p, q], Attrs::new()).unwrap();
    g.add_output("r", r);
    g
}

#[test]
fn gpu_library_calls_run_through_blaslt_and_match_the_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let driver_path = fake_driver(dir.path());
    let blaslt_path = build(dir.path(), "fake_cublaslt.c", "libcublasLt-fake.so", &[]);
    // SAFETY: the stand-ins have no initialisers.
    let (driver, blaslt) = unsafe {
        (
            libloading::Library::new(&driver_path).unwrap(),
            libloading::Library::new(&blaslt_path).unwrap(),
        )
    };
    let (gpu, host) = compile_for_the_stand_in(&products(), &driver, &dir.path().join("host.so"));
    let calls = gpu.program.steps.iter().filter(|s| s.call.is_some()).count();
    let matmuls = gpu
        .program
        .steps
        .iter()
        .filter(|s| matches!(s.call, Some(LibraryCall::Matmul(_))))
        .count();
    assert!(matmuls > 0, "the products are library calls: {:?}", gpu.program.steps);
    let on_host = Executable::load(host.program, &host.library).unwrap();
    let program = &gpu.program;
    let inputs: HashMap<String, Tensor> = (program.inputs.iter().enumerate())
        .map(|(i, b)| (b.name.clone(), values(&program.buffers[b.buffer].ty.shape, 10 + i)))
        .collect();
    let expected = on_host.run(&inputs).unwrap();
    let load = || {
        let device = Gpu::open_library(driver_path.to_str().unwrap(), Vendor::Nvidia).unwrap();
        let memory = gpu.program.memory_plan();
        Executable::load_gpu(gpu.program.clone(), memory, &gpu.code_objects, device).unwrap()
    };
    // the routes of calls other than products: MIOpen's convolutions have no library on NVIDIA GPUs
    let others = |routes: &[CallRoute]| -> usize {
        let others = routes.iter().filter(|r| r.callee != Callee::BlasLtMatmul);
        others
            .inspect(|r| assert_eq!(r.library, Err("MIOpen runs on AMD GPUs only".into()), "{r}"))
            .map(|r| r.steps)
            .sum()
    };

    // through the stand-in cuBLASLt: its own rounding, within rtol 1e-5 of the kernels'
    let guard = blaslt_named(&blaslt_path);
    let exe = load();
    let routes = exe.call_routes();
    assert!(
        routes.contains(&CallRoute {
            callee: Callee::BlasLtMatmul,
            steps: matmuls,
            library: Ok(blaslt_path.display().to_string()),
        }),
        "{routes:?}"
    );
    assert_eq!(others(&routes) + matmuls, calls, "{routes:?}");
    let before = counter(&blaslt, "fake_cublaslt_matmuls");
    let outputs = exe.run(&inputs).unwrap();
    assert_eq!(
        counter(&blaslt, "fake_cublaslt_matmuls"),
        before + matmuls as c_long,
        "each product step called the library once"
    );
    for ((name, actual), (_, want)) in outputs.iter().zip(&expected) {
        if let Some(m) = mismatch(actual, want, 1e-5, 1e-6) {
            panic!("output {name}: {m}");
        }
    }
    drop(exe);
    assert_eq!(
        counter(&blaslt, "fake_cublaslt_live_objects"),
        0,
        "every descriptor destroyed"
    );
    assert_eq!(counter(&driver, "fake_cuda_live_allocations"), 0, "the workspace freed");
    drop(guard);

    // no library where $MXC_BLASLT points: the kernels run, bit for bit the host's
    let missing = dir.path().join("missing").join("libcublasLt.so");
    let _guard = blaslt_named(&missing);
    let exe = load();
    let routes = exe.call_routes();
    let why = routes
        .iter()
        .find(|r| r.callee == Callee::BlasLtMatmul)
        .map(|r| (r.steps, r.library.clone()));
    let Some((steps, Err(why))) = why else {
        panic!("{routes:?}")
    };
    assert_eq!(steps, matmuls);
    assert!(
        why.starts_with(&format!(
            "no cuBLASLt: $MXC_BLASLT names {}, which does not open",
            missing.display()
        )),
        "{why}"
    );
    let before = counter(&blaslt, "fake_cublaslt_matmuls");
    assert_eq!(exe.run(&inputs).unwrap(), expected);
    assert_eq!(
        counter(&blaslt, "fake_cublaslt_matmuls"),
        before,
        "the library was not called"
    );
}
