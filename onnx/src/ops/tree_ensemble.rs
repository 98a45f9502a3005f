//! `TreeEnsemble` (`ai.onnx.ml`, opset 5) built from mx ops. The trees are attributes, so
//! their shapes are known at import: every interior node reachable from a root gets a
//! column of a `[N, nodes]` table of its condition, computed for all rows at once per
//! comparison mode (a gather of the nodes' feature columns of `X` compared with their
//! thresholds; `BRANCH_MEMBER` compares with its set, padded with NaN to the largest, and
//! takes any; where a feature is NaN, the condition is `nodes_missing_value_tracks_true`, or
//! true for `BRANCH_NEQ`, as the reference's comparisons give). Then each row walks all trees
//! at once, as many steps as the deepest tree has levels: the state is a node or leaf index
//! per row and tree (`[N, trees]`), a step gathers the condition of the node it is at and the
//! node's true or false successor (leaves lead to themselves). The leaves reached give their
//! weights to their targets, aggregated over the trees (SUM, AVERAGE, or MIN / MAX starting
//! from the type's largest / lowest value, as the reference does), computed in f32 (f64 for
//! double) and given in `X`'s type. `post_transform` LOGISTIC is a sigmoid and SOFTMAX a
//! softmax over the targets (as onnxruntime applies them; the reference ignores the
//! attribute); SOFTMAX_ZERO and PROBIT are refused. Membership sets follow the
//! `BRANCH_MEMBER` nodes in the order of `nodes_modes`, each ending with a NaN (a set member
//! 0 is a member, which the reference's parsing of the list drops).

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::build::float_compute_type;
use super::layout::concat_values;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};

const DOMAIN: &str = "ai.onnx.ml";

pub fn register(r: &mut Registry) {
    r.add(DOMAIN, "TreeEnsemble", 5, LATEST, tree_ensemble);
}

const MODES: [&str; 7] = [
    "BRANCH_LEQ",
    "BRANCH_LT",
    "BRANCH_GTE",
    "BRANCH_GT",
    "BRANCH_EQ",
    "BRANCH_NEQ",
    "BRANCH_MEMBER",
];
const MEMBER: usize = 6;
const NEQ: usize = 5;

/// The interior nodes and the leaves, as the `nodes_*` and `leaf_*` attributes give them.
struct Trees {
    modes: Vec<usize>,
    features: Vec<usize>,
    splits: Vec<f64>,
    /// Each node's successors: `(is a leaf, index)` for true and false.
    next: Vec<[(bool, usize); 2]>,
    missing_true: Vec<bool>,
    /// The set of each `BRANCH_MEMBER` node (empty for the others).
    sets: Vec<Vec<f64>>,
    weights: Vec<f64>,
    targets: Vec<usize>,
}

fn required_ints(ctx: &Ctx, name: &str) -> Result<Vec<i64>, String> {
    ctx.node
        .opt_ints(name)?
        .ok_or_else(|| format!("missing attribute `{name}`"))
}

fn required_tensor(ctx: &Ctx, name: &str) -> Result<Tensor, String> {
    ctx.tensor_attr(name)?
        .ok_or_else(|| format!("missing attribute `{name}`"))
}

/// `list`'s entries as indices below `bound`.
fn indices(list: &[i64], bound: usize, name: &str) -> Result<Vec<usize>, String> {
    list.iter()
        .map(|&i| {
            usize::try_from(i)
                .ok()
                .filter(|&i| i < bound)
                .ok_or_else(|| format!("{name} has {i}, outside 0..{bound}"))
        })
        .collect()
}

fn read_trees(ctx: &Ctx, features: usize, n_targets: usize) -> Result<Trees, String> {
    let modes = required_tensor(ctx, "nodes_modes")?.to_i64_vec();
    let count = modes.len();
    let modes = indices(&modes, MODES.len(), "nodes_modes")?;
    let same_length = |name: &str, list: Vec<i64>| {
        if list.len() == count {
            Ok(list)
        } else {
            Err(format!("{name} has {} entries, nodes_modes {count}", list.len()))
        }
    };
    let splits = required_tensor(ctx, "nodes_splits")?.to_f64_vec();
    if splits.len() != count {
        return Err(format!(
            "nodes_splits has {} entries, nodes_modes {count}",
            splits.len()
        ));
    }
    let feature_ids = same_length("nodes_featureids", required_ints(ctx, "nodes_featureids")?)?;
    let features = indices(&feature_ids, features, "nodes_featureids")?;
    let true_ids = same_length("nodes_truenodeids", required_ints(ctx, "nodes_truenodeids")?)?;
    let false_ids = same_length("nodes_falsenodeids", required_ints(ctx, "nodes_falsenodeids")?)?;
    let true_leafs = same_length("nodes_trueleafs", required_ints(ctx, "nodes_trueleafs")?)?;
    let false_leafs = same_length("nodes_falseleafs", required_ints(ctx, "nodes_falseleafs")?)?;
    let missing_true = match ctx.node.opt_ints("nodes_missing_value_tracks_true")? {
        Some(list) => same_length("nodes_missing_value_tracks_true", list)?,
        None => vec![0; count],
    };
    let weights = required_tensor(ctx, "leaf_weights")?.to_f64_vec();
    let targets = required_ints(ctx, "leaf_targetids")?;
    if targets.len() != weights.len() {
        return Err(format!(
            "leaf_targetids has {} entries, leaf_weights {}",
            targets.len(),
            weights.len()
        ));
    }
    let targets = indices(&targets, n_targets, "leaf_targetids")?;
    let leaves = weights.len();
    let mut next = Vec::with_capacity(count);
    for j in 0..count {
        let step = |leaf: i64, id: i64| {
            let (bound, what) = if leaf != 0 { (leaves, "leaf") } else { (count, "node") };
            usize::try_from(id)
                .ok()
                .filter(|&i| i < bound)
                .map(|i| (leaf != 0, i))
                .ok_or_else(|| format!("node {j} leads to {what} {id}, outside 0..{bound}"))
        };
        next.push([step(true_leafs[j], true_ids[j])?, step(false_leafs[j], false_ids[j])?]);
    }
    let members = ctx.tensor_attr("membership_values")?.map(|t| t.to_f64_vec());
    let mut sets = vec![Vec::new(); count];
    let member_nodes: Vec<usize> = (0..count).filter(|&j| modes[j] == MEMBER).collect();
    if !member_nodes.is_empty() {
        let members = members.ok_or("BRANCH_MEMBER nodes need membership_values")?;
        let mut listed = members.split(|v| v.is_nan());
        let delimiters = members.iter().filter(|v| v.is_nan()).count();
        if delimiters != member_nodes.len() {
            return Err(format!(
                "membership_values has {delimiters} sets (each ending with NaN) for {} BRANCH_MEMBER nodes",
                member_nodes.len()
            ));
        }
        for &j in &member_nodes {
            sets[j] = listed.next().expect("a set per delimiter").to_vec();
        }
    }
    Ok(Trees {
        modes,
        features,
        splits,
        next,
        missing_true: missing_true.iter().map(|&m| m != 0).collect(),
        sets,
        weights,
        targets,
    })
}

/// The number of levels below each interior node reachable from `starts` (1 for a node
/// whose successors are leaves), refusing cycles.
fn levels(trees: &Trees, starts: &[usize]) -> Result<Vec<Option<usize>>, String> {
    let mut levels: Vec<Option<usize>> = vec![None; trees.next.len()];
    let mut on_path = vec![false; trees.next.len()];
    for &start in starts {
        let mut stack = vec![(start, false)];
        while let Some((j, expanded)) = stack.pop() {
            if levels[j].is_some() {
                continue;
            }
            let children = trees.next[j].iter().filter(|n| !n.0).map(|n| n.1);
            if expanded {
                on_path[j] = false;
                let below = children.map(|c| levels[c].expect("visited")).max().unwrap_or(0);
                levels[j] = Some(below + 1);
                continue;
            }
            on_path[j] = true;
            stack.push((j, true));
            for c in children {
                if on_path[c] {
                    return Err(format!("the trees have a cycle through node {c}"));
                }
                if levels[c].is_none() {
                    stack.push((c, false));
                }
            }
        }
    }
    Ok(levels)
}

/// Whether `values` are all exact in `dtype` (NaN included).
fn exact_in(dtype: DType, values: &[f64]) -> bool {
    let t = Tensor::from_f64s(dtype, vec![values.len()], values);
    t.to_f64_vec()
        .iter()
        .zip(values)
        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
}

fn tree_ensemble(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    if !matches!(ty.dtype, DType::F16 | DType::F32 | DType::F64) {
        return Err(format!(
            "X of element type {} is not supported (float, double or float16)",
            ty.dtype
        ));
    }
    let [rows, features] = ty.shape[..] else {
        return Err(format!("X must be [N, F], got {ty}"));
    };
    // a hint for how often each node is taken, for the order of evaluation
    ctx.node.without_effect(&["nodes_hitrates"]);
    let aggregate = ctx.node.int("aggregate_function", 1)?;
    let post_transform = ctx.node.int("post_transform", 0)?;
    let n_targets = ctx.node.opt_int("n_targets")?.ok_or("missing attribute `n_targets`")?;
    let n_targets = usize::try_from(n_targets)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("n_targets must be positive, got {n_targets}"))?;
    let roots = required_ints(ctx, "tree_roots")?;
    let trees = read_trees(ctx, features, n_targets)?;
    let roots = indices(&roots, trees.next.len(), "tree_roots")?;
    if roots.is_empty() {
        return Err("tree_roots is empty".into());
    }
    if !(0..=3).contains(&aggregate) {
        return Err(format!(
            "aggregate_function {aggregate} is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)"
        ));
    }
    match post_transform {
        0..=2 => {}
        3 => return Err("post_transform SOFTMAX_ZERO is not supported".into()),
        4 => return Err("post_transform PROBIT is not supported".into()),
        p => return Err(format!("post_transform {p} is not one of 0 to 4")),
    }

    // a root whose both branches are the same leaf is that leaf (the reference's rule)
    let degenerate = |r: usize| {
        let [t, f] = trees.next[r];
        t.0 && f.0 && t.1 == f.1
    };
    let starts: Vec<usize> = roots.iter().copied().filter(|&r| !degenerate(r)).collect();
    let levels = levels(&trees, &starts)?;
    let depth = starts.iter().map(|&r| levels[r].expect("reached")).max().unwrap_or(0);
    // the interior nodes reached, grouped by mode: slot `k` is `reached[k]`, leaf `l` slot
    // `reached.len() + l`
    let mut reached: Vec<usize> = (0..trees.next.len()).filter(|&j| levels[j].is_some()).collect();
    reached.sort_by_key(|&j| trees.modes[j]);
    let nodes = reached.len();
    let mut slot = vec![usize::MAX; trees.next.len()];
    for (k, &j) in reached.iter().enumerate() {
        slot[j] = k;
    }
    let slot_of = |(leaf, i): (bool, usize)| if leaf { nodes + i } else { slot[i] };

    let compute = float_compute_type(ty.dtype);
    let state = if nodes == 0 {
        let s: Vec<i64> = roots.iter().map(|&r| slot_of(trees.next[r][0]) as i64).collect();
        ctx.constant(Tensor::from_i64s(DType::I64, vec![1, roots.len()], &s))
    } else {
        let cond = conditions(ctx, x, &trees, &reached)?;
        walk(ctx, cond, &trees, &reached, &roots, depth, &slot_of)?
    };

    // the leaves' weights and targets, by slot (interior slots never remain)
    let leaves = trees.weights.len();
    let mut weights = vec![0.0; nodes];
    weights.extend(&trees.weights);
    let weights = ctx.constant(Tensor::from_f64s(compute, vec![nodes + leaves], &weights));
    let gather0 = Attrs::new().with("axis", Attr::Int(0));
    let w = ctx.build1(OpKind::Gather, vec![weights, state], gather0.clone())?;
    let lowest = match ty.dtype {
        DType::F16 => -65504.0,
        DType::F32 => f32::MIN as f64,
        _ => f64::MIN,
    };
    // MIN is the negated MAX of the negated weights; both start from the lowest value
    let (negate, neutral) = match aggregate {
        2 | 3 => (aggregate == 2, lowest),
        _ => (false, 0.0),
    };
    let w = if negate { ctx.op(OpKind::Neg, &[w])? } else { w };
    let w = if n_targets == 1 {
        w
    } else {
        let mut targets = vec![0; nodes];
        targets.extend(trees.targets.iter().map(|&t| t as i64));
        let targets = ctx.constant(Tensor::from_i64s(DType::I64, vec![nodes + leaves], &targets));
        let t = ctx.build1(OpKind::Gather, vec![targets, state], gather0)?;
        let shape = ctx.ty(t).shape.clone();
        let t = reshape(ctx, t, &[shape[0], shape[1], 1])?;
        let w = reshape(ctx, w, &[shape[0], shape[1], 1])?;
        let ramp = ctx.ramp(n_targets, 2, 3, DType::I64)?;
        let mine = ctx.op(OpKind::Equal, &[t, ramp])?;
        let other = ctx.scalar(compute, neutral);
        ctx.op(OpKind::Where, &[mine, w, other])?
    };
    let y = if aggregate <= 1 {
        let sum = ctx.reduce(OpKind::ReduceSum, w, &[1], false)?;
        if aggregate == 0 {
            let n = ctx.scalar(compute, roots.len() as f64);
            ctx.op(OpKind::Div, &[sum, n])?
        } else {
            sum
        }
    } else {
        let m = ctx.reduce(OpKind::ReduceMax, w, &[1], false)?;
        let start = ctx.scalar(compute, lowest);
        let m = ctx.op(OpKind::Max, &[m, start])?;
        if negate {
            ctx.op(OpKind::Neg, &[m])?
        } else {
            m
        }
    };
    let kept = ctx.ty(y).shape[0];
    let y = reshape(ctx, y, &[kept, n_targets])?;
    let y = if kept != rows {
        ctx.build1(
            OpKind::Expand,
            vec![y],
            Attrs::new().with("shape", super::axes::ints(&[rows, n_targets])),
        )?
    } else {
        y
    };
    let y = match post_transform {
        1 => ctx.build1(OpKind::Softmax, vec![y], Attrs::new().with("axis", Attr::Int(1)))?,
        2 => ctx.op(OpKind::Sigmoid, &[y])?,
        _ => y,
    };
    Ok(vec![ctx.cast(y, ty.dtype)?])
}

/// The conditions of the nodes `reached` (grouped by mode) for every row: `[N, nodes]` bool.
fn conditions(ctx: &mut Ctx, x: ValueId, trees: &Trees, reached: &[usize]) -> Result<ValueId, String> {
    let dtype = ctx.ty(x).dtype;
    let mut constants: Vec<f64> = reached
        .iter()
        .filter(|&&j| trees.modes[j] != MEMBER)
        .map(|&j| trees.splits[j])
        .collect();
    constants.extend(reached.iter().flat_map(|&j| trees.sets[j].iter().copied()));
    // compared in X's type where the thresholds are exact in it, else in f64
    let dtype = if exact_in(dtype, &constants) { dtype } else { DType::F64 };
    let x = ctx.cast(x, dtype)?;
    let gather1 = Attrs::new().with("axis", Attr::Int(1));
    let mut conds = Vec::new();
    for mode in 0..MODES.len() {
        let group: Vec<usize> = reached.iter().copied().filter(|&j| trees.modes[j] == mode).collect();
        if group.is_empty() {
            continue;
        }
        let g = group.len();
        let feats: Vec<i64> = group.iter().map(|&j| trees.features[j] as i64).collect();
        let feats = ctx.constant(Tensor::from_i64s(DType::I64, vec![g], &feats));
        let column = ctx.build1(OpKind::Gather, vec![x, feats], gather1.clone())?;
        let cond = if mode == MEMBER {
            let width = group.iter().map(|&j| trees.sets[j].len()).max().unwrap_or(0).max(1);
            let mut at = Vec::with_capacity(g * width);
            let mut values = Vec::with_capacity(g * width);
            for &j in &group {
                let set = &trees.sets[j];
                at.extend(std::iter::repeat_n(trees.features[j] as i64, width));
                values.extend(
                    set.iter()
                        .copied()
                        .chain(std::iter::repeat_n(f64::NAN, width - set.len())),
                );
            }
            let at = ctx.constant(Tensor::from_i64s(DType::I64, vec![g, width], &at));
            let items = ctx.build1(OpKind::Gather, vec![x, at], gather1.clone())?;
            let values = ctx.constant(Tensor::from_f64s(dtype, vec![1, g, width], &values));
            let equal = ctx.op(OpKind::Equal, &[items, values])?;
            let equal = ctx.cast(equal, DType::F32)?;
            let any = ctx.reduce(OpKind::ReduceMax, equal, &[2], false)?;
            let zero = ctx.scalar(DType::F32, 0.0);
            ctx.op(OpKind::Greater, &[any, zero])?
        } else {
            let splits: Vec<f64> = group.iter().map(|&j| trees.splits[j]).collect();
            let splits = ctx.constant(Tensor::from_f64s(dtype, vec![1, g], &splits));
            let (kind, negate) = match mode {
                0 => (OpKind::Greater, true),
                1 => (OpKind::Less, false),
                2 => (OpKind::Less, true),
                3 => (OpKind::Greater, false),
                4 => (OpKind::Equal, false),
                _ => (OpKind::Equal, true),
            };
            let c = ctx.op(kind, &[column, splits])?;
            if negate {
                ctx.op(OpKind::Not, &[c])?
            } else {
                c
            }
        };
        // what a NaN feature gives: the comparison above gives true for the negated modes
        let natural = matches!(mode, 0 | 2 | NEQ);
        let on_nan: Vec<f64> = group
            .iter()
            .map(|&j| (trees.missing_true[j] || mode == NEQ) as u8 as f64)
            .collect();
        let cond = if on_nan.iter().all(|&v| (v != 0.0) == natural) {
            cond
        } else {
            let on_nan = ctx.constant(Tensor::from_f64s(DType::Bool, vec![1, g], &on_nan));
            let number = ctx.op(OpKind::Equal, &[column, column])?;
            ctx.op(OpKind::Where, &[number, cond, on_nan])?
        };
        conds.push(cond);
    }
    concat_values(ctx, conds, 1)
}

/// The slot (node or leaf) each row reaches in each tree: `[N, trees]` i64, after `depth`
/// steps from the roots through the conditions `cond` (`[N, nodes]`).
fn walk(
    ctx: &mut Ctx,
    cond: ValueId,
    trees: &Trees,
    reached: &[usize],
    roots: &[usize],
    depth: usize,
    slot_of: &dyn Fn((bool, usize)) -> usize,
) -> Result<ValueId, String> {
    let [rows, nodes] = ctx.ty(cond).shape[..] else {
        unreachable!("conditions are [N, nodes]")
    };
    let leaves = trees.weights.len();
    let successors = |branch: usize| {
        let mut s: Vec<i64> = reached.iter().map(|&j| slot_of(trees.next[j][branch]) as i64).collect();
        s.extend((nodes..nodes + leaves).map(|l| l as i64));
        s
    };
    let (on_true, on_false) = (successors(0), successors(1));
    let on_true = ctx.constant(Tensor::from_i64s(DType::I64, vec![nodes + leaves], &on_true));
    let on_false = ctx.constant(Tensor::from_i64s(DType::I64, vec![nodes + leaves], &on_false));
    let start: Vec<i64> = roots
        .iter()
        .map(|&r| {
            let [t, f] = trees.next[r];
            let leaf = t.0 && f.0 && t.1 == f.1;
            (if leaf { slot_of(t) } else { slot_of((false, r)) }) as i64
        })
        .collect();
    let mut state = ctx.constant(Tensor::from_i64s(DType::I64, vec![1, roots.len()], &start));
    let flat = reshape(ctx, cond, &[rows * nodes])?;
    let row_starts: Vec<i64> = (0..rows).map(|r| (r * nodes) as i64).collect();
    let row_starts = ctx.constant(Tensor::from_i64s(DType::I64, vec![rows, 1], &row_starts));
    let last = ctx.scalar(DType::I64, (nodes - 1) as f64);
    let gather0 = Attrs::new().with("axis", Attr::Int(0));
    for _ in 0..depth {
        // a leaf's slot reads any condition: both its successors are itself
        let column = ctx.op(OpKind::Min, &[state, last])?;
        let at = ctx.op(OpKind::Add, &[column, row_starts])?;
        let c = ctx.build1(OpKind::Gather, vec![flat, at], gather0.clone())?;
        let t = ctx.build1(OpKind::Gather, vec![on_true, state], gather0.clone())?;
        let f = ctx.build1(OpKind::Gather, vec![on_false, state], gather0.clone())?;
        state = ctx.op(OpKind::Where, &[c, t, f])?;
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::{AttributeProto, TensorProto};
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::{DType, Tensor};

    fn u8_tensor(values: &[u8]) -> TensorProto {
        TensorProto {
            dims: vec![values.len() as i64],
            data_type: Some(DataType::Uint8 as i32),
            int32_data: values.iter().map(|&v| v as i32).collect(),
            ..Default::default()
        }
    }

    fn f32s(values: &[f32]) -> TensorProto {
        f32_tensor("", &[values.len() as i64], values)
    }

    /// The ensemble of onnx's `test_ai_onnx_ml_tree_ensemble_set_membership`: a node
    /// `x <= 11` whose true branch tests `x in {1.2, 3.7, 8, 9}` (leaf 0, else a node testing
    /// `x in {12, 7}`: leaf 1, else leaf 3) and whose false branch is leaf 2.
    fn membership(extra: Vec<AttributeProto>) -> ModelBuilder {
        let mut attrs = vec![
            int_attr("aggregate_function", 1),
            ints_attr("leaf_targetids", &[0, 1, 2, 3]),
            tensor_attr("leaf_weights", f32s(&[1.0, 10.0, 1000.0, 100.0])),
            tensor_attr(
                "membership_values",
                f32s(&[1.2, 3.7, 8.0, 9.0, f32::NAN, 12.0, 7.0, f32::NAN]),
            ),
            int_attr("n_targets", 4),
            ints_attr("nodes_falseleafs", &[1, 0, 1]),
            ints_attr("nodes_falsenodeids", &[2, 2, 3]),
            ints_attr("nodes_featureids", &[0, 0, 0]),
            tensor_attr("nodes_modes", u8_tensor(&[0, 6, 6])),
            tensor_attr("nodes_splits", f32s(&[11.0, 232344.0, f32::NAN])),
            ints_attr("nodes_trueleafs", &[0, 1, 1]),
            ints_attr("nodes_truenodeids", &[1, 0, 1]),
            ints_attr("tree_roots", &[0]),
        ];
        attrs.retain(|a| !extra.iter().any(|e| e.name() == a.name()));
        attrs.extend(extra);
        let mut n = node("TreeEnsemble", &["x"], &["y"], attrs);
        n.domain = Some(super::DOMAIN.into());
        ModelBuilder::new(21)
            .domain(super::DOMAIN, 5)
            .input("x", DataType::Float, &[6, 1])
            .node(n)
            .output("y")
    }

    fn eval(b: ModelBuilder, x: &[f32]) -> Vec<f64> {
        let g = b.import().unwrap();
        mxc_dialects::verify(&g).unwrap();
        run(&g, &[Tensor::from_f32s(vec![x.len(), 1], x)]).unwrap()[0].to_f64_vec()
    }

    const X: [f32; 6] = [1.2, 3.4, -0.12, f32::NAN, 12.0, 7.0];

    #[test]
    fn set_membership_reaches_the_leaves_the_reference_does() {
        // the case's expected output, from onnx's reference implementation
        let y = eval(membership(vec![]), &X);
        #[rustfmt::skip]
        let expected = [
            1., 0., 0., 0.,
            0., 0., 0., 100.,
            0., 0., 0., 100.,
            0., 0., 1000., 0.,
            0., 0., 1000., 0.,
            0., 10., 0., 0.,
        ];
        assert_eq!(y, expected);
    }

    #[test]
    fn missing_values_follow_the_true_branch_where_asked() {
        // NaN takes the true branch at the root and at the first set: leaf 0 (as onnx's
        // reference implementation finds)
        let y = eval(
            membership(vec![ints_attr("nodes_missing_value_tracks_true", &[1, 1, 0])]),
            &X,
        );
        assert_eq!(&y[12..16], [1., 0., 0., 0.]);
        assert_eq!(&y[..12], [1., 0., 0., 0., 0., 0., 0., 100., 0., 0., 0., 100.]);
    }

    #[test]
    fn aggregates_over_trees_per_target() {
        // two trees on target 0: tree 0 is the leaf 0 (weight 1) alone, tree 1 tests x < 0
        // (leaf 1, weight 4; else leaf 2, weight -2); a target no leaf gives to keeps the
        // aggregation's start. The values agree with onnx's reference implementation.
        let b = |aggregate: i64, targets: i64| {
            let attrs = vec![
                int_attr("aggregate_function", aggregate),
                ints_attr("leaf_targetids", &[0, 0, 0]),
                tensor_attr("leaf_weights", f32s(&[1.0, 4.0, -2.0])),
                int_attr("n_targets", targets),
                ints_attr("nodes_falseleafs", &[1, 1]),
                ints_attr("nodes_falsenodeids", &[0, 2]),
                ints_attr("nodes_featureids", &[0, 0]),
                tensor_attr("nodes_modes", u8_tensor(&[0, 1])),
                tensor_attr("nodes_splits", f32s(&[0.0, 0.0])),
                ints_attr("nodes_trueleafs", &[1, 1]),
                ints_attr("nodes_truenodeids", &[0, 1]),
                ints_attr("tree_roots", &[0, 1]),
            ];
            let mut n = node("TreeEnsemble", &["x"], &["y"], attrs);
            n.domain = Some(super::DOMAIN.into());
            ModelBuilder::new(21)
                .domain(super::DOMAIN, 5)
                .input("x", DataType::Float, &[2, 1])
                .node(n)
                .output("y")
        };
        assert_eq!(eval(b(1, 1), &[-1.0, 1.0]), [5.0, -1.0]);
        assert_eq!(eval(b(0, 1), &[-1.0, 1.0]), [2.5, -0.5]);
        assert_eq!(eval(b(2, 1), &[-1.0, 1.0]), [1.0, -2.0]);
        assert_eq!(eval(b(3, 1), &[-1.0, 1.0]), [4.0, 1.0]);
        let big = f32::MAX as f64;
        assert_eq!(eval(b(1, 2), &[-1.0, 1.0]), [5.0, 0.0, -1.0, 0.0]);
        assert_eq!(eval(b(2, 2), &[-1.0, 1.0]), [1.0, big, -2.0, big]);
        assert_eq!(eval(b(3, 2), &[-1.0, 1.0]), [4.0, -big, 1.0, -big]);
    }

    #[test]
    fn thresholds_not_exact_in_the_input_type_compare_in_f64() {
        // 0.10002 rounds up to the f16 0.10003662109375, which is not <= 0.10002: leaf 1
        let attrs = vec![
            ints_attr("leaf_targetids", &[0, 0]),
            tensor_attr("leaf_weights", f32s(&[1.0, 2.0])),
            int_attr("n_targets", 1),
            ints_attr("nodes_falseleafs", &[1]),
            ints_attr("nodes_falsenodeids", &[1]),
            ints_attr("nodes_featureids", &[0]),
            tensor_attr("nodes_modes", u8_tensor(&[0])),
            tensor_attr("nodes_splits", f32s(&[0.10002])),
            ints_attr("nodes_trueleafs", &[1]),
            ints_attr("nodes_truenodeids", &[0]),
            ints_attr("tree_roots", &[0]),
        ];
        let mut n = node("TreeEnsemble", &["x"], &["y"], attrs);
        n.domain = Some(super::DOMAIN.into());
        let g = ModelBuilder::new(21)
            .domain(super::DOMAIN, 5)
            .input("x", DataType::Float16, &[2, 1])
            .node(n)
            .output("y")
            .import()
            .unwrap();
        let x = Tensor::from_f64s(DType::F16, vec![2, 1], &[0.0999755859375, 0.10003662109375]);
        let y = run(&g, &[x]).unwrap();
        assert_eq!(y[0].dtype(), DType::F16);
        assert_eq!(y[0].to_f64_vec(), [1.0, 2.0]);
    }

    #[test]
    fn post_transforms_are_sigmoid_and_softmax() {
        let text = membership(vec![int_attr("post_transform", 2)]).text();
        assert!(text.contains("mx.sigmoid"), "{text}");
        let text = membership(vec![int_attr("post_transform", 1)]).text();
        assert!(text.contains("mx.softmax") && text.contains("axis = 1"), "{text}");
    }

    #[test]
    fn refusals_name_what_is_not_supported() {
        let e = membership(vec![int_attr("post_transform", 4)]).error();
        assert!(e.contains("post_transform PROBIT is not supported"), "{e}");
        let e = membership(vec![tensor_attr("membership_values", f32s(&[1.0, f32::NAN]))]).error();
        assert!(e.contains("membership_values has 1 sets"), "{e}");
        let e = membership(vec![ints_attr("nodes_truenodeids", &[1, 0, 9])]).error();
        assert!(e.contains("node 2 leads to leaf 9, outside 0..4"), "{e}");
        let e = membership(vec![
            ints_attr("nodes_falsenodeids", &[2, 0, 3]),
            ints_attr("nodes_falseleafs", &[1, 0, 1]),
        ])
        .error();
        assert!(e.contains("cycle"), "{e}");
    }
}
