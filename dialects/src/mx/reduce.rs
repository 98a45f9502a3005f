//! Type rules of reductions: `axes` sorted, distinct and non-negative; `keepdims` 0 or 1.

use super::check_axis;
use crate::{Attrs, DType, TensorType};

pub fn reduce(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    if x.dtype == DType::Bool {
        return Err("cannot reduce a bool tensor".into());
    }
    let axes = attrs.ints("axes")?;
    for (i, &a) in axes.iter().enumerate() {
        check_axis(a, x.rank(), "axis")?;
        if i > 0 && axes[i - 1] >= a {
            return Err(format!("axes {axes:?} must be sorted and distinct"));
        }
    }
    let keep = attrs.int("keepdims")? != 0;
    let shape = (0..x.rank())
        .filter_map(|d| match (axes.contains(&(d as i64)), keep) {
            (false, _) => Some(x.shape[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok(x.with_shape(shape))
}
