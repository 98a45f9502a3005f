//! Rows in vectors: a kernel's pass over the last (contiguous) dimension of one row, as whole
//! vectors and then the partial one under a lane mask, either folding the row (the reductions:
//! softmax's maximum and sum, layer norm's mean and variance, the reduce ops along the last
//! axis) or writing it.

use super::emit::{Emitter, Ty, V};
use super::sizes::Extent;

/// Reads the `lanes` elements of a row from offset `at` on.
pub type Read<'r> = &'r dyn Fn(&mut Emitter, &V, usize) -> V;

/// Folds `step(acc, x)` over the `n` elements of a row in vectors of `lanes`, `x` what `read`
/// gives at each offset, from `init` in every lane; the lanes of the last vector past the row's
/// end count as `neutral`. Returns the lane-wise accumulator (`Emitter::reduce_lanes` folds its
/// lanes).
pub fn fold(
    e: &mut Emitter,
    (n, lanes): (impl Into<Extent>, usize),
    (init, neutral): (f64, f64),
    read: Read,
    step: &dyn Fn(&mut Emitter, &V, &V) -> V,
) -> V {
    let n = n.into();
    let init = e.float(Ty::F32, init);
    let mut acc = e.splat(&init, lanes);
    let (whole, rest) = match &n {
        Extent::Fixed(n) => (
            Extent::Fixed(n / lanes),
            (n % lanes > 0).then(|| e.first_lanes(n % lanes, lanes)),
        ),
        // the run decides how many lanes the last vector has: none is a mask of no lanes
        Extent::Run { value, dim } => {
            let k = e.idx(lanes as i64);
            let whole = e.hoisted_op(&format!("arith.divsi {value}, {k} : index"), Ty::Index, 1);
            let rest = e.hoisted_op(&format!("arith.remsi {value}, {k} : index"), Ty::Index, 1);
            let whole_dim = dim.floor_div(lanes as u64).expect("a size divided by a lane count");
            (
                Extent::Run {
                    value: whole,
                    dim: whole_dim,
                },
                Some(e.run_time_lanes(&rest, lanes)),
            )
        }
    };
    match whole.fixed() {
        Some(0) => {}
        Some(w) if w >= 2 * CHAINS => acc = in_chains(e, w, lanes, (acc, neutral), read, step),
        _ => {
            acc = e.nest_acc_over(std::slice::from_ref(&whole), &[acc], |e, chunk, acc| {
                let at = e.lin(&[(&chunk[0], lanes as i64)], 0);
                let x = read(e, &at, lanes);
                vec![step(e, &acc[0], &x)]
            })[0]
                .clone();
        }
    }
    if let Some(mask) = rest {
        let at = match &whole {
            Extent::Fixed(w) => e.idx((w * lanes) as i64),
            Extent::Run { value, .. } => {
                let k = e.idx(lanes as i64);
                e.hoisted_op(&format!("arith.muli {value}, {k} : index"), Ty::Index, 1)
            }
        };
        let x = e.masked(Some(mask.clone()), |e| read(e, &at, lanes));
        let neutral = e.float(Ty::F32, neutral);
        let x = e.select(&mask, &x, &neutral);
        acc = step(e, &acc, &x);
    }
    acc
}

/// The independent accumulators a long row is folded into: each step of a chain waits for the
/// one before it (an add's latency, 4 cycles), so one chain takes a vector per 4 cycles where
/// four keep up with the loads (a 4.8 MB sum: 0.23 -> 0.1 ms of one core).
const CHAINS: usize = 4;

/// `fold`'s whole vectors of a row of `whole` of them, `CHAINS` at a time into as many
/// accumulators (the first starting from `acc`, the others from `neutral`), the few left
/// over into the first; the accumulators are then combined.
fn in_chains(
    e: &mut Emitter,
    whole: usize,
    lanes: usize,
    (acc, neutral): (V, f64),
    read: Read,
    step: &dyn Fn(&mut Emitter, &V, &V) -> V,
) -> V {
    let neutral = e.float(Ty::F32, neutral);
    let neutral = e.splat(&neutral, lanes);
    let mut chains = vec![acc];
    chains.extend(std::iter::repeat_n(neutral, CHAINS - 1));
    let rounds = Extent::Fixed(whole / CHAINS);
    let mut chains = e.nest_acc_over(std::slice::from_ref(&rounds), &chains, |e, round, chains| {
        (0..CHAINS)
            .map(|c| {
                let at = e.lin(&[(&round[0], (CHAINS * lanes) as i64)], (c * lanes) as i64);
                let x = read(e, &at, lanes);
                step(e, &chains[c], &x)
            })
            .collect()
    });
    for v in whole / CHAINS * CHAINS..whole {
        let at = e.idx((v * lanes) as i64);
        let x = read(e, &at, lanes);
        chains[0] = step(e, &chains[0], &x);
    }
    let (a, b) = (step(e, &chains[0], &chains[1]), step(e, &chains[2], &chains[3]));
    step(e, &a, &b)
}

/// Writes a row of `n` elements in vectors of `lanes`: `body(at, lanes)` at each offset, the
/// last vector under a mask of the lanes left.
pub fn each(e: &mut Emitter, (n, lanes): (impl Into<Extent>, usize), body: &dyn Fn(&mut Emitter, &V, usize)) {
    let n = n.into();
    let chunks = e.extent_chunks(&n, lanes);
    e.for_each(chunks, |e, chunk| {
        let at = e.lin(&[(&chunk, lanes as i64)], 0);
        in_vectors(e, &chunk, &n, lanes, |e, lanes| body(e, &at, lanes));
    });
}

/// Writes `body` for chunk `chunk` of a row of `n` elements in vectors of `lanes`: whole, or
/// (the last chunk, when `n` is not a multiple of `lanes`) under a mask of the lanes left.
fn in_vectors(e: &mut Emitter, chunk: &V, n: &Extent, lanes: usize, body: impl Fn(&mut Emitter, usize)) {
    let (last, mask) = match n {
        Extent::Fixed(n) => {
            let rest = n % lanes;
            if rest == 0 {
                return body(e, lanes);
            }
            (e.idx((n / lanes) as i64), e.first_lanes(rest, lanes))
        }
        // the run decides whether a partial chunk exists: where it does not, no chunk reaches
        // `n / lanes`
        Extent::Run { value, .. } => {
            let k = e.idx(lanes as i64);
            let last = e.hoisted_op(&format!("arith.divsi {value}, {k} : index"), Ty::Index, 1);
            let rest = e.hoisted_op(&format!("arith.remsi {value}, {k} : index"), Ty::Index, 1);
            (last, e.run_time_lanes(&rest, lanes))
        }
    };
    let whole = e.cmp_idx("slt", chunk, &last);
    e.if_else_like(
        &whole,
        &[],
        |e| {
            body(e, lanes);
            Vec::new()
        },
        |e| {
            e.masked(Some(mask), |e| body(e, lanes));
            Vec::new()
        },
    );
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one_vector, t};
    use mxc_dialects::{Attr, DType, OpKind};

    #[test]
    fn a_softmax_row_of_13_is_a_vector_and_a_masked_rest() {
        let m = lower_one_vector(
            OpKind::Softmax,
            &[t(DType::F32, &[4, 13])],
            attrs(&[("axis", Attr::Int(1))]),
        );
        check_in_order(
            &m,
            &[
                "vector.constant_mask [5]",
                "arith.maximumf",
                "vector.maskedload",
                "arith.select",
                "vector.reduction <maximumf>",
                "vector.reduction <add>",
                "arith.divf",
                "vector.maskedstore",
            ],
        );
        assert!(!m.contains("math.exp"), "exp is the vector polynomial: {m}");
    }
}
