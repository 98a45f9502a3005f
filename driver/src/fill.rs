//! Values for the inputs a caller does not give: seeded pseudo-random ones (reproducible on
//! every machine) or a constant, of the type the program takes.

use crate::error::{invalid, Result};
use mxc_dialects::program::Program;
use mxc_dialects::{Tensor, TensorType};
use std::collections::HashMap;

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
    complete_with(program, &HashMap::new(), given, Fill::Seeded(seed))
}

/// What inputs that are not given are filled with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// Seeded pseudo-random values (see `complete`).
    Seeded(u64),
    /// Every element this number (a string element: its text).
    Constant(f64),
}

/// Adds a value made by `fill` for every program input not in `given`, of the program's type
/// (a symbolic one at its cost point) or of the shape `shapes` gives it; an input larger than the tensor-size limit
/// (`mxc_dialects::max_tensor_bytes`) is refused, naming it.
pub fn complete_with(
    program: &Program,
    shapes: &HashMap<String, Vec<usize>>,
    mut given: HashMap<String, Tensor>,
    fill: Fill,
) -> Result<HashMap<String, Tensor>> {
    let mut rng = SplitMix64(match fill {
        Fill::Seeded(seed) => seed,
        Fill::Constant(_) => 0,
    });
    for b in &program.inputs {
        let ty = &program.buffers[b.buffer].ty;
        // a symbolic input not given a shape takes its sizes at the cost point
        let ty = &ty.with_shape(shapes.get(&b.name).cloned().unwrap_or_else(|| ty.shape.clone()));
        if let Some(value) = given.get_mut(&b.name) {
            // a bf16 or narrow-typed value read from .npy comes as its numpy stand-in
            if let Some(retyped) = value.as_stood_in_for(ty.dtype) {
                *value = retyped;
            }
            continue;
        }
        let value = value_of(ty, fill, &mut rng).map_err(|e| e.context(format!("input `{}`", b.name)))?;
        given.insert(b.name.clone(), value);
    }
    Ok(given)
}

/// A value of type `ty` made by `fill`, drawing from `rng`: floats uniform in [-1, 1),
/// integers and bools 0 or 1, strings of up to 8 lowercase letters; a type larger than the
/// tensor-size limit (`mxc_dialects::max_tensor_bytes`) is refused.
pub fn value_of(ty: &TensorType, fill: Fill, rng: &mut SplitMix64) -> Result<Tensor> {
    ty.check_limit(mxc_dialects::max_tensor_bytes()?)
        .map_err(|e| invalid(format!("cannot make a value: {e}")))?;
    let n = ty.num_elements();
    if ty.dtype == mxc_dialects::DType::Str {
        let text = |_| match fill {
            Fill::Constant(c) => c.to_string(),
            Fill::Seeded(_) => {
                let len = rng.next_u64() % 9;
                (0..len)
                    .map(|_| char::from(b'a' + (rng.next_u64() % 26) as u8))
                    .collect()
            }
        };
        return Ok(Tensor::from_strings(ty.shape.clone(), (0..n).map(text).collect()));
    }
    // integer types truncate a constant toward zero (`from_f64s`)
    let float = ty.dtype.is_float();
    let made = match fill {
        Fill::Constant(c) => Tensor::try_from_fn(ty.clone(), || c),
        Fill::Seeded(_) => Tensor::try_from_fn(ty.clone(), || match float {
            true => rng.unit() * 2.0 - 1.0,
            false => (rng.next_u64() & 1) as f64,
        }),
    };
    made.ok_or_else(|| invalid(format!("cannot allocate {} bytes for a value of {ty}", ty.num_bytes())))
}

/// A small, well-mixed generator (SplitMix64); reproducible across runs and platforms.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
