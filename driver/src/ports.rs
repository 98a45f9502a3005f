//! The inputs and outputs of a file of programs by size, with their symbolic dimensions: what
//! `mxc params` prints and the Python module's `get_parameter_shapes` returns.

use mxc_dialects::dim::{Dim, Symbol};
use mxc_dialects::DType;
use mxc_kernels::mxr::SizedMxr;

/// A port: its name, element type and dimensions.
pub type SymbolicPort = (String, DType, Vec<Dim>);

/// The inputs with their symbolic dimensions and element types, in the file's order.
pub fn symbolic_inputs(sized: &SizedMxr) -> Vec<SymbolicPort> {
    let first = &sized.variants[0].mxr.program;
    (sized.dims.inputs().iter())
        .filter_map(|(name, dims)| {
            let b = first.inputs.iter().find(|b| &b.name == name)?;
            Some((name.clone(), first.buffers[b.buffer].ty.dtype, dims.clone()))
        })
        .collect()
}

/// The outputs with their symbolic dimensions, when every symbol counts items: each output's
/// item axis is its symbol, and every program's output is that shape at its sizes (else `None`:
/// the programs' own shapes say what each gives).
pub fn symbolic_outputs(sized: &SizedMxr) -> Option<Vec<SymbolicPort>> {
    let symbols = sized.dims.symbols();
    if symbols.iter().any(|s| !sized.items.iter().any(|i| i.symbol == s.name)) {
        return None;
    }
    let first = &sized.variants[0].mxr.program;
    let mut out = Vec::new();
    for b in &first.outputs {
        let ty = &first.buffers[b.buffer].ty;
        // the symbol at each axis of this output, if any
        let mut at: Vec<Option<&Symbol>> = vec![None; ty.rank()];
        for items in &sized.items {
            let (_, axis) = items.outputs.iter().find(|(name, _)| name == &b.name)?;
            let symbol = symbols.iter().find(|s| s.name == items.symbol)?;
            *at.get_mut(*axis)? = Some(symbol);
        }
        for v in &sized.variants {
            let p = &v.mxr.program;
            let shape = &p.buffers[p.outputs.iter().find(|o| o.name == b.name)?.buffer].ty.shape;
            let expected = at
                .iter()
                .zip(&ty.shape)
                .map(|(s, &d)| s.map_or(d as u64, |s| v.sizes[&s.name]));
            if !shape.iter().map(|&d| d as u64).eq(expected) {
                return None;
            }
        }
        let dims = (at.iter().zip(&ty.shape))
            .map(|(s, &d)| s.map_or_else(|| Dim::constant(d as u64), |s| Dim::symbol(s.clone())))
            .collect();
        out.push((b.name.clone(), ty.dtype, dims));
    }
    Some(out)
}
