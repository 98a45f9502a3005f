//! Axis normalisation shared by the parsers: ONNX axes may be negative (counting from the
//! end); mx axes are non-negative, and lists of them sorted and distinct.

use mxc_dialects::Attr;

/// `axis` of a rank-`rank` tensor as a non-negative index.
pub fn axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// A list of axes, normalised, sorted and checked to be distinct.
pub fn axes(list: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out = list
        .iter()
        .map(|&a| axis(a, rank))
        .collect::<Result<Vec<usize>, String>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("axes {list:?} repeat an axis"));
    }
    Ok(out)
}

/// A list of sizes or indices as an attribute.
pub fn ints(v: &[usize]) -> Attr {
    Attr::Ints(v.iter().map(|&x| x as i64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_axes_count_from_the_end() {
        assert_eq!(axis(-1, 3), Ok(2));
        assert!(axis(3, 3).is_err());
        assert!(axis(-4, 3).is_err());
        assert_eq!(axes(&[-1, 0], 3), Ok(vec![0, 2]));
        assert!(axes(&[2, -1], 3).is_err());
    }
}
