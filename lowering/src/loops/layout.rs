//! Data-movement ops: reshape (a flat copy), bitcast (a flat copy of the bits), transpose,
//! concat, slice, gather (negative indices count from the end), scatter (a copy, then the
//! updates in order, on one thread), expand (a broadcasting copy) and pack (a matrix in panels
//! of columns, zero-padded).

use super::buffer::{storage_ty, Buf};
use super::emit::{Emitter, Ty, V};
use super::rows;
use super::scalar::Cmp;
use super::sizes::Extent;
use mxc_dialects::{Attrs, DType, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let out = &outs[0];
    match kind {
        OpKind::Reshape => {
            let (src, dst) = (e.flat(&ins[0]), e.flat(out));
            e.for_each(dst.extents().remove(0), |e, i| {
                let v = e.load(&src, std::slice::from_ref(&i));
                e.store(&dst, &[i], &v);
            });
        }
        OpKind::BitCast => {
            let (src, dst) = (e.flat(&ins[0]), e.flat(out));
            e.for_each(dst.extents().remove(0), |e, i| {
                let v = e.load(&src, std::slice::from_ref(&i));
                let v = reinterpret(e, &v, out.dtype);
                e.store(&dst, &[i], &v);
            });
        }
        OpKind::Expand => copy_nest(e, &ins[0], out, |e, idx| e.bcast_index_of(&ins[0], idx)),
        OpKind::Transpose => transpose(e, &attrs.dims("perm")?, &ins[0], out),
        OpKind::Slice => {
            // a start may be a size only the run knows (then its step is 1)
            let starts: Vec<Extent> = attrs.sizes("starts")?.iter().map(|d| e.extent(d)).collect();
            let steps = attrs.ints("steps")?;
            copy_nest(e, &ins[0], out, |e, idx| {
                (idx.iter().enumerate())
                    .map(|(d, i)| match &starts[d] {
                        Extent::Fixed(start) => e.lin(&[(i, steps[d])], *start as i64),
                        Extent::Run { value, .. } => e.lin(&[(i, steps[d]), (value, 1)], 0),
                    })
                    .collect()
            });
        }
        OpKind::Concat => concat(e, attrs.int("axis")? as usize, ins, out),
        OpKind::Gather => gather(e, attrs.int("axis")? as usize, &ins[0], &ins[1], out),
        OpKind::Scatter => scatter(e, attrs.str("reduction")?, &ins[0], &ins[1], &ins[2], out),
        OpKind::Pack => pack(e, &ins[0], out),
        _ => return Err(format!("{kind} is not a data-movement op")),
    }
    Ok(())
}

/// A stored element's bits as the storage of `to` (as wide: `mx.bitcast`), as
/// `mxc_dialects::eval` reinterprets them: narrow elements keep their low bits, re-extended as
/// `to` holds them; a bool is a nonzero byte.
fn reinterpret(e: &mut Emitter, v: &V, to: DType) -> V {
    let ty = storage_ty(to);
    let v = if v.ty.is_float() || ty.is_float() {
        e.bitcast(v, ty)
    } else {
        e.convert(v, ty)
    };
    match to.narrow_int() {
        Some(width) => e.wrap_narrow_int(&v, width),
        None if to.bits() < 8 => e.bits_const("andi", &v, (1 << to.bits()) - 1),
        None => v,
    }
}

/// `out` = the operands one after the other along `axis`. With dimensions before the axis,
/// one loop over them (the parallel loop) copies each operand's run for that index in turn,
/// contiguous runs in vectors on a vector unit; else a loop per operand.
fn concat(e: &mut Emitter, axis: usize, ins: &[Buf], out: &Buf) {
    if ins.iter().chain([out]).any(Buf::is_sized_at_run_time) {
        return concat_over_extents(e, axis, ins, out);
    }
    let outer: usize = out.shape[..axis].iter().product();
    if axis == 0 || outer == 1 || ins.iter().any(Buf::is_empty) {
        let mut offset = 0;
        for src in ins {
            e.nest(&src.shape, |e, idx| {
                let v = e.load(src, idx);
                let mut dst = idx.to_vec();
                dst[axis] = e.lin(&[(&idx[axis], 1)], offset as i64);
                e.store(out, &dst, &v);
            });
            offset += src.shape[axis];
        }
        return;
    }
    // each operand, and the result, as [outer, run]
    let as_rows = |e: &mut Emitter, b: &Buf| e.view(b, &[outer, b.len() / outer]);
    let srcs: Vec<Buf> = ins.iter().map(|b| as_rows(e, b)).collect();
    let dst = as_rows(e, out);
    // floats in vectors of f32 lanes; integers in vectors of as many bytes (64 bytes of u8)
    let lanes = e
        .f32_lanes()
        .filter(|_| ins.iter().chain([out]).all(Buf::holds_vectors))
        .map(|lanes| match out.dtype.is_float() {
            true => lanes,
            false => lanes * 4 / out.dtype.size(),
        });
    e.for_each(outer, |e, o| {
        let mut offset = 0;
        for src in &srcs {
            let run = src.shape[1];
            let copy = |e: &mut Emitter, j: &V, lanes: usize| {
                let v = e.read_lanes(src, &[o.clone(), j.clone()], lanes);
                let at = e.lin(&[(j, 1)], offset as i64);
                e.write(&dst, &[o.clone(), at], &v);
            };
            // a run shorter than a vector in the largest power of two of lanes it fills
            let fitting = |lanes: usize| lanes.min(1 << run.ilog2());
            match lanes.filter(|_| run >= 4).map(fitting) {
                Some(lanes) => rows::each(e, (run, lanes), &copy),
                None => e.for_each(run, |e, j| copy(e, &j, 1)),
            }
            offset += run;
        }
    });
}

/// `concat` over sizes only the run knows: a loop nest per operand, each at its offset along
/// the axis (the sum of the operands' extents before it).
fn concat_over_extents(e: &mut Emitter, axis: usize, ins: &[Buf], out: &Buf) {
    let mut offset = e.idx(0);
    for src in ins {
        let extents = src.extents();
        e.nest_over(&extents, |e, idx| {
            let v = e.load(src, idx);
            let mut dst = idx.to_vec();
            dst[axis] = e.lin(&[(&idx[axis], 1), (&offset, 1)], 0);
            e.store(out, &dst, &v);
        });
        let n = e.extent_value(&extents[axis]);
        offset = e.lin(&[(&offset, 1), (&n, 1)], 0);
    }
}

/// `out[.., p, k / g, j * g + k % g] = x[.., k, p * panel + j]`, 0 past the last column or
/// depth of `x` (`g` depths side by side: `mx::depth_pairing`).
fn pack(e: &mut Emitter, x: &Buf, out: &Buf) {
    let r = out.rank();
    let g = mxc_dialects::mx::depth_pairing(out.dtype) as i64;
    let (depth, columns) = (x.shape[x.rank() - 2] as i64, x.shape[x.rank() - 1] as i64);
    let panel = out.shape[r - 1] as i64 / g;
    e.nest(&out.shape, |e, idx| {
        let (batch, pkw) = idx.split_at(r - 3);
        let j = e.div_idx(&pkw[2], g);
        let t = e.rem_idx(&pkw[2], g);
        let column = e.lin(&[(&pkw[0], panel), (&j, 1)], 0);
        let row = e.lin(&[(&pkw[1], g), (&t, 1)], 0);
        let (end, last) = (e.idx(columns), e.idx(depth));
        let inside = [e.cmp_idx("slt", &column, &end), e.cmp_idx("slt", &row, &last)];
        let zero = e.zero(x.ty());
        let at = [batch, &[row, column]].concat();
        let v = e.when(&inside, &[zero], |e| vec![e.read(x, &at)]);
        e.write(out, idx, &v[0]);
    });
}

/// The side of the square blocks a transpose moves at a time: a cache line of f32.
const TRANSPOSE_BLOCK: usize = 16;

/// `out[idx] = x[idx permuted back]`. When the input's innermost dimension does not stay
/// innermost, walking the output in order would read the input a whole row apart at each
/// step, one cache line per element (an image of 64 channels turned channels-first moved at
/// 0.65 GB/s); instead the two dimensions that trade places, the output's innermost and the
/// one the input's innermost becomes, go in square blocks of `TRANSPOSE_BLOCK`, whose lines are
/// read and written whole while they stay in the L1 cache.
fn transpose(e: &mut Emitter, perm: &[usize], x: &Buf, out: &Buf) {
    let source = |idx: &[V]| {
        let mut at = idx.to_vec();
        for (j, &p) in perm.iter().enumerate() {
            at[p] = idx[j].clone();
        }
        at
    };
    let last = out.rank().saturating_sub(1);
    let across = perm.iter().position(|&p| p == last).filter(|&j| j != last);
    // over a size only the run knows, blocks are worth it where the cost point says so
    let Some(across) = across.filter(|&j| out.shape[j].min(out.shape[last]) >= TRANSPOSE_BLOCK) else {
        return copy_nest(e, x, out, |_, idx| source(idx));
    };
    let block = TRANSPOSE_BLOCK;
    let extents = out.extents();
    let mut blocks = extents.clone();
    for d in [across, last] {
        blocks[d] = e.extent_chunks(&extents[d], block);
    }
    let ends: Vec<V> = extents.iter().map(|n| e.extent_value(n)).collect();
    e.nest_over(&blocks, |e, idx| {
        // the block's range along dimension `d`
        let range = |e: &mut Emitter, d: usize| {
            let lo = e.lin(&[(&idx[d], block as i64)], 0);
            let next = e.lin(&[(&lo, 1)], block as i64);
            (lo, e.min_idx(&next, &ends[d]))
        };
        let (rows, columns) = (range(e, across), range(e, last));
        e.for_between(&rows.0, &rows.1, block as u64, &[], |e, i, _| {
            e.for_between(&columns.0, &columns.1, block as u64, &[], |e, j, _| {
                let mut at = idx.to_vec();
                at[across] = i.clone();
                at[last] = j.clone();
                let v = e.load(x, &source(&at));
                e.store(out, &at, &v);
                Vec::new()
            });
            Vec::new()
        });
    });
}

/// `out[idx] = src[source(idx)]` over every index of `out`.
fn copy_nest(e: &mut Emitter, src: &Buf, out: &Buf, source: impl FnOnce(&mut Emitter, &[V]) -> Vec<V>) {
    e.nest_over(&out.extents(), |e, idx| {
        let from = source(e, idx);
        let v = e.load(src, &from);
        e.store(out, idx, &v);
    });
}

/// `out[pre, j, post] = data[pre, indices[j], post]`; an index `i < 0` reads `i + extent`,
/// and indices still out of range are clamped to the axis (never read out of bounds).
fn gather(e: &mut Emitter, axis: usize, data: &Buf, indices: &Buf, out: &Buf) {
    let extent = data.extents().swap_remove(axis);
    let q = indices.rank();
    let n = e.extent_value(&extent);
    // the last index along the axis (an empty axis has none: every read is clamped to 0)
    let last = e.extent_last(&extent);
    e.nest_over(&out.extents(), |e, idx| {
        let raw = e.read(indices, &idx[axis..axis + q]);
        let i = e.convert(&raw, Ty::Index);
        let zero = e.idx(0);
        let negative = e.cmp(Cmp::Lt, &i, &zero);
        let wrapped = e.add(&i, &n);
        let i = e.select(&negative, &wrapped, &i);
        let i = e.max(&i, &zero);
        let i = e.min(&i, &last);
        let mut from = idx[..axis].to_vec();
        from.push(i);
        from.extend_from_slice(&idx[axis + q..]);
        let v = e.load(data, &from);
        e.store(out, idx, &v);
    });
}

/// `out` = `data`, then `updates[j]` combined by `reduction` into flat position `indices[j]`
/// (wrapped when negative, clamped to the buffer), `j` in order. The whole kernel is one
/// iteration of its parallel loop: updates may land on one position, so they are not split
/// across threads, and they follow the copy.
fn scatter(e: &mut Emitter, reduction: &str, data: &Buf, indices: &Buf, updates: &Buf, out: &Buf) {
    let (src, dst) = (e.flat(data), e.flat(out));
    let n = dst.len() as i64;
    e.nest(&[1], |e, _| {
        e.for_each(dst.len(), |e, i| {
            let v = e.load(&src, std::slice::from_ref(&i));
            e.store(&dst, &[i], &v);
        });
        e.for_each(indices.len(), |e, j| {
            let raw = e.read(indices, std::slice::from_ref(&j));
            let i = e.convert(&raw, Ty::Index);
            let zero = e.idx(0);
            let negative = e.cmp(Cmp::Lt, &i, &zero);
            let wrapped = e.lin(&[(&i, 1)], n);
            let i = e.select(&negative, &wrapped, &i);
            let last = e.idx((n - 1).max(0));
            let i = e.max(&i, &zero);
            let at = [e.min(&i, &last)];
            let update = e.read(updates, &[j]);
            let v = match reduction {
                "none" => update,
                combine => {
                    let old = e.read(&dst, &at);
                    match combine {
                        "add" => e.add(&old, &update),
                        "mul" => e.mul(&old, &update),
                        "max" => e.max(&old, &update),
                        _ => e.min(&old, &update),
                    }
                }
            };
            e.write(&dst, &at, &v);
        });
    });
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, ints, loop_depth, lower_one, lower_one_for, t, AVX512};
    use mxc_dialects::{Attr, DType, OpKind};

    #[test]
    fn reshape_is_a_flat_copy() {
        let m = lower_one(
            OpKind::Reshape,
            &[t(DType::I64, &[2, 3])],
            attrs(&[("shape", ints(&[3, 2]))]),
        )
        .mlir;
        assert_eq!(loop_depth(&m), 1, "{m}");
        check_in_order(
            &m,
            &[
                "memref.reinterpret_cast %in0",
                "memref.reinterpret_cast %out0",
                "memref.load",
                "memref.store",
            ],
        );
    }

    #[test]
    fn a_transpose_that_moves_the_innermost_dimension_goes_in_square_blocks() {
        // channels last to channels first: 40 x 33 pixels x 20 channels
        let m = lower_one(
            OpKind::Transpose,
            &[t(DType::F32, &[1, 40, 33, 20])],
            attrs(&[("perm", ints(&[0, 3, 1, 2]))]),
        )
        .mlir;
        // blocks of 16 along the channels (2) and the columns (3), their ends clipped
        check_in_order(
            &m,
            &[
                "of 1x2x40x3",
                "arith.minsi",
                "scf.for",
                "scf.for",
                "memref.load %in0",
                "memref.store",
            ],
        );
        // the innermost dimension staying innermost: a plain copy in order
        let m = lower_one(
            OpKind::Transpose,
            &[t(DType::F32, &[20, 33, 40])],
            attrs(&[("perm", ints(&[1, 0, 2]))]),
        )
        .mlir;
        assert!(m.contains("of 33x20x40"), "{m}");
        assert!(!m.contains("arith.minsi"), "{m}");
    }

    #[test]
    fn gather_wraps_negative_indices() {
        let m = lower_one(
            OpKind::Gather,
            &[t(DType::F32, &[5, 2]), t(DType::I32, &[3])],
            attrs(&[("axis", Attr::Int(0))]),
        )
        .mlir;
        check_in_order(
            &m,
            &[
                "memref.load %in1",
                "arith.index_cast",
                "arith.cmpi slt",
                "arith.select",
                "memref.load %in0",
            ],
        );
    }

    #[test]
    fn a_reversed_slice_steps_down_from_its_start() {
        let a = attrs(&[("starts", ints(&[4])), ("ends", ints(&[-1])), ("steps", ints(&[-2]))]);
        let m = lower_one(OpKind::Slice, &[t(DType::F32, &[5])], a).mlir;
        check_in_order(&m, &["memref<3xf32>", "arith.muli", "arith.addi", "memref.load %in0"]);
    }

    #[test]
    fn concat_offsets_each_operand_along_the_axis() {
        let m = lower_one(
            OpKind::Concat,
            &[t(DType::Bool, &[2, 1]), t(DType::Bool, &[2, 2])],
            attrs(&[("axis", Attr::Int(1))]),
        )
        .mlir;
        // one loop over the rows, each input's run copied into its place in the row
        check_in_order(
            &m,
            &[
                "to memref<2x1xi1>",
                "to memref<2x2xi1>",
                "to memref<2x3xi1>",
                "the parallel loop over 2 of 2",
                "memref.load %view",
                "memref.store",
                "memref.load %view",
                "arith.addi",
                "memref.store",
            ],
        );
    }

    #[test]
    fn a_concatenation_of_bytes_copies_runs_of_64_bytes() {
        // two runs of 96 and 32 bytes per row: a whole vector of 64 and a masked half of one,
        // then a vector of 32
        let m = lower_one_for(
            AVX512,
            OpKind::Concat,
            &[t(DType::U8, &[4, 96]), t(DType::U8, &[4, 32])],
            attrs(&[("axis", Attr::Int(1))]),
        );
        check_in_order(
            &m,
            &[
                "vector.load",
                "vector<64xi8>",
                "vector.maskedload",
                "vector<64xi8>",
                "vector<32xi8>",
            ],
        );
        assert!(!m.contains("memref.load %view"), "{m}");
    }
}
