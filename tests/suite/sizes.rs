//! Huge tensors: shapes whose element count or bytes overflow, and tensors larger than the
//! tensor-size limit, are one-line errors naming the input or node, never a wrapped size, a
//! panic or an abort.

use crate::common::{float_value, int64_initializer, model_bytes, mxc, mxc_under_address_limit, mxc_with_env, stderr};
use mxc_kernels::mxr;
use mxc_onnx::proto;
use std::path::Path;
use std::process::{Command, Output};

/// `mxc args` with `MXC_MAX_TENSOR_BYTES` set to `limit`.
fn mxc_with_limit(limit: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxc"))
        .env("MXC_MAX_TENSOR_BYTES", limit)
        .args(args)
        .output()
        .expect("the mxc binary runs")
}

/// Asserts that `out` failed with one error line containing every one of `needles`.
fn failed_naming(out: &Output, what: &str, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{what} did not exit with 1: {err}");
    assert!(!err.contains("panicked"), "{what} panicked: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: not a one-line error: {err}");
    for n in needles {
        assert!(err.contains(n), "error of {what} does not name `{n}`: {err}");
    }
}

fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> proto::NodeProto {
    proto::NodeProto {
        name: Some(name.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// Writes a model of `nodes` from input `x` (of `x_dims`) to output `y` (of `y_dims`).
fn write_model(
    dir: &Path,
    x_dims: &[&str],
    y_dims: &[&str],
    nodes: Vec<proto::NodeProto>,
    initializer: Vec<proto::TensorProto>,
) -> String {
    let graph = proto::GraphProto {
        name: Some("g".into()),
        node: nodes,
        initializer,
        input: vec![float_value("x", x_dims)],
        output: vec![float_value("y", y_dims)],
        ..Default::default()
    };
    let path = dir.join("model.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path.display().to_string()
}

/// `y = relu(x)`, `x` of shape `[n, 4]`.
fn relu_model(dir: &Path) -> String {
    write_model(
        dir,
        &["n", "4"],
        &["n", "4"],
        vec![node("act", "Relu", &["x"], &["y"])],
        vec![],
    )
}

#[test]
fn a_shape_whose_size_overflows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = relu_model(dir.path());
    let out_dir = dir.path().join("out");
    let mxr = dir.path().join("m.mxr").display().to_string();
    // the element count overflows (2^64), then only the bytes (2^62 elements of 4 bytes)
    let cases = [
        (
            "x=4611686018427387904x4",
            ["--shape `x=4611686018427387904x4`", "[4611686018427387904, 4]"],
        ),
        (
            "x=1152921504606846976x4",
            ["input \"x\"", "[1152921504606846976, 4] of f32 is too large"],
        ),
    ];
    for (shape, needles) in cases {
        for cmd in ["read", "compile", "run"] {
            let mut args = vec![cmd, model.as_str(), "--shape", shape];
            match cmd {
                "compile" => args.extend(["-o", mxr.as_str()]),
                "run" => args.extend(["-o", out_dir.to_str().unwrap()]),
                _ => {}
            }
            failed_naming(&mxc(&args), &format!("{cmd} {shape}"), &needles);
        }
    }
    assert!(!Path::new(&mxr).exists() && !out_dir.exists(), "nothing is written");
}

#[test]
fn a_huge_input_is_refused_at_compile_time() {
    let dir = tempfile::tempdir().unwrap();
    // 2^40 floats: 4 TiB, more than this machine's memory (the default limit)
    let model = write_model(
        dir.path(),
        &["1048576", "1048576"],
        &["1048576", "1048576"],
        vec![node("act", "Relu", &["x"], &["y"])],
        vec![],
    );
    let needles = [
        "input \"x\"",
        "[1048576, 1048576]",
        "4398046511104 bytes",
        "tensor-size limit",
    ];
    for cmd in ["read", "run"] {
        failed_naming(&mxc(&[cmd, &model]), cmd, &needles);
    }
    // the limit is configurable
    let model = relu_model(dir.path());
    let args = ["read", model.as_str(), "--shape", "x=256x4"];
    failed_naming(
        &mxc_with_limit("4095", &args),
        "read under a limit",
        &[
            "input \"x\"",
            "4096 bytes",
            "limit of 4095 bytes",
            "MXC_MAX_TENSOR_BYTES",
        ],
    );
    assert!(mxc_with_limit("4096", &args).status.success());
    failed_naming(
        &mxc_with_limit("lots", &args),
        "a bad limit",
        &["MXC_MAX_TENSOR_BYTES=lots"],
    );
}

#[test]
fn huge_computed_tensors_are_refused_at_compile_time() {
    let dir = tempfile::tempdir().unwrap();
    // Expand of a [1, 4] input to [2^40, 4]: 16 TiB
    let model = write_model(
        dir.path(),
        &["1", "4"],
        &["1099511627776", "4"],
        vec![node("big", "Expand", &["x", "shape"], &["y"])],
        vec![int64_initializer("shape", &[1 << 40, 4])],
    );
    let needles = [
        "\"big\" (Expand)",
        "[1099511627776, 4]",
        "17592186044416 bytes",
        "tensor-size limit",
    ];
    for cmd in ["read", "run"] {
        failed_naming(&mxc(&[cmd, &model]), cmd, &needles);
    }
    // Pad of a [4] input by 2^40 at the end
    let model = write_model(
        dir.path(),
        &["4"],
        &["1099511627780"],
        vec![node("wide", "Pad", &["x", "pads"], &["y"])],
        vec![int64_initializer("pads", &[0, 1 << 40])],
    );
    for cmd in ["read", "run"] {
        failed_naming(
            &mxc(&[cmd, &model]),
            cmd,
            &["\"wide\" (Pad)", "[1099511627776]", "tensor-size limit"],
        );
    }
}

/// Compiles `y = relu(x)` for `x` of shape [2, 4] and rewrites the type of its input or
/// output buffer in the `.mxr` to `shape`, and the kernel's record of that argument to match
/// (saturating: a plan whose sizes disagree with its kernels is refused before anything else).
fn mxr_with_shape(dir: &Path, output: bool, shape: Vec<usize>) -> String {
    let model = relu_model(dir);
    let path = dir.join("m.mxr");
    let out = mxc(&["compile", &model, "--shape", "x=2x4", "-o", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut file = mxr::read(&path, None, &Default::default()).unwrap();
    let p = &mut file.program;
    let buffer = if output {
        p.outputs[0].buffer
    } else {
        p.inputs[0].buffer
    };
    p.buffers[buffer].ty.shape = shape;
    let bytes = p.buffers[buffer].ty.num_bytes() as u64;
    let step = p
        .steps
        .iter()
        .position(|s| s.args.contains(&buffer))
        .expect("a step takes it");
    let arg = p.steps[step].args.iter().position(|&a| a == buffer).unwrap();
    let symbol = p.steps[step].symbol.clone();
    let kernel = p.kernels.iter_mut().find(|k| k.symbol == symbol).unwrap();
    kernel.arg_bytes[arg] = bytes;
    std::fs::write(&path, mxr::encode(&file, None)).unwrap();
    path.display().to_string()
}

#[test]
fn a_compiled_program_with_a_huge_input_makes_no_value_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let cases = [
        (
            vec![1 << 62, 4],
            "buffer 0 (tensor<4611686018427387904x4xf32>) has more bytes than the address space",
        ),
        (vec![1 << 40, 4], "tensor-size limit"),
    ];
    for (shape, needle) in cases {
        let mxr = mxr_with_shape(dir.path(), false, shape);
        for fill in ["--seed=1", "--fill0"] {
            let out = mxc(&["run", &mxr, fill, "-o", out_dir.to_str().unwrap()]);
            failed_naming(&out, &format!("run {fill}"), &[needle]);
        }
    }
    assert!(!out_dir.exists(), "no output is written");
}

#[test]
fn a_compiled_program_with_a_huge_output_writes_no_npy() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let mxr = mxr_with_shape(dir.path(), true, vec![1 << 62, 4]);
    let out = mxc(&["run", &mxr, "-o", out_dir.to_str().unwrap()]);
    failed_naming(&out, "run", &["invalid plan", "has more bytes than the address space"]);
    assert!(!out_dir.join("y.npy").exists(), "an .npy is written");
}

/// A model needing a 4 GiB temporary: an Expand of a [1, 4] input to [2^28, 4], reduced to
/// [1, 4].
fn model_with_a_4_gib_temporary(dir: &Path) -> String {
    let mut max = node("max", "ReduceMax", &["big"], &["y"]);
    max.attribute.push(proto::AttributeProto {
        name: Some("axes".into()),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ints: vec![0],
        ..Default::default()
    });
    write_model(
        dir,
        &["1", "4"],
        &["1", "4"],
        vec![node("big", "Expand", &["x", "shape"], &["big"]), max],
        vec![int64_initializer("shape", &[1 << 28, 4])],
    )
}

/// The one-line refusal of `model_with_a_4_gib_temporary` by `cmd`, under a limit of 3 GiB.
fn refused_as_over_3_gib(out: &Output, cmd: &str) {
    failed_naming(
        out,
        cmd,
        &[
            "\"big\" (Expand)",
            "[268435456, 4]",
            "4294967296 bytes",
            "tensor-size limit of 3221225472 bytes",
        ],
    );
}

/// Under an address-space limit (`ulimit -v`, 3 GiB), a model needing a 4 GiB temporary is
/// refused at compile time with one error naming the node and its bytes: the tensor-size limit
/// is the smallest of the process's limits and the machine's memory (`dialects/src/memory.rs`).
/// Without the ulimit the same model is accepted on a machine of more than 4 GiB.
#[test]
fn an_address_space_limit_bounds_the_tensors_a_model_may_make() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_with_a_4_gib_temporary(dir.path());
    for cmd in ["read", "run"] {
        refused_as_over_3_gib(&mxc_under_address_limit(3 << 20, &[cmd, &model]), cmd);
    }
}

/// The same inside a cgroup whose memory limit is 3 GiB: the cgroup file systems are faked
/// under a folder (`MXC_CGROUP_ROOT`) holding, for the cgroup `/proc/self/cgroup` names, a v2
/// `memory.max` and a v1 `memory.limit_in_bytes` of 3 GiB.
#[test]
fn a_cgroup_memory_limit_bounds_the_tensors_a_model_may_make() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_with_a_4_gib_temporary(dir.path());
    let root = dir.path().join("cgroup");
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").expect("/proc/self/cgroup");
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next().unwrap(), fields.next().unwrap(), fields.next().unwrap());
        let (folder, file) = match controllers {
            "" => (root.clone(), "memory.max"),
            c if c.split(',').any(|c| c == "memory") => (root.join("memory"), "memory.limit_in_bytes"),
            _ => continue,
        };
        let folder = folder.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(file), "3221225472\n").unwrap();
    }
    for cmd in ["read", "run"] {
        let out = mxc_with_env(&[cmd, &model], &[("MXC_CGROUP_ROOT", root.to_str().unwrap())]);
        refused_as_over_3_gib(&out, cmd);
    }
}

/// An input as large as the address-space limit (`ulimit -v` 8 GiB, an input of 2^31 f32: 8
/// GiB, within the tensor-size limit that ulimit sets) cannot be made for `mxc run`: it is
/// refused with an error naming the input, not an abort. `mxc run` once built the random
/// values as f64 first, twice the input's bytes (an outside fuzzer's finding: `memory
/// allocation of 17179869184 bytes failed`); it now writes them straight into the tensor's
/// bytes, allocated fallibly (`Tensor::try_from_fn`).
#[test]
fn an_input_as_large_as_the_address_space_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(
        dir.path(),
        &["2147483648"],
        &["2147483648"],
        vec![node("act", "Relu", &["x"], &["y"])],
        vec![],
    );
    let out = mxc_under_address_limit(8 << 20, &["run", &model]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("input `x`"), "{message}");
    assert!(
        message.contains("cannot allocate") || message.contains("tensor-size limit"),
        "{message}"
    );
}
