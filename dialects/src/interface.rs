//! A model's interface where it is not all tensors: ONNX graph inputs and outputs that are
//! sequences or optionals. mx values are tensors, so such a value is carried by tensor ports
//! whose number is fixed when the model is compiled: a sequence of `n` tensors named `s` by
//! the ports `s[0]` .. `s[n-1]`, an optional by its value's ports or, when empty, by none.
//! The interface records how the model's values map to ports, so that the runtime can read a
//! sequence given for `s` into its ports and write the ports back as one sequence.

use std::fmt;

/// The structure of one of a model's values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Structure {
    /// One tensor, the port of the value's own name.
    Tensor,
    /// A sequence of this many tensors.
    Sequence(usize),
    /// An optional: of a sequence (else of a tensor), and what it holds, `None` when empty.
    Optional {
        of_sequence: bool,
        value: Option<Box<Structure>>,
    },
}

/// A model input or output and its structure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    pub name: String,
    pub structure: Structure,
}

/// A model's inputs and outputs, in order. Empty when every one is a tensor carried by the
/// port of its name (every program built from mx text).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
}

impl Interface {
    /// Whether every value is a tensor of its own port (nothing to record).
    pub fn is_plain(&self) -> bool {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .all(|v| v.structure == Structure::Tensor)
    }

    /// Checks that the values' ports are exactly the bindings' names, `inputs` and `outputs`
    /// (any order), for a plain interface too; says which differs.
    pub fn check(&self, inputs: &[&str], outputs: &[&str]) -> Result<(), String> {
        for (what, values, names) in [("input", &self.inputs, inputs), ("output", &self.outputs, outputs)] {
            if values.is_empty() {
                continue;
            }
            let mut ports: Vec<String> = values.iter().flat_map(|v| v.structure.ports(&v.name)).collect();
            let mut names: Vec<&str> = names.to_vec();
            ports.sort();
            names.sort_unstable();
            if ports != names {
                return Err(format!(
                    "the interface's {what}s are carried by [{}], the program's {what}s are [{}]",
                    ports.join(", "),
                    names.join(", ")
                ));
            }
        }
        Ok(())
    }
}

impl Structure {
    /// The names of the ports that carry a value named `name` of this structure, in order.
    pub fn ports(&self, name: &str) -> Vec<String> {
        match self {
            Structure::Tensor => vec![name.to_string()],
            Structure::Sequence(n) => (0..*n).map(|i| element_port(name, i)).collect(),
            Structure::Optional { value, .. } => value.as_ref().map_or_else(Vec::new, |v| v.ports(name)),
        }
    }
}

/// The port of element `i` of the sequence `name`.
pub fn element_port(name: &str, i: usize) -> String {
    format!("{name}[{i}]")
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Structure::Tensor => write!(f, "a tensor"),
            Structure::Sequence(n) => write!(f, "a sequence of {n} tensors"),
            Structure::Optional {
                of_sequence,
                value: None,
            } => {
                write!(
                    f,
                    "an empty optional {}",
                    if *of_sequence { "sequence" } else { "tensor" }
                )
            }
            Structure::Optional { value: Some(v), .. } => write!(f, "an optional holding {v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_carried_by_ports_named_after_them() {
        assert_eq!(Structure::Tensor.ports("x"), ["x"]);
        assert_eq!(Structure::Sequence(2).ports("s"), ["s[0]", "s[1]"]);
        assert!(Structure::Sequence(0).ports("s").is_empty());
        let present = Structure::Optional {
            of_sequence: true,
            value: Some(Box::new(Structure::Sequence(1))),
        };
        assert_eq!(present.ports("o"), ["o[0]"]);
        let empty = Structure::Optional {
            of_sequence: false,
            value: None,
        };
        assert!(empty.ports("o").is_empty());
        assert_eq!(empty.to_string(), "an empty optional tensor");
        assert_eq!(present.to_string(), "an optional holding a sequence of 1 tensors");
    }

    #[test]
    fn an_interface_of_tensors_is_plain() {
        let mut i = Interface {
            inputs: vec![Value {
                name: "x".into(),
                structure: Structure::Tensor,
            }],
            outputs: vec![],
        };
        assert!(i.is_plain());
        i.outputs.push(Value {
            name: "s".into(),
            structure: Structure::Sequence(0),
        });
        assert!(!i.is_plain());
    }
}
