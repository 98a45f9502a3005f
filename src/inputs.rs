//! Input values for `mxc run`: `NAME=FILE` arguments (.npy or TensorProto .pb) and seeded
//! random values for the inputs not given.

use anyhow::{bail, Result};
use mxc_dialects::program::Program;
use mxc_dialects::Tensor;
use mxc_lowering::onnx::ImportOptions;
use std::collections::HashMap;
use std::path::Path;

/// Parses and loads every `NAME=FILE` argument.
pub fn load(args: &[String]) -> Result<HashMap<String, Tensor>> {
    let mut out = HashMap::new();
    for arg in args {
        let Some((name, file)) = arg.split_once('=') else {
            bail!("--input `{arg}`: expected NAME=FILE");
        };
        let path = Path::new(file);
        let value = if file.ends_with(".npy") {
            mxc_kernels::npy::read(path)?
        } else {
            mxc_lowering::onnx::read_tensor_file(path)?.1
        };
        if out.insert(name.to_string(), value).is_some() {
            bail!("--input `{name}` is given twice");
        }
    }
    Ok(out)
}

/// Parses `NAME=DIMS` arguments (`DIMS` like `1x3x224x224`, or `1,3,224,224`).
pub fn parse_shapes(args: &[String]) -> Result<HashMap<String, Vec<usize>>> {
    let mut out = HashMap::new();
    for arg in args {
        let Some((name, dims)) = arg.split_once('=') else {
            bail!("--shape `{arg}`: expected NAME=DIMS, e.g. input=1x3x224x224");
        };
        let shape = dims
            .split(['x', ','])
            .map(|d| d.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| anyhow::anyhow!("--shape `{arg}`: `{dims}` is not a list of dimensions like 1x3x224x224"))?;
        let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d.max(1)));
        if elements.is_none_or(|n| n > isize::MAX as usize) {
            bail!("--shape `{arg}`: {shape:?} has more elements than memory can address");
        }
        if out.insert(name.to_string(), shape).is_some() {
            bail!("--shape `{name}` is given twice");
        }
    }
    Ok(out)
}

/// Import options for a model run on `given` inputs: their shapes fix dynamic dimensions (a
/// `--shape` must agree) and their values may be used where an op needs a compile-time value.
pub fn specialize(mut opts: ImportOptions, given: &HashMap<String, Tensor>) -> Result<ImportOptions> {
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
/// floats uniform in [-1, 1), integers and bools 0 or 1 (valid as indices and masks).
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
    /// Every element this number.
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
