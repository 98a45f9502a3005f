//! The persistent kernel cache: a second compile takes every kernel from it and writes the same
//! bytes, damaged entries are misses, processes compiling at once share it, `--no-cache` leaves
//! it alone, and kernels are found by their code whatever their place in the program.

use crate::common::{cache_dir, repo, stderr};
use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::path::Path;
use std::process::{Command, Output};

fn mxc_with_cache(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxc"))
        .env("MXC_CACHE_DIR", cache)
        .args(args)
        .output()
        .expect("the mxc binary runs")
}

/// Compiles `model` to `out` with the cache in `cache`; the summary's (hits, compiled).
fn compile_counting(cache: &Path, model: &str, out: &Path) -> (usize, usize) {
    compile_counting_with(cache, model, out, &[])
}

/// `compile_counting` with more `flags` to `mxc compile`.
fn compile_counting_with(cache: &Path, model: &str, out: &Path, flags: &[&str]) -> (usize, usize) {
    let mut args = vec!["compile", model, "-o", out.to_str().unwrap()];
    args.extend(flags);
    let output = mxc_with_cache(cache, &args);
    assert!(output.status.success(), "mxc compile {model}: {}", stderr(&output));
    counts(&stderr(&output))
}

fn counts(summary: &str) -> (usize, usize) {
    let rest = summary
        .split("kernel cache: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no cache counts in {summary}"));
    let numbers: Vec<usize> = rest
        .split([' ', ',', ';'])
        .map_while(|w| (w != "compiled").then_some(w))
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 2, "{summary}");
    (numbers[0], numbers[1])
}

fn entries(cache: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(cache).unwrap().flatten() {
        files.extend(std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()));
    }
    files.sort();
    files
}

fn convnet() -> String {
    cache_dir("models/convnet").join("model.onnx").display().to_string()
}

#[test]
fn second_compile_takes_every_kernel_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (cold, warm) = (dir.path().join("cold.mxr"), dir.path().join("warm.mxr"));
    let (hits, compiled) = compile_counting(&cache, &convnet(), &cold);
    assert_eq!(hits, 0);
    assert!(compiled > 10, "{compiled} kernels compiled");
    assert_eq!(entries(&cache).len(), compiled, "one entry per distinct kernel");
    assert_eq!(compile_counting(&cache, &convnet(), &warm), (compiled, 0));
    assert!(
        std::fs::read(&cold).unwrap() == std::fs::read(&warm).unwrap(),
        "cold and warm compiles differ"
    );
}

/// The key is the kernels' code, whose element types are the program's precision: an `--fp16`
/// compile of a model cached in f32 finds none of its half-precision kernels, and a second
/// `--fp16` compile finds them all.
#[test]
fn a_program_in_another_precision_has_kernels_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("out.mxr");
    compile_counting(&cache, &convnet(), &out);
    let (_, compiled) = compile_counting_with(&cache, &convnet(), &out, &["--fp16"]);
    assert!(compiled > 0, "an --fp16 compile took every kernel from the f32 entries");
    assert_eq!(compile_counting_with(&cache, &convnet(), &out, &["--fp16"]).1, 0);
}

#[test]
fn damaged_entries_are_misses_and_are_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let (first, second) = (dir.path().join("first.mxr"), dir.path().join("second.mxr"));
    let (_, compiled) = compile_counting(&cache, &model, &first);
    let files = entries(&cache);
    assert_eq!(files.len(), compiled);
    for (i, file) in files.iter().enumerate() {
        let mut bytes = std::fs::read(file).unwrap();
        match i % 3 {
            0 => bytes.truncate(bytes.len() / 2),
            1 => *bytes.last_mut().unwrap() ^= 0x10,
            _ => bytes.clear(),
        }
        std::fs::write(file, bytes).unwrap();
    }
    assert_eq!(compile_counting(&cache, &model, &second), (0, compiled));
    assert!(std::fs::read(&first).unwrap() == std::fs::read(&second).unwrap());
    let run = |path: &str| {
        let out = mxc_with_cache(&cache, &["run", path]);
        assert!(out.status.success(), "mxc run {path}: {}", stderr(&out));
        out.stdout
    };
    assert_eq!(
        run(second.to_str().unwrap()),
        run(&model),
        "outputs after a damaged cache"
    );
    assert_eq!(
        compile_counting(&cache, &model, &second),
        (compiled, 0),
        "entries rewritten"
    );
}

#[test]
fn processes_compiling_at_once_share_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let outs: Vec<_> = (0..2).map(|i| dir.path().join(format!("{i}.mxr"))).collect();
    let children: Vec<_> = outs
        .iter()
        .map(|out| {
            Command::new(env!("CARGO_BIN_EXE_mxc"))
                .env("MXC_CACHE_DIR", &cache)
                .args(["compile", &convnet(), "-o", out.to_str().unwrap()])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert!(std::fs::read(&outs[0]).unwrap() == std::fs::read(&outs[1]).unwrap());
    let third = dir.path().join("third.mxr");
    let (hits, compiled) = compile_counting(&cache, &convnet(), &third);
    assert_eq!(compiled, 0, "{hits} hits");
    assert!(std::fs::read(&outs[0]).unwrap() == std::fs::read(&third).unwrap());
}

#[test]
fn no_cache_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let model = repo().join("examples/tiny_cnn.onnx").display().to_string();
    let mxr = dir.path().join("tiny.mxr");
    let out = mxc_with_cache(&cache, &["compile", &model, "-o", mxr.to_str().unwrap(), "--no-cache"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("kernel cache: off, "), "{}", stderr(&out));
    let out = mxc_with_cache(&cache, &["run", &model, "--no-cache"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!cache.exists(), "--no-cache made {}", cache.display());
}

/// `x` f32[2,3] → relu(x), after `prefix` other element-wise ops on x.
fn relu_graph(prefix: usize) -> Graph {
    let mut g = Graph::new("relu");
    let mut v = g.add_input("x", TensorType::new(DType::F32, vec![2, 3]));
    for _ in 0..prefix {
        v = g.build1(OpKind::Neg, vec![v], Attrs::new()).unwrap();
    }
    let y = g.build1(OpKind::Relu, vec![v], Attrs::new()).unwrap();
    g.add_output("y", y);
    g
}

#[test]
fn kernels_are_found_by_their_code_not_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let options = CompileOptions {
        cache: Some(dir.path().to_path_buf()),
        ..CompileOptions::default()
    };
    let alone = compile(&relu_graph(0), Target::Ref, &options).unwrap();
    assert_eq!((alone.cache.hits, alone.cache.misses), (0, 1));
    // Two negations (one kernel, used twice) then the relu at op index 2.
    let after = compile(&relu_graph(2), Target::Ref, &options).unwrap();
    assert_eq!((after.cache.hits, after.cache.misses), (1, 1));
    assert_eq!(after.program.steps.len(), 3);
    let exe = Executable::load(after.program, &after.library).unwrap();
    let x = Tensor::from_f32s(vec![2, 3], &[-1.0, 2.0, -3.0, 0.5, 0.0, -0.25]);
    let y = exe.run(&[("x".to_string(), x)].into_iter().collect()).unwrap();
    assert_eq!(y[0].1.to_f64_vec(), vec![0.0, 2.0, 0.0, 0.5, 0.0, 0.0]);
    let again = compile(&relu_graph(0), Target::Ref, &options).unwrap();
    assert_eq!((again.cache.hits, again.cache.misses), (1, 0));
    assert!(again.library == alone.library, "cold and warm libraries differ");
}
