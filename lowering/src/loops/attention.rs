//! `attention` (`mxc_dialects::mx::attention`): softmax(scale · q kᵀ + mask) v per batch and
//! head.
//!
//! Scalar code (the `ref` oracle) follows the definition row by row: each query row's scores
//! in a scratch row, their maximum, the exponentials and their sum, the probabilities, then
//! each output element as the sum over the keys.
//!
//! On a vector unit (f32) the kernel is tiled the way FlashAttention is: the parallel loop runs
//! over batch x heads x blocks of query rows (two vectors of rows), and each block walks the
//! keys in tiles, so the scores of a block never leave a scratch tile in the L1 cache. Every
//! vector runs across the block's query rows, which keeps the softmax lane-wise (no horizontal
//! reductions) and makes both products register-tiled outer products:
//!
//! - the block of q is copied transposed to a scratch `[depth, rows]` once;
//! - scores of a key tile: micro-tiles of keys x 2 vectors of rows, each key's element of k
//!   broadcast against the rows of q at each depth, scaled, the mask added, stored to the tile;
//! - the online softmax: the running maximum `m` and sum `l` per row, `alpha = exp(m_old -
//!   m_new)` rescaling what was summed before, each score replaced by `exp(score - m_new)`;
//! - the output, transposed in a scratch `[value depth, rows]`: micro-tiles of depths x 2
//!   vectors of rows, rescaled by `alpha`, then each key's element of v broadcast against the
//!   probabilities of the rows;
//! - at the end each row is multiplied by the reciprocal of its sum and stored. A maximum of
//!   -inf (every key masked) is taken as 0 for the exponentials, so such a row sums to 0 and
//!   gives 0 * (1 / 0) = NaN, as the plain softmax does; with `zero_nan_rows`, a row whose sum
//!   is not positive (NaN or 0: its softmax is NaN) is stored as the sum of `0 * v` over the
//!   keys instead.

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::scalar::Cmp;
use super::sizes::Extent;
use super::tile::MicroTile;
use super::vector::VectorIsa;
use mxc_dialects::mx::attention::{dims, Dims};
use mxc_dialects::{Attrs, DType, TensorType};

/// Keys per tile of scores: 256 keys x 2 vectors of rows stay in the L1 cache.
const KEY_TILE: usize = 256;

/// One attention kernel's operands, dimensions and attributes.
struct Attention<'a> {
    q: &'a Buf,
    k: &'a Buf,
    v: &'a Buf,
    mask: Option<&'a Buf>,
    out: &'a Buf,
    /// The dimensions (the batch, queries and keys at the cost point where only the run knows
    /// them: `run` has them as extents; heads and depths are fixed).
    d: Dims,
    run: RunDims,
    scale: f64,
    zero_nan_rows: bool,
}

impl Attention<'_> {
    /// The index of element `depth` of row `row` (a query or key) of batch `b`, head `h`.
    fn at(&self, b: &V, h: &V, row: &V, depth: &V) -> Vec<V> {
        self.d.place(b, h, row, depth).into_iter().cloned().collect()
    }

    /// The mask's element for query `s` and key `j` (as a number: 0 without a mask).
    fn mask_at(&self, e: &mut Emitter, (b, h): (&V, &V), s: &V, j: &V) -> Option<V> {
        self.mask
            .map(|m| e.read_bcast(m, &[b.clone(), h.clone(), s.clone(), j.clone()]))
    }
}

/// The batch, queries and keys as extents, and the last query's and key's indices.
struct RunDims {
    batch: Extent,
    queries: Extent,
    keys: Extent,
    last_query: V,
    last_key: V,
}

impl RunDims {
    fn of(e: &mut Emitter, d: &Dims, q: &Buf, k: &Buf) -> RunDims {
        let row = |b: &Buf| b.extents().swap_remove(d.seq_axis);
        let (queries, keys) = (row(q), row(k));
        RunDims {
            batch: q.extents().swap_remove(0),
            last_query: e.extent_last(&queries),
            last_key: e.extent_last(&keys),
            queries,
            keys,
        }
    }
}

pub fn lower(e: &mut Emitter, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let layout = attrs.str("layout")?;
    let types: Vec<TensorType> = ins.iter().map(|b| TensorType::new(b.dtype, b.shape.clone())).collect();
    let d = dims(&types, layout)?;
    let a = Attention {
        q: &ins[0],
        k: &ins[1],
        v: &ins[2],
        mask: ins.get(3),
        out: &outs[0],
        run: RunDims::of(e, &d, &ins[0], &ins[1]),
        d,
        scale: attrs.float("scale")?,
        zero_nan_rows: attrs.int("zero_nan_rows")? != 0,
    };
    let all_f32 = ins.iter().chain(outs).all(|b| b.dtype == DType::F32);
    // no keys (every output 0) or no queries: nothing to tile
    let tiles = a.d.keys > 0 && a.d.queries > 0;
    match e.isa {
        Some(isa) if all_f32 && tiles && a.out.epilogue.is_none() => tiled(e, &a, isa),
        _ => scalar(e, &a),
    }
    Ok(())
}

/// The definition, one query row at a time, its scores and then probabilities in a scratch row.
fn scalar(e: &mut Emitter, a: &Attention) {
    let d = a.d;
    let ty = a.q.ty();
    let row_dtype = if ty == Ty::F64 { DType::F64 } else { DType::F32 };
    let keys = a.run.keys.clone();
    let p = Buf::with_extents(&e.fresh("scores"), row_dtype, vec![keys.clone()]);
    let size = match &keys {
        Extent::Fixed(_) => String::new(),
        Extent::Run { value, .. } => value.name.clone(),
    };
    e.line(&format!("{} = memref.alloca({size}) : {}", p.name, p.memref()));
    let over = [a.run.batch.clone(), Extent::Fixed(d.heads), a.run.queries.clone()];
    e.nest_over(&over, |e, idx| {
        let (b, h, s) = (&idx[0], &idx[1], &idx[2]);
        let zero = e.zero(ty);
        let lowest = e.lowest(ty);
        let scale = e.float(ty, a.scale);
        let max = e.nest_acc_over(std::slice::from_ref(&keys), &[lowest], |e, j, acc| {
            let j = &j[0];
            let dot = e.nest_acc(&[d.depth], std::slice::from_ref(&zero), |e, k, acc| {
                let (qi, ki) = (a.at(b, h, s, &k[0]), a.at(b, h, j, &k[0]));
                vec![e.multiply_add(&acc[0], a.q, &qi, a.k, &ki)]
            });
            let mut score = e.mul(&dot[0], &scale);
            if let Some(m) = a.mask_at(e, (b, h), s, j) {
                score = e.add(&score, &m);
            }
            e.write(&p, std::slice::from_ref(j), &score);
            vec![e.max(&acc[0], &score)]
        });
        let sum = e.nest_acc_over(std::slice::from_ref(&keys), std::slice::from_ref(&zero), |e, j, acc| {
            let score = e.read(&p, j);
            let shifted = e.sub(&score, &max[0]);
            let ex = e.math("exp", &shifted);
            e.write(&p, j, &ex);
            vec![e.add(&acc[0], &ex)]
        });
        e.for_each(keys.clone(), |e, j| {
            let ex = e.read(&p, std::slice::from_ref(&j));
            let mut prob = e.div(&ex, &sum[0]);
            if a.zero_nan_rows {
                let nan = e.cmp(Cmp::Ne, &prob, &prob);
                prob = e.select(&nan, &zero, &prob);
            }
            e.write(&p, &[j], &prob);
        });
        e.for_each(d.value_depth, |e, c| {
            let y = e.nest_acc_over(std::slice::from_ref(&keys), std::slice::from_ref(&zero), |e, j, acc| {
                let vi = a.at(b, h, &j[0], &c);
                vec![e.multiply_add(&acc[0], &p, j, a.v, &vi)]
            });
            let oi = a.at(b, h, s, &c);
            e.write(a.out, &oi, &y[0]);
        });
    });
}

/// Scratch tiles of one block of query rows (each thread's call has its own, on its stack).
struct Scratch {
    /// The block of q, transposed: `[depth, rows]`.
    q_t: Buf,
    /// A tile of scores, then of probabilities: `[keys, rows]`.
    scores: Buf,
    /// The output so far, transposed: `[value depth, rows]`.
    out_t: Buf,
    /// Each row's sum, for the final division: `[rows]`.
    sums: Buf,
}

/// The tiled kernel for `isa` (see the module's comment).
fn tiled(e: &mut Emitter, a: &Attention, isa: VectorIsa) {
    let d = a.d;
    let lanes = isa.lanes;
    let rows = 2 * lanes;
    let micro = MicroTile::most_rows(isa);
    // a tile of the most keys the run may have (the keys at the cost point may be fewer)
    let key_tile = match a.run.keys.fixed() {
        Some(keys) => KEY_TILE.min(keys),
        None => KEY_TILE,
    };
    let mut scratch = |name: &str, shape: &[usize]| {
        let buf = Buf::new(&e.fresh(name), DType::F32, shape);
        e.line(&format!("{} = memref.alloca() : {}", buf.name, buf.memref()));
        buf
    };
    let s = Scratch {
        q_t: scratch("q_t", &[d.depth, rows]),
        scores: scratch("scores", &[key_tile.next_multiple_of(micro), rows]),
        out_t: scratch("out_t", &[d.value_depth.next_multiple_of(micro), rows]),
        sums: scratch("sums", &[rows]),
    };
    let blocks = e.extent_chunks(&a.run.queries, rows);
    let tiles = e.extent_chunks(&a.run.keys, key_tile);
    let (keys, count) = (e.extent_value(&a.run.keys), e.extent_value(&tiles));
    let over = [a.run.batch.clone(), Extent::Fixed(d.heads), blocks];
    e.nest_over(&over, |e, idx| {
        let (b, h) = (&idx[0], &idx[1]);
        let first = e.lin(&[(&idx[2], rows as i64)], 0);
        let last_query = a.run.last_query.clone();
        // the block's rows past the last query repeat it; they are computed and not stored
        let query = |e: &mut Emitter, r: &V| {
            let row = e.lin(&[(&first, 1), (r, 1)], 0);
            e.min_idx(&row, &last_query)
        };
        e.nest(&[d.depth, rows], |e, i| {
            let row = query(e, &i[1]);
            let x = e.read(a.q, &a.at(b, h, &row, &i[0]));
            e.store(&s.q_t, i, &x);
        });
        let zero = e.zero(Ty::F32);
        let zeros = e.splat(&zero, lanes);
        e.nest(&[d.value_depth, 2], |e, i| {
            let col = e.lin(&[(&i[1], lanes as i64)], 0);
            e.store(&s.out_t, &[i[0].clone(), col], &zeros);
        });
        let lowest = e.float(Ty::F32, f64::NEG_INFINITY);
        let lowest = e.splat(&lowest, lanes);
        let inits = [lowest.clone(), lowest, zeros.clone(), zeros.clone()];
        let start = e.idx(0);
        let state = e.for_between(&start, &count, tiles.at_cost_point() as u64, &inits, |e, t, carried| {
            let key0 = e.lin(&[(t, key_tile as i64)], 0);
            let rest = e.lin(&[(&keys, 1), (t, -(key_tile as i64))], 0);
            let tile_keys = e.idx(key_tile as i64);
            let valid = e.min_idx(&rest, &tile_keys);
            let block = Block {
                a,
                s: &s,
                lanes,
                micro,
                batch_head: (b, h),
                key0: &key0,
                valid: &valid,
                key_tile,
            };
            block.scores(e, &query);
            block.softmax_and_values(e, carried)
        });
        let sums = [&state[2], &state[3]];
        for (half, sum) in sums.iter().enumerate() {
            let at = e.idx((half * lanes) as i64);
            e.store(&s.sums, &[at], sum);
        }
        store_rows(e, a, &s, (b, h), &first, rows);
    });
}

/// One key tile of one block of query rows.
struct Block<'a> {
    a: &'a Attention<'a>,
    s: &'a Scratch,
    lanes: usize,
    /// Keys (scores) or value depths (output) per micro-tile.
    micro: usize,
    batch_head: (&'a V, &'a V),
    /// The tile's first key, how many keys it has, and how many a tile has at most.
    key0: &'a V,
    valid: &'a V,
    key_tile: usize,
}

/// The index of the `i`-th row of a micro-tile from `from` on, the last ones repeating `last`.
fn clamped(e: &mut Emitter, from: &V, i: usize, last: &V) -> V {
    let r = e.lin(&[(from, 1)], i as i64);
    e.min_idx(&r, last)
}

impl Block<'_> {
    /// The tile's scores, `scale * q · k + mask`, to the scores scratch (`[key, rows]`).
    fn scores(&self, e: &mut Emitter, query: &dyn Fn(&mut Emitter, &V) -> V) {
        let (a, lanes, micro) = (self.a, self.lanes, self.micro);
        let (b, h) = self.batch_head;
        let micro_tiles = self.micro_tiles(e, self.valid);
        let last_key = a.run.last_key.clone();
        let scale = e.float(Ty::F32, a.scale);
        let zero = e.zero(Ty::F32);
        let start = e.idx(0);
        e.for_between(
            &start,
            &micro_tiles,
            self.key_tile.div_ceil(micro) as u64,
            &[],
            |e, mt, _| {
                let local0 = e.lin(&[(mt, micro as i64)], 0);
                let key_first = e.lin(&[(self.key0, 1), (&local0, 1)], 0);
                let keys: Vec<V> = (0..micro).map(|i| clamped(e, &key_first, i, &last_key)).collect();
                let inits = vec![e.splat(&zero, lanes); 2 * micro];
                let sums = e.nest_acc(&[a.d.depth], &inits, |e, k, acc| {
                    let k = &k[0];
                    let row_vectors: Vec<V> = (0..2)
                        .map(|half| {
                            let col = e.idx((half * lanes) as i64);
                            e.read_lanes(&self.s.q_t, &[k.clone(), col], lanes)
                        })
                        .collect();
                    outer_product_step(e, acc, &row_vectors, |e, i| e.read(a.k, &a.at(b, h, &keys[i], k)))
                });
                for (i, key) in keys.iter().enumerate() {
                    let local = e.lin(&[(&local0, 1)], i as i64);
                    for half in 0..2 {
                        let mut score = e.mul(&sums[i * 2 + half], &scale);
                        if a.mask.is_some() {
                            let mask = self.mask_vector(e, key, half, query);
                            score = e.add(&score, &mask);
                        }
                        let col = e.idx((half * lanes) as i64);
                        e.store(&self.s.scores, &[local.clone(), col], &score);
                    }
                }
                Vec::new()
            },
        );
    }

    /// The mask's elements for key `key` and the rows of vector `half` of the block: one
    /// element for every row when the mask does not vary along the queries.
    fn mask_vector(&self, e: &mut Emitter, key: &V, half: usize, query: &dyn Fn(&mut Emitter, &V) -> V) -> V {
        let (a, lanes) = (self.a, self.lanes);
        let mask = a.mask.expect("a mask");
        let per_query = mask.rank() >= 2 && !mask.is_unit(mask.rank() - 2);
        if !per_query {
            let zero = e.idx(0);
            let first = query(e, &zero);
            let m = a.mask_at(e, self.batch_head, &first, key).expect("a mask");
            return e.splat(&m, lanes);
        }
        let elements: Vec<V> = (0..lanes)
            .map(|lane| {
                let r = e.idx((half * lanes + lane) as i64);
                let row = query(e, &r);
                a.mask_at(e, self.batch_head, &row, key).expect("a mask")
            })
            .collect();
        let names: Vec<String> = elements.iter().map(|v| v.name.clone()).collect();
        e.op_lanes(
            "m",
            Ty::F32,
            lanes,
            &format!("vector.from_elements {} : vector<{lanes}xf32>", names.join(", ")),
        )
    }

    /// The number of micro-tiles that cover `n` (an index value) rows.
    fn micro_tiles(&self, e: &mut Emitter, n: &V) -> V {
        let up = e.lin(&[(n, 1)], self.micro as i64 - 1);
        e.div_idx(&up, self.micro as i64)
    }

    /// The online softmax over the tile's scores and the output's update; `carried` is the
    /// running maximum and sum of each half of the rows, and so is the result.
    fn softmax_and_values(&self, e: &mut Emitter, carried: &[V]) -> Vec<V> {
        let (lanes, scores) = (self.lanes, &self.s.scores);
        let score_at = |e: &mut Emitter, j: &V, half: usize| {
            let col = e.idx((half * lanes) as i64);
            vec![j.clone(), col]
        };
        let start = e.idx(0);
        let trips = self.key_tile as u64;
        let tile_max = e.for_between(&start, self.valid, trips, &carried[..2], |e, j, acc| {
            (0..2)
                .map(|half| {
                    let at = score_at(e, j, half);
                    let x = e.read_lanes(scores, &at, lanes);
                    e.max(&acc[half], &x)
                })
                .collect()
        });
        // a maximum of -inf (every key so far masked) counts as 0, so exp gives 0, not NaN
        let lowest = e.float(Ty::F32, f64::NEG_INFINITY);
        let zero = e.zero(Ty::F32);
        let mut shift = Vec::new();
        let mut alpha = Vec::new();
        for half in 0..2 {
            let empty = e.cmp(Cmp::Eq, &tile_max[half], &lowest);
            let safe = e.select(&empty, &zero, &tile_max[half]);
            let old = e.sub(&carried[half], &safe);
            alpha.push(e.math("exp", &old));
            shift.push(safe);
        }
        let zeros = e.splat(&zero, lanes);
        let tile_sums = e.for_between(&start, self.valid, trips, &[zeros.clone(), zeros], |e, j, acc| {
            (0..2)
                .map(|half| {
                    let at = score_at(e, j, half);
                    let x = e.read_lanes(scores, &at, lanes);
                    let shifted = e.sub(&x, &shift[half]);
                    let p = e.math("exp", &shifted);
                    e.store(scores, &at, &p);
                    e.add(&acc[half], &p)
                })
                .collect()
        });
        self.values(e, &alpha);
        let mut next = tile_max;
        for half in 0..2 {
            let rescaled = e.mul(&carried[2 + half], &alpha[half]);
            next.push(e.add(&rescaled, &tile_sums[half]));
        }
        next
    }

    /// `out_t = out_t * alpha + vᵀ p` over the tile's keys, in micro-tiles of value depths.
    fn values(&self, e: &mut Emitter, alpha: &[V]) {
        let (a, lanes, micro) = (self.a, self.lanes, self.micro);
        let (b, h) = self.batch_head;
        let (out_t, scores) = (&self.s.out_t, &self.s.scores);
        let value_depth = e.idx(a.d.value_depth as i64);
        let micro_tiles = self.micro_tiles(e, &value_depth);
        let last_depth = e.idx(a.d.value_depth as i64 - 1);
        let start = e.idx(0);
        let cols: Vec<V> = (0..2).map(|half| e.idx((half * lanes) as i64)).collect();
        e.for_between(
            &start,
            &micro_tiles,
            a.d.value_depth.div_ceil(micro) as u64,
            &[],
            |e, mt, _| {
                let depth_first = e.lin(&[(mt, micro as i64)], 0);
                let depths: Vec<V> = (0..micro).map(|i| clamped(e, &depth_first, i, &last_depth)).collect();
                let mut inits = Vec::with_capacity(2 * micro);
                for depth in &depths {
                    for half in 0..2 {
                        let x = e.read_lanes(out_t, &[depth.clone(), cols[half].clone()], lanes);
                        inits.push(e.mul(&x, &alpha[half]));
                    }
                }
                let sums = e.for_between(&start, self.valid, self.key_tile as u64, &inits, |e, j, acc| {
                    let probabilities: Vec<V> = (0..2)
                        .map(|half| e.read_lanes(scores, &[j.clone(), cols[half].clone()], lanes))
                        .collect();
                    let key = e.lin(&[(self.key0, 1), (j, 1)], 0);
                    outer_product_step(e, acc, &probabilities, |e, i| {
                        e.read(a.v, &a.at(b, h, &key, &depths[i]))
                    })
                });
                for (i, depth) in depths.iter().enumerate() {
                    for half in 0..2 {
                        e.store(out_t, &[depth.clone(), cols[half].clone()], &sums[i * 2 + half]);
                    }
                }
                Vec::new()
            },
        );
    }
}

/// One step of an outer-product micro-tile: accumulator `(i, half)` plus the scalar
/// `element(i)` (broadcast) times vector `half` of `vectors`.
fn outer_product_step(e: &mut Emitter, acc: &[V], vectors: &[V], element: impl Fn(&mut Emitter, usize) -> V) -> Vec<V> {
    let lanes = vectors[0].lanes;
    let mut next = Vec::with_capacity(acc.len());
    for i in 0..acc.len() / vectors.len() {
        let x = element(e, i);
        let x = e.splat(&x, lanes);
        for (half, vector) in vectors.iter().enumerate() {
            next.push(e.fma(&x, vector, &acc[i * vectors.len() + half]));
        }
    }
    next
}

/// Each of the block's query rows that exists, times the reciprocal of its sum, stored (a row
/// whose softmax is NaN, with `zero_nan_rows`: the sum of `0 * v` over the keys).
fn store_rows(e: &mut Emitter, a: &Attention, s: &Scratch, (b, h): (&V, &V), first: &V, rows: usize) {
    let queries = e.extent_value(&a.run.queries);
    e.for_each(rows, |e, r| {
        let row = e.lin(&[(first, 1), (&r, 1)], 0);
        let exists = e.cmp_idx("slt", &row, &queries);
        e.if_then(&exists, |e| {
            let sum = e.read(&s.sums, std::slice::from_ref(&r));
            let divide = |e: &mut Emitter| {
                let one = e.one(Ty::F32);
                let reciprocal = e.div(&one, &sum);
                e.for_each(a.d.value_depth, |e, c| {
                    let x = e.read(&s.out_t, &[c.clone(), r.clone()]);
                    let y = e.mul(&x, &reciprocal);
                    e.write(a.out, &a.at(b, h, &row, &c), &y);
                });
                Vec::new()
            };
            if !a.zero_nan_rows {
                divide(e);
                return;
            }
            let zero = e.zero(Ty::F32);
            let positive = e.cmp(Cmp::Gt, &sum, &zero);
            e.if_else_like(&positive, &[], divide, |e| {
                e.for_each(a.d.value_depth, |e, c| {
                    let keys = std::slice::from_ref(&a.run.keys);
                    let y = e.nest_acc_over(keys, std::slice::from_ref(&zero), |e, j, acc| {
                        let x = e.read(a.v, &a.at(b, h, &j[0], &c));
                        let none = e.mul(&x, &zero);
                        vec![e.add(&acc[0], &none)]
                    });
                    e.write(a.out, &a.at(b, h, &row, &c), &y[0]);
                });
                Vec::new()
            });
        });
    });
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one, lower_one_vector, t};
    use mxc_dialects::{Attr, DType, OpKind};

    fn attention_attrs(layout: &str, zero_nan_rows: i64) -> mxc_dialects::Attrs {
        attrs(&[
            ("layout", Attr::Str(layout.into())),
            ("scale", Attr::Float(0.125)),
            ("zero_nan_rows", Attr::Int(zero_nan_rows)),
        ])
    }

    #[test]
    fn the_vector_kernel_tiles_keys_and_keeps_the_softmax_lane_wise() {
        // 300 keys: two tiles; a mask per query, gathered across the rows of a vector
        let m = lower_one_vector(
            OpKind::Attention,
            &[
                t(DType::F32, &[1, 20, 2, 24]),
                t(DType::F32, &[1, 300, 2, 24]),
                t(DType::F32, &[1, 300, 2, 20]),
                t(DType::F32, &[1, 1, 20, 300]),
            ],
            attention_attrs("bshd", 1),
        );
        check_in_order(
            &m,
            &[
                // q transposed, 24 x 16 rows; a tile of 256 keys; the output transposed (20 depths
                // rounded up to micro-tiles of 6)
                "memref.alloca() : memref<24x16xf32>",
                "memref.alloca() : memref<258x16xf32>",
                "memref.alloca() : memref<24x16xf32>",
                "the parallel loop over 1x2x2",
                // the key tiles, carrying the maxima and sums of both vectors of rows
                "iter_args",
                // scores: k broadcast against q's rows
                "vector.broadcast",
                "math.fma",
                "vector.from_elements",
                "vector.store",
                "arith.maximumf",
                "arith.select",
                "vector.store",
                // the output: rescaled, then v broadcast against the probabilities
                "arith.mulf",
                "math.fma",
                // the rows stored, NaN rows as the sum of 0 * v
                "arith.cmpf ogt",
                "arith.divf",
                "} else {",
                "arith.mulf",
            ],
        );
        let tiles = m.lines().find(|l| {
            l.contains("iter_args") && l.contains("-> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)")
        });
        assert!(tiles.is_some(), "the key tiles carry 4 vectors:\n{m}");
        assert!(!m.contains("vector.reduction"), "no horizontal reduction:\n{m}");
    }

    #[test]
    fn no_keys_or_no_queries_take_the_scalar_form() {
        for (queries, keys) in [(3, 0), (0, 3)] {
            let m = lower_one_vector(
                OpKind::Attention,
                &[
                    t(DType::F32, &[1, 1, queries, 4]),
                    t(DType::F32, &[1, 1, keys, 4]),
                    t(DType::F32, &[1, 1, keys, 5]),
                ],
                attention_attrs("bhsd", 0),
            );
            assert!(!m.contains("vector"), "{m}");
        }
    }

    #[test]
    fn scalar_code_follows_the_definition_row_by_row() {
        let m = lower_one(
            OpKind::Attention,
            &[
                t(DType::F32, &[1, 2, 5, 4]),
                t(DType::F32, &[1, 2, 7, 4]),
                t(DType::F32, &[1, 2, 7, 3]),
            ],
            attention_attrs("bhsd", 0),
        )
        .mlir;
        check_in_order(
            &m,
            &[
                "memref.alloca() : memref<7xf32>",
                "the parallel loop over 1x2x5",
                "arith.maximumf",
                "math.exp",
                "arith.divf",
                "memref.store",
            ],
        );
        assert!(!m.contains("vector"), "{m}");
    }
}
