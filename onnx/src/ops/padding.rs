//! Sliding-window attributes shared by convolution and pooling: `strides`, `dilations` and
//! `pads` with their defaults, and `auto_pad` (`SAME_UPPER`, `SAME_LOWER`, `VALID`) resolved
//! to explicit pads (the begin pads of every spatial dim, then the end pads).

use super::super::node::NodeView;
use super::axes::ints;
use mxc_dialects::dim::Dim;
use mxc_dialects::Attrs;

/// A window over `n` spatial dims, attributes resolved.
#[derive(Debug, PartialEq)]
pub struct Window {
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads: Vec<usize>,
}

impl Window {
    /// The same window over one more spatial dim in front, of extent 1 (a 1-D window as a 2-D
    /// one of height 1: stride and dilation 1, no pads).
    pub fn with_unit_dim(&self) -> Window {
        let n = self.strides.len();
        let pads = [&[0], &self.pads[..n], &[0], &self.pads[n..]].concat();
        Window {
            strides: [&[1], &self.strides[..]].concat(),
            dilations: [&[1], &self.dilations[..]].concat(),
            pads,
        }
    }

    /// The window as mx attributes (`strides`, `dilations`, `pads`).
    pub fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("strides", ints(&self.strides))
            .with("dilations", ints(&self.dilations))
            .with("pads", ints(&self.pads))
    }
}

/// The largest stride, dilation, pad, kernel or spatial extent a window may have, so that the
/// window arithmetic (products of two of them, plus a few more) cannot overflow.
const MAX_EXTENT: usize = i32::MAX as usize;

/// Checks that every entry of `values` (the `what` of a window) is at most `MAX_EXTENT`.
pub fn check_extents(values: &[usize], what: &str) -> Result<(), String> {
    match values.iter().find(|&&v| v > MAX_EXTENT) {
        Some(v) => Err(format!("{what} {values:?}: {v} is too large")),
        None => Ok(()),
    }
}

/// A list attribute of window sizes, each at least `min` and at most `MAX_EXTENT`.
pub fn sizes(name: &str, list: &[i64], min: usize) -> Result<Vec<usize>, String> {
    let v = list
        .iter()
        .map(|&v| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v >= min)
                .ok_or_else(|| format!("`{name}` {list:?} must have entries of at least {min}"))
        })
        .collect::<Result<Vec<usize>, String>>()?;
    check_extents(&v, &format!("`{name}`"))?;
    Ok(v)
}

/// A per-spatial-dim list attribute (`strides`, `dilations`), 1 for each dim when absent.
pub fn per_dim(node: &NodeView, name: &str, n: usize) -> Result<Vec<usize>, String> {
    let Some(list) = node.opt_ints(name)? else {
        return Ok(vec![1; n]);
    };
    if list.len() != n {
        return Err(format!("`{name}` {list:?} must have {n} entries"));
    }
    sizes(name, &list, 1)
}

/// Explicit `pads` (2n non-negative entries), zeros when absent.
pub fn explicit_pads(node: &NodeView, n: usize) -> Result<Vec<usize>, String> {
    let Some(list) = node.opt_ints("pads")? else {
        return Ok(vec![0; 2 * n]);
    };
    if list.len() != 2 * n {
        return Err(format!("`pads` {list:?} must have {} entries", 2 * n));
    }
    sizes("pads", &list, 0)
}

/// Splits a total padding between begin and end: the extra one goes to the end for
/// `SAME_UPPER` (`upper`), to the begin otherwise.
pub fn split_total(total: usize, upper: bool) -> (usize, usize) {
    if upper {
        (total / 2, total - total / 2)
    } else {
        (total - total / 2, total / 2)
    }
}

/// Refuses `auto_pad` `SAME_UPPER`/`SAME_LOWER` with a stride above 1 along a symbolic spatial
/// extent: the pads it asks for depend on the extent there (`window` resolves them at the
/// cost point, which holds at that size alone).
pub fn check_symbolic_padding(node: &NodeView, spatial: &[Dim]) -> Result<(), String> {
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    if !auto_pad.starts_with("SAME") {
        return Ok(());
    }
    let strides = per_dim(node, "strides", spatial.len())?;
    match spatial
        .iter()
        .zip(&strides)
        .find(|(d, &s)| d.as_constant().is_none() && s > 1)
    {
        Some((d, s)) => Err(format!(
            "auto_pad {auto_pad} with stride {s} over the symbolic extent {d}: its pads depend on the size, \
             which is not supported (give the pads)"
        )),
        None => Ok(()),
    }
}

/// The window of a convolution or pooling over spatial extents `input` with kernel extents
/// `kernel`.
pub fn window(node: &NodeView, input: &[usize], kernel: &[usize]) -> Result<Window, String> {
    check_extents(input, "spatial extents")?;
    check_extents(kernel, "kernel extents")?;
    let n = input.len();
    let strides = per_dim(node, "strides", n)?;
    let dilations = per_dim(node, "dilations", n)?;
    let pads = match node.string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" => explicit_pads(node, n)?,
        "VALID" => vec![0; 2 * n],
        mode @ ("SAME_UPPER" | "SAME_LOWER") => {
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let out = input[i].div_ceil(strides[i]);
                let span = dilations[i] * (kernel[i].max(1) - 1) + 1;
                let total = ((out.max(1) - 1) * strides[i] + span).saturating_sub(input[i]);
                (pads[i], pads[i + n]) = split_total(total, mode == "SAME_UPPER");
            }
            pads
        }
        other => return Err(format!("unknown auto_pad \"{other}\"")),
    };
    Ok(Window {
        strides,
        dilations,
        pads,
    })
}

/// The kernel extents: the `kernel_shape` attribute, which must agree with `from_weights`
/// when the weights give them.
pub fn kernel_shape(node: &NodeView, from_weights: Option<&[usize]>) -> Result<Vec<usize>, String> {
    match (node.opt_ints("kernel_shape")?, from_weights) {
        (None, Some(w)) => Ok(w.to_vec()),
        (None, None) => Err("missing attribute `kernel_shape`".into()),
        (Some(k), w) => {
            let k = sizes("kernel_shape", &k, 0)?;
            match w {
                Some(w) if w != k.as_slice() => Err(format!("`kernel_shape` {k:?} differs from the weights' {w:?}")),
                _ => Ok(k),
            }
        }
    }
}
