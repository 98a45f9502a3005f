//! `Einsum` as transposes, reshapes, reductions and one batched `matmul`: each operand first
//! takes its diagonals (a letter repeated in one operand) and sums out the letters only it
//! has and the output lacks; two operands are then arranged as `[batch, own, contracted]` and
//! `[batch, contracted, own]` and multiplied; the result is put in the output's letter order.
//! `...` stands for the broadcast leading dims, named by letters no equation can use.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("Einsum", einsum);
}

/// An operand with one label per dim, no label repeated.
struct Term {
    value: ValueId,
    labels: Vec<char>,
}

fn einsum(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let equation: String = ctx
        .node
        .opt_string("equation")?
        .ok_or("missing attribute `equation`")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let inputs = ctx.all_inputs()?;
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (equation.clone(), None),
    };
    let specs: Vec<&str> = lhs.split(',').collect();
    if specs.len() != inputs.len() || !(1..=2).contains(&inputs.len()) {
        return Err(format!(
            "equation {equation:?} names {} operands for {} inputs (1 or 2 are supported)",
            specs.len(),
            inputs.len()
        ));
    }
    let ellipsis_rank = specs
        .iter()
        .zip(&inputs)
        .map(|(s, &v)| ellipsis_dims(s, ctx.ty(v).rank()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .max()
        .unwrap_or(0);
    let mut labelled = Vec::new();
    for (spec, &v) in specs.iter().zip(&inputs) {
        let own = ellipsis_dims(spec, ctx.ty(v).rank())?;
        labelled.push((v, expand_labels(spec, own, ellipsis_rank)?));
    }
    let output = match rhs {
        Some(r) => expand_labels(&r, ellipsis_rank, ellipsis_rank)?,
        None => implicit_output(labelled.iter().map(|(_, l)| l), ellipsis_rank),
    };
    let mut terms = Vec::new();
    for (v, labels) in labelled {
        terms.push(diagonal(ctx, v, labels)?);
    }
    if let Some(c) = output.iter().find(|c| !terms.iter().any(|t| t.labels.contains(c))) {
        return Err(format!("output label {c:?} of {equation:?} is in no operand"));
    }
    // letters no other term and not the output uses are summed out first
    for i in 0..terms.len() {
        let others: Vec<char> = terms
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, t)| t.labels.clone())
            .chain(output.iter().copied())
            .collect();
        terms[i] = sum_out(ctx, &terms[i], |c| !others.contains(&c))?;
    }
    let term = if terms.len() == 2 {
        let b = terms.pop().expect("two terms");
        let a = terms.pop().expect("two terms");
        contract(ctx, a, b, &output)?
    } else {
        terms.pop().expect("one term")
    };
    let perm: Vec<usize> = output
        .iter()
        .map(|c| {
            term.labels
                .iter()
                .position(|l| l == c)
                .expect("every output label survives")
        })
        .collect();
    Ok(vec![ctx.transpose(term.value, &perm)?])
}

/// How many dims the `...` of `spec` covers in an operand of rank `rank`.
fn ellipsis_dims(spec: &str, rank: usize) -> Result<usize, String> {
    let letters = spec.chars().filter(|c| c.is_ascii_alphabetic()).count();
    match (spec.contains("..."), rank.checked_sub(letters)) {
        (true, Some(n)) => Ok(n),
        (false, Some(0)) => Ok(0),
        _ => Err(format!("term {spec:?} does not fit an operand of rank {rank}")),
    }
}

/// The label of each dim of a term: its letters, with `...` as `own` of the `ellipsis_rank`
/// reserved labels (the rightmost ones: broadcast dims align at the right).
fn expand_labels(spec: &str, own: usize, ellipsis_rank: usize) -> Result<Vec<char>, String> {
    let mut labels = Vec::new();
    let mut rest = spec;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("...") {
            labels.extend((ellipsis_rank - own..ellipsis_rank).map(broadcast_label));
            rest = after;
            continue;
        }
        let c = rest.chars().next().expect("not empty");
        if !c.is_ascii_alphabetic() {
            return Err(format!("{c:?} in term {spec:?} is not a letter"));
        }
        labels.push(c);
        rest = &rest[1..];
    }
    Ok(labels)
}

/// The label of broadcast dim `i` (outside the ASCII letters an equation may use).
fn broadcast_label(i: usize) -> char {
    char::from_u32(0x3b1 + i as u32).expect("a Greek letter")
}

/// The implicit output: the broadcast dims, then the letters used once, in order.
fn implicit_output<'a>(terms: impl Iterator<Item = &'a Vec<char>>, ellipsis_rank: usize) -> Vec<char> {
    let mut out: Vec<char> = (0..ellipsis_rank).map(broadcast_label).collect();
    let all: Vec<char> = terms.flatten().copied().collect();
    let mut once: Vec<char> = all
        .iter()
        .copied()
        .filter(|c| c.is_ascii_alphabetic() && all.iter().filter(|d| *d == c).count() == 1)
        .collect();
    once.sort_unstable();
    out.extend(once);
    out
}

/// `v` with each repeated label reduced to its diagonal: the two dims moved last, merged, and
/// the entries `i * (n + 1)` gathered.
fn diagonal(ctx: &mut Ctx, mut v: ValueId, mut labels: Vec<char>) -> Result<Term, String> {
    while let Some((p, q)) = repeated(&labels) {
        let shape = ctx.ty(v).shape.clone();
        let n = shape[p];
        if shape[q] != n {
            return Err(format!("label {:?} has extents {n} and {}", labels[p], shape[q]));
        }
        let mut perm: Vec<usize> = (0..labels.len()).filter(|&d| d != p && d != q).collect();
        perm.extend([p, q]);
        let moved = ctx.transpose(v, &perm)?;
        let mut merged: Vec<usize> = perm[..perm.len() - 2].iter().map(|&d| shape[d]).collect();
        merged.push(n * n);
        let flat = reshape(ctx, moved, &merged)?;
        let index: Vec<i64> = (0..n).map(|i| (i * (n + 1)) as i64).collect();
        let index = ctx.constant(Tensor::from_i64s(DType::I64, vec![n], &index));
        let axis = merged.len() - 1;
        v = ctx.build1(
            OpKind::Gather,
            vec![flat, index],
            Attrs::new().with("axis", Attr::Int(axis as i64)),
        )?;
        let label = labels[p];
        labels = perm[..perm.len() - 2].iter().map(|&d| labels[d]).collect();
        labels.push(label);
    }
    Ok(Term { value: v, labels })
}

/// The first pair of dims with the same label.
fn repeated(labels: &[char]) -> Option<(usize, usize)> {
    (0..labels.len()).find_map(|p| (p + 1..labels.len()).find(|&q| labels[q] == labels[p]).map(|q| (p, q)))
}

/// `t` summed over the dims whose labels `drop` picks.
fn sum_out(ctx: &mut Ctx, t: &Term, drop: impl Fn(char) -> bool) -> Result<Term, String> {
    let over: Vec<usize> = (0..t.labels.len()).filter(|&d| drop(t.labels[d])).collect();
    if over.is_empty() {
        return Ok(Term {
            value: t.value,
            labels: t.labels.clone(),
        });
    }
    let value = ctx.reduce(OpKind::ReduceSum, t.value, &over, false)?;
    let labels = t.labels.iter().copied().filter(|&c| !drop(c)).collect();
    Ok(Term { value, labels })
}

/// The product of two terms summed over the labels they share that the output lacks, as
/// one batched `matmul`: labels in both and the output are the batch, labels of one only are
/// its own rows or columns. Batch dims of extent 1 broadcast against the other's.
fn contract(ctx: &mut Ctx, a: Term, b: Term, output: &[char]) -> Result<Term, String> {
    let in_b = |c: &char| b.labels.contains(c);
    let batch: Vec<char> = a
        .labels
        .iter()
        .copied()
        .filter(|c| in_b(c) && output.contains(c))
        .collect();
    let summed: Vec<char> = a
        .labels
        .iter()
        .copied()
        .filter(|c| in_b(c) && !output.contains(c))
        .collect();
    let a_own: Vec<char> = a.labels.iter().copied().filter(|c| !in_b(c)).collect();
    let b_own: Vec<char> = b.labels.iter().copied().filter(|c| !a.labels.contains(c)).collect();
    let extent = |ctx: &Ctx, t: &Term, c: char| t.labels.iter().position(|&l| l == c).map(|d| ctx.ty(t.value).shape[d]);
    let batch_dims: Vec<usize> = batch
        .iter()
        .map(|&c| extent(ctx, &a, c).unwrap_or(1).max(extent(ctx, &b, c).unwrap_or(1)))
        .collect();
    let size = |ctx: &Ctx, t: &Term, labels: &[char]| -> usize {
        labels.iter().map(|&c| extent(ctx, t, c).unwrap_or(1)).product()
    };
    let (m, n, k) = (size(ctx, &a, &a_own), size(ctx, &b, &b_own), size(ctx, &a, &summed));
    let arrange = |ctx: &mut Ctx, t: &Term, order: Vec<char>, matrix: [usize; 2]| -> Result<ValueId, String> {
        let perm: Vec<usize> = order
            .iter()
            .map(|c| t.labels.iter().position(|l| l == c).expect("a label of the term"))
            .collect();
        let moved = ctx.transpose(t.value, &perm)?;
        let shape = ctx.ty(moved).shape.clone();
        let mut full = batch_dims.clone();
        full.extend(&shape[batch.len()..]);
        let expanded = if shape == full {
            moved
        } else {
            ctx.build1(
                OpKind::Expand,
                vec![moved],
                Attrs::new().with("shape", super::axes::ints(&full)),
            )?
        };
        let mut three = batch_dims.clone();
        three.extend(matrix);
        reshape(ctx, expanded, &three)
    };
    let a_order: Vec<char> = batch.iter().chain(&a_own).chain(&summed).copied().collect();
    let b_order: Vec<char> = batch.iter().chain(&summed).chain(&b_own).copied().collect();
    let a_matrix = arrange(ctx, &a, a_order, [m, k])?;
    let b_matrix = arrange(ctx, &b, b_order, [k, n])?;
    let product = ctx.op(OpKind::MatMul, &[a_matrix, b_matrix])?;
    let mut shape = batch_dims.clone();
    shape.extend(a_own.iter().map(|&c| extent(ctx, &a, c).expect("own label")));
    shape.extend(b_own.iter().map(|&c| extent(ctx, &b, c).expect("own label")));
    let value = reshape(ctx, product, &shape)?;
    let labels = batch.into_iter().chain(a_own).chain(b_own).collect();
    Ok(Term { value, labels })
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    fn einsum(equation: &str, shapes: &[&[i64]], values: &[&[f32]]) -> Vec<f64> {
        let names = ["x", "y"];
        let mut m = ModelBuilder::new(12);
        for (name, shape) in names.iter().zip(shapes) {
            m = m.input(name, DataType::Float, shape);
        }
        let g = m
            .node(node(
                "Einsum",
                &names[..shapes.len()],
                &["z"],
                vec![str_attr("equation", equation)],
            ))
            .output("z")
            .import()
            .unwrap();
        let inputs: Vec<Tensor> = shapes
            .iter()
            .zip(values)
            .map(|(s, v)| Tensor::from_f32s(s.iter().map(|&d| d as usize).collect(), v))
            .collect();
        run(&g, &inputs).unwrap()[0].to_f64_vec()
    }

    #[test]
    fn traces_transposes_and_sums() {
        let x: &[f32] = &[1., 2., 3., 4.];
        assert_eq!(einsum("ii", &[&[2, 2]], &[x]), [5.]);
        assert_eq!(einsum("ij->ji", &[&[2, 2]], &[x]), [1., 3., 2., 4.]);
        assert_eq!(einsum("...ii->...i", &[&[1, 2, 2]], &[x]), [1., 4.]);
        assert_eq!(einsum("ij->i", &[&[2, 2]], &[x]), [3., 7.]);
    }

    #[test]
    fn a_term_that_does_not_fit_is_refused() {
        let err = ModelBuilder::new(12)
            .input("x", DataType::Float, &[2, 2])
            .node(node("Einsum", &["x"], &["z"], vec![str_attr("equation", "i->i")]))
            .output("z")
            .error();
        assert!(err.contains("term \"i\" does not fit an operand of rank 2"), "{err}");
    }
}
