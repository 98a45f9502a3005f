//! Losses: `NegativeLogLikelihoodLoss` as the input taken along the class axis at the target
//! (`take_along_axis`), weighted, masked where the target is `ignore_index` and reduced;
//! `SoftmaxCrossEntropyLoss` as the same loss of the log-softmax of the scores, which is its
//! optional second output.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::activation::log_softmax;
use super::index::take_along_axis;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("NegativeLogLikelihoodLoss", negative_log_likelihood);
    r.add_all("SoftmaxCrossEntropyLoss", softmax_cross_entropy);
}

#[derive(Clone, Copy)]
enum Reduction {
    None,
    Sum,
    Mean,
}

fn reduction(ctx: &Ctx) -> Result<Reduction, String> {
    match ctx.node.string("reduction", "mean")?.as_str() {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => Err(format!("reduction {other:?} is not one of \"none\", \"sum\", \"mean\"")),
    }
}

fn negative_log_likelihood(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (input, target) = (ctx.input(0)?, ctx.input(1)?);
    let weight = ctx.opt_input(2);
    Ok(vec![loss(ctx, input, target, weight)?])
}

fn softmax_cross_entropy(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (scores, labels) = (ctx.input(0)?, ctx.input(1)?);
    if ctx.ty(scores).rank() < 2 {
        return Err(format!(
            "scores must be N x C x ..., got shape {:?}",
            ctx.ty(scores).shape
        ));
    }
    let weights = ctx.opt_input(2);
    let log_prob = log_softmax(ctx, scores, 1)?;
    Ok(vec![loss(ctx, log_prob, labels, weights)?, log_prob])
}

/// `-input[n, target[n, d], d] * weight[target[n, d]]`, 0 where the target is `ignore_index`,
/// reduced as the node says (`mean` divides by the total weight of the targets not ignored).
fn loss(ctx: &mut Ctx, input: ValueId, target: ValueId, weight: Option<ValueId>) -> Result<ValueId, String> {
    let reduction = reduction(ctx)?;
    let ignore_index = ctx.node.opt_int("ignore_index")?;
    let shape = ctx.ty(input).shape.clone();
    let target_shape = ctx.ty(target).shape.clone();
    let dtype = ctx.ty(input).dtype;
    let mut expected = shape.clone();
    if shape.len() >= 2 {
        expected.remove(1);
    }
    if shape.len() < 2 || target_shape != expected || !ctx.ty(target).dtype.is_int() {
        return Err(format!(
            "target of shape {target_shape:?} ({}) does not label input of shape {shape:?}",
            ctx.ty(target).dtype
        ));
    }
    // an ignored target may be any value: it reads class 0, and its loss is masked out
    let (target, kept) = match ignore_index {
        Some(ii) => {
            let ii = ctx.scalar(ctx.ty(target).dtype, ii as f64);
            let ignored = ctx.op(OpKind::Equal, &[target, ii])?;
            let zero = ctx.scalar(ctx.ty(target).dtype, 0.0);
            let safe = ctx.op(OpKind::Where, &[ignored, zero, target])?;
            let kept = ctx.op(OpKind::Not, &[ignored])?;
            (safe, Some(ctx.cast(kept, dtype)?))
        }
        None => (target, None),
    };
    let mut column = shape.clone();
    column[1] = 1;
    let index = reshape(ctx, target, &column)?;
    let picked = take_along_axis(ctx, input, index, 1)?;
    let picked = reshape(ctx, picked, &target_shape)?;
    let class_weight = match weight {
        Some(w) => Some(ctx.build1(OpKind::Gather, vec![w, target], Attrs::new().with("axis", Attr::Int(0)))?),
        None => None,
    };
    let sample_weight = match (class_weight, kept) {
        (Some(w), Some(k)) => Some(ctx.op(OpKind::Mul, &[w, k])?),
        (w, k) => w.or(k),
    };
    let negated = ctx.op(OpKind::Neg, &[picked])?;
    let losses = match sample_weight {
        Some(w) => ctx.op(OpKind::Mul, &[negated, w])?,
        None => negated,
    };
    let all: Vec<usize> = (0..target_shape.len()).collect();
    match reduction {
        Reduction::None => Ok(losses),
        Reduction::Sum => ctx.reduce(OpKind::ReduceSum, losses, &all, false),
        Reduction::Mean => {
            let Some(w) = sample_weight else {
                return ctx.reduce(OpKind::ReduceMean, losses, &all, false);
            };
            let total = ctx.reduce(OpKind::ReduceSum, losses, &all, false)?;
            let total_weight = ctx.reduce(OpKind::ReduceSum, w, &all, false)?;
            ctx.op(OpKind::Div, &[total, total_weight])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::{DType, Tensor};

    fn nll(attrs: Vec<super::super::super::proto::AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(13)
            .input("x", DataType::Float, &[2, 3])
            .input("t", DataType::Int64, &[2])
            .init(f32_tensor("w", &[3], &[0.2, 0.3, 0.5]))
            .node(node("NegativeLogLikelihoodLoss", &["x", "t", "w"], &["y"], attrs))
            .output("y")
    }

    #[test]
    fn the_weighted_mean_divides_by_the_weight_of_the_targets_kept() {
        let g = nll(vec![int_attr("ignore_index", 7)]).import().unwrap();
        let x = Tensor::from_f32s(vec![2, 3], &[1., 2., 3., 4., 5., 6.]);
        let t = Tensor::from_i64s(DType::I64, vec![2], &[2, 7]);
        let y = run(&g, &[x.clone(), t]).unwrap();
        assert_eq!(y[0].to_f64_vec(), [-3.0]);
        let t = Tensor::from_i64s(DType::I64, vec![2], &[2, 0]);
        let y = run(&g, &[x, t]).unwrap();
        let expected = -(3.0 * 0.5 + 4.0 * 0.2) / 0.7;
        assert!((y[0].to_f64_vec()[0] - expected).abs() < 1e-6);
    }

    #[test]
    fn an_unknown_reduction_is_refused() {
        let err = nll(vec![str_attr("reduction", "max")]).error();
        assert!(err.contains("reduction \"max\" is not one of"), "{err}");
    }
}
