//! Kernels split across threads: outputs are bit-identical whatever the number of threads,
//! `mxc perf` says how many threads each kernel ran on, and a thread count of 0 is refused.

use crate::common::{cache_dir, mxc, stderr};
use std::path::Path;

/// The output files of `mxc run FILE ARGS -o DIR`, by name.
fn outputs(file: &Path, args: &[&str], dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut argv = vec!["run", file.to_str().unwrap(), "-o", dir.to_str().unwrap()];
    argv.extend(args);
    let out = mxc(&argv);
    assert!(out.status.success(), "mxc {argv:?}: {}", stderr(&out));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "mxc {argv:?} wrote no outputs");
    files
}

fn compiled(model: &str, dir: &Path) -> std::path::PathBuf {
    let onnx = cache_dir(&format!("models/{model}")).join("model.onnx");
    let file = dir.join(format!("{model}.mxr"));
    let out = mxc(&["compile", onnx.to_str().unwrap(), "-o", file.to_str().unwrap(), "-q"]);
    assert!(out.status.success(), "mxc compile {model}: {}", stderr(&out));
    file
}

#[test]
fn outputs_do_not_depend_on_the_number_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["convnet", "encoder"] {
        let file = compiled(model, dir.path());
        let run = |name: &str, args: &[&str]| {
            let out = dir.path().join(format!("{model}-{name}"));
            outputs(&file, args, &out)
        };
        let one = run("one", &["--threads", "1"]);
        assert_eq!(one, run("two", &["--threads", "2"]), "{model}: 2 threads");
        let every = run("every", &["--threads", "3", "--split-work", "0"]);
        assert_eq!(one, every, "{model}: every kernel split in 3");
    }
}

#[test]
fn perf_reports_the_threads_each_kernel_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = compiled("convnet", dir.path());
    let perf = |threads: &str| {
        let out = mxc(&["perf", file.to_str().unwrap(), "-n", "3", "--threads", threads]);
        assert!(out.status.success(), "mxc perf: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    // the column after the share and the rate: how many threads a call of the kernel runs on
    let threads_column = |report: &str| -> Vec<u32> {
        report
            .lines()
            .filter(|l| l.contains('%') && l.contains(" (") && !l.contains("runs on"))
            .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
            .collect()
    };
    let serial = perf("1");
    assert!(serial.starts_with("3 runs on 1 thread: median"), "{serial}");
    assert!(threads_column(&serial).iter().all(|&t| t == 1), "{serial}");
    let parallel = perf("2");
    assert!(parallel.starts_with("3 runs on 2 threads: median"), "{parallel}");
    let column = threads_column(&parallel);
    let kernels = parallel
        .lines()
        .find_map(|l| l.strip_prefix("kernels: ")?.split(' ').next()?.parse::<usize>().ok());
    assert_eq!(Some(column.len()), kernels, "{parallel}");
    // the convs are split; kernels too small to be worth it are not
    assert!(column.contains(&2) && column.contains(&1), "{parallel}");
    assert!(
        parallel.lines().any(|l| l.contains("  2  ") && l.contains("conv")),
        "{parallel}"
    );
}

#[test]
fn zero_threads_is_refused() {
    let model = crate::common::repo().join("examples/tiny_cnn.onnx");
    let out = mxc(&["run", model.to_str().unwrap(), "--threads", "0"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--threads"), "{err}");
}
