//! Type rules of matrix products: `gemm` (ONNX Gemm: `alpha * A' * B' + beta * C` with
//! `trans_a`/`trans_b` 0 or 1 and C broadcast to the result), `matmul` (numpy matmul), and
//! the packed forms the cpu target's rules make of products with constant weights: `pack`
//! (a matrix `[K, N]` as `[ceil(N / panel), K, panel]`, column `n` at `[n / panel, k, n %
//! panel]`, the padding zeros) and `matmul_packed` (`a` times the matrix `b` packs, `n`
//! columns).

use super::{broadcast_shapes, same_dtype};
use crate::{Attrs, DType, TensorType};

fn check_numeric(t: &TensorType) -> Result<(), String> {
    if t.dtype == DType::Bool {
        Err("operands must be numeric, got bool".into())
    } else {
        Ok(())
    }
}

pub fn gemm(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (a, b) = (&ops[0], &ops[1]);
    check_numeric(a)?;
    same_dtype(a, b, "A and B")?;
    attrs.float("alpha")?;
    attrs.float("beta")?;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(format!(
            "A and B must be matrices, got shapes {:?} and {:?}",
            a.shape, b.shape
        ));
    }
    let (m, ka) = if attrs.int("trans_a")? != 0 {
        (a.shape[1], a.shape[0])
    } else {
        (a.shape[0], a.shape[1])
    };
    let (kb, n) = if attrs.int("trans_b")? != 0 {
        (b.shape[1], b.shape[0])
    } else {
        (b.shape[0], b.shape[1])
    };
    if ka != kb {
        return Err(format!("inner dimensions differ: A gives {ka}, B gives {kb}"));
    }
    if let Some(c) = ops.get(2) {
        same_dtype(a, c, "A and C")?;
        if broadcast_shapes(&c.shape, &[m, n])? != [m, n] {
            return Err(format!("C of shape {:?} does not broadcast to [{m}, {n}]", c.shape));
        }
    }
    Ok(a.with_shape(vec![m, n]))
}

pub fn matmul(ops: &[TensorType]) -> Result<TensorType, String> {
    let (a, b) = (&ops[0], &ops[1]);
    check_numeric(a)?;
    same_dtype(a, b, "operands")?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err("matmul operands must have rank 1 or more".into());
    }
    let a_shape = if a.rank() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let b_shape = if b.rank() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (ra, rb) = (a_shape.len(), b_shape.len());
    if a_shape[ra - 1] != b_shape[rb - 2] {
        return Err(format!("inner dimensions differ: {:?} x {:?}", a.shape, b.shape));
    }
    let mut shape = broadcast_shapes(&a_shape[..ra - 2], &b_shape[..rb - 2])?;
    if a.rank() > 1 {
        shape.push(a_shape[ra - 2]);
    }
    if b.rank() > 1 {
        shape.push(b_shape[rb - 1]);
    }
    Ok(a.with_shape(shape))
}

/// `pack`: a matrix `[K, N]` as panels of `panel` columns, `[ceil(N / panel), K, panel]`.
pub fn pack(b: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let panel = attrs.int("panel")?;
    if b.rank() != 2 {
        return Err(format!("packs a matrix, got shape {:?}", b.shape));
    }
    if panel < 1 {
        return Err(format!("panel must be positive, got {panel}"));
    }
    let panel = panel as usize;
    Ok(b.with_shape(vec![b.shape[1].div_ceil(panel), b.shape[0], panel]))
}

/// `matmul_packed`: `a [..., M, K]` times the `[K, n]` matrix packed as `b [P, K, panel]`.
pub fn matmul_packed(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (a, b) = (&ops[0], &ops[1]);
    check_numeric(a)?;
    same_dtype(a, b, "operands")?;
    let n = attrs.int("n")?;
    if a.rank() < 2 || b.rank() != 3 {
        return Err(format!(
            "takes a [..., M, K] and packed panels [P, K, panel], got shapes {:?} and {:?}",
            a.shape, b.shape
        ));
    }
    let k = a.shape[a.rank() - 1];
    if n < 1 || b.shape[1] != k || b.shape[0] != (n as usize).div_ceil(b.shape[2]) {
        return Err(format!("panels {:?} do not hold a [{k}, {n}] matrix", b.shape));
    }
    let mut shape = a.shape.clone();
    *shape.last_mut().expect("rank 2 or more") = n as usize;
    Ok(a.with_shape(shape))
}
