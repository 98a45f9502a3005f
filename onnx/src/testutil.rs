//! Test helpers: building small ONNX models with the protobuf types, importing them and
//! printing the result.

use super::proto::tensor_proto::DataType;
use super::proto::tensor_shape_proto::{dimension, Dimension};
use super::proto::type_proto::{self, Value};
use super::proto::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
};
use super::proto::{TensorProto, TensorShapeProto, TypeProto, ValueInfoProto};
use super::{import_bytes, ImportError, ImportOptions};
use mxc_dialects::Graph;
use prost::Message;

/// A value info of element type `ty` with `dims` (`-1` for a named dim `"n"`).
pub fn value_info(name: &str, ty: DataType, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(if d < 0 {
                dimension::Value::DimParam("n".into())
            } else {
                dimension::Value::DimValue(d)
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(Value::TensorType(type_proto::Tensor {
                elem_type: Some(ty as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

pub fn bool_tensor(name: &str, dims: &[i64], values: &[bool]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Bool as i32),
        int32_data: values.iter().map(|&b| b as i32).collect(),
        ..Default::default()
    }
}

pub fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        float_data: values.to_vec(),
        ..Default::default()
    }
}

pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub fn floats_attr(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Floats as i32),
        floats: v.to_vec(),
        ..Default::default()
    }
}

/// A subgraph attribute (`If`'s branches, `FlexAttention`'s modifiers).
pub fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

pub fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

pub fn tensor_attr(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(t),
        ..Default::default()
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A model of one graph at `opset` of the default domain (and of other domains it imports).
pub struct ModelBuilder {
    pub graph: GraphProto,
    pub opset: i64,
    pub domains: Vec<(String, i64)>,
}

impl ModelBuilder {
    pub fn new(opset: i64) -> Self {
        ModelBuilder {
            graph: GraphProto {
                name: Some("test".into()),
                ..Default::default()
            },
            opset,
            domains: vec![],
        }
    }

    /// Also imports `domain` at `version` (for ops outside the default domain).
    pub fn domain(mut self, domain: &str, version: i64) -> Self {
        self.domains.push((domain.into(), version));
        self
    }

    pub fn input(mut self, name: &str, ty: DataType, dims: &[i64]) -> Self {
        self.graph.input.push(value_info(name, ty, dims));
        self
    }

    pub fn init(mut self, t: TensorProto) -> Self {
        self.graph.initializer.push(t);
        self
    }

    pub fn node(mut self, n: NodeProto) -> Self {
        self.graph.node.push(n);
        self
    }

    /// An output with no declared type.
    pub fn output(mut self, name: &str) -> Self {
        self.graph.output.push(ValueInfoProto {
            name: Some(name.into()),
            ..Default::default()
        });
        self
    }

    pub fn bytes(self) -> Vec<u8> {
        ModelProto {
            ir_version: Some(8),
            opset_import: std::iter::once((String::new(), self.opset))
                .chain(self.domains)
                .map(|(domain, version)| OperatorSetIdProto {
                    domain: Some(domain),
                    version: Some(version),
                })
                .collect(),
            graph: Some(self.graph),
            ..Default::default()
        }
        .encode_to_vec()
    }

    pub fn import(self) -> Result<Graph, ImportError> {
        import_bytes(&self.bytes(), None, &ImportOptions::default())
    }

    /// The imported graph, verified, as text.
    pub fn text(self) -> String {
        match self.import() {
            Ok(g) => {
                if let Err(e) = mxc_dialects::verify(&g) {
                    panic!("the imported graph does not verify: {e}");
                }
                mxc_dialects::text::print(&g)
            }
            Err(e) => panic!("import failed: {e}"),
        }
    }

    /// The import error, as text.
    pub fn error(self) -> String {
        match self.import() {
            Ok(g) => panic!("import succeeded:\n{}", mxc_dialects::text::print(&g)),
            Err(e) => e.to_string(),
        }
    }
}
