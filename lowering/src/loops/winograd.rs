//! Winograd F(4x4, 3x3) (`mxc_dialects::mx::winograd`): the input transform (a 6x6 patch per
//! output tile, `B^T d B`), the filter transform (`G g G^T`, for weights that are not constants;
//! constant ones are transformed at compile time) and the output transform (`A^T X A`, cut to
//! the image, through the fused epilogue). The batched product between them is `matmul_packed`.
//!
//! The transforms run on vectors of channels where the buffers hold f32 on a vector unit, else
//! one channel at a time: the same code, on scalars. A tile whose patch lies inside the image
//! reads it without tests; a border tile reads zeros outside. The image's batch, height and
//! width may be known only at run time (then so are the tile counts, and whether an output
//! tile runs past the image is tested per tile).

use super::buffer::Buf;
use super::emit::{Emitter, V};
use super::rows;
use super::sizes::Extent;
use mxc_dialects::mx::winograd::{AT, BT, G, PATCH, POINTS, TILE};
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    match kind {
        OpKind::WinogradInput => input(e, &ins[0], &attrs.dims("pads")?, &outs[0]),
        OpKind::WinogradWeights => weights(e, &ins[0], &outs[0]),
        OpKind::WinogradOutput => output(e, &ins[0], &outs[0]),
        _ => return Err(format!("{kind} is not a Winograd transform")),
    }
    Ok(())
}

/// `sum over k of m[r][k] * x[k]` for each row `r` of `m`: zeros skipped, ones added.
fn combine<const K: usize>(e: &mut Emitter, m: &[[f64; K]], x: &[V]) -> Vec<V> {
    m.iter()
        .map(|row| {
            let mut acc: Option<V> = None;
            for (&c, xk) in row.iter().zip(x) {
                if c == 0.0 {
                    continue;
                }
                acc = Some(match (acc.take(), c) {
                    (None, 1.0) => xk.clone(),
                    (None, -1.0) => e.neg(xk),
                    (None, c) => {
                        let k = e.float(xk.ty, c);
                        e.mul(xk, &k)
                    }
                    (Some(a), 1.0) => e.add(&a, xk),
                    (Some(a), -1.0) => e.sub(&a, xk),
                    (Some(a), c) => {
                        let k = e.float(xk.ty, c);
                        e.fma(xk, &k, &a)
                    }
                });
            }
            acc.unwrap_or_else(|| e.zero(x[0].ty))
        })
        .collect()
}

/// `m X m^T` for a square `X` given row by row.
fn both_sides<const K: usize>(e: &mut Emitter, m: &[[f64; K]], x: &[Vec<V>]) -> Vec<Vec<V>> {
    // columns first: t = m X, then each row of t times m^T
    let columns: Vec<Vec<V>> = (0..K)
        .map(|j| {
            let column: Vec<V> = x.iter().map(|row| row[j].clone()).collect();
            combine(e, m, &column)
        })
        .collect();
    (0..m.len())
        .map(|a| {
            let row: Vec<V> = columns.iter().map(|c| c[a].clone()).collect();
            combine(e, m, &row)
        })
        .collect()
}

/// Runs `body(c, lanes)` over the `n` channels: vectors of the emitter's lanes when `f32`
/// vectors apply (the last masked), else one channel at a time.
fn channels(e: &mut Emitter, n: usize, vectors: bool, body: impl Fn(&mut Emitter, &V, usize)) {
    match e.f32_lanes().filter(|&l| vectors && n >= l) {
        Some(lanes) => rows::each(e, (n, lanes), &body),
        None => e.for_each(n, |e, c| body(e, &c, 1)),
    }
}

/// Tile `t` as `(n, tile row, tile column)` for `tiles = [rows, columns]` per image.
fn tile_of(e: &mut Emitter, t: &V, tiles: &[Extent; 2]) -> [V; 3] {
    // numbered as an implicit GEMM numbers its output pixels
    super::conv_tiled::pixel(e, t, tiles)
}

/// The tiles along an output side of `size`: `ceil(size / TILE)`.
fn tiles_along(e: &mut Emitter, size: &Extent) -> Extent {
    e.extent_chunks(size, TILE)
}

fn input(e: &mut Emitter, x: &Buf, pads: &[usize], out: &Buf) {
    let [_, height, width, _] = <[Extent; 4]>::try_from(x.extents()).expect("an N x H x W x C image");
    let c = x.shape[3];
    // the output's sides are the padded image's less 2 (at least 1, as the type rule proved)
    let [oh, ow] = [(&height, pads[0] + pads[2]), (&width, pads[1] + pads[3])]
        .map(|(side, p)| e.extent_offset(side, p as i64 - 2));
    let tiles = [tiles_along(e, &oh), tiles_along(e, &ow)];
    let vectors = x.holds_float_vectors() && out.holds_float_vectors();
    e.for_each(out.extents()[1].clone(), |e, t| {
        let [n, ty, tx] = tile_of(e, &t, &tiles);
        let top = e.lin(&[(&ty, TILE as i64)], -(pads[0] as i64));
        let left = e.lin(&[(&tx, TILE as i64)], -(pads[1] as i64));
        let transform = |e: &mut Emitter, checked: bool| {
            channels(e, c, vectors, |e, ch, lanes| {
                let patch: Vec<Vec<V>> = (0..PATCH)
                    .map(|i| {
                        (0..PATCH)
                            .map(|j| {
                                let (r, col) = (e.lin(&[(&top, 1)], i as i64), e.lin(&[(&left, 1)], j as i64));
                                let idx = [n.clone(), r.clone(), col.clone(), ch.clone()];
                                if !checked {
                                    return e.read_lanes(x, &idx, lanes);
                                }
                                let conds = inside(e, &[(&r, &height), (&col, &width)]);
                                let zero = e.zero(x.ty());
                                let zero = e.splat(&zero, lanes);
                                e.when(&conds, &[zero], |e| vec![e.read_lanes(x, &idx, lanes)])[0].clone()
                            })
                            .collect()
                    })
                    .collect();
                let v = both_sides(e, &BT, &patch);
                for (a, row) in v.iter().enumerate() {
                    for (b, value) in row.iter().enumerate() {
                        let point = e.idx((a * PATCH + b) as i64);
                        e.write(out, &[point, t.clone(), ch.clone()], value);
                    }
                }
            });
        };
        // whole patches inside the image need no test
        let conds = {
            let (bottom, right) = (
                e.lin(&[(&top, 1)], PATCH as i64 - 1),
                e.lin(&[(&left, 1)], PATCH as i64 - 1),
            );
            let mut conds = inside(e, &[(&top, &height), (&left, &width)]);
            conds.extend(inside(e, &[(&bottom, &height), (&right, &width)]));
            conds
        };
        let whole = e.all(&conds);
        e.if_else_like(
            &whole,
            &[],
            |e| {
                transform(e, false);
                Vec::new()
            },
            |e| {
                transform(e, true);
                Vec::new()
            },
        );
    });
}

/// `0 <= v < extent` for each `(v, extent)`.
fn inside(e: &mut Emitter, positions: &[(&V, &Extent)]) -> Vec<V> {
    let zero = e.idx(0);
    positions
        .iter()
        .flat_map(|&(v, extent)| {
            let end = e.extent_value(extent);
            [e.cmp_idx("sge", v, &zero), e.cmp_idx("slt", v, &end)]
        })
        .collect()
}

fn weights(e: &mut Emitter, w: &Buf, out: &Buf) {
    let (m, c) = (w.shape[0], w.shape[3]);
    e.nest(&[m, c], |e, idx| {
        let (mi, ci) = (&idx[0], &idx[1]);
        let g: Vec<Vec<V>> = (0..3)
            .map(|i| {
                (0..3)
                    .map(|j| {
                        let (i, j) = (e.idx(i), e.idx(j));
                        e.read(w, &[mi.clone(), i, j, ci.clone()])
                    })
                    .collect()
            })
            .collect();
        // G g G^T: columns of g through G, then rows through G
        let columns: Vec<Vec<V>> = (0..3)
            .map(|j| {
                let column: Vec<V> = g.iter().map(|row| row[j].clone()).collect();
                combine(e, &G, &column)
            })
            .collect();
        for a in 0..PATCH {
            let row: Vec<V> = columns.iter().map(|col| col[a].clone()).collect();
            for (b, value) in combine(e, &G, &row).iter().enumerate() {
                let point = e.idx((a * PATCH + b) as i64);
                e.write(out, &[point, ci.clone(), mi.clone()], value);
            }
        }
    });
}

fn output(e: &mut Emitter, x: &Buf, out: &Buf) {
    let [_, oh, ow, _] = <[Extent; 4]>::try_from(out.extents()).expect("an N x OH x OW x M result");
    let m = out.shape[3];
    let tiles = [tiles_along(e, &oh), tiles_along(e, &ow)];
    let vectors = x.holds_float_vectors() && out.holds_float_vectors();
    debug_assert_eq!(x.shape[0], POINTS);
    e.for_each(x.extents()[1].clone(), |e, t| {
        let [n, ty, tx] = tile_of(e, &t, &tiles);
        let top = e.lin(&[(&ty, TILE as i64)], 0);
        let left = e.lin(&[(&tx, TILE as i64)], 0);
        // sizes known only at run time: whether this tile lies inside the image, per tile
        let inside: Vec<V> = [(&oh, &top), (&ow, &left)]
            .into_iter()
            .filter_map(|(side, first)| match side {
                Extent::Fixed(_) => None,
                Extent::Run { value, .. } => {
                    let last = e.lin(&[(first, 1)], TILE as i64 - 1);
                    Some(e.cmp_idx("slt", &last, value))
                }
            })
            .collect();
        let whole = (!inside.is_empty()).then(|| e.all(&inside));
        let store_tile = |e: &mut Emitter, checked: bool| {
            output_tile(e, x, out, (&t, [&n, &top, &left]), (m, vectors), [&oh, &ow], checked)
        };
        match whole {
            None => store_tile(e, true),
            Some(whole) => {
                e.if_else_like(
                    &whole,
                    &[],
                    |e| {
                        store_tile(e, false);
                        Vec::new()
                    },
                    |e| {
                        store_tile(e, true);
                        Vec::new()
                    },
                );
            }
        }
    });
}

/// The output transform of tile `t` (of image `n`, its first row `top` and column `left`), its
/// stores past the image's sides `[oh, ow]` left out: a fixed side tests the rows or columns
/// its last tiles can pass; a side known only at run time tests them where `checked` (the tile
/// was not found inside the image).
fn output_tile(
    e: &mut Emitter,
    x: &Buf,
    out: &Buf,
    (t, [n, top, left]): (&V, [&V; 3]),
    (m, vectors): (usize, bool),
    [oh, ow]: [&Extent; 2],
    checked: bool,
) {
    channels(e, m, vectors, |e, ch, lanes| {
        let products: Vec<Vec<V>> = (0..PATCH)
            .map(|a| {
                (0..PATCH)
                    .map(|b| {
                        let point = e.idx((a * PATCH + b) as i64);
                        e.read_lanes(x, &[point, t.clone(), ch.clone()], lanes)
                    })
                    .collect()
            })
            .collect();
        let y = both_sides(e, &AT, &products);
        for (i, row) in y.iter().enumerate() {
            for (j, value) in row.iter().enumerate() {
                let (r, col) = (e.lin(&[(top, 1)], i as i64), e.lin(&[(left, 1)], j as i64));
                // the last tiles of a side may run past the image: only those rows and
                // columns are tested
                let mut conds = Vec::new();
                for (side, k, at) in [(oh, i, &r), (ow, j, &col)] {
                    let may_pass = match side {
                        Extent::Fixed(size) => size % TILE != 0 && k >= size % TILE,
                        Extent::Run { .. } => checked && k > 0,
                    };
                    if may_pass {
                        let end = e.extent_value(side);
                        conds.push(e.cmp_idx("slt", at, &end));
                    }
                }
                let idx = [n.clone(), r, col, ch.clone()];
                let store = |e: &mut Emitter| e.write(out, &idx, value);
                if conds.is_empty() {
                    store(e);
                } else {
                    let cond = e.all(&conds);
                    e.if_then(&cond, store);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, ints, lower_one, lower_one_vector, t};
    use mxc_dialects::{Attrs, DType, OpKind};

    #[test]
    fn whole_patches_are_read_without_tests_border_ones_with() {
        let a = attrs(&[("pads", ints(&[1, 1, 1, 1]))]);
        let m = lower_one_vector(OpKind::WinogradInput, &[t(DType::F32, &[1, 10, 10, 16])], a);
        check_in_order(
            &m,
            &[
                "the parallel loop over 9",
                "scf.if",
                "vector.load %in0",
                "vector.store",
                "} else {",
                "scf.if",
            ],
        );
    }

    #[test]
    fn output_tiles_past_the_image_store_only_inside_it() {
        // 6 x 5 output: the second tile of each side runs past it
        let a = attrs(&[("shape", ints(&[1, 6, 5, 3]))]);
        let m = lower_one(OpKind::WinogradOutput, &[t(DType::F32, &[36, 4, 3])], a).mlir;
        assert!(m.contains("arith.cmpi slt") && m.contains("scf.if"), "{m}");
        assert_eq!(m.matches("memref.store").count(), 16, "{m}");
    }

    #[test]
    fn filters_transform_by_g_on_both_sides() {
        let m = lower_one(OpKind::WinogradWeights, &[t(DType::F32, &[2, 3, 3, 4])], Attrs::new()).mlir;
        // 36 products of each filter
        assert_eq!(m.matches("memref.store").count(), 36, "{m}");
    }
}
