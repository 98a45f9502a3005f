//! A program's inputs as dimensions: the symbols their shapes carry (one symbol per name, its
//! constraints gathered from every use), the symbols' sizes bound from the shapes of values
//! given, and the points (combinations of optimal sizes) a compiler specialises for.

use super::{Dim, DimError, Symbol};
use std::collections::BTreeMap;

/// A size for each symbol, by name.
pub type Sizes = BTreeMap<String, u64>;

/// The most programs one compile specialises (the product of the symbols' optimal counts).
pub const MAX_SPECIALISATIONS: usize = 16;

/// The inputs' shapes as dimensions, in the inputs' order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputDims {
    inputs: Vec<(String, Vec<Dim>)>,
    /// Every symbol, with what all its uses say, in the order of first use.
    symbols: Vec<Symbol>,
}

impl InputDims {
    /// The inputs `inputs`, a symbol used by several of them merged (`Symbol::merged`); every
    /// symbol must be some input's whole dimension, or a multiple of it (`h * 32`: the size of
    /// `h` is that dimension's over 32, and a size that is no multiple of 32 is refused),
    /// somewhere, so that a value's shape says its size (`n + 2` alone would say it only
    /// through a subtraction, refused).
    pub fn new(inputs: Vec<(String, Vec<Dim>)>) -> Result<InputDims, DimError> {
        let mut symbols: Vec<Symbol> = Vec::new();
        for s in inputs.iter().flat_map(|(_, dims)| dims.iter().flat_map(Dim::symbols)) {
            match symbols.iter_mut().find(|known| known.name == s.name) {
                Some(known) => *known = known.merged(s)?,
                None => symbols.push(s.clone()),
            }
        }
        let by_name: BTreeMap<String, Symbol> = symbols.iter().map(|s| (s.name.clone(), s.clone())).collect();
        let inputs: Vec<(String, Vec<Dim>)> = inputs
            .into_iter()
            .map(|(name, dims)| (name, dims.into_iter().map(|d| d.with_symbols(&by_name)).collect()))
            .collect();
        for s in &symbols {
            let alone = inputs
                .iter()
                .flat_map(|(_, dims)| dims)
                .any(|d| d.as_scaled_symbol().map(|(t, _)| t) == Some(s));
            if !alone {
                return Err(DimError::Symbol {
                    name: s.name.clone(),
                    message: "it must be a whole dimension of some input, or a multiple of one, so that a value's shape gives its size"
                        .into(),
                });
            }
        }
        Ok(InputDims { inputs, symbols })
    }

    /// The inputs and their dimensions.
    pub fn inputs(&self) -> &[(String, Vec<Dim>)] {
        &self.inputs
    }

    /// The symbols, each with every constraint its uses give.
    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    /// Whether no dimension is symbolic.
    pub fn is_fixed(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The sizes the shapes `shape_of` gives (of some inputs, by name) say: each symbol that is
    /// a whole dimension of a given input, or a multiple `k` of it, takes that size (over `k`,
    /// which must divide it), the same wherever it appears, in its range; then every given
    /// shape must be what its dimensions are at those sizes. Symbols no given input says stay
    /// unbound.
    pub fn bind(&self, shape_of: &dyn Fn(&str) -> Option<Vec<usize>>) -> Result<Sizes, DimError> {
        let mut sizes = Sizes::new();
        let mut said_by: BTreeMap<String, String> = BTreeMap::new();
        let given: Vec<(&str, &[Dim], Vec<usize>)> = self
            .inputs
            .iter()
            .filter_map(|(name, dims)| shape_of(name).map(|shape| (name.as_str(), dims.as_slice(), shape)))
            .collect();
        for &(name, dims, ref shape) in &given {
            if dims.len() != shape.len() {
                return Err(DimError::Value(format!(
                    "input `{name}` has shape {shape:?}, and the program takes {} dimensions ({})",
                    dims.len(),
                    show(dims)
                )));
            }
            for (axis, (d, &size)) in dims.iter().zip(shape).enumerate() {
                let Some((s, k)) = d.as_scaled_symbol() else { continue };
                let (lo, hi) = s.bounds();
                let size = size as u64;
                if !size.is_multiple_of(k) {
                    return Err(DimError::Value(format!(
                        "input `{name}` dimension {axis} is {size}, not a multiple of {k} (the program takes {d})"
                    )));
                }
                let size = size / k;
                if size < lo || size > hi {
                    return Err(DimError::Value(format!(
                        "input `{name}` dimension {axis}: {} is {size}, outside its range [{lo}..{hi}]",
                        s.name
                    )));
                }
                match sizes.insert(s.name.clone(), size) {
                    Some(before) if before != size => {
                        return Err(DimError::Value(format!(
                            "input `{name}` dimension {axis} makes {} {size}, and {} made it {before}",
                            s.name, said_by[&s.name]
                        )))
                    }
                    _ => said_by.insert(s.name.clone(), format!("input `{name}` dimension {axis}")),
                };
            }
        }
        for (name, dims, shape) in given {
            for (axis, (d, &size)) in dims.iter().zip(&shape).enumerate() {
                if !d.symbols().all(|s| sizes.contains_key(&s.name)) {
                    continue;
                }
                let want = d.eval(&sizes)?;
                if want != size as u64 {
                    let why = match d.as_constant() {
                        Some(_) => format!("the program takes {want}"),
                        None => format!("and {d} is {want} there"),
                    };
                    return Err(DimError::Value(format!(
                        "input `{name}` dimension {axis} is {size}, {why}"
                    )));
                }
            }
        }
        Ok(sizes)
    }

    /// The inputs' shapes at `sizes` (every symbol given, in its range).
    pub fn shapes_at(&self, sizes: &Sizes) -> Result<Vec<(String, Vec<usize>)>, DimError> {
        self.inputs
            .iter()
            .map(|(name, dims)| {
                let shape = dims.iter().map(|d| d.eval(sizes).map(|v| v as usize));
                Ok((name.clone(), shape.collect::<Result<_, _>>()?))
            })
            .collect()
    }

    /// The same inputs, each symbol without optimal sizes given its least size as its one
    /// optimal.
    pub fn with_least_optimals(&self) -> InputDims {
        let symbols: Vec<Symbol> = (self.symbols.iter())
            .map(|s| match s.optimals.is_empty() {
                true => Symbol {
                    optimals: vec![s.bounds().0],
                    ..s.clone()
                },
                false => s.clone(),
            })
            .collect();
        let by_name: BTreeMap<String, Symbol> = symbols.iter().map(|s| (s.name.clone(), s.clone())).collect();
        let inputs = (self.inputs.iter())
            .map(|(name, dims)| {
                (
                    name.clone(),
                    dims.iter().map(|d| d.clone().with_symbols(&by_name)).collect(),
                )
            })
            .collect();
        InputDims { inputs, symbols }
    }

    /// Every combination of the symbols' optimal sizes, the first symbol's varying slowest;
    /// refused when a symbol has none or there are more than `MAX_SPECIALISATIONS`.
    pub fn optimal_points(&self) -> Result<Vec<Sizes>, DimError> {
        let mut points = vec![Sizes::new()];
        for s in &self.symbols {
            if s.optimals.is_empty() {
                return Err(DimError::Symbol {
                    name: s.name.clone(),
                    message: format!(
                        "{} has no optimal size to compile for: give some, as in {}{{{}}} \
                         (code that runs every size in a range is not built yet)",
                        Dim::symbol(s.clone()),
                        s.name,
                        s.bounds().0
                    ),
                });
            }
            points = points
                .into_iter()
                .flat_map(|p| {
                    s.optimals.iter().map(move |&o| {
                        let mut p = p.clone();
                        p.insert(s.name.clone(), o);
                        p
                    })
                })
                .collect();
        }
        if points.len() > MAX_SPECIALISATIONS {
            return Err(DimError::Value(format!(
                "the optimal sizes of {} make {} programs, more than {MAX_SPECIALISATIONS}: give fewer",
                self.symbols
                    .iter()
                    .map(|s| Dim::symbol(s.clone()).to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                points.len()
            )));
        }
        Ok(points)
    }
}

/// Dimensions as a list: `[1, s[1..512]{128}]`.
pub fn show(dims: &[Dim]) -> String {
    let dims: Vec<String> = dims.iter().map(Dim::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Sizes as `n=2, s=128`.
pub fn show_sizes(sizes: &Sizes) -> String {
    let sizes: Vec<String> = sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
    sizes.join(", ")
}
