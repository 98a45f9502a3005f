//! The C example (`examples/c/run_model.c`) compiled against `include/mxc.h` and libmxc.so,
//! and run: its outputs must be what the driver computes for the same model and inputs, and
//! its error strings the driver's own messages.

use mxc_dialects::{DType, Tensor, TensorType};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// target/<profile>/deps, where cargo builds libmxc.so (the library's cdylib, made with the
/// rlib this test depends on) beside the test binary.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let dir = exe.parent().expect("target/<profile>/deps").to_path_buf();
    assert!(dir.join("libmxc.so").exists(), "{} has no libmxc.so", dir.display());
    dir
}

#[test]
fn the_c_example_runs_a_model_as_the_driver_does() {
    let tmp = std::env::temp_dir().join(format!("mxc-c-example-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let lib = library_dir();
    let exe = tmp.join("run_model");
    let built = Command::new("cc")
        .arg(root().join("examples/c/run_model.c"))
        .arg("-I")
        .arg(root().join("include"))
        .arg("-L")
        .arg(&lib)
        .arg("-lmxc")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-Wall")
        .arg("-Werror")
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("cc (gcc) is needed to build the C example");
    assert!(built.success(), "the C example did not compile");

    let model = root().join("examples/tiny_cnn.onnx");
    let out = Command::new(&exe)
        .arg(&model)
        .arg(tmp.join("tiny.mxr"))
        .arg("image=1x3x8x8")
        .env("MXC_CACHE_DIR", tmp.join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));

    // the same inputs through the driver
    let values: Vec<f32> = (0..3 * 64).map(|i| ((i % 17) as f32 - 8.0) / 16.0).collect();
    let inputs = HashMap::from([("image".to_string(), Tensor::from_f32s(vec![1, 3, 8, 8], &values))]);
    let exe = mxc_driver::compile_model(
        &model,
        mxc_codegen::Target::Cpu,
        &Default::default(),
        &mxc_driver::default_options(),
    )
    .unwrap();
    let expected = exe.run(&inputs).unwrap();
    assert_eq!(expected[0].1.ty, TensorType::new(DType::F32, vec![1, 3]));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("output scores:"))
        .expect("the output line");
    let got: Vec<f64> = line["output scores:".len()..]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let want = expected[0].1.to_f64_vec();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{got:?} against {want:?}");
    }

    let missing = mxc_driver::read_mxr(
        Path::new("no-such-file.mxr"),
        None,
        &mxc_driver::trust_policy(&[]).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(stdout.contains(&format!("a missing file: {missing}\n")), "{stdout}");
    assert!(
        stdout.contains("a small buffer: output `scores`: tensor<1x3xf32> takes 12 bytes, the buffer given holds 0"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&tmp).ok();
}

/// The header's `mxc_dtype` values are mx's element types in order.
#[test]
fn the_header_numbers_the_element_types_as_the_library_does() {
    let header = std::fs::read_to_string(root().join("include/mxc.h")).unwrap();
    let mut seen = 0;
    for line in header.lines() {
        let Some(rest) = line.trim().strip_prefix("MXC_") else {
            continue;
        };
        let Some((name, value)) = rest.trim_end_matches(',').split_once(" = ") else {
            continue;
        };
        let index: usize = value.parse().unwrap();
        assert_eq!(DType::ALL[index].name(), name.to_lowercase(), "MXC_{name}");
        seen += 1;
    }
    assert_eq!(seen, DType::ALL.len());
}
