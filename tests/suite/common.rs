//! Shared helpers: where the test data lives, running the `mxc` binary, comparing tensors.

use mxc_dialects::Tensor;
use mxc_onnx::data::{read_value_file, DataKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A folder under `.cache/` made by `scripts/setup.sh`; a missing one fails the test loudly.
pub fn cache_dir(rel: &str) -> PathBuf {
    let dir = repo().join(".cache").join(rel);
    assert!(
        dir.is_dir(),
        "{} is missing: run `bash scripts/setup.sh` first",
        dir.display()
    );
    dir
}

/// The kernel cache of every `mxc` the tests run (never the user's): under the target folder,
/// emptied once per test run.
pub fn kernel_cache() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel-cache");
        let _ = std::fs::remove_dir_all(&dir);
        dir
    })
}

pub fn mxc(args: &[&str]) -> Output {
    mxc_with_env(args, &[])
}

/// `mxc` with these environment variables set too.
pub fn mxc_with_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxc"))
        .env("MXC_CACHE_DIR", kernel_cache())
        .envs(vars.iter().copied())
        .args(args)
        .output()
        .expect("the mxc binary runs")
}

/// `mxc` under an address-space limit of `kib` KiB (`ulimit -v`), without
/// `MXC_MAX_TENSOR_BYTES`, so that the limit it knows is the one the process has.
pub fn mxc_under_address_limit(kib: u64, args: &[&str]) -> Output {
    let script = format!("ulimit -v {kib} && exec \"$@\"");
    Command::new("sh")
        .args(["-c", &script, "mxc", env!("CARGO_BIN_EXE_mxc")])
        .args(args)
        .env("MXC_CACHE_DIR", kernel_cache())
        .env_remove("MXC_MAX_TENSOR_BYTES")
        .output()
        .expect("sh runs")
}

/// `mxc run MODEL --target TARGET --input INPUT -o OUT_DIR`, which must succeed.
pub fn mxc_run_to(model: &str, target: &str, input: &str, out_dir: &Path) {
    let out = mxc(&[
        "run",
        model,
        "--target",
        target,
        "--input",
        input,
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "mxc run {model} on {target}: {}", stderr(&out));
}

/// The case folders (each with a `model.onnx`) a script of `scripts/models` wrote into the
/// cache's `models/<set>`, in order; none is an error telling how to make them.
pub fn generated_cases(set: &str) -> Vec<PathBuf> {
    let root = cache_dir(&format!("models/{set}"));
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    cases.retain(|p| p.join("model.onnx").is_file());
    cases.sort();
    assert!(
        !cases.is_empty(),
        "{} holds no cases: rerun scripts/setup.sh",
        root.display()
    );
    cases
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `input_N.pb` / `output_N.pb` files of an ONNX test data set, in order.
pub fn data_files(set: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<(usize, PathBuf)> = std::fs::read_dir(set)
        .map(|rd| rd.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let n = name.strip_prefix(prefix)?.strip_suffix(".pb")?.parse().ok()?;
            Some((n, p))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

pub fn read_pb(path: &Path) -> Result<(String, Tensor), String> {
    mxc_onnx::read_tensor_file(path).map_err(|e| e.to_string())
}

/// The generated convnet and its test data set.
/// Whether this machine's cpu kernels sum bytes with VNNI (`vpdpbusd`): the cost model makes
/// quantised products and convolutions integer kernels only then (without it their exact
/// integer form is slower than f32: `FlopCost::integer`), so a test of which kernels a
/// quantised program holds asks this first, and checks the outputs either way.
pub fn integer_kernels_pay() -> bool {
    mxc_codegen::vector_isa(mxc_codegen::Target::Cpu, mxc_codegen::OptLevel::O2).is_some_and(|isa| isa.vnni)
}

pub fn convnet_case() -> (PathBuf, PathBuf) {
    let dir = cache_dir("models/convnet");
    (dir.join("model.onnx"), dir.join("test_data_set_0"))
}

/// Why `actual` is not within `fraction` of `expected`'s largest magnitude of it, if it is not.
pub fn not_close(actual: &Tensor, expected: &Tensor, fraction: f64) -> Option<String> {
    let largest = (0..expected.len())
        .map(|i| expected.get_f64(i).abs())
        .fold(0.0, f64::max);
    mismatch(actual, expected, 0.0, fraction * largest)
}

/// Why `actual` is not close to `expected` (|a - e| <= atol + rtol * |e| everywhere, NaN
/// matching NaN), or `None` when it is.
pub fn mismatch(actual: &Tensor, expected: &Tensor, rtol: f64, atol: f64) -> Option<String> {
    if let Some(why) = type_mismatch(actual, expected) {
        return Some(why);
    }
    if let (Some(a), Some(e)) = (actual.strings(), expected.strings()) {
        let i = a.iter().zip(&e).position(|(a, e)| a != e)?;
        return Some(format!(
            "element {i}: {:?} instead of {:?} (and maybe others)",
            a[i], e[i]
        ));
    }
    let actual = &as_reference_type(actual.clone(), expected);
    let mut worst: Option<(usize, f64, f64)> = None;
    for i in 0..actual.len() {
        let (a, e) = (actual.get_f64(i), expected.get_f64(i));
        let ok = (a.is_nan() && e.is_nan()) || a == e || (a - e).abs() <= atol + rtol * e.abs();
        if !ok && worst.is_none_or(|(_, wa, we)| (a - e).abs() > (wa - we).abs() || wa.is_nan()) {
            worst = Some((i, a, e));
        }
    }
    worst.map(|(i, a, e)| format!("element {i}: {a} instead of {e} (and maybe others)"))
}

/// Why `actual` cannot be compared with `expected` element by element (another type or
/// shape), or `None` when it can.
pub fn type_mismatch(actual: &Tensor, expected: &Tensor) -> Option<String> {
    let actual = as_reference_type(actual.clone(), expected);
    (actual.ty != expected.ty).then(|| format!("type {} instead of {}", actual.ty, expected.ty))
}

/// The names of a model's graph inputs that are not initializers, and of its outputs.
pub fn model_io_names(model: &Path) -> Result<(Vec<String>, Vec<String>), String> {
    let (inputs, outputs) = model_io(model)?;
    Ok((inputs, outputs.into_iter().map(|(name, _)| name).collect()))
}

/// A model output's name and kind.
pub type ModelOutput = (String, DataKind);

/// The names of a model's graph inputs that are not initializers, and its outputs' names and
/// kinds (tensor, sequence, optional).
pub fn model_io(model: &Path) -> Result<(Vec<String>, Vec<ModelOutput>), String> {
    use prost::Message;
    let bytes = std::fs::read(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let m = mxc_onnx::proto::ModelProto::decode(bytes.as_slice()).map_err(|e| format!("{}: {e}", model.display()))?;
    let g = m.graph.unwrap_or_default();
    let inputs = mxc_onnx::data::input_kinds(&g).into_iter().map(|(n, _)| n).collect();
    let outputs = g
        .output
        .iter()
        .map(|v| (v.name().to_string(), DataKind::declared(v.r#type.as_ref())))
        .collect();
    Ok((inputs, outputs))
}

/// The tensors of a test data set's expected outputs (`output_N.pb` of the model's N-th
/// output, of the kind it declares), a sequence's or optional's in order, named by port.
pub fn expected_outputs(model: &Path, set: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let (_, outputs) = model_io(model)?;
    let mut tensors = Vec::new();
    for ((name, kind), f) in outputs.iter().zip(data_files(set, "output_")) {
        let value = read_value_file(&f, *kind).map_err(|e| format!("expected output: {e}"))?;
        tensors.extend(value.ports(name));
    }
    Ok(tensors)
}

/// Runs `mxc run` on a model with the inputs of a test data set (`input_N.pb` is the N-th
/// graph input) and returns the outputs in graph order (a sequence's or optional's tensors in
/// order, as `expected_outputs` gives them), or the error text.
pub fn run_case(model: &Path, set: &Path, target: &str, extra: &[&str], out_dir: &Path) -> Result<Vec<Tensor>, String> {
    run_file(model, model, set, target, extra, out_dir)
}

/// `run_case` of `file`, the model itself or an `.mxr` compiled from it (which runs without
/// the inputs it is given being known when compiling), the names read from `model`.
pub fn run_file(
    model: &Path,
    file: &Path,
    set: &Path,
    target: &str,
    extra: &[&str],
    out_dir: &Path,
) -> Result<Vec<Tensor>, String> {
    run_file_with_env(model, file, set, (target, extra), out_dir, &[])
}

/// `run_file` with these environment variables set for `mxc`.
pub fn run_file_with_env(
    model: &Path,
    file: &Path,
    set: &Path,
    (target, extra): (&str, &[&str]),
    out_dir: &Path,
    vars: &[(&str, &str)],
) -> Result<Vec<Tensor>, String> {
    let (input_names, outputs) = model_io(model)?;
    let mut args: Vec<String> = vec![
        "run".into(),
        file.display().to_string(),
        "--target".into(),
        target.into(),
        "-o".into(),
        out_dir.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    for (name, f) in input_names.iter().zip(data_files(set, "input_")) {
        args.push("--input".into());
        args.push(format!("{name}={}", f.display()));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mxc_with_env(&argv, vars);
    if !out.status.success() {
        let err = stderr(&out);
        return Err(if err.is_empty() {
            format!("exit status {}", out.status)
        } else {
            err.trim().to_string()
        });
    }
    let mut tensors = Vec::new();
    for (name, kind) in outputs {
        let npy = out_dir.join(mxc_kernels::npy::file_name_for(&name));
        match kind {
            DataKind::Tensor => tensors.push(mxc_kernels::npy::read(&npy).map_err(|e| e.to_string())?),
            kind => {
                let value = read_value_file(&npy.with_extension("pb"), kind).map_err(|e| e.to_string())?;
                tensors.extend(value.ports(&name).into_iter().map(|(_, t)| t));
            }
        }
    }
    Ok(tensors)
}

/// `.npy` has no bfloat16 and no narrow types: mxc writes their bytes as a numpy type
/// (`DType::numpy_stand_in`), read back here as the reference's type.
fn as_reference_type(actual: Tensor, expected: &Tensor) -> Tensor {
    match actual.as_stood_in_for(expected.dtype()) {
        Some(t) if t.shape() == expected.shape() => t,
        _ => actual,
    }
}

/// A float tensor's ValueInfoProto; each dimension is a number or a symbolic name.
pub fn float_value(name: &str, dims: &[&str]) -> mxc_onnx::proto::ValueInfoProto {
    tensor_value(name, mxc_onnx::proto::tensor_proto::DataType::Float, dims)
}

/// A tensor's ValueInfoProto of element type `elem`; each dimension is a number or a symbolic
/// name.
pub fn tensor_value(
    name: &str,
    elem: mxc_onnx::proto::tensor_proto::DataType,
    dims: &[&str],
) -> mxc_onnx::proto::ValueInfoProto {
    use mxc_onnx::proto::{self, tensor_shape_proto::dimension::Value, tensor_shape_proto::Dimension};
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d.parse::<i64>() {
                Ok(n) => Value::DimValue(n),
                Err(_) => Value::DimParam(d.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    proto::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(proto::type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(proto::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A rank-1 i64 initializer (a shape, axes, pads).
pub fn int64_initializer(name: &str, values: &[i64]) -> mxc_onnx::proto::TensorProto {
    mxc_onnx::proto::TensorProto {
        name: Some(name.into()),
        dims: vec![values.len() as i64],
        data_type: Some(mxc_onnx::proto::tensor_proto::DataType::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// An ints attribute.
pub fn ints(name: &str, values: &[i64]) -> mxc_onnx::proto::AttributeProto {
    use mxc_onnx::proto;
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

/// A string attribute.
pub fn text(name: &str, value: &str) -> mxc_onnx::proto::AttributeProto {
    use mxc_onnx::proto;
    proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::String as i32),
        s: Some(value.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// An ONNX node of the default domain.
pub fn node(
    op: &str,
    inputs: &[&str],
    output: &str,
    attribute: Vec<mxc_onnx::proto::AttributeProto>,
) -> mxc_onnx::proto::NodeProto {
    mxc_onnx::proto::NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

/// The bytes of a model of `graph` (IR version 8, default-domain opset 17).
pub fn model_bytes(graph: mxc_onnx::proto::GraphProto) -> Vec<u8> {
    use mxc_onnx::proto;
    use prost::Message;
    proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The op names of printed mx IR, in order, constants left out and fused kernels' bodies
/// listed in place of the `mx.fused` op.
pub fn op_names(ir: &str) -> Vec<&str> {
    ir.lines()
        .filter_map(|l| l.split(" = mx.").nth(1)?.split([' ', '{']).next())
        .filter(|op| *op != "constant" && *op != "fused")
        .collect()
}

/// The kernels of printed mx IR: its top-level ops but constants (a fused op counts once).
pub fn kernel_count(ir: &str) -> usize {
    ir.lines()
        .filter(|l| l.starts_with("  %") && l.contains(" = mx.") && !l.contains(" = mx.constant "))
        .count()
}

/// `mxc read MODEL --target TARGET` followed by `extra` arguments: the graph that target lowers.
pub fn read_for_target(model: &str, target: &str, extra: &[&str]) -> String {
    let mut args = vec!["read", model, "--target", target];
    args.extend(extra);
    let out = mxc(&args);
    assert!(out.status.success(), "mxc {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Compiles the text-form program `src` for `target`, round-trips it through an `.mxr` file's
/// bytes (checking that the plan reads back as written) and loads it.
pub fn compile_and_load(src: &str, target: mxc_codegen::Target) -> mxc_kernels::Executable {
    use mxc_kernels::mxr::{self, Mxr};
    let g = mxc_dialects::text::parse(src).unwrap_or_else(|e| panic!("parsing: {e}"));
    let c = mxc_codegen::compile(&g, target, &mxc_codegen::CompileOptions::default())
        .unwrap_or_else(|e| panic!("compiling for {target}: {e}"));
    let file = Mxr::new(target.name(), "test", "", c.program, c.library);
    let bytes = mxr::encode(&file, None);
    let read = mxr::decode(&bytes, "test.mxr", None, &mxc_kernels::TrustPolicy::AnyIntact).expect("reads back");
    assert_eq!(read.program, file.program, "the plan round-trips through the file");
    mxc_kernels::Executable::load_planned(read.program, read.memory, &read.library).expect("loads")
}

/// `relu(x · w + b)` with x of 256 x 512 and w of 512 x 512, all inputs.
pub fn dense_model(dir: &Path) -> PathBuf {
    let graph = mxc_onnx::proto::GraphProto {
        name: Some("dense".into()),
        node: vec![
            node("MatMul", &["x", "w"], "xw", vec![]),
            node("Add", &["xw", "b"], "z", vec![]),
            node("Relu", &["z"], "y", vec![]),
        ],
        input: vec![
            float_value("x", &["256", "512"]),
            float_value("w", &["512", "512"]),
            float_value("b", &["512"]),
        ],
        output: vec![float_value("y", &["256", "512"])],
        ..Default::default()
    };
    let path = dir.join("dense.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path
}
