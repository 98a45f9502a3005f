//! The `run` and `compile` commands: a compiled file run in a new process gives the same
//! outputs as running the model directly, a damaged file is refused with a clear error,
//! inputs that are not given get the same seeded values every time (and are saved when asked),
//! dynamic dimensions are fixed by `--shape` or by the inputs given, and a reader that closes
//! the output early ends the process quietly.

use crate::common::{float_value, model_bytes, mxc, mxc_run_to, repo, stderr};
use mxc_onnx::proto;

fn run_to(model: &str, target: &str, input: &str, dir: &std::path::Path) -> Vec<u8> {
    mxc_run_to(model, target, input, dir);
    std::fs::read(dir.join("scores.npy")).unwrap()
}

#[test]
fn compiled_file_gives_the_models_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let input = dir.path().join("image.npy");
    let values: Vec<f32> = (0..192).map(|i| ((i * 37) % 19) as f32 / 9.5 - 1.0).collect();
    mxc_kernels::npy::write(&input, &mxc_dialects::Tensor::from_f32s(vec![1, 3, 8, 8], &values)).unwrap();
    let input = format!("image={}", input.display());
    let mxr = dir.path().join("tiny.mxr");
    for target in ["ref", "cpu"] {
        let out = mxc(&["compile", &model, "-o", mxr.to_str().unwrap(), "--target", target]);
        assert!(out.status.success(), "mxc compile: {}", stderr(&out));
        let direct = run_to(&model, target, &input, &dir.path().join(format!("direct-{target}")));
        let compiled = run_to(
            mxr.to_str().unwrap(),
            target,
            &input,
            &dir.path().join(format!("compiled-{target}")),
        );
        assert_eq!(direct, compiled, "{target}: the compiled file's outputs differ");
    }

    let mut bytes = std::fs::read(&mxr).unwrap();
    let truncated = dir.path().join("truncated.mxr");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let out = mxc(&["run", truncated.to_str().unwrap()]);
    assert!(
        !out.status.success() && stderr(&out).contains("truncated.mxr"),
        "{}",
        stderr(&out)
    );
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x40;
    let corrupt = dir.path().join("corrupt.mxr");
    std::fs::write(&corrupt, &bytes).unwrap();
    let out = mxc(&["run", corrupt.to_str().unwrap()]);
    assert!(
        !out.status.success() && stderr(&out).contains("digest mismatch"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inputs_not_given_are_seeded_the_same_every_run() {
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let first = mxc(&["run", &model]);
    let second = mxc(&["run", &model]);
    assert!(first.status.success() && second.status.success(), "{}", stderr(&first));
    let summary = String::from_utf8(first.stdout).unwrap();
    assert!(summary.starts_with("scores: [1, 3] f32 ["), "{summary}");
    assert_eq!(summary, String::from_utf8(second.stdout).unwrap());
}

#[test]
fn the_inputs_a_run_generated_are_saved_and_give_the_same_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let (saved, first) = (dir.path().join("inputs"), dir.path().join("first"));
    let out = mxc(&[
        "run",
        &model,
        "--save-inputs",
        saved.to_str().unwrap(),
        "-o",
        first.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let image = mxc_kernels::npy::read(&saved.join("image.npy")).unwrap();
    assert_eq!(image.shape(), [1, 3, 8, 8]);
    let input = format!("image={}", saved.join("image.npy").display());
    let again = run_to(&model, "cpu", &input, &dir.path().join("again"));
    assert_eq!(again, std::fs::read(first.join("scores.npy")).unwrap());
}

#[test]
fn dynamic_dimensions_come_from_shape_or_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let graph = proto::GraphProto {
        name: Some("dynamic".into()),
        node: vec![proto::NodeProto {
            op_type: Some("Relu".into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            ..Default::default()
        }],
        input: vec![float_value("x", &["batch", "3"])],
        output: vec![float_value("y", &["batch", "3"])],
        ..Default::default()
    };
    let path = dir.path().join("dynamic.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    let path = path.to_str().unwrap();

    // read without shapes imports the dim_param as a symbol (docs/shapes.md)
    let out = mxc(&["read", path]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("graph \"dynamic\" symbols<batch> (%arg0: tensor<(batch)x3xf32> \"x\")"),
        "{}",
        stderr(&out)
    );
    let out = mxc(&["read", path, "--shape", "x=2x3"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("%arg0: tensor<2x3xf32> \"x\""),
        "{}",
        stderr(&out)
    );
    let out = mxc(&["run", path, "--shape", "x=4,3"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("y: [4, 3] f32"),
        "{}",
        stderr(&out)
    );

    let input = dir.path().join("x.npy");
    mxc_kernels::npy::write(&input, &mxc_dialects::Tensor::from_f32s(vec![5, 3], &[-1.0; 15])).unwrap();
    let input = format!("x={}", input.display());
    let out = mxc(&["run", path, "--input", &input]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("y: [5, 3] f32 [0.000000"),
        "{}",
        stderr(&out)
    );
    let out = mxc(&["run", path, "--input", &input, "--shape", "x=4x3"]);
    assert!(
        !out.status.success() && stderr(&out).contains("[4, 3]"),
        "{}",
        stderr(&out)
    );
}

/// The kernel count of `mxc compile`'s summary line (`OUT: N kernels for ...`).
fn kernels_compiled(summary: &str) -> usize {
    let count = summary.split(": ").nth(1).and_then(|s| s.split(' ').next());
    count
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no kernel count in {summary}"))
}

#[test]
fn perf_times_every_kernel_of_a_compiled_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let file = dir.path().join("tiny.mxr");
    let out = mxc(&["compile", &model, "-o", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let kernels = kernels_compiled(&stderr(&out)).to_string();
    let out = mxc(&["perf", file.to_str().unwrap(), "-n", "5", "--threads", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("5 runs on 1 thread: median "), "{text}");
    // the file's weights (conv filters and biases) are read where the file is mapped
    assert!(
        text.contains("\nmemory: weights ") && text.contains("(read in place)"),
        "{text}"
    );
    assert!(text.contains(&format!("\nkernels: {kernels} (")), "{text}");
    let rows: Vec<&str> = text.lines().skip(4).collect();
    assert_eq!(rows.len().to_string(), kernels, "{text}");
    // the conv and its relu are one kernel; the shares add up to the whole
    assert!(rows.iter().any(|r| r.ends_with("(conv_nhwc_packed, relu)")), "{text}");
    let shares: f64 = rows
        .iter()
        .map(|r| {
            r.split_whitespace()
                .nth(1)
                .unwrap()
                .trim_end_matches('%')
                .parse::<f64>()
                .unwrap()
        })
        .sum();
    assert!((shares - 100.0).abs() < 1.0, "{text}");
}

#[test]
fn inputs_not_given_are_filled_as_asked() {
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let summary = |extra: &[&str]| {
        let mut args = vec!["run", model.as_str()];
        args.extend(extra);
        let out = mxc(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let (seeded, other_seed) = (summary(&[]), summary(&["--seed", "7"]));
    assert_ne!(seeded, other_seed);
    assert_eq!(other_seed, summary(&["--seed", "7"]));
    let (zeros, ones) = (summary(&["--fill0"]), summary(&["--fill1"]));
    assert!(zeros != ones && zeros != seeded, "{zeros} {ones}");
    let both = mxc(&["run", &model, "--fill0", "--fill1"]);
    assert!(!both.status.success() && stderr(&both).contains("cannot be used with"));
}

#[test]
fn running_a_compiled_file_compiles_nothing() {
    // every kernel compiled goes through the kernel cache: running the file leaves it empty
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let file = dir.path().join("tiny.mxr");
    let out = mxc(&["compile", &model, "-o", file.to_str().unwrap(), "--no-cache"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cache = dir.path().join("cache");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_mxc"))
        .args(["run", file.to_str().unwrap()])
        .env("MXC_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(!cache.exists(), "running the file compiled kernels");
    // while running the model itself compiles (and caches) its kernels
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_mxc"))
        .args(["run", &model])
        .env("MXC_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(std::fs::read_dir(&cache).unwrap().next().is_some());
}

#[test]
fn compile_shows_its_stages_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let file = dir.path().join("tiny.mxr").display().to_string();
    // not a terminal: the summary line alone
    let out = mxc(&["compile", &model, "-o", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(!stderr(&out).contains('\r'));
    // on a terminal (util-linux `script` gives the command a pseudo-terminal)
    let on_terminal = |quiet: &str| {
        let command = format!(
            "{} compile {model} -o {file} --no-cache {quiet}",
            env!("CARGO_BIN_EXE_mxc")
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .output()
            .expect("`script` (util-linux) runs a command on a pseudo-terminal");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = on_terminal("");
    for stage in ["import", "saturation", "extraction", "fusion", "lowering", "codegen"] {
        assert!(shown.contains(&format!("] {stage} (")), "{stage} not shown: {shown:?}");
    }
    // the line is cleared before the summary
    let cleared = shown.rfind("\r\x1b[K").unwrap();
    assert!(
        shown[cleared..].contains("kernels for cpu") && !shown[cleared..].contains("] codegen ("),
        "{shown:?}"
    );
    let quiet = on_terminal("-q");
    assert!(!quiet.contains("] import ("), "{quiet:?}");
    assert!(quiet.contains("kernels for cpu"), "{quiet:?}");
}

#[test]
fn compile_timings_give_each_phase_its_time_share_and_peak_memory() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let file = dir.path().join("tiny.mxr").display().to_string();
    let out = mxc(&["compile", &model, "-o", &file, "--timings", "--no-cache"]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let rows: Vec<Vec<&str>> = said.lines().skip(2).map(|l| l.split_whitespace().collect()).collect();
    let phases: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(
        phases,
        [
            "import",
            "saturation",
            "extraction",
            "fusion",
            "lowering",
            "codegen",
            "write",
            "total"
        ],
        "{said}"
    );
    let seconds: Vec<f64> = rows.iter().map(|r| r[1].parse().unwrap()).collect();
    let parts: f64 = seconds[..seconds.len() - 1].iter().sum();
    assert!((parts - seconds[seconds.len() - 1]).abs() < 0.01, "{said}");
    // LLVM compiled the kernels afresh: codegen took some time
    assert!(seconds[5] > 0.0, "{said}");
    // the peak so far at each phase's end (MB), the total the last phase's
    let peaks: Vec<f64> = rows.iter().map(|r| r[3].parse().unwrap()).collect();
    assert!(peaks[0] > 1.0 && peaks.windows(2).all(|w| w[0] <= w[1]), "{said}");
    assert_eq!(peaks[peaks.len() - 1], peaks[peaks.len() - 2], "{said}");
}

#[test]
fn optimisation_levels_trade_compile_work_for_kernels_and_agree_with_ref() {
    let model = crate::common::cache_dir("models/convnet")
        .join("model.onnx")
        .display()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let kernels = |level: &str| {
        let file = dir.path().join(format!("o{level}.mxr")).display().to_string();
        let out = mxc(&["compile", &model, "-o", &file, level]);
        assert!(out.status.success(), "{}", stderr(&out));
        let summary = stderr(&out);
        (kernels_compiled(&summary), summary)
    };
    let ((o0, s0), (o1, s1), (o2, s2)) = (kernels("-O0"), kernels("-O1"), kernels("-O2"));
    // -O0: every imported op a kernel, no rewriting; -O1: rewritten (batch norms folded, but
    // Winograd's convs are three kernels each), unfused; -O2: fused, fewer kernels than -O1
    assert!(
        s0.contains("74 kernels for cpu (74 ops imported)") && !s0.contains("rewriting"),
        "{s0}"
    );
    assert!(s1.contains("rewriting") && o0 > 0 && o2 < o1, "{s0}\n{s1}\n{s2}");
    let read = mxc(&["read", &model, "--target", "cpu", "-O1"]);
    assert!(!String::from_utf8(read.stdout).unwrap().contains("mx.fused"));
    for level in ["-O0", "-O1"] {
        let out = mxc(&["verify", &model, level]);
        assert!(out.status.success(), "{level}: {}", stderr(&out));
    }
    let bad = mxc(&["compile", &model, "-o", "x.mxr", "-O3"]);
    assert!(!bad.status.success() && stderr(&bad).contains("-O <LEVEL>"));
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    use std::process::{Command, Stdio};
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    // the reader is gone before anything is printed, as `| head -1`'s would be soon
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_mxc"))
        .args(["read", &model])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.is_empty(), "{err}");
}
