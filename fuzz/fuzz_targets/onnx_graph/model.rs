//! An ONNX model chosen by the fuzzer's bytes: ops the importer has parsers for, at an opset
//! their parsers cover, their attributes named as the ONNX schemas name them
//! (`attributes.rs`), and sizes, indices and scalars drawn mostly from hostile values.

#[path = "attributes.rs"]
mod attributes;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use mxc_onnx::proto::attribute_proto::AttributeType;
use mxc_onnx::proto::tensor_proto::DataType;
use mxc_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use mxc_onnx::proto::type_proto::{self, Value};
use mxc_onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
use mxc_onnx::proto::{TensorProto, TensorShapeProto, TypeProto, ValueInfoProto};
use mxc_onnx::{supported_ops, OpSupport, NEWEST_OPSET};
use std::sync::OnceLock;

/// What an attribute holds.
#[derive(Clone, Copy, Debug)]
pub enum AttrKind {
    Int,
    Ints,
    Float,
    Floats,
    Str,
    Strs,
    Tensor,
    Graph,
}

/// Integers that break size arithmetic: zero, one, lengths and indices near the limits of
/// i32, u32, i64 and usize, and negatives.
const HOSTILE_INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    3,
    -2,
    1 << 20,
    1_000_000_000,
    (1 << 31) - 1,
    1 << 31,
    1 << 32,
    (1 << 32) + 1,
    1 << 40,
    1 << 62,
    i64::MAX,
    i64::MIN,
    -(1 << 31),
    i64::MAX / 2 + 1,
];

const HOSTILE_FLOATS: &[f32] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    1e-30,
    1e9,
    1e30,
    f32::MAX,
    f32::MIN_POSITIVE,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
];

/// Values string attributes take somewhere in ONNX (modes, directions, activations, ...).
const STRINGS: &[&str] = &[
    "",
    "constant",
    "reflect",
    "edge",
    "wrap",
    "linear",
    "nearest",
    "cubic",
    "bilinear",
    "bicubic",
    "TF",
    "IDF",
    "TFIDF",
    "forward",
    "reverse",
    "bidirectional",
    "NOTSET",
    "SAME_UPPER",
    "SAME_LOWER",
    "VALID",
    "half_pixel",
    "asymmetric",
    "align_corners",
    "tf_crop_and_resize",
    "floor",
    "ceil",
    "round_prefer_floor",
    "DCR",
    "CRD",
    "Relu",
    "Tanh",
    "Sigmoid",
    "sum",
    "mean",
    "max",
    "min",
    "none",
    "add",
    "mul",
    "tanh",
    "zeros",
    "border",
    "reflection",
    "ij,jk->ik",
    "i,i",
    "...ii->...i",
    "a",
    "LOWER",
    "UPPER",
    "HARD",
];

/// Element types of inputs and constants.
const DTYPES: &[DataType] = &[
    DataType::Float,
    DataType::Int64,
    DataType::Int32,
    DataType::Float16,
    DataType::Uint8,
    DataType::Int8,
    DataType::Bool,
    DataType::Double,
    DataType::Bfloat16,
    DataType::String,
    DataType::Uint16,
    DataType::Int4,
    DataType::Float8e4m3fn,
];

/// Every op the importer parses, once.
fn ops() -> &'static [OpSupport] {
    static OPS: OnceLock<Vec<OpSupport>> = OnceLock::new();
    OPS.get_or_init(supported_ops)
}

/// The attributes the ONNX schemas give `op` of `domain`; every attribute name of every op
/// for an op the schemas do not know (com.microsoft's).
fn attributes_of(domain: &str, op: &str) -> Vec<(&'static str, AttrKind)> {
    match attributes::ATTRIBUTES.iter().find(|(d, o, _)| *d == domain && *o == op) {
        Some((_, _, attrs)) => attrs.to_vec(),
        None => attributes::ATTRIBUTES
            .iter()
            .flat_map(|(_, _, attrs)| attrs.iter().copied())
            .collect(),
    }
}

/// A model of one to three nodes.
pub fn model_from(u: &mut Unstructured) -> Result<ModelProto> {
    let mut opsets: Vec<(String, i64)> = Vec::new();
    let graph = graph_from(u, 2, &mut opsets)?;
    Ok(ModelProto {
        ir_version: Some(*u.choose(&[3, 7, 8, 9, 10])?),
        opset_import: opsets
            .into_iter()
            .map(|(domain, version)| OperatorSetIdProto {
                domain: Some(domain),
                version: Some(version),
            })
            .collect(),
        graph: Some(graph),
        ..Default::default()
    })
}

/// A graph of one to three nodes reading up to three inputs and three initializers; `depth`
/// more levels of subgraphs may nest in its attributes. The opset each node's op needs is
/// added to `opsets` where its domain has none yet.
fn graph_from(u: &mut Unstructured, depth: u32, opsets: &mut Vec<(String, i64)>) -> Result<GraphProto> {
    let mut graph = GraphProto {
        name: Some(format!("g{depth}")),
        ..Default::default()
    };
    let mut values: Vec<String> = Vec::new();
    for i in 0..u.int_in_range(0..=3)? {
        let name = format!("in{depth}_{i}");
        graph.input.push(value_info(u, &name)?);
        values.push(name);
    }
    for i in 0..u.int_in_range(0..=3)? {
        let name = format!("c{depth}_{i}");
        graph.initializer.push(tensor(u, &name)?);
        values.push(name);
    }
    for n in 0..u.int_in_range(1..=3)? {
        let op = *u.choose(ops())?;
        let newest = if op.domain.is_empty() {
            NEWEST_OPSET
        } else {
            op.since.saturating_add(4)
        };
        let version = u.int_in_range(op.since.max(1)..=op.until.min(newest).max(op.since.max(1)))?;
        if !opsets.iter().any(|(d, _)| d == op.domain) {
            opsets.push((op.domain.to_string(), version));
        }
        let mut node = NodeProto {
            op_type: Some(op.op_type.to_string()),
            domain: (!op.domain.is_empty()).then(|| op.domain.to_string()),
            name: Some(format!("n{depth}_{n}")),
            ..Default::default()
        };
        for _ in 0..u.int_in_range(0..=5)? {
            // an empty name is an optional input left out
            let input = match u.ratio(1, 8)? || values.is_empty() {
                true => String::new(),
                false => u.choose(&values)?.clone(),
            };
            node.input.push(input);
        }
        for o in 0..u.int_in_range(1..=3)? {
            let name = format!("v{depth}_{n}_{o}");
            node.output.push(name.clone());
            values.push(name);
        }
        let known = attributes_of(op.domain, op.op_type);
        for _ in 0..u.int_in_range(0..=4)? {
            if let Some(&(name, kind)) = u.choose(&known).ok() {
                node.attribute.push(attribute(u, name, kind, depth, opsets)?);
            }
        }
        graph.node.push(node);
    }
    // one or two of the values as the graph's outputs, their types left to inference
    for _ in 0..u.int_in_range(1..=2)? {
        let name = u.choose(&values)?.clone();
        graph.output.push(ValueInfoProto {
            name: Some(name),
            ..Default::default()
        });
    }
    Ok(graph)
}

fn attribute(
    u: &mut Unstructured,
    name: &str,
    kind: AttrKind,
    depth: u32,
    opsets: &mut Vec<(String, i64)>,
) -> Result<AttributeProto> {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let (ty, kind) = match kind {
        AttrKind::Graph if depth == 0 => (AttributeType::Int, AttrKind::Int),
        AttrKind::Int => (AttributeType::Int, kind),
        AttrKind::Ints => (AttributeType::Ints, kind),
        AttrKind::Float => (AttributeType::Float, kind),
        AttrKind::Floats => (AttributeType::Floats, kind),
        AttrKind::Str => (AttributeType::String, kind),
        AttrKind::Strs => (AttributeType::Strings, kind),
        AttrKind::Tensor => (AttributeType::Tensor, kind),
        AttrKind::Graph => (AttributeType::Graph, kind),
    };
    a.r#type = Some(ty as i32);
    match kind {
        AttrKind::Int => a.i = Some(int(u)?),
        AttrKind::Ints => a.ints = list(u, int)?,
        AttrKind::Float => a.f = Some(float(u)?),
        AttrKind::Floats => a.floats = list(u, float)?,
        AttrKind::Str => a.s = Some(string(u)?.into_bytes()),
        AttrKind::Strs => a.strings = list(u, |u| Ok(string(u)?.into_bytes()))?,
        AttrKind::Tensor => a.t = Some(tensor(u, name)?),
        AttrKind::Graph => a.g = Some(graph_from(u, depth - 1, opsets)?),
    }
    Ok(a)
}

/// Up to eight items.
fn list<T>(u: &mut Unstructured, mut item: impl FnMut(&mut Unstructured) -> Result<T>) -> Result<Vec<T>> {
    (0..u.int_in_range(0..=8)?).map(|_| item(u)).collect()
}

/// A small integer most of the time, a hostile one otherwise.
fn int(u: &mut Unstructured) -> Result<i64> {
    match u.ratio(1, 3)? {
        true => Ok(*u.choose(HOSTILE_INTS)?),
        false => Ok(i64::from(u.int_in_range(-4i8..=8)?)),
    }
}

fn float(u: &mut Unstructured) -> Result<f32> {
    match u.ratio(1, 2)? {
        true => Ok(*u.choose(HOSTILE_FLOATS)?),
        false => Ok(f32::from(u.int_in_range(-8i8..=8)?) / 4.0),
    }
}

fn string(u: &mut Unstructured) -> Result<String> {
    match u.ratio(1, 8)? {
        true => Ok(String::from(u.arbitrary::<&str>()?)),
        false => Ok(u.choose(STRINGS)?.to_string()),
    }
}

/// A dimension: small mostly, hostile sometimes.
fn dim(u: &mut Unstructured) -> Result<i64> {
    match u.ratio(1, 6)? {
        true => Ok(*u.choose(HOSTILE_INTS)?),
        false => Ok(i64::from(u.int_in_range(0u8..=6)?)),
    }
}

/// A tensor input: an element type and a rank-0 to rank-4 shape whose dims may be named.
fn value_info(u: &mut Unstructured, name: &str) -> Result<ValueInfoProto> {
    let dims = (0..u.int_in_range(0..=4)?)
        .map(|_| {
            let value = match u.ratio(1, 8)? {
                true => dimension::Value::DimParam("n".into()),
                false => dimension::Value::DimValue(dim(u)?),
            };
            Ok(Dimension {
                value: Some(value),
                ..Default::default()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(Value::TensorType(type_proto::Tensor {
                elem_type: Some(*u.choose(DTYPES)? as i32),
                shape: Some(TensorShapeProto { dim: dims }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A constant of rank 0 to 2, its data as many items as its shape holds (up to 16, so that
/// shapes and indices are what the data says) or, now and then, a count that disagrees.
fn tensor(u: &mut Unstructured, name: &str) -> Result<TensorProto> {
    let dtype = *u.choose(DTYPES)?;
    let rank = u.int_in_range(0..=2)?;
    let mut dims: Vec<i64> = (0..rank)
        .map(|_| u.int_in_range(0u8..=4).map(i64::from))
        .collect::<Result<_>>()?;
    if u.ratio(1, 16)? {
        dims.push(dim(u)?);
    }
    let count = match dims.iter().try_fold(1i64, |n, &d| n.checked_mul(d)) {
        Some(n @ 0..=16) if !u.ratio(1, 16)? => n as usize,
        _ => u.int_in_range(0..=16)?,
    };
    let mut t = TensorProto {
        name: Some(name.into()),
        dims,
        data_type: Some(dtype as i32),
        ..Default::default()
    };
    match dtype {
        DataType::Float => t.float_data = (0..count).map(|_| float(u)).collect::<Result<_>>()?,
        DataType::Double => t.double_data = (0..count).map(|_| float(u).map(f64::from)).collect::<Result<_>>()?,
        DataType::Int64 => t.int64_data = (0..count).map(|_| int(u)).collect::<Result<_>>()?,
        DataType::String => t.string_data = (0..count).map(|_| Ok(string(u)?.into_bytes())).collect::<Result<_>>()?,
        // the rest in int32_data (bools, small integers, halves and bytes of floats as bits)
        _ => t.int32_data = (0..count).map(|_| int(u).map(|v| v as i32)).collect::<Result<_>>()?,
    }
    Ok(t)
}
