//! `--int8 --calibration` on the command line (docs/quantisation.md): the generated convnet,
//! calibrated on samples `mxc run --save-inputs` wrote, compiles to a program whose
//! convolutions are integer kernels; its outputs are close to f32's but not equal, `ref` and
//! `cpu` agree on it, its file says how it was quantised, and every misuse (no samples, a
//! folder that is not one, a sample naming no input, an op with no int8 form, `--int8` with
//! `--fp16`) is refused by name.

use crate::common::{convnet_case, integer_kernels_pay, mxc, not_close, run_file, stderr};
use mxc_dialects::Tensor;
use std::path::{Path, PathBuf};

/// Calibration samples of the convnet's input under `dir`, one folder each, written by `mxc
/// run --save-inputs`: the test data set's input, then `random` random inputs of different
/// seeds.
fn samples(model: &Path, set: &Path, dir: &Path, random: usize) -> PathBuf {
    let root = dir.join("calibration");
    let given = format!("input={}", set.join("input_0.pb").display());
    for i in 0..=random {
        let folder = root.join(format!("sample{i}"));
        let seed = i.to_string();
        let mut args = vec![
            "run",
            model.to_str().unwrap(),
            "--save-inputs",
            folder.to_str().unwrap(),
        ];
        args.extend(match i {
            0 => ["--input", given.as_str()],
            _ => ["--seed", seed.as_str()],
        });
        let out = mxc(&args);
        assert!(out.status.success(), "mxc run --save-inputs: {}", stderr(&out));
    }
    root
}

/// `mxc compile MODEL -o OUT` with `flags`: its output, which the caller judges.
fn compile(model: &Path, out: &Path, flags: &[&str]) -> std::process::Output {
    let mut args = vec!["compile", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(flags);
    mxc(&args)
}

#[test]
fn a_calibrated_int8_program_is_close_to_f32_and_its_file_says_so() {
    let (model, set) = convnet_case();
    let dir = tempfile::tempdir().unwrap();
    let calibration = samples(&model, &set, dir.path(), 3);
    let (plain, int8) = (dir.path().join("plain.mxr"), dir.path().join("int8.mxr"));
    let out = compile(&model, &plain, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = compile(
        &model,
        &int8,
        &["--int8", "--calibration", calibration.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    let params = mxc(&["params", int8.to_str().unwrap()]);
    let shown = String::from_utf8(params.stdout).unwrap();
    let line = shown.lines().find(|l| l.contains("precision:")).unwrap_or_default();
    assert!(
        line.contains("precision: int8 (") && line.contains(" ops, 4 calibration samples)"),
        "{shown}"
    );
    let explained = mxc(&[
        "explain",
        model.to_str().unwrap(),
        "--int8",
        "--calibration",
        calibration.to_str().unwrap(),
    ]);
    let text = String::from_utf8(explained.stdout).unwrap();
    assert_eq!(
        text.contains("= mx.conv_nhwc_integer_packed "),
        integer_kernels_pay(),
        "the quantised convolutions become integer kernels where VNNI makes them pay:\n{text}"
    );

    let run = |file: &Path, target: &str| {
        let out_dir = dir
            .path()
            .join(format!("{}-{target}", file.file_stem().unwrap().to_str().unwrap()));
        let mut outputs = run_file(&model, file, &set, target, &[], &out_dir).unwrap();
        outputs.remove(0)
    };
    let (f32_out, int8_out) = (run(&plain, "cpu"), run(&int8, "cpu"));
    assert_eq!(int8_out.ty, f32_out.ty, "the outputs keep their type");
    assert_eq!(not_close(&int8_out, &f32_out, 0.1), None);
    assert_ne!(int8_out, f32_out, "int8 rounds the activations and weights");

    let int8_ref = dir.path().join("int8-ref.mxr");
    let out = compile(
        &model,
        &int8_ref,
        &[
            "--int8",
            "--calibration",
            calibration.to_str().unwrap(),
            "--target",
            "ref",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // cpu and ref compute the same int8 program; a requantisation whose scales cpu folds (a
    // residual join's, `requantise-dequantized-sum`) may round one unit apart, and so may
    // what follows: far less than quantising changes
    let int8_ref_out = run(&int8_ref, "ref");
    let largest_difference = |a: &Tensor, b: &Tensor| {
        (0..a.len())
            .map(|i| (a.get_f64(i) - b.get_f64(i)).abs())
            .fold(0.0, f64::max)
    };
    let (apart, quantising) = (
        largest_difference(&int8_out, &int8_ref_out),
        largest_difference(&int8_ref_out, &f32_out),
    );
    assert!(
        apart <= quantising / 2.0,
        "cpu {apart} from ref, int8 {quantising} from f32"
    );
}

/// Each misuse of `--int8` is refused with the thing it names, and nothing is written.
#[test]
fn int8_misuse_is_refused_by_name() {
    let (model, set) = convnet_case();
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("out.mxr");
    let refused = |flags: &[&str], code: i32, says: &str| {
        let out = compile(&model, &out_file, flags);
        assert_eq!(out.status.code(), Some(code), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(says),
            "{flags:?} should say {says:?}: {}",
            stderr(&out)
        );
        assert!(!out_file.exists(), "{flags:?} left {}", out_file.display());
    };
    refused(&["--int8"], 2, "--calibration <DIR>");
    refused(&["--calibration", "x"], 1, "calibration is for --int8");
    let calibration = samples(&model, &set, dir.path(), 0);
    let cal = calibration.to_str().unwrap();
    refused(&["--int8", "--fp16", "--calibration", cal], 2, "cannot be used with");
    refused(
        &["--int8-ops", "relu", "--calibration", cal],
        1,
        "`relu` has no int8 form",
    );

    let missing = dir.path().join("nowhere");
    refused(&["--int8", "--calibration", missing.to_str().unwrap()], 1, "nowhere");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    refused(&["--int8", "--calibration", empty.to_str().unwrap()], 1, "empty");

    let stray = dir.path().join("stray");
    let sample = stray.join("s0");
    std::fs::create_dir_all(&sample).unwrap();
    std::fs::copy(calibration.join("sample0/input.npy"), sample.join("pixels.npy")).unwrap();
    let said = "`pixels` is not an input of the model (its inputs: input)";
    refused(&["--int8", "--calibration", stray.to_str().unwrap()], 1, said);
    let out = compile(&model, &out_file, &["--int8", "--calibration", stray.to_str().unwrap()]);
    assert_eq!(stderr(&out).matches(said).count(), 1, "said once: {}", stderr(&out));
}
