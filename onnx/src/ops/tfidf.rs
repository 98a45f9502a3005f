//! `TfIdfVectorizer` (opset 9) built from mx ops. Everything but the input's values is an
//! attribute, so the pool's n-grams and the windows they are looked for in are known at
//! import. As the reference implementation counts them: an n-gram of `n` items, `n` between
//! `min_gram_length` and `max_gram_length`, is counted once for each start position and each
//! skip distance `d` in `1..=max_skip_count + 1` at which the items `x[start + k*d]`,
//! `k < n`, all equal its own, except that unigrams are counted at distance 1 only (they do
//! not depend on it) when `min_gram_length` is 1; a pool that lists one n-gram twice counts
//! it at its last position. Per size `n`, the items of every window are `n` gathers of `X`
//! at constant positions (`[rows, windows, 1]`), each compared with the pool's `k`-th items
//! (`[1, 1, n-grams]`), the comparisons joined with `where` and summed over the windows;
//! the counts of all sizes go to their `ngram_indexes` positions by gathers (one more per
//! n-gram sharing a position with another), and `mode` weighs them: TF the counts, IDF
//! `weights` (or 1) where a count is positive, TFIDF the counts times `weights` (weights
//! indexed by output position, as the reference does). `pool_strings` and a
//! `min_gram_length` below 1 are refused.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::check_constant;
use super::layout::concat_values;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};
use std::collections::{BTreeMap, HashMap};

pub fn register(r: &mut Registry) {
    r.add("", "TfIdfVectorizer", 9, LATEST, tfidf_vectorizer);
}

/// An n-gram of the pool that is counted, with the output position of its count.
struct Gram {
    items: Vec<i64>,
    out: usize,
}

fn required_int(ctx: &Ctx, name: &str) -> Result<i64, String> {
    ctx.node
        .opt_int(name)?
        .ok_or_else(|| format!("missing attribute `{name}`"))
}

fn required_ints(ctx: &Ctx, name: &str) -> Result<Vec<i64>, String> {
    ctx.node
        .opt_ints(name)?
        .ok_or_else(|| format!("missing attribute `{name}`"))
}

/// The n-grams of `pool` that are counted, by size: `counts[i]` is where the n-grams of
/// `i + 1` items start in `pool` (those of the last size run to its end); n-grams are
/// numbered in pool order, sizes outside `min..=max` included, and n-gram `j` is counted at
/// `indexes[j]`. An n-gram listed twice keeps its last number (the reference's trie).
fn pool_grams(
    pool: &[i64],
    counts: &[i64],
    indexes: &[i64],
    (min, max): (i64, i64),
) -> Result<BTreeMap<usize, Vec<Gram>>, String> {
    let mut numbered: HashMap<Vec<i64>, usize> = HashMap::new();
    let mut number = 0usize;
    for (i, &start) in counts.iter().enumerate() {
        let size = i + 1;
        let in_pool = |c: i64| usize::try_from(c).ok().filter(|&c| c <= pool.len());
        let start = in_pool(start).ok_or_else(|| {
            format!(
                "ngram_counts {counts:?} has {start}, outside the pool of {} items",
                pool.len()
            )
        })?;
        let end = match counts.get(i + 1) {
            Some(&end) => in_pool(end).ok_or_else(|| {
                format!(
                    "ngram_counts {counts:?} has {end}, outside the pool of {} items",
                    pool.len()
                )
            })?,
            None => pool.len(),
        };
        if end <= start {
            continue;
        }
        let grams = (end - start) / size;
        if (min..=max).contains(&(size as i64)) {
            for g in 0..grams {
                let from = start + g * size;
                numbered.insert(pool[from..from + size].to_vec(), number + g);
            }
        }
        number += grams;
    }
    let mut by_size: BTreeMap<usize, Vec<(usize, Gram)>> = BTreeMap::new();
    for (items, number) in numbered {
        let out = match indexes.get(number) {
            Some(&o) => usize::try_from(o).map_err(|_| format!("ngram_indexes has a negative entry {o}"))?,
            None => {
                return Err(format!(
                    "ngram_indexes has {} entries, too few for n-gram #{number} of the pool",
                    indexes.len()
                ))
            }
        };
        by_size
            .entry(items.len())
            .or_default()
            .push((number, Gram { items, out }));
    }
    Ok(by_size
        .into_iter()
        .map(|(size, mut grams)| {
            grams.sort_by_key(|g| g.0);
            (size, grams.into_iter().map(|g| g.1).collect())
        })
        .collect())
}

fn tfidf_vectorizer(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    if ctx.node.has("pool_strings") {
        return Err("pool_strings: element type STRING is not supported (only pool_int64s)".into());
    }
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    if !matches!(ty.dtype, DType::I32 | DType::I64) {
        return Err(format!(
            "X of element type {} is not supported (int32 or int64)",
            ty.dtype
        ));
    }
    let (rows, width) = match ty.shape[..] {
        [] => (1, 1),
        [c] => (1, c),
        [n, c] => (n, c),
        _ => return Err(format!("X must be [C] or [N, C], got {ty}")),
    };
    let max_gram = required_int(ctx, "max_gram_length")?;
    let min_gram = required_int(ctx, "min_gram_length")?;
    let max_skip = required_int(ctx, "max_skip_count")?;
    if min_gram < 1 {
        return Err(format!("min_gram_length must be at least 1, got {min_gram}"));
    }
    let mode = ctx.node.opt_string("mode")?.ok_or("missing attribute `mode`")?;
    let counts = required_ints(ctx, "ngram_counts")?;
    let indexes = required_ints(ctx, "ngram_indexes")?;
    let pool = required_ints(ctx, "pool_int64s")?;
    let weights = ctx.node.opt_floats("weights")?.unwrap_or_default();
    let Some(&last) = indexes.iter().max() else {
        return Err("ngram_indexes is empty".into());
    };
    let outputs = (last.checked_add(1).and_then(|n| usize::try_from(n).ok()))
        .ok_or_else(|| format!("ngram_indexes {indexes:?} are negative or too large"))?;
    if mode != "TF" && !weights.is_empty() && weights.len() < outputs {
        return Err(format!(
            "weights has {} entries, fewer than the {outputs} outputs",
            weights.len()
        ));
    }
    if !["TF", "IDF", "TFIDF"].contains(&mode.as_str()) {
        return Err(format!("mode \"{mode}\" is not one of TF, IDF, TFIDF"));
    }
    let grams = pool_grams(&pool, &counts, &indexes, (min_gram, max_gram))?;

    let xi = ctx.cast(x, DType::I64)?;
    let xi = reshape(ctx, xi, &[rows, width])?;
    let mut found = Vec::new();
    let mut found_at = Vec::new();
    for (&size, grams) in &grams {
        // unigrams at distance 1 only; a distance past the row's width finds no window
        let farthest = if size == 1 { 1 } else { width as i64 };
        let distances = 1..=max_skip.saturating_add(1).min(farthest);
        // the windows' starts and distances, and the tables gathering them, as large
        let count = (distances.clone()).fold(0usize, |n, d| {
            n.saturating_add(width.saturating_sub((size - 1).saturating_mul(d as usize)))
        });
        check_constant(&TensorType::new(DType::I64, vec![count, 2]))?;
        let mut windows = Vec::new();
        for d in distances.map(|d| d as usize) {
            let span = (size - 1) * d;
            windows.extend((0..width.saturating_sub(span)).map(|start| (start, d)));
        }
        if windows.is_empty() {
            continue;
        }
        let mut all = None;
        for k in 0..size {
            let at: Vec<i64> = windows.iter().map(|&(s, d)| (s + k * d) as i64).collect();
            let items = if at.iter().enumerate().all(|(i, &a)| a == i as i64) && at.len() == width {
                reshape(ctx, xi, &[rows, width, 1])?
            } else {
                let at = ctx.constant(Tensor::from_i64s(DType::I64, vec![at.len(), 1], &at));
                ctx.build1(OpKind::Gather, vec![xi, at], Attrs::new().with("axis", Attr::Int(1)))?
            };
            let kth: Vec<i64> = grams.iter().map(|g| g.items[k]).collect();
            let kth = ctx.constant(Tensor::from_i64s(DType::I64, vec![1, 1, kth.len()], &kth));
            let same = ctx.op(OpKind::Equal, &[items, kth])?;
            all = Some(match all {
                None => same,
                Some(all) => {
                    let no = ctx.scalar(DType::Bool, 0.0);
                    ctx.op(OpKind::Where, &[all, same, no])?
                }
            });
        }
        let hits = ctx.cast(all.expect("n-grams have an item"), DType::F32)?;
        found.push(ctx.reduce(OpKind::ReduceSum, hits, &[1], false)?);
        found_at.extend(grams.iter().map(|g| g.out));
    }
    // the counts, one per output position, placed by tables as large
    check_constant(&TensorType::new(DType::F32, vec![rows, outputs]))?;
    let y = place(ctx, found, &found_at, rows, outputs)?;
    // weights by output position (1 where there are none)
    let w = (!weights.is_empty()).then(|| ctx.constant(Tensor::from_f32s(vec![1, outputs], &weights[..outputs])));
    let y = match (mode.as_str(), w) {
        ("IDF", w) => {
            let zero = ctx.scalar(DType::F32, 0.0);
            let seen = ctx.op(OpKind::Greater, &[y, zero])?;
            match w {
                Some(w) => ctx.op(OpKind::Where, &[seen, w, zero])?,
                None => ctx.cast(seen, DType::F32)?,
            }
        }
        ("TFIDF", Some(w)) => ctx.op(OpKind::Mul, &[y, w])?,
        _ => y,
    };
    let shape = if ty.rank() == 2 {
        vec![rows, outputs]
    } else {
        vec![outputs]
    };
    Ok(vec![reshape(ctx, y, &shape)?])
}

/// The counts `found` (`[rows, n-grams]` each, the n-grams' output positions `at` in order)
/// summed at their positions of a `[rows, outputs]` f32 tensor: gathers from the counts
/// with a zero column appended, one per n-gram that shares a position with earlier ones.
fn place(ctx: &mut Ctx, found: Vec<ValueId>, at: &[usize], rows: usize, outputs: usize) -> Result<ValueId, String> {
    if found.is_empty() {
        return Ok(ctx.constant(Tensor::from_f64s(
            DType::F32,
            vec![rows, outputs],
            &vec![0.0; rows * outputs],
        )));
    }
    let counts = concat_values(ctx, found, 1)?;
    let mut landing = vec![Vec::new(); outputs];
    for (column, &o) in at.iter().enumerate() {
        landing[o].push(column as i64);
    }
    if at.len() == outputs && landing.iter().enumerate().all(|(o, l)| l[..] == [o as i64]) {
        return Ok(counts);
    }
    let zeros = ctx.constant(Tensor::from_f64s(DType::F32, vec![rows, 1], &vec![0.0; rows]));
    let padded = concat_values(ctx, vec![counts, zeros], 1)?;
    let layers = landing.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let mut y = None;
    for layer in 0..layers {
        let columns: Vec<i64> = landing
            .iter()
            .map(|l| l.get(layer).copied().unwrap_or(at.len() as i64))
            .collect();
        let columns = ctx.constant(Tensor::from_i64s(DType::I64, vec![outputs], &columns));
        let picked = ctx.build1(
            OpKind::Gather,
            vec![padded, columns],
            Attrs::new().with("axis", Attr::Int(1)),
        )?;
        y = Some(match y {
            None => picked,
            Some(y) => ctx.op(OpKind::Add, &[y, picked])?,
        });
    }
    Ok(y.expect("at least one layer"))
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::AttributeProto;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    fn model(dims: &[i64], ty: DataType, attrs: Vec<AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(9)
            .input("x", ty, dims)
            .node(node("TfIdfVectorizer", &["x"], &["y"], attrs))
            .output("y")
    }

    fn attrs(
        min: i64,
        max: i64,
        skip: i64,
        mode: &str,
        counts: &[i64],
        indexes: &[i64],
        pool: &[i64],
    ) -> Vec<AttributeProto> {
        vec![
            int_attr("min_gram_length", min),
            int_attr("max_gram_length", max),
            int_attr("max_skip_count", skip),
            str_attr("mode", mode),
            ints_attr("ngram_counts", counts),
            ints_attr("ngram_indexes", indexes),
            ints_attr("pool_int64s", pool),
        ]
    }

    fn eval(b: ModelBuilder, shape: Vec<usize>, x: &[i64]) -> Vec<f64> {
        let g = b.import().unwrap();
        mxc_dialects::verify(&g).unwrap();
        let dtype = g.ty(g.inputs[0].value).dtype;
        let x = Tensor::from_i64s(dtype, shape, x);
        run(&g, &[x]).unwrap()[0].to_f64_vec()
    }

    #[test]
    fn counts_unigrams_once_and_bigrams_at_every_skip() {
        // onnx's test_tfidfvectorizer_tf_batch_uniandbigrams_skip5, whose expected values
        // come from the reference implementation: unigrams 2 3 5 4, bigrams (5 6) (7 8) (6 7).
        let a = attrs(
            1,
            2,
            5,
            "TF",
            &[0, 4],
            &[0, 1, 2, 3, 4, 5, 6],
            &[2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
        );
        let y = eval(
            model(&[2, 6], DataType::Int32, a),
            vec![2, 6],
            &[1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8],
        );
        assert_eq!(y, [0., 3., 0., 0., 0., 0., 0., 0., 0., 1., 0., 1., 1., 1.]);
    }

    #[test]
    fn skips_bigrams_apart_and_weighs_them() {
        // x = 5 1 6 5 6 7 6, bigrams (5 6) and (6 7) at distances 1 to 3, counted by hand
        // (and by onnx's reference implementation): (5 6) at positions (3, 4), (0, 2) and
        // (3, 6); (6 7) at (4, 5) and (2, 5). ngram_indexes swaps them; TFIDF weighs each
        // output position.
        let mut a = attrs(2, 2, 2, "TFIDF", &[0, 0], &[1, 0], &[5, 6, 6, 7]);
        a.push(floats_attr("weights", &[0.5, 3.0]));
        let y = eval(model(&[7], DataType::Int64, a), vec![7], &[5, 1, 6, 5, 6, 7, 6]);
        assert_eq!(y, [2.0 * 0.5, 3.0 * 3.0]);
    }

    #[test]
    fn idf_marks_what_is_present_and_shared_positions_add() {
        // Unigrams 1, 2, 3 all land on output 0 and 4 on output 2; output 1 is never hit.
        let a = attrs(1, 1, 0, "IDF", &[0], &[0, 0, 0, 2], &[1, 2, 3, 4]);
        let y = eval(model(&[2, 3], DataType::Int32, a), vec![2, 3], &[1, 1, 2, 5, 5, 5]);
        assert_eq!(y, [1., 0., 0., 0., 0., 0.]);
        let a = attrs(1, 1, 0, "TF", &[0], &[0, 0, 0, 2], &[1, 2, 3, 4]);
        let y = eval(model(&[2, 3], DataType::Int32, a), vec![2, 3], &[1, 1, 2, 4, 5, 3]);
        assert_eq!(y, [3., 0., 0., 1., 0., 1.]);
    }

    #[test]
    fn grams_outside_the_lengths_are_not_counted() {
        // min_gram_length 2: the unigram 7 is not counted, though it keeps its number.
        let a = attrs(2, 2, 0, "TF", &[0, 1], &[0, 1], &[7, 7, 8]);
        let y = eval(model(&[3], DataType::Int64, a), vec![3], &[7, 7, 8]);
        assert_eq!(y, [0., 1.]);
    }

    #[test]
    fn refuses_strings_and_unknown_modes() {
        let mut a = attrs(1, 1, 0, "TF", &[0], &[0], &[]);
        a.retain(|a| a.name() != "pool_int64s");
        a.push(AttributeProto {
            name: Some("pool_strings".into()),
            r#type: Some(super::super::super::proto::attribute_proto::AttributeType::Strings as i32),
            strings: vec![b"a".to_vec()],
            ..Default::default()
        });
        let e = model(&[3], DataType::Int64, a).error();
        assert!(e.contains("STRING is not supported"), "{e}");
        let a = attrs(1, 1, 0, "BM25", &[0], &[0], &[1]);
        let e = model(&[3], DataType::Int64, a).error();
        assert!(e.contains("mode \"BM25\" is not one of TF, IDF, TFIDF"), "{e}");
    }
}
