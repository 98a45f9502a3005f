//! The GPU runtime without a GPU: `gpu` programs loaded and run through the CUDA driver API
//! (`mxc_kernels::device`, `Executable::load_gpu`) as implemented by a stand-in driver
//! (`tests/fixtures/fake_cuda.c`, compiled here with `cc`) that keeps "device" memory in host
//! memory and runs each launch's threads with the host build of the same kernels, after
//! checking the launch against the kernel's PTX (block size, parameter count). The outputs
//! must be those of the same kernels run by the host runtime, bit for bit, and match the
//! models' reference outputs; every allocation is freed when the program is dropped.

use crate::common::{cache_dir, data_files, mismatch, model_io_names, read_pb, repo};
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::program::GpuArch;
use mxc_dialects::Tensor;
use mxc_kernels::device::{Gpu, Vendor};
use mxc_kernels::Executable;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_long, CString};
use std::path::{Path, PathBuf};

/// The stand-in driver, compiled into `dir`.
fn fake_driver(dir: &Path) -> PathBuf {
    let out = dir.join("libcuda-fake.so");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(repo().join("tests/fixtures/fake_cuda.c"))
        .arg("-ldl")
        .output()
        .expect("cc (a C compiler) is needed to build the stand-in CUDA driver");
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    out
}

/// A counter the stand-in driver keeps.
fn counter(driver: &libloading::Library, name: &str) -> c_long {
    // SAFETY: the stand-in's counters take nothing and return a long.
    unsafe { driver.get::<unsafe extern "C" fn() -> c_long>(name.as_bytes()).unwrap()() }
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
    let models = [
        "convnet",
        "encoder",
        "control_flow/loop_runtime",
        "control_flow/if_runtime_then",
    ];
    for (n, name) in models.into_iter().enumerate() {
        let model = cache_dir("models").join(name).join("model.onnx");
        let graph = mxc_lowering::onnx::import_file(&model, &Default::default()).unwrap();
        let options = CompileOptions {
            gpu_archs: vec![GpuArch::Nvidia("sm_90".into())],
            ..CompileOptions::default()
        };
        let gpu = mxc_codegen::compile(&graph, Target::Gpu, &options).unwrap();
        // the same graph's kernels for the host: `ref` rewrites nothing, and lowers as `gpu` does
        let host = mxc_codegen::compile(&gpu.graph, Target::Ref, &CompileOptions::default()).unwrap();
        assert_eq!(gpu.program.steps.len(), host.program.steps.len(), "{name}");
        for (g, h) in gpu.program.steps.iter().zip(&host.program.steps) {
            assert_eq!(
                g.symbol.strip_suffix("_kernel"),
                h.symbol.strip_suffix("_entry"),
                "{name}"
            );
            assert_eq!(
                (&g.args, g.range, g.splittable),
                (&h.args, h.range, h.splittable),
                "{name}"
            );
        }
        let host_kernels = dir.path().join(format!("host{n}.so"));
        std::fs::write(&host_kernels, &host.library).unwrap();
        let path = CString::new(host_kernels.to_str().unwrap()).unwrap();
        // SAFETY: the stand-in's function takes a C string and returns an int.
        let status = unsafe {
            driver
                .get::<unsafe extern "C" fn(*const c_char) -> c_int>(b"fake_cuda_use_host_kernels")
                .unwrap()(path.as_ptr())
        };
        assert_eq!(status, 0, "{name}: the host kernels load");

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
