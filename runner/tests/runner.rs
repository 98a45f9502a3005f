//! `mxc-runner` on files compiled here: it runs a `cpu` file from `.npy` inputs, writes and
//! checks its outputs (exit 1 when they differ), times repeated runs, names a missing input,
//! says that no GPU runtime was found for a `gpu` file on a machine without one, and needs no
//! LLVM or MLIR library to start.

use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::program::GpuArch;
use mxc_dialects::Tensor;
use mxc_kernels::mxr::{self, Mxr};
use mxc_kernels::npy;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `y = relu(x) * w + 1`.
const PROGRAM: &str = r#"graph "scale" (%arg0: tensor<2x3xf32> "x") {
  %0 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<2x3xf32>} : tensor<2x3xf32>
  %1 = mx.constant {value = dense<[1.0]> : tensor<f32>} : tensor<f32>
  %2 = mx.relu %arg0 : tensor<2x3xf32>
  %3 = mx.mul %2, %0 : tensor<2x3xf32>
  %4 = mx.add %3, %1 : tensor<2x3xf32>
  return "y" = %4
}
"#;

fn compile(target: Target, out: &Path) {
    let graph = mxc_dialects::text::parse(PROGRAM).unwrap();
    let options = CompileOptions {
        gpu_archs: vec![GpuArch::Nvidia("sm_90".into())],
        ..CompileOptions::default()
    };
    let c = mxc_codegen::compile(&graph, target, &options).unwrap();
    let file = Mxr::new(target.name(), "test", "", c.program, c.library).with_code_objects(c.code_objects);
    std::fs::write(out, mxr::encode(&file, None)).unwrap();
}

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxc-runner"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_cpu_file_runs_from_npy_inputs_and_its_outputs_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.mxr");
    compile(Target::Cpu, &file);
    let x = dir.path().join("x.npy");
    npy::write(&x, &Tensor::from_f32s(vec![2, 3], &[-1.0, 0.5, 2.0, 3.0, -4.0, 0.0])).unwrap();
    let expected = dir.path().join("expected");
    std::fs::create_dir(&expected).unwrap();
    npy::write(
        &expected.join("y.npy"),
        &Tensor::from_f32s(vec![2, 3], &[1.0, 2.0, 7.0, 13.0, 1.0, 1.0]),
    )
    .unwrap();
    let outputs: PathBuf = dir.path().join("out");
    std::fs::create_dir(&outputs).unwrap();
    let input = format!("x={}", path(&x));
    let run = runner(&[
        path(&file),
        "--input",
        &input,
        "--check",
        path(&expected),
        "-o",
        path(&outputs),
        "--repeat",
        "3",
    ]);
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("device: this CPU (1 threads)"), "{stdout}");
    assert!(stdout.contains("time: median "), "{stdout}");
    assert!(
        stdout.contains("output y: tensor<2x3xf32> max |diff| 0.000e0"),
        "{stdout}"
    );
    assert_eq!(
        npy::read(&outputs.join("y.npy")).unwrap().to_f64_vec(),
        [1.0, 2.0, 7.0, 13.0, 1.0, 1.0]
    );

    // an expected value it does not match: exit 1, the difference shown
    npy::write(&expected.join("y.npy"), &Tensor::from_f32s(vec![2, 3], &[1.0; 6])).unwrap();
    let run = runner(&[path(&file), "--input", &input, "--check", path(&expected)]);
    let (stdout, _) = text(&run);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL (3 of 6 elements outside atol + rtol*|ref|)"),
        "{stdout}"
    );

    // no value for an input: named, with its type
    let run = runner(&[path(&file)]);
    let (_, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        stderr.contains("input `x`: no value given (expected tensor<2x3xf32>; give it with --input x=FILE.npy)"),
        "{stderr}"
    );
}

/// `y = relu(x) * w + 1` on a batch of `n` rows of 3, `w` the same for every row.
fn rows_program(n: usize) -> Mxr {
    let src = format!(
        r#"graph "rows" (%arg0: tensor<{n}x3xf32> "x") {{
  %0 = mx.constant {{value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>}} : tensor<3xf32>
  %1 = mx.constant {{value = dense<[1.0]> : tensor<f32>}} : tensor<f32>
  %2 = mx.relu %arg0 : tensor<{n}x3xf32>
  %3 = mx.mul %2, %0 : tensor<{n}x3xf32>
  %4 = mx.add %3, %1 : tensor<{n}x3xf32>
  return "y" = %4
}}
"#
    );
    let graph = mxc_dialects::text::parse(&src).unwrap();
    let c = mxc_codegen::compile(&graph, Target::Cpu, &CompileOptions::default()).unwrap();
    Mxr::new("cpu", "test", "", c.program, c.library)
}

#[test]
fn a_batch_no_program_is_compiled_for_runs_in_parts() {
    use mxc_dialects::dim::{parse, InputDims, Sizes};
    use mxc_kernels::mxr::{Contents, Items, SizedMxr, Variant};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.mxr");
    let variant = |n: usize| Variant {
        sizes: Sizes::from([("n".to_string(), n as u64)]),
        mxr: rows_program(n),
    };
    let sized = SizedMxr {
        dims: InputDims::new(vec![(
            "x".into(),
            vec![parse("n[1..8]{2}").unwrap(), parse("3").unwrap()],
        )])
        .unwrap(),
        // the program for 2 rows alone: 5 rows run as 2 + 2 and the last row filled up to 2
        variants: vec![variant(2)],
        items: vec![Items {
            symbol: "n".into(),
            inputs: vec![("x".into(), 0)],
            outputs: vec![("y".into(), 0)],
        }],
        generic: None,
    };
    let mut bytes = Vec::new();
    mxr::write_contents(&Contents::BySize(sized), None, &mut bytes).unwrap();
    std::fs::write(&file, bytes).unwrap();
    let x = dir.path().join("x.npy");
    let rows = [
        -1.0, 0.5, 2.0, 3.0, -4.0, 0.0, 1.0, 1.0, 1.0, -2.0, 0.25, 0.0, 2.0, 2.0, -2.0,
    ];
    npy::write(&x, &Tensor::from_f32s(vec![5, 3], &rows)).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let run = runner(&[
        path(&file),
        "--input",
        &format!("x={}", path(&x)),
        "--output-dir",
        path(&out),
    ]);
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("sizes: n=5 in parts of 2 + 2 + 1 (as 2)"), "{stdout}");
    let y = npy::read(&out.join("y.npy")).unwrap();
    let expected: Vec<f64> = rows
        .iter()
        .enumerate()
        .map(|(i, &v)| f64::from(v.max(0.0) * [1.0, 2.0, 3.0][i % 3] + 1.0))
        .collect();
    assert_eq!(y.shape(), [5, 3]);
    assert_eq!(y.to_f64_vec(), expected);
    // a batch of 9 is out of range
    npy::write(&x, &Tensor::from_f32s(vec![9, 3], &[0.0; 27])).unwrap();
    let run = runner(&[path(&file), "--input", &format!("x={}", path(&x))]);
    let (_, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        stderr.contains("input `x` dimension 0: n is 9, outside its range [1..8]"),
        "{stderr}"
    );
}

#[test]
fn a_gpu_file_here_names_the_runtimes_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.mxr");
    compile(Target::Gpu, &file);
    let run = runner(&[path(&file)]);
    let (stdout, stderr) = text(&run);
    // a build with the `hip-sys` feature links HIP instead of looking for its files
    #[cfg(feature = "hip-sys")]
    let hip = mxc_kernels::device::LINKED_HIP;
    #[cfg(not(feature = "hip-sys"))]
    let hip = "/opt/rocm/lib/libamdhip64.so";
    match mxc_kernels::device::Gpu::find() {
        Err(_) => {
            assert_eq!(run.status.code(), Some(1), "{stdout}");
            assert!(
                stderr.contains("no GPU runtime was found: looked for HIP and the CUDA driver as")
                    && stderr.contains(hip)
                    && stderr.contains("libcuda.so.1"),
                "{stderr}"
            );
        }
        // with a GPU, the missing input is what stops it
        Ok(_) => assert!(stderr.contains("input `x`: no value given"), "{stderr}"),
    }
}

#[test]
fn the_runner_needs_no_llvm_or_mlir_library() {
    let ldd = Command::new("ldd").arg(env!("CARGO_BIN_EXE_mxc-runner")).output();
    let ldd = ldd.expect("ldd (Debian's libc-bin) lists the libraries a binary needs");
    let libraries = String::from_utf8_lossy(&ldd.stdout);
    assert!(ldd.status.success() && libraries.contains("libc.so"), "{libraries}");
    // a build linking HIP (the `hip-sys` feature) needs the C++ library through it
    let names: &[&str] = match cfg!(feature = "hip-sys") {
        true => &["LLVM", "MLIR"],
        false => &["LLVM", "MLIR", "libstdc++"],
    };
    for name in names {
        assert!(!libraries.contains(name), "the runner needs {name}: {libraries}");
    }
}
