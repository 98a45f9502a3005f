//! The gpu target on a machine without a GPU: the repo's models and every case of the node
//! suite that cpu passes compile to an `.mxr` holding an AMDGPU code object for each default
//! chip and PTX for sm_90, each checked against the plan when the file is read
//! (`mxc_kernels::gpu`), no vector register spilled to scratch, and the PTX (of every 40th
//! case) assembled by `ptxas`; damaged code is refused naming what is wrong; and running the file
//! says that no GPU runtime was found where there is none (and runs where there is one).

use crate::common::{cache_dir, mxc, stderr};
use mxc_dialects::program::{CodeFormat, CodeObject, GpuArch};
use mxc_kernels::mxr::{self, Mxr};
use mxc_kernels::TrustPolicy;
use std::path::Path;

/// Compiles `model` for the gpu target into `out` and reads the file back (which checks
/// every code object against the plan).
fn compile(model: &Path, out: &Path) -> Result<Mxr, String> {
    let run = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        "gpu",
        "-o",
        out.to_str().unwrap(),
        "-q",
    ]);
    if !run.status.success() {
        return Err(stderr(&run));
    }
    mxr::read(out, Some("gpu"), &TrustPolicy::AnyIntact).map_err(|e| e.to_string())
}

/// `ptxas` from where `scripts/setup.sh` puts it.
fn ptxas() -> std::path::PathBuf {
    let path = mxc_codegen::nvidia_folder().expect("a cache folder").join("ptxas");
    assert!(
        path.is_file(),
        "{} is missing: run `bash scripts/setup.sh` first",
        path.display()
    );
    path
}

/// Assembles `ptx` for `arch` with ptxas.
fn assemble(ptx: &CodeObject, dir: &Path) {
    let file = dir.join(format!("{}.ptx", ptx.arch));
    std::fs::write(&file, &ptx.bytes).unwrap();
    let out = std::process::Command::new(ptxas())
        .args(["-arch", ptx.arch.name(), "-o"])
        .arg(dir.join("out.cubin"))
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "ptxas: {}", String::from_utf8_lossy(&out.stderr));
}

fn archs(m: &Mxr) -> Vec<(String, CodeFormat)> {
    m.code_objects.iter().map(|o| (o.arch.to_string(), o.format)).collect()
}

#[test]
fn params_lists_the_library_calls_a_gpu_file_makes() {
    let tmp = tempfile::tempdir().unwrap();
    let model = crate::common::dense_model(tmp.path());
    let mxr = tmp.path().join("dense.mxr");
    for (extra, calls) in [(None, true), (Some("--no-library-calls"), false)] {
        let mut args = vec!["compile", model.to_str().unwrap(), "-o", mxr.to_str().unwrap()];
        args.extend(["--target", "gpu", "--gpu-arch", "sm_90"]);
        args.extend(extra);
        let out = mxc(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        // the summary names the code made, not a kernel cache GPU code does not use
        let summary = stderr(&out);
        assert!(
            summary.contains(", code for sm_90;") && !summary.contains("cache"),
            "{summary}"
        );
        let listed = String::from_utf8(mxc(&["params", mxr.to_str().unwrap()]).stdout).unwrap();
        let line = "library calls (each step's generated kernel runs where its library is absent):\n  \
                    blaslt.matmul: 1 step, through hipBLASLt on AMD GPUs, cuBLASLt on NVIDIA GPUs\n";
        assert_eq!(listed.contains(line), calls, "{listed}");
        assert_eq!(listed.contains("library calls"), calls, "{listed}");
    }
}

/// A model of one 1x1 convolution 40 channels deep to 240 on 28x28, as EfficientNet-B0 has:
/// its tiled GEMM steps through three slices of the depth, a loop LLVM would unroll (and
/// then spill) unless told not to.
fn shallow_conv_model(dir: &Path) -> std::path::PathBuf {
    use crate::common::{float_value, model_bytes, node};
    let graph = mxc_onnx::proto::GraphProto {
        name: Some("conv".into()),
        node: vec![node("Conv", &["x", "w"], "y", vec![])],
        input: vec![
            float_value("x", &["1", "40", "28", "28"]),
            float_value("w", &["240", "40", "1", "1"]),
        ],
        output: vec![float_value("y", &["1", "240", "28", "28"])],
        ..Default::default()
    };
    let path = dir.join("conv.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path
}

#[test]
fn products_and_convolutions_without_library_calls_are_tiled_gemms_whose_sums_stay_in_registers() {
    let tmp = tempfile::tempdir().unwrap();
    // matmul, add and relu fused: a block per 64x64 tile of the 256x512 result; the
    // convolution's 240 channels by 784 positions
    let cases = [
        (crate::common::dense_model(tmp.path()), 32),
        (shallow_conv_model(tmp.path()), 4 * 13),
    ];
    for (model, tiles) in cases {
        let out = tmp.path().join("tiled.mxr");
        let run = mxc(&[
            "compile",
            model.to_str().unwrap(),
            "--target",
            "gpu",
            "--no-library-calls",
            "-o",
            out.to_str().unwrap(),
            "-q",
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        let m = mxr::read(&out, Some("gpu"), &TrustPolicy::AnyIntact).unwrap();
        let blocks: Vec<(u64, bool)> = m.program.steps.iter().map(|s| (s.range, s.per_block)).collect();
        assert_eq!(blocks, [(tiles, true)], "{:?}", m.program.steps);
        for o in &m.code_objects {
            match mxc_kernels::gpu::check(o, &m.program).unwrap() {
                // a thread's 16 sums are private memory at constant indices: registers, no scratch
                Some(s) => assert!(s.max_scratch == 0 && s.spills.is_empty(), "{}: {s:?}", o.arch),
                None => {
                    let ptx = String::from_utf8_lossy(&o.bytes);
                    assert!(ptx.contains(".shared") && ptx.contains("bar.sync"), "{ptx}");
                    assert!(!ptx.contains(".local"), "{ptx}");
                    assemble(o, tmp.path());
                }
            }
        }
    }
}

#[test]
fn the_repo_models_compile_for_amd_chips_and_nvidia() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["convnet", "encoder"] {
        let model = cache_dir("models").join(name).join("model.onnx");
        let m = compile(&model, &tmp.path().join(format!("{name}.mxr"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            archs(&m),
            [
                ("gfx90a".to_string(), CodeFormat::Hsaco),
                ("gfx942".to_string(), CodeFormat::Hsaco),
                ("gfx1100".to_string(), CodeFormat::Hsaco),
                ("sm_90".to_string(), CodeFormat::Ptx),
            ],
            "{name}"
        );
        assert!(m.library.is_empty(), "{name}: no host kernels");
        for o in &m.code_objects {
            let summary = mxc_kernels::gpu::check(o, &m.program).unwrap_or_else(|e| panic!("{name}: {e}"));
            if let Some(s) = summary {
                assert!(s.kernels >= m.program.kernels.len(), "{name} {}: {s:?}", o.arch);
                assert!(s.spills.is_empty(), "{name} {}: {:?}", o.arch, s.spills);
            }
        }
        assemble(
            m.code_objects.iter().find(|o| o.format == CodeFormat::Ptx).unwrap(),
            tmp.path(),
        );
        let params = mxc(&["params", tmp.path().join(format!("{name}.mxr")).to_str().unwrap()]);
        let listed = String::from_utf8_lossy(&params.stdout);
        assert!(
            listed.contains("code for GPUs:\n  gfx90a: AMDGPU code object, ") && listed.contains("\n  sm_90: PTX, "),
            "{listed}"
        );
        let run = mxc(&["run", tmp.path().join(format!("{name}.mxr")).to_str().unwrap()]);
        let err = stderr(&run);
        match mxc_kernels::device::Gpu::find() {
            Err(_) => assert!(
                !run.status.success()
                    && err.contains("no GPU runtime was found: looked for HIP and the CUDA driver as")
                    && err.contains("libcuda.so.1"),
                "{err}"
            ),
            Ok(gpu) => assert!(run.status.success(), "{name} on {gpu:?}: {err}"),
        }
    }
}

/// Why a node-suite case fails for the gpu target, or `None` when it compiles (or its import
/// needs its inputs: values known at compile time, a sequence's length, which is not the gpu
/// target's to compile without them). Every 40th case's PTX is also assembled by ptxas.
fn gpu_failure(n: usize, case: &str, dir: &Path) -> Option<String> {
    let model = cache_dir("onnx-backend-tests/node").join(case).join("model.onnx");
    let m = match compile(&model, &dir.join(format!("{case}.mxr"))) {
        Ok(m) => m,
        Err(e) if !e.contains("error: compiling") => return None,
        Err(e) => return Some(format!("{case}: {e}")),
    };
    if m.code_objects.len() != 4 {
        return Some(format!("{case}: {:?}", archs(&m)));
    }
    for o in &m.code_objects {
        match mxc_kernels::gpu::check(o, &m.program) {
            Err(e) => return Some(format!("{case}: {e}")),
            Ok(Some(summary)) if !summary.spills.is_empty() => {
                return Some(format!("{case} {}: spills {:?}", o.arch, summary.spills))
            }
            Ok(_) => {}
        }
    }
    if n.is_multiple_of(40) {
        let ptx = m.code_objects.iter().find(|o| o.format == CodeFormat::Ptx).unwrap();
        let own = dir.join(case);
        std::fs::create_dir_all(&own).unwrap();
        assemble(ptx, &own);
    }
    None
}

#[test]
fn every_node_suite_case_cpu_passes_compiles_for_every_default_gpu() {
    let expected = std::fs::read_to_string(crate::common::repo().join("tests/node_expected_pass.txt")).unwrap();
    let cases: Vec<&str> = expected.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(cases.len() > 1600, "{} cases", cases.len());
    let tmp = tempfile::tempdir().unwrap();
    // two compiles at a time: each is mostly one thread (MLIR's, LLVM's per chip)
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(case) = cases.get(n) else { break };
                if let Some(failure) = gpu_failure(n, case, tmp.path()) {
                    failures.lock().unwrap().push(failure);
                }
                let _ = std::fs::remove_file(tmp.path().join(format!("{case}.mxr")));
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} cases: {failures:#?}",
        failures.len(),
        cases.len()
    );
}

#[test]
fn damaged_gpu_code_is_refused_naming_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let m = compile(
        &cache_dir("models").join("convnet").join("model.onnx"),
        &tmp.path().join("c.mxr"),
    )
    .unwrap();
    let with = |arch: &str, change: &dyn Fn(&mut Vec<u8>)| {
        let mut o = m.code_objects.iter().find(|o| o.arch.name() == arch).unwrap().clone();
        change(&mut o.bytes);
        mxc_kernels::gpu::check(&o, &m.program).unwrap_err()
    };
    // the machine number of gfx90a's object made gfx942's
    let err = with("gfx90a", &|b| b[48] = 0x4c);
    assert!(
        err.contains("the code for gfx90a: machine number 0x4c, not gfx90a's (0x3f)"),
        "{err}"
    );
    let err = with("gfx942", &|b| b[18] = 62);
    assert!(err.contains("ELF machine 62, not AMDGPU"), "{err}");
    // a kernel's name in the metadata changed: the plan's kernel is missing
    let name = m.program.kernels[0].symbol.clone();
    let err = with("gfx1100", &|b| {
        let at = b.windows(name.len()).position(|w| w == name.as_bytes()).unwrap();
        b[at] = b'X';
    });
    assert!(
        err.contains("is missing") || err.contains("no descriptor symbol"),
        "{err}"
    );
    let err = with("sm_90", &|b| {
        let text = String::from_utf8(b.clone()).unwrap();
        *b = text.replacen(".target sm_90", ".target sm_80", 1).into_bytes();
    });
    assert!(err.contains("made for `sm_80`, not sm_90"), "{err}");
    let err = with("sm_90", &|b| b.extend(b"\n.extern .func __nv_expf\n"));
    assert!(
        err.contains("an undefined function: `.extern .func __nv_expf`"),
        "{err}"
    );
    // an object for a GPU in the wrong format
    let mut wrong = m.code_objects[0].clone();
    wrong.arch = GpuArch::Nvidia("sm_90".into());
    let err = mxc_kernels::gpu::check(&wrong, &m.program).unwrap_err();
    assert!(err.contains("Hsaco code for sm_90"), "{err}");
}

#[test]
fn an_unknown_gpu_architecture_is_refused() {
    let model = cache_dir("models").join("convnet").join("model.onnx");
    let out = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        "gpu",
        "--gpu-arch",
        "gfx90a,volta",
        "-o",
        "/dev/null",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("unknown GPU architecture `volta`"), "{err}");
}
