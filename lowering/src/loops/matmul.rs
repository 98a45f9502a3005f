//! Matrix products: `gemm` (`alpha * A' * B' + beta * C`, C broadcast to the result) and
//! `matmul` (numpy: batch dimensions broadcast, a 1-D operand is a row or column vector
//! whose dimension is dropped from the result). One dot product per result element,
//! accumulated in the compute type.

use super::amx;
use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::sizes::Extent;
use super::tile::{self, Matrix, Panels, Product, Sums};
use super::vector::VectorIsa;
use mxc_dialects::{Attrs, DType, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    match kind {
        OpKind::Gemm => gemm(e, attrs, ins, &outs[0]),
        OpKind::MatMul => {
            matmul(e, &ins[0], &ins[1], &outs[0]);
            Ok(())
        }
        OpKind::MatMulPacked => {
            matmul_packed(e, &ins[0], &ins[1], &outs[0]);
            Ok(())
        }
        _ => Err(format!("{kind} is not a matrix product")),
    }
}

/// `sum over k of a[a_idx(k)] * b[b_idx(k)]` for `k` in `0..depth`.
fn dot(
    e: &mut Emitter,
    depth: usize,
    a: &Buf,
    a_idx: impl Fn(&V) -> Vec<V>,
    b: &Buf,
    b_idx: impl Fn(&V) -> Vec<V>,
) -> V {
    let zero = e.zero(a.ty());
    let acc = e.nest_acc(&[depth], &[zero], |e, k, acc| {
        vec![e.multiply_add(&acc[0], a, &a_idx(&k[0]), b, &b_idx(&k[0]))]
    });
    acc[0].clone()
}

/// The vector unit to tile a product of `a` and `b` into `out` for: the emitter's, when all
/// of them hold f32 (`None`: the scalar form).
fn tiling(e: &Emitter, a: &Buf, b: &Buf, out: &Buf) -> Option<VectorIsa> {
    e.isa.filter(|_| [a, b, out].iter().all(|x| x.holds_float_vectors()))
}

/// What `gemm` does with a product: `alpha * sum + beta * C`, C broadcast to the result.
pub struct GemmScale<'a> {
    alpha: f64,
    beta: f64,
    /// C, unless absent or scaled by 0.
    c: Option<&'a Buf>,
}

impl<'a> GemmScale<'a> {
    /// The scaling of a `gemm` with `attrs` and operands `ins`.
    pub fn of(attrs: &Attrs, ins: &'a [Buf]) -> Result<GemmScale<'a>, String> {
        let beta = attrs.float("beta")?;
        Ok(GemmScale {
            alpha: attrs.float("alpha")?,
            beta,
            c: ins.get(2).filter(|_| beta != 0.0),
        })
    }

    /// The result at `idx` whose product is `r` (of the compute type `ty`).
    pub fn apply(&self, e: &mut Emitter, ty: Ty, idx: &[V], mut r: V) -> V {
        if self.alpha != 1.0 {
            let k = e.num(ty, self.alpha);
            r = e.mul(&r, &k);
        }
        if let Some(c) = self.c {
            let mut cv = e.read_bcast_lanes(c, idx, r.lanes);
            if self.beta != 1.0 {
                let k = e.num(ty, self.beta);
                cv = e.mul(&cv, &k);
            }
            r = e.add(&r, &cv);
        }
        r
    }
}

fn gemm(e: &mut Emitter, attrs: &Attrs, ins: &[Buf], out: &Buf) -> Result<(), String> {
    let (a, b) = (&ins[0], &ins[1]);
    let (trans_a, trans_b) = (attrs.int("trans_a")? != 0, attrs.int("trans_b")? != 0);
    let depth = if trans_a { a.shape[0] } else { a.shape[1] };
    let ty = out.ty();
    let scale = GemmScale::of(attrs, ins)?;
    let c = scale.c;
    let finish = |e: &mut Emitter, idx: &[V], r: V| scale.apply(e, ty, idx, r);
    let vectors = tiling(e, a, b, out).filter(|_| c.is_none_or(|c| c.dtype == DType::F32) && !trans_b);
    if let Some(isa) = vectors {
        let at = |_: &mut Emitter, _: &[V], row: &V, k: &V| match trans_a {
            true => vec![k.clone(), row.clone()],
            false => vec![row.clone(), k.clone()],
        };
        let b_at = |_: &mut Emitter, _: &[V], k: &V, col: &V| vec![k.clone(), col.clone()];
        let out_at = |_: &mut Emitter, _: &[V], row: &V, col: &V| vec![row.clone(), col.clone()];
        let rows = Matrix { buf: a, depth, at: &at };
        let product = Product {
            batch: Vec::new(),
            m: out.extents().swap_remove(0),
            n: out.shape[1],
            a: &rows,
            b: Panels::RowMajor { buf: b, at: &b_at },
            out,
            out_at: &out_at,
            finish: &finish,
            sums: Sums::Float,
            start: None,
        };
        tile::emit(e, &product, isa);
        return Ok(());
    }
    e.nest_over(&out.extents(), |e, idx| {
        let (m, n) = (&idx[0], &idx[1]);
        let a_idx = |k: &V| {
            if trans_a {
                vec![k.clone(), m.clone()]
            } else {
                vec![m.clone(), k.clone()]
            }
        };
        let b_idx = |k: &V| {
            if trans_b {
                vec![n.clone(), k.clone()]
            } else {
                vec![k.clone(), n.clone()]
            }
        };
        let r = dot(e, depth, a, a_idx, b, b_idx);
        let r = finish(e, idx, r);
        e.write(out, idx, &r);
    });
    Ok(())
}

fn matmul(e: &mut Emitter, a: &Buf, b: &Buf, out: &Buf) {
    let (ra, rb) = (a.rank(), b.rank());
    let depth = a.shape[ra - 1];
    let batch = out.rank() - usize::from(ra > 1) - usize::from(rb > 1);
    if let Some(isa) = tiling(e, a, b, out).filter(|_| rb > 1) {
        let a_at = |e: &mut Emitter, batch: &[V], row: &V, k: &V| {
            let mut i = e.bcast_prefix(a, ra.saturating_sub(2), batch);
            i.extend((ra > 1).then(|| row.clone()));
            i.push(k.clone());
            i
        };
        let b_at = |e: &mut Emitter, batch: &[V], k: &V, col: &V| {
            let mut i = e.bcast_prefix(b, rb - 2, batch);
            i.extend([k.clone(), col.clone()]);
            i
        };
        let out_at = |_: &mut Emitter, batch: &[V], row: &V, col: &V| {
            let mut i = batch.to_vec();
            i.extend((ra > 1).then(|| row.clone()));
            i.push(col.clone());
            i
        };
        let rows = Matrix {
            buf: a,
            depth,
            at: &a_at,
        };
        let product = Product {
            batch: out.extents()[..batch].to_vec(),
            m: match ra > 1 {
                true => a.extents().swap_remove(ra - 2),
                false => Extent::Fixed(1),
            },
            n: b.shape[rb - 1],
            a: &rows,
            b: Panels::RowMajor { buf: b, at: &b_at },
            out,
            out_at: &out_at,
            finish: &|_, _, v| v,
            sums: Sums::Float,
            start: None,
        };
        return tile::emit(e, &product, isa);
    }
    e.nest_over(&out.extents(), |e, idx| {
        let (batch_idx, rest) = idx.split_at(batch);
        let m = (ra > 1).then(|| rest[0].clone());
        let n = (rb > 1).then(|| rest[rest.len() - 1].clone());
        let a_batch = e.bcast_prefix(a, ra.saturating_sub(2), batch_idx);
        let b_batch = e.bcast_prefix(b, rb.saturating_sub(2), batch_idx);
        let a_idx = |k: &V| {
            let mut i = a_batch.clone();
            i.extend(m.clone());
            i.push(k.clone());
            i
        };
        let b_idx = |k: &V| {
            let mut i = b_batch.clone();
            i.push(k.clone());
            i.extend(n.clone());
            i
        };
        let r = dot(e, depth, a, a_idx, b, b_idx);
        e.write(out, idx, &r);
    });
}

/// `out[.., m, n] = sum over k of a[.., m, k] * bp[.., n / panel, k, n % panel]` (`bp`:
/// `mx.pack`, with `a`'s batch dimensions or none).
fn matmul_packed(e: &mut Emitter, a: &Buf, bp: &Buf, out: &Buf) {
    let rank = a.rank();
    let depth = a.shape[rank - 1];
    let batch = out.extents()[..rank - 2].to_vec();
    let sized = a.is_sized_at_run_time();
    if e.isa.is_some_and(|isa| !sized && amx::usable(isa, a, bp, out)) {
        return amx::emit(e, a, bp, out);
    }
    if let Some(isa) = tiling(e, a, bp, out) {
        // `a` and `out` alike: the batch, then the row and the column
        let at = |_: &mut Emitter, batch: &[V], row: &V, col: &V| [batch, &[row.clone(), col.clone()]].concat();
        let rows = Matrix { buf: a, depth, at: &at };
        let product = Product {
            batch,
            m: a.extents().swap_remove(rank - 2),
            n: out.shape[rank - 1],
            a: &rows,
            b: Panels::Packed(bp),
            out,
            out_at: &at,
            finish: &|_, _, v| v,
            sums: Sums::Float,
            start: None,
        };
        return tile::emit(e, &product, isa);
    }
    let g = mxc_dialects::mx::depth_pairing(bp.dtype) as i64;
    let panel = bp.shape[bp.rank() - 1] as i64 / g;
    e.nest_over(&out.extents(), |e, idx| {
        let (m, n) = (&idx[rank - 2], &idx[rank - 1]);
        let (p, j) = (e.div_idx(n, panel), e.rem_idx(n, panel));
        let a_idx = |k: &V| [&idx[..rank - 2], &[m.clone(), k.clone()]].concat();
        let b_batch = &idx[..bp.rank() - 3];
        let b_idx = |e: &mut Emitter, k: &V| {
            let (pair, t) = (e.div_idx(k, g), e.rem_idx(k, g));
            let w = e.lin(&[(&j, g), (&t, 1)], 0);
            [b_batch, &[p.clone(), pair, w]].concat()
        };
        let zero = e.zero(a.ty());
        let acc = e.nest_acc(&[depth], &[zero], |e, k, acc| {
            let bi = b_idx(e, &k[0]);
            vec![e.multiply_add(&acc[0], a, &a_idx(&k[0]), bp, &bi)]
        });
        e.write(out, idx, &acc[0]);
    });
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, loop_depth, lower_one, t};
    use mxc_dialects::{Attr, Attrs, DType, OpKind};

    #[test]
    fn batched_matmul_loops_over_the_result_then_the_inner_dimension() {
        let m = lower_one(
            OpKind::MatMul,
            &[t(DType::F32, &[2, 1, 3, 4]), t(DType::F32, &[5, 4, 6])],
            Attrs::new(),
        );
        assert_eq!(loop_depth(&m.mlir), 5, "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &[
                "memref<2x5x3x6xf32>",
                "iter_args",
                "memref.load %in0",
                "memref.load %in1",
                "arith.mulf",
                "arith.addf",
            ],
        );
    }

    #[test]
    fn gemm_scales_only_when_asked() {
        let a = |alpha: f64| {
            attrs(&[
                ("alpha", Attr::Float(alpha)),
                ("beta", Attr::Float(1.0)),
                ("trans_a", Attr::Int(0)),
                ("trans_b", Attr::Int(1)),
            ])
        };
        let tys = [t(DType::F32, &[3, 4]), t(DType::F32, &[5, 4]), t(DType::F32, &[5])];
        let plain = lower_one(OpKind::Gemm, &tys, a(1.0)).mlir;
        assert_eq!(plain.matches("arith.mulf").count(), 1, "{plain}");
        let scaled = lower_one(OpKind::Gemm, &tys, a(0.5)).mlir;
        check_in_order(
            &scaled,
            &["5.0e-1", "arith.mulf", "arith.mulf", "memref.load %in2", "arith.addf"],
        );
    }

    #[test]
    fn integer_matmul_accumulates_in_the_integer_type() {
        let m = lower_one(
            OpKind::MatMul,
            &[t(DType::U8, &[4]), t(DType::U8, &[4, 2])],
            Attrs::new(),
        )
        .mlir;
        check_in_order(&m, &["arith.muli", "arith.addi", "memref<2xi8>"]);
    }
}
