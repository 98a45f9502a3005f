//! Graph inputs and outputs that are sequences or optionals. mx values are tensors, so such a
//! value is carried by tensor ports (`mxc_dialects::interface`) whose structure is fixed at
//! import: a sequence input's length and its elements' shapes, and whether an optional input
//! holds a value, come from the import options (`--shape s=[2x3,4x3]`, `--shape o=none`, or
//! the values given to `mxc run`); an output's structure is the one its value has. The graph
//! records the model's interface, which the `.mxr` file keeps.

use super::importer::{Importer, OnnxValue, Sequence};
use super::proto::type_proto::Value as TypeValue;
use super::proto::{TypeProto, ValueInfoProto};
use super::tensor::require_dtype;
use super::{ImportError, ImportOptions};
use mxc_dialects::interface::{element_port, Structure, Value};

impl Importer {
    /// Adds the graph input `vi`, a tensor or the ports of a sequence or optional, and records
    /// its structure in the interface.
    pub(super) fn add_model_input(
        &mut self,
        vi: &ValueInfoProto,
        opts: &ImportOptions,
    ) -> Result<OnnxValue, ImportError> {
        let name = vi.name();
        let err = |message: String| ImportError::Input {
            input: name.to_string(),
            message,
        };
        let ty = vi.r#type.clone().unwrap_or_default();
        let structure = match (opts.structures.get(name), &ty.value) {
            (Some(s), _) => s.clone(),
            (None, Some(TypeValue::SequenceType(_))) => {
                return Err(err(format!(
                    "it is a sequence: give its length and its elements' shapes (--shape '{name}=[2x3,2x3]') or \
                     its value"
                )))
            }
            (None, Some(TypeValue::OptionalType(o))) => match o.elem_type.as_deref().and_then(|t| t.value.as_ref()) {
                Some(TypeValue::TensorType(_)) => Structure::Optional {
                    of_sequence: false,
                    value: Some(Box::new(Structure::Tensor)),
                },
                _ => {
                    return Err(err(format!(
                        "it is an optional sequence: say whether it holds one, and its length and shapes \
                         (--shape '{name}=[2x3]' or --shape {name}=none), or give its value"
                    )))
                }
            },
            (None, _) => Structure::Tensor,
        };
        let value = self.structured_input(name, &ty, &structure, opts)?;
        self.graph.interface.inputs.push(Value {
            name: name.to_string(),
            // what an optional holds when empty is the type's to say
            structure: value.structure(),
        });
        Ok(value)
    }

    /// The value of `structure` for a graph input of type `ty`, its tensors added as the
    /// inputs `port` or `port[i]`.
    fn structured_input(
        &mut self,
        port: &str,
        ty: &TypeProto,
        structure: &Structure,
        opts: &ImportOptions,
    ) -> Result<OnnxValue, ImportError> {
        let mismatch = |declared: &str| ImportError::Input {
            input: port.to_string(),
            message: format!("the model declares {declared} but {structure} is given"),
        };
        let element = |t: &Option<Box<TypeProto>>| t.as_deref().cloned().unwrap_or_default();
        let typed = |port: &str, ty: &TypeProto| ValueInfoProto {
            name: Some(port.to_string()),
            r#type: Some(ty.clone()),
            ..Default::default()
        };
        Ok(match (&ty.value, structure) {
            (None | Some(TypeValue::TensorType(_)), Structure::Tensor) => {
                OnnxValue::Tensor(self.add_tensor_input(port, &typed(port, ty), opts)?)
            }
            (Some(TypeValue::SequenceType(s)), Structure::Sequence(n)) => {
                let elem = element(&s.elem_type);
                let Some(TypeValue::TensorType(t)) = &elem.value else {
                    return Err(mismatch("a sequence of non-tensors"));
                };
                let dtype = require_dtype(t.elem_type()).map_err(|message| ImportError::Input {
                    input: port.to_string(),
                    message,
                })?;
                let elements = (0..*n)
                    .map(|i| {
                        let element_port = element_port(port, i);
                        self.add_tensor_input(&element_port, &typed(&element_port, &elem), opts)
                    })
                    .collect::<Result<Vec<_>, ImportError>>()?;
                OnnxValue::Sequence(Sequence { dtype, elements })
            }
            (Some(TypeValue::OptionalType(o)), given) => {
                let elem = element(&o.elem_type);
                let of_sequence = matches!(elem.value, Some(TypeValue::SequenceType(_)));
                // a tensor or sequence given for an optional input is held by it
                let held = match given {
                    Structure::Optional { value, .. } => value.as_deref(),
                    other => Some(other),
                };
                let value = match held {
                    Some(s) => Some(Box::new(self.structured_input(port, &elem, s, opts)?)),
                    None => None,
                };
                OnnxValue::Optional { of_sequence, value }
            }
            (Some(TypeValue::SequenceType(_)), _) => return Err(mismatch("a sequence")),
            (Some(TypeValue::TensorType(_)) | None, _) => return Err(mismatch("a tensor")),
            (Some(_), _) => return Err(mismatch("a map or sparse tensor, which are not supported")),
        })
    }

    /// Binds the graph outputs to their values' tensors (a sequence's as `name[i]`) and
    /// records their structures; the interface is cleared when every value is a tensor.
    pub(super) fn add_outputs(&mut self, outputs: &[ValueInfoProto]) -> Result<(), ImportError> {
        for vi in outputs {
            let name = vi.name();
            let value = match self.lookup(name) {
                Some(value) => value,
                None => OnnxValue::Tensor(self.produced(name)?),
            }
            .into_declared(vi.r#type.as_ref());
            if let OnnxValue::Tensor(v) = value {
                self.check_declared(vi, v)?;
            }
            let structure = value.structure();
            for (port, v) in structure.ports(name).iter().zip(value.tensors()) {
                self.add_output_port(port, v);
            }
            self.graph.interface.outputs.push(Value {
                name: name.to_string(),
                structure,
            });
        }
        if self.graph.interface.is_plain() {
            self.graph.interface = Default::default();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::tensor_proto::DataType;
    use super::super::proto::type_proto;
    use super::super::testutil::{node, value_info, ModelBuilder};
    use super::*;
    use mxc_dialects::Tensor;

    /// `vi`'s type wrapped: a sequence of it, or an optional of that when `optional`.
    fn wrapped(vi: ValueInfoProto, optional: bool) -> ValueInfoProto {
        let seq = TypeProto {
            value: Some(TypeValue::SequenceType(Box::new(type_proto::Sequence {
                elem_type: vi.r#type.map(Box::new),
            }))),
            ..Default::default()
        };
        let ty = match optional {
            false => seq,
            true => TypeProto {
                value: Some(TypeValue::OptionalType(Box::new(type_proto::Optional {
                    elem_type: Some(Box::new(seq)),
                }))),
                ..Default::default()
            },
        };
        ValueInfoProto {
            name: vi.name,
            r#type: Some(ty),
            ..Default::default()
        }
    }

    /// A model appending `x` to the sequence input `s` (an optional sequence when `optional`),
    /// whose elements have a dynamic first dimension.
    fn appending(optional: bool) -> ModelBuilder {
        let mut b = ModelBuilder::new(18).input("x", DataType::Float, &[3]);
        b.graph
            .input
            .push(wrapped(value_info("s", DataType::Float, &[-1]), optional));
        let nodes = match optional {
            true => vec![
                node("OptionalGetElement", &["s"], &["t"], vec![]),
                node("SequenceInsert", &["t", "x"], &["y"], vec![]),
            ],
            false => vec![node("SequenceInsert", &["s", "x"], &["y"], vec![])],
        };
        nodes.into_iter().fold(b, ModelBuilder::node).output("y")
    }

    fn import(b: ModelBuilder, opts: &ImportOptions) -> Result<mxc_dialects::Graph, ImportError> {
        super::super::import_bytes(&b.bytes(), None, opts)
    }

    #[test]
    fn a_sequence_input_is_carried_by_a_port_per_element() {
        let mut opts = ImportOptions::default();
        opts.structures.insert("s".into(), Structure::Sequence(2));
        opts.input_shapes.insert("s[0]".into(), vec![1]);
        opts.input_shapes.insert("s[1]".into(), vec![2]);
        opts.specialize
            .insert("s[1]".into(), Tensor::from_f32s(vec![2], &[1.0, 2.0]));
        let g = import(appending(false), &opts).unwrap();
        let names: Vec<&str> = g.inputs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "s[0]", "s[1]"]);
        let outputs: Vec<&str> = g.outputs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(outputs, ["y[0]", "y[1]", "y[2]"]);
        assert_eq!(g.ty(g.outputs[2].value).shape, [3]);
        assert_eq!(g.interface.inputs[1].structure, Structure::Sequence(2));
        assert_eq!(g.interface.outputs[0].structure, Structure::Sequence(3));
    }

    #[test]
    fn a_sequence_input_needs_its_structure() {
        let err = import(appending(false), &ImportOptions::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "input \"s\": it is a sequence: give its length and its elements' shapes (--shape 's=[2x3,2x3]') or \
             its value"
        );
        let mut opts = ImportOptions::default();
        opts.structures.insert("s".into(), Structure::Sequence(1));
        let err = import(appending(false), &opts).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("input \"s[0]\": dimension 0 (\"n\") is not fixed"),
            "{err}"
        );
    }

    #[test]
    fn an_optional_input_holds_what_is_given() {
        let mut opts = ImportOptions::default();
        opts.structures.insert("s".into(), Structure::Sequence(1));
        opts.input_shapes.insert("s[0]".into(), vec![3]);
        let g = import(appending(true), &opts).unwrap();
        let held = Structure::Optional {
            of_sequence: true,
            value: Some(Box::new(Structure::Sequence(1))),
        };
        assert_eq!(g.interface.inputs[1].structure, held);
        let empty = Structure::Optional {
            of_sequence: false,
            value: None,
        };
        opts.structures.insert("s".into(), empty);
        let err = import(appending(true), &opts).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node #0 (output \"t\") (OptionalGetElement): the optional is empty"
        );
        opts.structures.insert("s".into(), Structure::Tensor);
        opts.structures.insert("x".into(), Structure::Sequence(0));
        let err = import(appending(true), &opts).unwrap_err();
        assert_eq!(
            err.to_string(),
            "input \"x\": the model declares a tensor but a sequence of 0 tensors is given"
        );
    }
}
