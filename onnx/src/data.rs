//! ONNX values in files, as the backend test data stores them and `mxc run` reads and writes
//! them: a tensor (`TensorProto`), a sequence (`SequenceProto`) or an optional
//! (`OptionalProto`). A `.pb` file does not say which message it holds, so the reader is told
//! (by the type the model declares, or by a compiled program's interface).

use super::proto::{type_proto::Value as TypeValue, GraphProto, OptionalProto, SequenceProto, TensorProto, TypeProto};
use super::tensor::{decode_tensor, encode_tensor};
use super::ImportError;
use mxc_dialects::interface::{element_port, Structure};
use mxc_dialects::Tensor;
use prost::Message;
use std::path::Path;

/// `SequenceProto.elem_type` and `OptionalProto.elem_type` codes.
const TENSOR: i32 = 1;
const SEQUENCE: i32 = 3;
const OPTIONAL: i32 = 5;

/// What a model value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    Tensor,
    Sequence,
    Optional,
}

impl DataKind {
    /// The kind of a value of `structure`.
    pub fn of(structure: &Structure) -> DataKind {
        match structure {
            Structure::Tensor => DataKind::Tensor,
            Structure::Sequence(_) => DataKind::Sequence,
            Structure::Optional { .. } => DataKind::Optional,
        }
    }

    /// The kind of a value of the declared type `ty` (a tensor when it declares none).
    pub fn declared(ty: Option<&TypeProto>) -> DataKind {
        match ty.and_then(|t| t.value.as_ref()) {
            Some(TypeValue::SequenceType(_)) => DataKind::Sequence,
            Some(TypeValue::OptionalType(_)) => DataKind::Optional,
            _ => DataKind::Tensor,
        }
    }
}

/// A model value: a tensor, a sequence of tensors, or an optional tensor or sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum DataValue {
    Tensor(Tensor),
    Sequence(Vec<Tensor>),
    Optional {
        of_sequence: bool,
        value: Option<Box<DataValue>>,
    },
}

impl DataValue {
    /// Its structure, as a program's interface records it.
    pub fn structure(&self) -> Structure {
        match self {
            DataValue::Tensor(_) => Structure::Tensor,
            DataValue::Sequence(s) => Structure::Sequence(s.len()),
            DataValue::Optional { of_sequence, value } => Structure::Optional {
                of_sequence: *of_sequence,
                value: value.as_ref().map(|v| Box::new(v.structure())),
            },
        }
    }

    /// Its tensors named by the ports that carry a value `name` (`name`, `name[i]`), in order.
    pub fn ports(&self, name: &str) -> Vec<(String, Tensor)> {
        match self {
            DataValue::Tensor(t) => vec![(name.to_string(), t.clone())],
            DataValue::Sequence(s) => s
                .iter()
                .enumerate()
                .map(|(i, t)| (element_port(name, i), t.clone()))
                .collect(),
            DataValue::Optional { value, .. } => value.as_ref().map_or_else(Vec::new, |v| v.ports(name)),
        }
    }

    /// The value of `structure` whose tensors are `tensors`, in port order (`ports`'s inverse);
    /// `None` when there are too few.
    pub fn from_ports(structure: &Structure, tensors: &mut impl Iterator<Item = Tensor>) -> Option<DataValue> {
        Some(match structure {
            Structure::Tensor => DataValue::Tensor(tensors.next()?),
            Structure::Sequence(n) => DataValue::Sequence((0..*n).map(|_| tensors.next()).collect::<Option<_>>()?),
            Structure::Optional { of_sequence, value } => DataValue::Optional {
                of_sequence: *of_sequence,
                value: match value {
                    Some(s) => Some(Box::new(DataValue::from_ports(s, tensors)?)),
                    None => None,
                },
            },
        })
    }
}

/// The kinds of `g`'s inputs that are not initializers, by name.
pub fn input_kinds(g: &GraphProto) -> Vec<(String, DataKind)> {
    g.input
        .iter()
        .filter(|vi| !g.initializer.iter().any(|t| t.name() == vi.name()))
        .map(|vi| (vi.name().to_string(), DataKind::declared(vi.r#type.as_ref())))
        .collect()
}

/// Reads the value of `kind` serialized in the file at `path`.
pub fn read_value_file(path: &Path, kind: DataKind) -> Result<DataValue, ImportError> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let decode_err = |source| ImportError::Decode {
        what: what.clone(),
        source,
    };
    let dir = path.parent();
    match kind {
        DataKind::Tensor => Ok(DataValue::Tensor(decode_tensor(
            &TensorProto::decode(bytes.as_slice()).map_err(decode_err)?,
            dir,
        )?)),
        DataKind::Sequence => sequence(
            &SequenceProto::decode(bytes.as_slice()).map_err(decode_err)?,
            dir,
            &what,
        ),
        DataKind::Optional => optional(
            &OptionalProto::decode(bytes.as_slice()).map_err(decode_err)?,
            dir,
            &what,
        ),
    }
}

fn unsupported(what: &str, message: String) -> ImportError {
    ImportError::Tensor {
        tensor: what.to_string(),
        message,
    }
}

fn sequence(s: &SequenceProto, dir: Option<&Path>, what: &str) -> Result<DataValue, ImportError> {
    if s.elem_type() != TENSOR && !(s.elem_type() == 0 && s.sequence_values.is_empty()) {
        return Err(unsupported(
            what,
            format!(
                "a sequence of element type {}: only sequences of tensors are supported",
                s.elem_type()
            ),
        ));
    }
    let tensors = s
        .tensor_values
        .iter()
        .map(|t| decode_tensor(t, dir))
        .collect::<Result<_, _>>()?;
    Ok(DataValue::Sequence(tensors))
}

fn optional(o: &OptionalProto, dir: Option<&Path>, what: &str) -> Result<DataValue, ImportError> {
    let (of_sequence, value) = match (o.elem_type(), &o.tensor_value, &o.sequence_value) {
        (TENSOR, Some(t), _) => (false, Some(DataValue::Tensor(decode_tensor(t, dir)?))),
        (TENSOR, None, _) => (false, None),
        (SEQUENCE, _, Some(s)) => (true, Some(sequence(s, dir, what)?)),
        (SEQUENCE, _, None) => (true, None),
        // an empty optional whose element type is left undefined
        (0, None, None) if o.optional_value.is_none() => (false, None),
        (code, ..) => {
            return Err(unsupported(
                what,
                format!("an optional of element type {code}: only optional tensors and sequences are supported"),
            ))
        }
    };
    Ok(DataValue::Optional {
        of_sequence,
        value: value.map(Box::new),
    })
}

/// `value`, named `name`, serialized as the message its kind is stored as.
pub fn encode_value(name: &str, value: &DataValue) -> Vec<u8> {
    match value {
        DataValue::Tensor(t) => encode_tensor(name, t).encode_to_vec(),
        DataValue::Sequence(s) => sequence_proto(name, s).encode_to_vec(),
        DataValue::Optional { of_sequence, value } => {
            optional_proto(name, *of_sequence, value.as_deref()).encode_to_vec()
        }
    }
}

fn optional_proto(name: &str, of_sequence: bool, value: Option<&DataValue>) -> OptionalProto {
    let mut o = OptionalProto {
        name: Some(name.to_string()),
        elem_type: Some(if of_sequence { SEQUENCE } else { TENSOR }),
        ..Default::default()
    };
    match value {
        Some(DataValue::Tensor(t)) => o.tensor_value = Some(encode_tensor("", t)),
        Some(DataValue::Sequence(s)) => o.sequence_value = Some(sequence_proto("", s)),
        Some(DataValue::Optional { of_sequence, value }) => {
            o.elem_type = Some(OPTIONAL);
            o.optional_value = Some(Box::new(optional_proto("", *of_sequence, value.as_deref())));
        }
        None => {}
    }
    o
}

fn sequence_proto(name: &str, s: &[Tensor]) -> SequenceProto {
    SequenceProto {
        name: Some(name.to_string()),
        elem_type: Some(TENSOR),
        tensor_values: s.iter().map(|t| encode_tensor("", t)).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mxc_dialects::DType;

    fn roundtrip(value: &DataValue, kind: DataKind) -> DataValue {
        let dir = std::env::temp_dir().join(format!("mxc-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{kind:?}.pb"));
        std::fs::write(&path, encode_value("v", value)).unwrap();
        let back = read_value_file(&path, kind).unwrap();
        std::fs::remove_file(&path).unwrap();
        back
    }

    #[test]
    fn values_of_every_kind_survive_a_file() {
        let a = Tensor::from_f32s(vec![2], &[1.0, -2.0]);
        let b = Tensor::from_i64s(DType::I4, vec![3], &[-1, 7, -8]);
        let values = [
            (DataValue::Tensor(b.clone()), DataKind::Tensor),
            (DataValue::Sequence(vec![a.clone(), a.clone()]), DataKind::Sequence),
            (DataValue::Sequence(vec![]), DataKind::Sequence),
            (
                DataValue::Optional {
                    of_sequence: true,
                    value: Some(Box::new(DataValue::Sequence(vec![b]))),
                },
                DataKind::Optional,
            ),
            (
                DataValue::Optional {
                    of_sequence: false,
                    value: None,
                },
                DataKind::Optional,
            ),
        ];
        for (value, kind) in values {
            assert_eq!(roundtrip(&value, kind), value);
        }
    }

    #[test]
    fn a_value_is_carried_by_the_ports_of_its_structure() {
        let a = Tensor::from_f32s(vec![1], &[1.0]);
        let v = DataValue::Optional {
            of_sequence: true,
            value: Some(Box::new(DataValue::Sequence(vec![a.clone(), a]))),
        };
        let ports = v.ports("s");
        let names: Vec<&str> = ports.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["s[0]", "s[1]"]);
        let back = DataValue::from_ports(&v.structure(), &mut ports.into_iter().map(|(_, t)| t));
        assert_eq!(back, Some(v));
    }
}
