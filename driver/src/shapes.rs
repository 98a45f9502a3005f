//! Input shapes as callers give them: `NAME=DIMS` text (`1x3x224x224`, `1xs[1..512]{128}`,
//! `[2x3,4x3]` for a sequence, `none` for an empty optional), fixed or symbolic, and the
//! import options they make for a model (a `dim_param` given in one input fixes it in every
//! input; values given fix the rest).

use crate::error::{invalid, Result};
use mxc_dialects::dim::{self, Dim};
use mxc_dialects::interface::{element_port, Structure};
use mxc_dialects::Tensor;
use mxc_onnx::ImportOptions;
use std::collections::HashMap;
use std::path::Path;

/// Shapes by port name, each dimension fixed or symbolic (`s[1..512]{128}`).
pub type Shapes = HashMap<String, Vec<Dim>>;
/// The structures of sequence and optional inputs, by name.
pub type Structures = HashMap<String, Structure>;

/// Parses `NAME=DIMS` arguments: `DIMS` like `1x3x224x224` (or `1,3,224,224`) for a tensor,
/// each dimension a size or a symbolic one in the `dim` notation (`1xs[1..512]{128}`), `[2x3,4x3]`
/// for a sequence (its elements' fixed shapes; `[]` when empty), `none` for an empty optional.
/// Returns the shapes by port and the structures of sequences and optionals.
pub fn parse_shapes(args: &[String]) -> Result<(Shapes, Structures)> {
    let mut shapes = HashMap::new();
    let mut structures = HashMap::new();
    for arg in args {
        let Some((name, dims)) = arg.split_once('=') else {
            return Err(invalid(format!(
                "--shape `{arg}`: expected NAME=DIMS, e.g. input=1x3x224x224"
            )));
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
        let twice = || invalid(format!("--shape `{name}` is given twice"));
        let of_sequence = structure.is_some();
        if let Some(s) = structure {
            if structures.insert(name.to_string(), s).is_some() {
                return Err(twice());
            }
        }
        for (port, dims) in ports {
            let shape = parse_dims(arg, dims)?;
            if of_sequence && shape.iter().any(|d| d.as_constant().is_none()) {
                return Err(invalid(format!(
                    "--shape `{arg}`: a sequence's element shapes are fixed sizes"
                )));
            }
            if shapes.insert(port, shape).is_some() {
                return Err(twice());
            }
        }
    }
    Ok((shapes, structures))
}

/// One shape of `--shape arg`: `1x3x224x224`, `1,3,224,224` or with symbolic dimensions
/// `1xs[1..512]{128}` (`split_dims`).
fn parse_dims(arg: &str, dims: &str) -> Result<Vec<Dim>> {
    let shape = split_dims(dims)
        .into_iter()
        .map(|d| dim::parse(d.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            invalid(format!(
                "--shape `{arg}`: `{dims}` is not a list of dimensions like 1x3x224x224 or 1xs[1..512]{{128}}: {e}"
            ))
        })?;
    let fixed: Option<Vec<u64>> = shape.iter().map(Dim::as_constant).collect();
    let elements = fixed.map(|f| f.iter().try_fold(1u64, |n, &d| n.checked_mul(d.max(1))));
    if elements.is_some_and(|n| n.is_none_or(|n| n > isize::MAX as u64)) {
        return Err(invalid(format!(
            "--shape `{arg}`: {} has more elements than memory can address",
            dim::show(&shape)
        )));
    }
    Ok(shape)
}

/// The dimensions of `dims`, split at each `,` outside brackets, braces and parentheses, or,
/// when there is none, at each such `x` that follows a digit, `]`, `}` or `)` or comes before
/// a digit (`1xs[1..8]x3`; a symbol whose name holds an `x` is safest between commas).
fn split_dims(dims: &str) -> Vec<&str> {
    let mut cuts = Vec::new();
    let bytes = dims.as_bytes();
    let commas = outside_brackets(dims).any(|(_, c)| c == b',');
    for (i, c) in outside_brackets(dims) {
        let after_size = i > 0 && matches!(bytes[i - 1], b'0'..=b'9' | b']' | b'}' | b')');
        let before_size = bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        let cut = match commas {
            true => c == b',',
            false => c == b'x' && (after_size || before_size),
        };
        if cut {
            cuts.push(i);
        }
    }
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts {
        out.push(&dims[start..cut]);
        start = cut + 1;
    }
    out.push(&dims[start..]);
    out
}

/// The bytes of `text` at bracket depth 0, with their offsets.
fn outside_brackets(text: &str) -> impl Iterator<Item = (usize, u8)> + '_ {
    let mut depth = 0i32;
    text.bytes().enumerate().filter(move |&(_, c)| {
        match c {
            b'[' | b'{' | b'(' => depth += 1,
            b']' | b'}' | b')' => depth -= 1,
            _ => return depth == 0,
        }
        false
    })
}

/// The shapes of `shapes` with fixed sizes; a symbolic one is refused (`command` takes fixed
/// sizes only).
pub fn fixed_shapes(shapes: &Shapes, command: &str) -> Result<HashMap<String, Vec<usize>>> {
    shapes
        .iter()
        .map(|(name, dims)| {
            let fixed: Option<Vec<usize>> = dims.iter().map(|d| d.as_constant().map(|n| n as usize)).collect();
            match fixed {
                Some(shape) => Ok((name.clone(), shape)),
                None => Err(invalid(format!(
                    "--shape {name}={}: `mxc {command}` takes fixed sizes; symbolic ones are compiled by `mxc compile`",
                    dim::show(dims)
                ))),
            }
        })
        .collect()
}

/// `opts` with the shape of every tensor input of the ONNX model `model` whose dimensions the
/// shapes given fix: a `dim_param` given a size in one input has it in every input
/// (`model_input_dims`). Left as they are when some dimension stays symbolic or a shape does
/// not fit (the importer then says what).
pub fn with_model_dims(model: &Path, opts: ImportOptions) -> Result<ImportOptions> {
    // nothing given fixes nothing: the model is not read twice
    if opts.input_shapes.is_empty() {
        return Ok(opts);
    }
    let given: Shapes = (opts.input_shapes.iter())
        .map(|(name, shape)| (name.clone(), shape.iter().map(|&d| Dim::constant(d as u64)).collect()))
        .collect();
    match mxc_onnx::model_input_dims(model, &given) {
        Ok(dims) => fixed_by(&dims, opts),
        // what does not fit is the importer's to say, as it always has
        Err(_) => Ok(opts),
    }
}

/// Import options that take each input as `dims` has it: fixed shapes as shapes, the others
/// as symbolic dimensions (the importer's symbolic import).
pub fn symbolic_import(dims: &dim::InputDims, structures: Structures) -> ImportOptions {
    let (mut input_shapes, mut symbolic_shapes) = (HashMap::new(), HashMap::new());
    for (name, dims) in dims.inputs() {
        let fixed: Option<Vec<usize>> = dims.iter().map(|d| d.as_constant().map(|n| n as usize)).collect();
        match fixed {
            Some(shape) => {
                input_shapes.insert(name.clone(), shape);
            }
            None => {
                symbolic_shapes.insert(name.clone(), dims.clone());
            }
        }
    }
    ImportOptions {
        input_shapes,
        symbolic_shapes,
        structures,
        ..ImportOptions::default()
    }
}

/// The model imported over symbolic sizes with `opts`; where that fails and the model limits a
/// symbol's size (`mxc_onnx::SizeLimit`), imported again with the symbols narrowed to their
/// limits (`told` hears which), until it imports or nothing narrows.
pub fn import_within_limits(
    model: &Path,
    mut opts: ImportOptions,
    told: &dyn Fn(&[mxc_onnx::SizeLimit]),
) -> std::result::Result<mxc_dialects::Graph, mxc_onnx::ImportError> {
    loop {
        match mxc_onnx::import_file(model, &opts) {
            Err(mxc_onnx::ImportError::Limited { error, limits }) => match mxc_onnx::narrowed(&opts, &limits) {
                Some(narrow) => {
                    told(&limits);
                    opts = narrow;
                }
                None => return Err(mxc_onnx::ImportError::Limited { error, limits }),
            },
            other => return other,
        }
    }
}

/// The steps a symbol without optimal sizes is tried in when the model does not import over
/// it as it is: image models whose feature levels are joined again (a detector's upsampled
/// levels concatenated with finer ones) are consistent only at multiples of their coarsest
/// level's stride.
pub const SIZE_STEPS: [u64; 6] = [2, 4, 8, 16, 32, 64];

/// `dims` with each symbol that has no optimal sizes taken in steps of `k`: `height[1..4096]`
/// becomes `height_in_32s[1..128] * 32` (for `k` 32), the symbol counting the steps; `None`
/// where no symbol changes, where such a symbol is used other than as a whole dimension, or
/// where its range holds no multiple of `k`.
pub fn in_steps_of(dims: &dim::InputDims, k: u64) -> Option<dim::InputDims> {
    let stepped = |d: &Dim| -> Option<Option<Dim>> {
        if d.symbols().all(|s| !s.optimals.is_empty()) {
            return Some(None);
        }
        let s = d.as_symbol()?;
        let (lo, hi) = s.bounds();
        let (lo, hi) = (lo.div_ceil(k).max(1), hi / k);
        let name = format!("{}_in_{k}s", s.name);
        let steps = dim::Symbol::new(&name, vec![(lo, hi)], Vec::new()).ok()?;
        Some(Some(Dim::symbol(steps).mul(&Dim::constant(k)).ok()?))
    };
    let mut changed = false;
    let mut inputs = Vec::with_capacity(dims.inputs().len());
    for (name, input) in dims.inputs() {
        let mut stepped_dims = Vec::with_capacity(input.len());
        for d in input {
            match stepped(d)? {
                Some(s) => {
                    changed = true;
                    stepped_dims.push(s);
                }
                None => stepped_dims.push(d.clone()),
            }
        }
        inputs.push((name.clone(), stepped_dims));
    }
    changed.then(|| dim::InputDims::new(inputs).ok()).flatten()
}

/// `opts` with the shape `dims` gives each input it has none for, when `dims` are all fixed.
pub fn fixed_by(dims: &dim::InputDims, mut opts: ImportOptions) -> Result<ImportOptions> {
    if dims.is_fixed() {
        for (name, shape) in dims.shapes_at(&Default::default())? {
            opts.input_shapes.entry(name).or_insert(shape);
        }
    }
    Ok(opts)
}

/// Import options for a model run on `given` inputs: their shapes fix dynamic dimensions (a
/// `--shape` must agree), their structures those of sequences and optionals, and their values
/// may be used where an op needs a compile-time value.
pub fn specialize(
    mut opts: ImportOptions,
    given: &HashMap<String, Tensor>,
    structures: &Structures,
) -> Result<ImportOptions> {
    for (name, structure) in structures {
        match opts.structures.get(name) {
            Some(s) if s != structure => {
                return Err(invalid(format!(
                    "input `{name}`: --shape says {s}, the value given is {structure}"
                )))
            }
            _ => opts.structures.insert(name.clone(), structure.clone()),
        };
    }
    for (name, value) in given {
        match opts.input_shapes.get(name) {
            Some(shape) if shape != value.shape() => {
                return Err(invalid(format!(
                    "input `{name}`: --shape says {shape:?}, the value given has shape {:?}",
                    value.shape()
                )))
            }
            _ => opts.input_shapes.insert(name.clone(), value.shape().to_vec()),
        };
    }
    opts.specialize = given.clone();
    Ok(opts)
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
        let dims = fixed_shapes(&dims, "run").unwrap();
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
        assert_eq!(err, "--shape `s=[2x3,a]`: a sequence's element shapes are fixed sizes");
        let err = shapes(&["x=2", "x=3"]).unwrap_err().to_string();
        assert_eq!(err, "--shape `x` is given twice");
    }

    #[test]
    fn shapes_take_symbolic_dimensions_in_either_form() {
        let shown = |arg: &str| {
            let (dims, _) = shapes(&[arg]).unwrap();
            dim::show(&dims["x"])
        };
        assert_eq!(shown("x=1xs[1..512]{128}"), "[1, s[1..512]{128}]");
        assert_eq!(shown("x=n[1..16]{1, 8}x3x224x224"), "[n[1..16]{1, 8}, 3, 224, 224]");
        assert_eq!(shown("x=nx3"), "[n, 3]");
        // with commas, a name may hold an x before a letter or digit
        assert_eq!(shown("x=max_len,box2,4"), "[max_len, box2, 4]");
        assert_eq!(shown("x=2,n[1..8] * 2 + 1"), "[2, n[1..8] * 2 + 1]");
        let err = shapes(&["x=1xs[1..0]"]).unwrap_err().to_string();
        assert_eq!(
            err,
            "--shape `x=1xs[1..0]`: `1xs[1..0]` is not a list of dimensions like 1x3x224x224 or 1xs[1..512]{128}: `s[1..0]`, column 1: symbol s: the range [1..0] is empty"
        );
        let err = shapes(&["s=[2xn]"]).unwrap_err().to_string();
        assert_eq!(err, "--shape `s=[2xn]`: a sequence's element shapes are fixed sizes");
        let (dims, _) = shapes(&["x=2xn[1..4]"]).unwrap();
        let err = fixed_shapes(&dims, "read").unwrap_err().to_string();
        assert_eq!(
            err,
            "--shape x=[2, n[1..4]]: `mxc read` takes fixed sizes; symbolic ones are compiled by `mxc compile`"
        );
    }
}
