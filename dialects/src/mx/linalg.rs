//! Type rules of matrix products: `gemm` (ONNX Gemm: `alpha * A' * B' + beta * C` with
//! `trans_a`/`trans_b` 0 or 1 and C broadcast to the result), `matmul` (numpy matmul), and
//! the packed forms the cpu target's rules make of products with constant weights: `pack`
//! (a matrix `[K, N]` as `[ceil(N / panel), K, panel]`, column `n` at `[n / panel, k, n %
//! panel]`, the padding zeros) and `matmul_packed` (`a` times the matrix `b` packs, `n`
//! columns). bf16 panels hold pairs of depths together (`depth_pairing`): `[ceil(N / panel),
//! ceil(K / 2), 2 * panel]`, column `n` at depths `k` and `k + 1` (`k` even) side by side at
//! `[n / panel, k / 2, 2 * (n % panel)]`: the layout AMX tiles and `vdpbf16ps` read, two
//! products per 32-bit lane. i8 panels hold groups of four depths (`[ceil(N / panel), ceil(K /
//! 4), 4 * panel]`), what `vpdpbusd` reads: four u8 x s8 products per 32-bit lane, summed in
//! i32 by `matmul_integer_packed`.

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

/// How many consecutive depths `pack` keeps side by side for each column: 2 for bf16 (the
/// pairs bf16 dot products multiply), 4 for i8 (the groups integer dot products multiply),
/// else 1.
pub fn depth_pairing(dtype: DType) -> usize {
    match dtype {
        DType::BF16 => 2,
        DType::I8 => 4,
        _ => 1,
    }
}

/// `pack`: matrices `[..., K, N]` as panels of `panel` columns, `[..., ceil(N / panel), K,
/// panel]` (bf16: `[..., ceil(N / panel), ceil(K / 2), 2 * panel]`, `depth_pairing`).
pub fn pack(b: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    let panel = attrs.int("panel")?;
    let rank = b.rank();
    if rank < 2 {
        return Err(format!("packs matrices, got shape {:?}", b.shape));
    }
    if panel < 1 {
        return Err(format!("panel must be positive, got {panel}"));
    }
    let panel = panel as usize;
    let (k, n) = (b.shape[rank - 2], b.shape[rank - 1]);
    let g = depth_pairing(b.dtype);
    let mut shape = b.shape[..rank - 2].to_vec();
    shape.extend([n.div_ceil(panel), k.div_ceil(g), panel * g]);
    Ok(b.with_shape(shape))
}

/// `matmul_integer_packed(a, bp, column_sums, a_zero)`: the exact product of `(a - a_zero)`
/// and an i8 matrix `[K, n]`, in i32 (wrapping, as i32 sums do): `a [..., M, K]` u8, the matrix
/// packed as `bp [P, ceil(K / 4), 4 * panel]` (`pack` of i8), `column_sums [n]` its columns'
/// sums and `a_zero` a scalar, both i32; computed as `a x b - a_zero * column_sums`.
pub fn matmul_integer_packed(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (a, bp, sums, zero) = (&ops[0], &ops[1], &ops[2], &ops[3]);
    let n = attrs.int("n")?;
    if a.dtype != DType::U8 || bp.dtype != DType::I8 || sums.dtype != DType::I32 || zero.dtype != DType::I32 {
        return Err(format!(
            "takes u8 a, i8 panels and i32 column sums and zero point, got {}, {}, {} and {}",
            a.dtype, bp.dtype, sums.dtype, zero.dtype
        ));
    }
    let rank = a.rank();
    if rank < 2 || bp.rank() != 3 || zero.rank() != 0 || sums.shape != [n.max(0) as usize] {
        return Err(format!(
            "takes a [..., M, K], panels [P, K / 4, 4 * panel], column sums [{n}] and a scalar zero point, got shapes {:?}, {:?}, {:?} and {:?}",
            a.shape, bp.shape, sums.shape, zero.shape
        ));
    }
    let k = a.shape[rank - 1];
    let [p, groups, width] = bp.shape[..] else {
        unreachable!("rank 3")
    };
    let panel = width / 4;
    if n < 1 || panel == 0 || width % 4 != 0 || groups != k.div_ceil(4) || p != (n as usize).div_ceil(panel) {
        return Err(format!("panels {:?} do not hold a [{k}, {n}] matrix", bp.shape));
    }
    let mut shape = a.shape.clone();
    shape[rank - 1] = n as usize;
    Ok(TensorType::new(DType::I32, shape))
}

/// `matmul_packed`: `a [..., M, K]` times the `[K, n]` matrix packed as `b [P, K, panel]`, or
/// (batched) times its own matrix of each batch packed as `b [..., P, K, panel]` (the batch
/// dimensions `a`'s).
pub fn matmul_packed(ops: &[TensorType], attrs: &Attrs) -> Result<TensorType, String> {
    let (a, b) = (&ops[0], &ops[1]);
    check_numeric(a)?;
    same_dtype(a, b, "operands")?;
    let n = attrs.int("n")?;
    let rank = a.rank();
    let batched = b.rank() == rank + 1 && b.shape[..rank - 2] == a.shape[..rank - 2];
    if rank < 2 || !(b.rank() == 3 || batched) {
        return Err(format!(
            "takes a [..., M, K] and packed panels [P, K, panel] or [..., P, K, panel], got shapes {:?} and {:?}",
            a.shape, b.shape
        ));
    }
    let k = a.shape[rank - 1];
    let [p, kb, width] = b.shape[b.rank() - 3..] else {
        unreachable!("rank 3 or more")
    };
    let g = depth_pairing(b.dtype);
    let panel = width / g;
    if n < 1 || panel == 0 || width % g != 0 || kb != k.div_ceil(g) || p != (n as usize).div_ceil(panel) {
        return Err(format!("panels {:?} do not hold a [{k}, {n}] matrix", b.shape));
    }
    let mut shape = a.shape.clone();
    shape[rank - 1] = n as usize;
    Ok(a.with_shape(shape))
}
