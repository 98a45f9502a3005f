//! Input values for `mxc run`: `NAME=FILE` arguments (.npy, or an ONNX TensorProto,
//! SequenceProto or OptionalProto .pb); the inputs not given are made by `mxc_driver::fill`. A
//! sequence or optional is given to the program as the tensors of its ports (`s[0]`, ...:
//! `mxc_dialects::interface`).

use anyhow::{bail, Result};
use mxc_dialects::interface::{Interface, Structure};
use mxc_dialects::Tensor;
pub use mxc_driver::fill::{complete_with, Fill, DEFAULT_SEED};
pub use mxc_driver::shapes::{fixed_shapes, parse_shapes, specialize, with_model_dims, Structures};
pub use mxc_onnx::data::DataKind;
use mxc_onnx::data::{read_value_file, DataValue};
use std::collections::HashMap;
use std::path::Path;

/// The values given: tensors by the ports that carry them, and the structures of the inputs
/// that are sequences or optionals.
#[derive(Clone, Debug, Default)]
pub struct Given {
    pub tensors: HashMap<String, Tensor>,
    pub structures: Structures,
}

/// Parses and loads every `NAME=FILE` argument; `kind_of` says what each input is (asked only
/// for `.pb` files, which do not say it themselves).
pub fn load(args: &[String], kind_of: &mut dyn FnMut(&str) -> Result<DataKind>) -> Result<Given> {
    let mut out = Given::default();
    for arg in args {
        let Some((name, file)) = arg.split_once('=') else {
            bail!("--input `{arg}`: expected NAME=FILE");
        };
        let path = Path::new(file);
        let value = match file.ends_with(".npy") {
            true => DataValue::Tensor(mxc_kernels::npy::read(path)?),
            false => read_value_file(path, kind_of(name)?)?,
        };
        let structure = value.structure();
        if structure != Structure::Tensor {
            out.structures.insert(name.to_string(), structure);
        }
        for (port, t) in value.ports(name) {
            if out.tensors.insert(port, t).is_some() {
                bail!("--input `{name}` is given twice");
            }
        }
    }
    Ok(out)
}

/// The kind of each input of a compiled program, by name (a tensor unless its interface says).
pub fn interface_kinds(interface: &Interface) -> impl FnMut(&str) -> Result<DataKind> + '_ {
    |name| {
        Ok(interface
            .inputs
            .iter()
            .find(|v| v.name == name)
            .map_or(DataKind::Tensor, |v| DataKind::of(&v.structure)))
    }
}

/// What each input of the ONNX model `model` is, read from the model when first asked.
pub fn model_kinds(model: &Path) -> impl FnMut(&str) -> Result<DataKind> + '_ {
    let mut kinds: Option<Vec<(String, DataKind)>> = None;
    move |name| {
        if kinds.is_none() {
            kinds = Some(mxc_onnx::model_input_kinds(model)?);
        }
        let known = kinds.as_deref().unwrap_or_default();
        match known.iter().find(|(n, _)| n == name) {
            Some((_, kind)) => Ok(*kind),
            None => bail!("--input `{name}`: the model has no input of this name"),
        }
    }
}

/// Checks that the sequences and optionals given have the structures `interface` was compiled
/// for (a compiled program's number of ports is fixed).
pub fn check_structures(given: &Given, interface: &Interface) -> Result<()> {
    for (name, structure) in &given.structures {
        match interface.inputs.iter().find(|v| &v.name == name) {
            Some(v) if &v.structure == structure => {}
            Some(v) => bail!(
                "input `{name}`: the program was compiled for {}, the value given is {structure}",
                v.structure
            ),
            None => bail!("input `{name}`: the program has no sequence or optional input of this name"),
        }
    }
    Ok(())
}
