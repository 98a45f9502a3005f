//! Input values for `mxc run`: `NAME=FILE` arguments (.npy, or an ONNX TensorProto,
//! SequenceProto or OptionalProto .pb) and seeded random values for the inputs not given. A
//! sequence or optional is given to the program as the tensors of its ports (`s[0]`, ...:
//! `mxc_dialects::interface`).

use anyhow::{bail, Result};
use mxc_dialects::interface::{element_port, Interface, Structure};
use mxc_dialects::program::Program;
use mxc_dialects::Tensor;
pub use mxc_lowering::onnx::data::DataKind;
use mxc_lowering::onnx::data::{read_value_file, DataValue};
use mxc_lowering::onnx::ImportOptions;
use std::collections::HashMap;
use std::path::Path;

/// Shapes by port name.
pub type Shapes = HashMap<String, Vec<usize>>;
/// The structures of sequence and optional inputs, by name.
pub type Structures = HashMap<String, Structure>;

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
            kinds = Some(mxc_lowering::onnx::model_input_kinds(model)?);
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

/// Parses `NAME=DIMS` arguments: `DIMS` like `1x3x224x224` (or `1,3,224,224`) for a tensor,
/// `[2x3,4x3]` for a sequence (its elements' shapes; `[]` when empty), `none` for an empty
/// optional. Returns the shapes by port and the structures of sequences and optionals.
pub fn parse_shapes(args: &[String]) -> Result<(Shapes, Structures)> {
    let mut shapes = HashMap::new();
    let mut structures = HashMap::new();
    for arg in args {
        let Some((name, dims)) = arg.split_once('=') else {
            bail!("--shape `{arg}`: expected NAME=DIMS, e.g. input=1x3x224x224");
        };
        let dims = dims.trim();
        let (structure, ports): (Option<Structure>, Vec<(String, &str)>) = if dims == "none" {
            let empty = Structure::Optional {
                of_sequence: false,
                value: None,
            };
            (Some(empty), vec![])
        } else if let Some(list) = dims.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
            let elements: Vec<&str> = list.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
            let ports = elements
                .iter()
                .enumerate()
                .map(|(i, d)| (element_port(name, i), *d))
                .collect();
            (Some(Structure::Sequence(elements.len())), ports)
        } else {
            (None, vec![(name.to_string(), dims)])
        };
        let twice = || anyhow::anyhow!("--shape `{name}` is given twice");
        if let Some(s) = structure {
            if structures.insert(name.to_string(), s).is_some() {
                return Err(twice());
            }
        }
        for (port, dims) in ports {
            let shape = parse_dims(arg, dims)?;
            if shapes.insert(port, shape).is_some() {
                return Err(twice());
            }
        }
    }
    Ok((shapes, structures))
}

/// One shape of `--shape arg`: `1x3x224x224` or `1,3,224,224` (`x` alone in a sequence's list).
fn parse_dims(arg: &str, dims: &str) -> Result<Vec<usize>> {
    let shape = dims
        .split(['x', ','])
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| anyhow::anyhow!("--shape `{arg}`: `{dims}` is not a list of dimensions like 1x3x224x224"))?;
    let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d.max(1)));
    if elements.is_none_or(|n| n > isize::MAX as usize) {
        bail!("--shape `{arg}`: {shape:?} has more elements than memory can address");
    }
    Ok(shape)
}

/// Import options for a model run on `given` inputs: their shapes fix dynamic dimensions (a
/// `--shape` must agree), their structures those of sequences and optionals, and their values
/// may be used where an op needs a compile-time value.
pub fn specialize(mut opts: ImportOptions, given: &Given) -> Result<ImportOptions> {
    for (name, structure) in &given.structures {
        match opts.structures.get(name) {
            Some(s) if s != structure => {
                bail!("input `{name}`: --shape says {s}, the value given is {structure}")
            }
            _ => opts.structures.insert(name.clone(), structure.clone()),
        };
    }
    let given = &given.tensors;
    for (name, value) in given {
        match opts.input_shapes.get(name) {
            Some(shape) if shape != value.shape() => {
                bail!(
                    "input `{name}`: --shape says {shape:?}, the value given has shape {:?}",
                    value.shape()
                )
            }
            _ => opts.input_shapes.insert(name.clone(), value.shape().to_vec()),
        };
    }
    opts.specialize = given.clone();
    Ok(opts)
}

/// The seed of the random inputs of `mxc run` (and of `mxc verify` without `--seed`).
pub const DEFAULT_SEED: u64 = 0x006d_7863;

/// Adds a seeded pseudo-random value for every program input not in `given`:
/// floats uniform in [-1, 1), integers and bools 0 or 1 (valid as indices and masks), strings
/// of up to 8 lowercase letters.
pub fn complete_seeded(
    program: &Program,
    given: HashMap<String, Tensor>,
    seed: u64,
) -> Result<HashMap<String, Tensor>> {
    complete_with(program, given, Fill::Seeded(seed))
}

/// What inputs that are not given are filled with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// Seeded pseudo-random values (see `complete`).
    Seeded(u64),
    /// Every element this number (a string element: its text).
    Constant(f64),
}

/// Adds a value made by `fill` for every program input not in `given`; an input larger than
/// the tensor-size limit (`mxc_dialects::max_tensor_bytes`) is refused, naming it.
pub fn complete_with(
    program: &Program,
    mut given: HashMap<String, Tensor>,
    fill: Fill,
) -> Result<HashMap<String, Tensor>> {
    let mut rng = SplitMix64(match fill {
        Fill::Seeded(seed) => seed,
        Fill::Constant(_) => 0,
    });
    for b in &program.inputs {
        let ty = &program.buffers[b.buffer].ty;
        if let Some(value) = given.get_mut(&b.name) {
            // a bf16 or narrow-typed value read from .npy comes as its numpy stand-in
            if let Some(retyped) = value.as_stood_in_for(ty.dtype) {
                *value = retyped;
            }
            continue;
        }
        ty.check_limit(mxc_dialects::max_tensor_bytes()?)
            .map_err(|e| anyhow::anyhow!("input `{}`: cannot make a value: {e}", b.name))?;
        let n = ty.num_elements();
        if ty.dtype == mxc_dialects::DType::Str {
            let text = |_| match fill {
                Fill::Constant(c) => c.to_string(),
                Fill::Seeded(_) => {
                    let len = rng.next() % 9;
                    (0..len).map(|_| char::from(b'a' + (rng.next() % 26) as u8)).collect()
                }
            };
            given.insert(
                b.name.clone(),
                Tensor::from_strings(ty.shape.clone(), (0..n).map(text).collect()),
            );
            continue;
        }
        let value = match (fill, ty.dtype.is_float()) {
            (Fill::Constant(c), true) => Tensor::from_f64s(ty.dtype, ty.shape.clone(), &vec![c; n]),
            (Fill::Constant(c), false) => Tensor::from_i64s(ty.dtype, ty.shape.clone(), &vec![c as i64; n]),
            (Fill::Seeded(_), true) => {
                let v: Vec<f64> = (0..n).map(|_| rng.unit() * 2.0 - 1.0).collect();
                Tensor::from_f64s(ty.dtype, ty.shape.clone(), &v)
            }
            (Fill::Seeded(_), false) => {
                let v: Vec<i64> = (0..n).map(|_| (rng.next() & 1) as i64).collect();
                Tensor::from_i64s(ty.dtype, ty.shape.clone(), &v)
            }
        };
        given.insert(b.name.clone(), value);
    }
    Ok(given)
}

/// A small, well-mixed generator (SplitMix64); reproducible across runs and platforms.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(args: &[&str]) -> Result<(Shapes, Structures)> {
        parse_shapes(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn shapes_give_sequence_lengths_and_empty_optionals() {
        let (dims, structures) = shapes(&["x=1,3", "s=[2x3, 4]", "e=[]", "o=none"]).unwrap();
        assert_eq!(dims["x"], [1, 3]);
        assert_eq!(dims["s[0]"], [2, 3]);
        assert_eq!(dims["s[1]"], [4]);
        assert_eq!(dims.len(), 3);
        assert_eq!(structures["s"], Structure::Sequence(2));
        assert_eq!(structures["e"], Structure::Sequence(0));
        assert_eq!(
            structures["o"],
            Structure::Optional {
                of_sequence: false,
                value: None
            }
        );
        let err = shapes(&["s=[2x3,a]"]).unwrap_err().to_string();
        assert_eq!(
            err,
            "--shape `s=[2x3,a]`: `a` is not a list of dimensions like 1x3x224x224"
        );
        let err = shapes(&["x=2", "x=3"]).unwrap_err().to_string();
        assert_eq!(err, "--shape `x` is given twice");
    }
}
