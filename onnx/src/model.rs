//! The entry points: import an ONNX model from a file or from bytes, and read a serialized
//! `TensorProto` (the `.pb` files of the ONNX test data).

use super::data::{input_kinds, DataKind};
use super::importer::import_model;
use super::proto::{ModelProto, TensorProto};
use super::tensor::decode_tensor;
use super::ImportError;
use bytes::Bytes;
use mxc_dialects::interface::Structure;
use mxc_dialects::{Graph, Tensor};
use prost::Message;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What the model alone does not say.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes of graph inputs (by name), for inputs whose declared shape has named or
    /// missing dims; a shape given here replaces the declared one (they must agree).
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Inputs (by name) imported with symbolic dimensions (`mxc read --shape x=nx3x224x224`):
    /// their types are symbolic, and a node reading a symbolic value must be one whose parser
    /// imports symbolic sizes (`registry::imports_symbolic`).
    pub symbolic_shapes: HashMap<String, Vec<mxc_dialects::dim::Dim>>,
    /// Values of graph inputs that may be used where an op needs a compile-time value (the
    /// shape of a `Reshape`, the starts of a `Slice`, ...). The inputs stay graph inputs.
    pub specialize: HashMap<String, Tensor>,
    /// The structures of graph inputs that are sequences or optionals (a sequence's length,
    /// whether an optional holds a value); their tensors' shapes and values are given above
    /// under the names of their ports (`s[0]`, ...: `onnx/src/interface.rs`).
    pub structures: HashMap<String, Structure>,
    /// The most bytes a graph input or a computed tensor may take (constants are not
    /// limited: they are already in memory); `None` for `mxc_dialects::max_tensor_bytes()`,
    /// which is `MXC_MAX_TENSOR_BYTES` or the machine's memory.
    pub max_tensor_bytes: Option<usize>,
}

fn read(path: &Path) -> Result<Vec<u8>, ImportError> {
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ImportError::NotFound {
            path: path.to_path_buf(),
        },
        _ => ImportError::Read {
            path: path.to_path_buf(),
            source: e,
        },
    })
}

/// The bytes of the file at `path`: memory-mapped where it is a regular file (so that the
/// weights decoded from it are slices of the mapping, read from the page cache as they are
/// used, never copied), read otherwise. The mapping is read-only; like every reader of a
/// mapped file, a process that shortens the file while it is compiled makes this one fail.
fn load(path: &Path) -> Result<Bytes, ImportError> {
    let mapped = std::fs::File::open(path).ok().and_then(|file| {
        let regular = file.metadata().is_ok_and(|m| m.is_file() && m.len() > 0);
        // SAFETY: mapped read-only and only read through `Bytes`; see above for a file
        // changed underneath
        regular.then(|| unsafe { memmap2::Mmap::map(&file) }.ok()).flatten()
    });
    match mapped {
        Some(map) => Ok(Bytes::from_owner(map)),
        None => read(path).map(Bytes::from),
    }
}

pub(super) fn decode_model(path: &Path) -> Result<ModelProto, ImportError> {
    let bytes = load(path)?;
    ModelProto::decode(bytes).map_err(|source| ImportError::Decode {
        what: path.display().to_string(),
        source,
    })
}

/// What each input of the model in `path` is (a tensor, a sequence or an optional), by name,
/// for reading the values given for them.
pub fn model_input_kinds(path: &Path) -> Result<Vec<(String, DataKind)>, ImportError> {
    let model = decode_model(path)?;
    Ok(model.graph.as_ref().map(input_kinds).unwrap_or_default())
}

/// Imports the model in `path`; external data is looked for next to it.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Graph, ImportError> {
    let model = decode_model(path)?;
    let dir = path.parent().map(|d| {
        if d.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            d.to_path_buf()
        }
    });
    import_model(&model, dir, opts)
}

/// Imports a model from its serialized bytes; `model_dir` is the folder external data paths
/// are relative to (without it, a model with external data is refused).
pub fn import_bytes(bytes: &[u8], model_dir: Option<&Path>, opts: &ImportOptions) -> Result<Graph, ImportError> {
    let model = ModelProto::decode(bytes).map_err(|source| ImportError::Decode {
        what: "model bytes".into(),
        source,
    })?;
    import_model(&model, model_dir.map(Path::to_path_buf), opts)
}

/// Reads a serialized `TensorProto`: its name and value.
pub fn read_tensor_file(path: &Path) -> Result<(String, Tensor), ImportError> {
    let bytes = read(path)?;
    let proto = TensorProto::decode(bytes.as_slice()).map_err(|source| ImportError::Decode {
        what: path.display().to_string(),
        source,
    })?;
    let value = decode_tensor(&proto, path.parent())?;
    Ok((proto.name().to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::super::proto::tensor_proto::DataType;
    use super::super::testutil::*;
    use super::*;

    fn relu_model() -> ModelBuilder {
        ModelBuilder::new(17)
            .input("x", DataType::Float, &[2, 3])
            .node(node("Relu", &["x"], &["y"], vec![]))
            .output("y")
    }

    #[test]
    fn imports_a_small_model() {
        let text = relu_model().text();
        assert!(text.contains("(%arg0: tensor<2x3xf32> \"x\")"), "{text}");
        assert!(text.contains("%0 = mx.relu %arg0 : tensor<2x3xf32>"), "{text}");
        assert!(text.contains("return \"y\" = %0"), "{text}");
    }

    #[test]
    fn an_op_without_a_parser_is_named() {
        let mut n = node("Foo", &["x"], &["y"], vec![]);
        n.name = Some("conv1".into());
        let err = ModelBuilder::new(17)
            .input("x", DataType::Float, &[1])
            .node(n)
            .output("y")
            .error();
        assert_eq!(
            err,
            "node \"conv1\" (Foo, domain \"\", opset 17): no parser for this op"
        );
    }

    #[test]
    fn an_opset_newer_than_the_parsers_know_is_refused_by_number() {
        let newest = super::super::registry::NEWEST_OPSET;
        let at = |opset| {
            ModelBuilder::new(opset)
                .input("x", DataType::Float, &[2, 3])
                .node(node("Relu", &["x"], &["y"], vec![]))
                .output("y")
        };
        assert!(at(newest).import().is_ok());
        let err = at(newest + 1).error();
        assert!(
            err.starts_with(&format!("the model imports opset {} of the default domain", newest + 1))
                && err.contains(&format!("up to opset {newest}")),
            "{err}"
        );
    }

    #[test]
    fn an_attribute_the_parser_does_not_read_is_refused_by_name() {
        let relu = |attrs| {
            ModelBuilder::new(17)
                .input("x", DataType::Float, &[2, 3])
                .node(node("Relu", &["x"], &["y"], attrs))
                .output("y")
        };
        let err = relu(vec![int_attr("alpha", 1)]).error();
        assert!(
            err.ends_with("(Relu): attribute `alpha` is not supported (the parser does not read it)"),
            "{err}"
        );
        // an attribute without meaning for inference (old opsets' memory hint) is no reason
        assert!(relu(vec![ints_attr("consumed_inputs", &[0])]).import().is_ok());
    }

    #[test]
    fn truncated_bytes_are_a_decode_error() {
        let bytes = relu_model().bytes();
        for cut in [bytes.len() / 2, bytes.len() - 1, 3] {
            let err = import_bytes(&bytes[..cut], None, &ImportOptions::default())
                .map(|_| ())
                .unwrap_err();
            assert!(matches!(err, ImportError::Decode { .. }), "{err}");
            assert!(
                err.to_string().starts_with("model bytes: not a valid ONNX protobuf"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = import_file(Path::new("/nonexistent/m.onnx"), &ImportOptions::default())
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.to_string(), "/nonexistent/m.onnx: file not found");
    }

    #[test]
    fn named_dims_need_a_given_shape() {
        let model = || {
            ModelBuilder::new(17)
                .input("x", DataType::Float, &[-1, 3])
                .node(node("Relu", &["x"], &["y"], vec![]))
                .output("y")
        };
        assert_eq!(
            model().error(),
            "input \"x\": dimension 0 (\"n\") is not fixed; give the input's shape"
        );
        let mut opts = ImportOptions::default();
        opts.input_shapes.insert("x".into(), vec![5, 3]);
        let g = import_bytes(&model().bytes(), None, &opts).expect("imports");
        assert_eq!(g.ty(g.inputs[0].value).shape, vec![5, 3]);
        opts.input_shapes.insert("x".into(), vec![5, 4]);
        let err = import_bytes(&model().bytes(), None, &opts).map(|_| ()).unwrap_err();
        assert!(
            err.to_string().contains("does not fit the declared FLOAT [?, 3]"),
            "{err}"
        );
    }

    #[test]
    fn unsupported_input_types_are_named() {
        let err = ModelBuilder::new(17)
            .input("s", DataType::Complex128, &[1])
            .node(node("Identity", &["s"], &["y"], vec![]))
            .output("y")
            .error();
        assert_eq!(err, "input \"s\": element type COMPLEX128 is not supported");
    }

    #[test]
    fn outputs_that_are_inputs_or_constants_get_an_identity() {
        let text = ModelBuilder::new(17)
            .input("x", DataType::Float, &[2])
            .init(f32_tensor("w", &[1], &[1.0]))
            .output("x")
            .output("w")
            .text();
        assert!(text.contains("%1 = mx.identity %arg0"), "{text}");
        assert!(text.contains("%2 = mx.identity %0"), "{text}");
        assert!(text.contains("return \"x\" = %1, \"w\" = %2"), "{text}");
    }

    #[test]
    fn initializers_listed_as_inputs_are_constants() {
        let g = ModelBuilder::new(17)
            .input("x", DataType::Float, &[1])
            .input("w", DataType::Float, &[1])
            .init(f32_tensor("w", &[1], &[2.0]))
            .node(node("Mul", &["x", "w"], &["y"], vec![]))
            .output("y")
            .import()
            .expect("imports");
        assert_eq!(g.inputs.len(), 1);
    }

    #[test]
    fn compile_time_inputs_come_from_specialize() {
        let model = || {
            ModelBuilder::new(17)
                .input("x", DataType::Float, &[2, 3])
                .input("shape", DataType::Int64, &[1])
                .node(node("Reshape", &["x", "shape"], &["y"], vec![]))
                .output("y")
        };
        let err = model().error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (Reshape): input \"shape\" must be known at compile time"
        );
        let mut opts = ImportOptions::default();
        opts.specialize.insert(
            "shape".into(),
            Tensor::from_i64s(mxc_dialects::DType::I64, vec![1], &[-1]),
        );
        let g = import_bytes(&model().bytes(), None, &opts).expect("imports");
        assert_eq!(g.inputs.len(), 2, "a specialised input stays an input");
        assert_eq!(g.ty(g.outputs[0].value).shape, vec![6]);
    }

    #[test]
    fn declared_output_types_are_checked() {
        let mut m = relu_model();
        m.graph.output[0] = value_info("y", DataType::Float, &[2, 4]);
        assert_eq!(
            m.error(),
            "value \"y\": the model declares FLOAT [2, 4] but the nodes compute tensor<2x3xf32>"
        );
    }

    #[test]
    fn undefined_inputs_and_missing_opsets_are_errors() {
        let err = ModelBuilder::new(17)
            .node(node("Relu", &["nope"], &["y"], vec![]))
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (Relu): input \"nope\" is not defined before this node"
        );
        let mut n = node("Relu", &["x"], &["y"], vec![]);
        n.domain = Some("com.example".into());
        let err = ModelBuilder::new(17)
            .input("x", DataType::Float, &[1])
            .node(n)
            .output("y")
            .error();
        assert_eq!(
            err,
            "node #0 (output \"y\") (Relu, domain \"com.example\"): the model imports no opset for this domain"
        );
    }

    #[test]
    fn ai_onnx_is_the_default_domain() {
        let mut m = relu_model();
        let mut n = node("Relu", &["x"], &["z"], vec![]);
        n.domain = Some("ai.onnx".into());
        m = m.node(n).output("z");
        let mut model = super::super::proto::ModelProto::decode(m.bytes().as_slice()).expect("decodes");
        model.opset_import[0].domain = Some("ai.onnx".into());
        let g = import_bytes(&model.encode_to_vec(), None, &ImportOptions::default()).expect("imports");
        assert_eq!(g.outputs.len(), 2);
    }

    #[test]
    fn tensors_over_the_size_limit_are_named() {
        let limit = |bytes| ImportOptions {
            max_tensor_bytes: Some(bytes),
            ..ImportOptions::default()
        };
        let err = import_bytes(&relu_model().bytes(), None, &limit(20))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "input \"x\": shape [2, 3] of f32 takes 24 bytes, more than the tensor-size limit of 20 \
             bytes (MXC_MAX_TENSOR_BYTES, the memory and the process's limits set it)"
        );
        let mut expand = node("Expand", &["x", "shape"], &["y"], vec![]);
        expand.name = Some("big".into());
        let model = ModelBuilder::new(17)
            .input("x", DataType::Float, &[1, 2])
            .init(i64_tensor("shape", &[2], &[4, 2]))
            .node(expand)
            .output("y")
            .bytes();
        assert!(import_bytes(&model, None, &limit(32)).is_ok());
        let err = import_bytes(&model, None, &limit(31)).map(|_| ()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node \"big\" (Expand): mx.expand: the result shape [4, 2] of f32 takes 32 bytes, more than \
             the tensor-size limit of 31 bytes (MXC_MAX_TENSOR_BYTES, the memory and the process's limits set it)"
        );
    }

    #[test]
    fn reads_tensor_files() {
        let path = std::env::temp_dir().join(format!("mxc-tensor-{}.pb", std::process::id()));
        std::fs::write(&path, i64_tensor("t", &[2], &[4, -5]).encode_to_vec()).expect("writes");
        let (name, t) = read_tensor_file(&path).expect("reads");
        std::fs::remove_file(&path).ok();
        assert_eq!(name, "t");
        assert_eq!(t.to_i64_vec(), vec![4, -5]);
    }
}
