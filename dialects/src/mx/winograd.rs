//! Winograd convolution F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
//! Networks", 2016), in three ops a rule puts in place of a 3x3, stride-1 `conv_nhwc`:
//!
//! - `winograd_weights`: weights `[M, 3, 3, C]` to `U [36, C, M]`, `U[6a + b, c, m] = (G g G^T)
//!   [a, b]` for each filter `g = w[m, :, :, c]` (evaluated at compile time on constants);
//! - `winograd_input`: an image `[N, H, W, C]` with `pads` (top, left, bottom, right) to
//!   `V [36, T, C]`, one 6x6 patch `d` per output tile of 4x4 (`T = N * ceil(OH / 4) * ceil(OW
//!   / 4)` tiles, row-major), `V[6a + b, t, c] = (B^T d B)[a, b]`, zeros outside the image;
//! - then a batched product `[36, T, C] x [36, C, M]` (`matmul_packed` on packed `U`), and
//!   `winograd_output`: `[36, T, M]` to the result `[N, OH, OW, M]` (`shape`), each tile
//!   `A^T X A` cut to the image.
//!
//! The matrices below are the one definition of the transforms: the constant evaluator and
//! the loop level use them.

use crate::TensorType;

/// `B^T`: the input transform, applied to a 6x6 patch on both sides.
pub const BT: [[f64; 6]; 6] = [
    [4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
    [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
    [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
    [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
    [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
    [0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
];

/// `G`: the filter transform, a 3x3 filter to 6x6.
pub const G: [[f64; 3]; 6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// `A^T`: the output transform, 6x6 products to a 4x4 tile.
pub const AT: [[f64; 6]; 4] = [
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
    [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
    [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
    [0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
];

/// Output pixels per tile side, input pixels per patch side, and products per tile.
pub const TILE: usize = 4;
pub const PATCH: usize = 6;
pub const POINTS: usize = PATCH * PATCH;

/// The output's height and width for an `[N, H, W, C]` image with `pads` (top, left, bottom,
/// right) under a 3x3 window, and the tiles along each.
pub fn geometry(x: &TensorType, pads: &[usize]) -> Result<([usize; 2], [usize; 2]), String> {
    if x.rank() != 4 || pads.len() != 4 {
        return Err(format!(
            "takes an N x H x W x C image and 4 pads, got shape {:?} and pads {pads:?}",
            x.shape
        ));
    }
    let out = [0, 1].map(|d| {
        x.shape[d + 1]
            .checked_add(pads[d])?
            .checked_add(pads[d + 2])?
            .checked_sub(2)
    });
    match out {
        [Some(h), Some(w)] if h > 0 && w > 0 => Ok(([h, w], [h.div_ceil(TILE), w.div_ceil(TILE)])),
        _ => Err(format!(
            "a 3x3 window does not fit the padded image {:?} with pads {pads:?}",
            x.shape
        )),
    }
}

/// `winograd_input`: `[N, H, W, C]` to `[36, T, C]`.
pub fn input(x: &TensorType, pads: &[usize]) -> Result<TensorType, String> {
    check_float(x)?;
    let (_, tiles) = geometry(x, pads)?;
    let tiles = x.shape[0]
        .checked_mul(tiles[0])
        .and_then(|t| t.checked_mul(tiles[1]))
        .ok_or_else(|| format!("the tiles of the padded image {:?} overflow", x.shape))?;
    Ok(x.with_shape(vec![POINTS, tiles, x.shape[3]]))
}

/// `winograd_weights`: `[M, 3, 3, C]` to `[36, C, M]`.
pub fn weights(w: &TensorType) -> Result<TensorType, String> {
    check_float(w)?;
    match w.shape[..] {
        [m, 3, 3, c] => Ok(w.with_shape(vec![POINTS, c, m])),
        _ => Err(format!("takes 3x3 weights [M, 3, 3, C], got shape {:?}", w.shape)),
    }
}

/// `winograd_output`: `[36, T, M]` to `shape` `[N, OH, OW, M]`.
pub fn output(x: &TensorType, shape: &[usize]) -> Result<TensorType, String> {
    check_float(x)?;
    let [n, h, w, m] = shape[..] else {
        return Err(format!("shape must be [N, OH, OW, M], got {shape:?}"));
    };
    let tiles = n
        .checked_mul(h.div_ceil(TILE))
        .and_then(|t| t.checked_mul(w.div_ceil(TILE)))
        .ok_or_else(|| format!("the tiles of an output of shape {shape:?} overflow"))?;
    if x.shape != [POINTS, tiles, m] {
        return Err(format!(
            "takes [{POINTS}, {tiles}, {m}] for an output of shape {shape:?}, got {:?}",
            x.shape
        ));
    }
    Ok(x.with_shape(shape.to_vec()))
}

fn check_float(t: &TensorType) -> Result<(), String> {
    if t.dtype.is_float() {
        Ok(())
    } else {
        Err(format!("takes floats, got {}", t.dtype))
    }
}
