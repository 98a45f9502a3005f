//! The optimiser steps of the `ai.onnx.preview.training` domain, element-wise on each
//! optimised tensor: `Adagrad`, `Momentum` (standard and Nesterov) and `Adam`, each taking
//! the learning rate `R` and the step count `T` (a run-time scalar: the first step, `T = 0`,
//! is told apart with a `where`) before its groups of tensors.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::build::float_compute_type;
use mxc_dialects::{OpKind, ValueId};

const DOMAIN: &str = "ai.onnx.preview.training";

pub fn register(r: &mut Registry) {
    r.add(DOMAIN, "Adagrad", 1, LATEST, adagrad);
    r.add(DOMAIN, "Momentum", 1, LATEST, momentum);
    r.add(DOMAIN, "Adam", 1, LATEST, adam);
}

/// `R` and `T`, and for each of the `n` optimised tensors its `per_tensor` inputs (X, G, and
/// the optimiser's state), grouped by tensor.
fn groups(ctx: &Ctx, per_tensor: usize) -> Result<(ValueId, ValueId, Vec<Vec<ValueId>>), String> {
    let inputs = ctx.all_inputs()?;
    let tensors = inputs.len().saturating_sub(2) / per_tensor;
    if tensors == 0 || inputs.len() != 2 + tensors * per_tensor {
        return Err(format!(
            "takes R, T and {per_tensor} inputs per optimised tensor, got {} inputs",
            inputs.len()
        ));
    }
    let grouped = (0..tensors)
        .map(|i| (0..per_tensor).map(|k| inputs[2 + k * tensors + i]).collect())
        .collect();
    Ok((inputs[0], inputs[1], grouped))
}

/// A scalar of `v`'s element type.
fn k(ctx: &mut Ctx, v: ValueId, value: f64) -> ValueId {
    ctx.scalar(ctx.ty(v).dtype, value)
}

/// `a * x + y` for a scalar `a`.
fn scaled_plus(ctx: &mut Ctx, a: f64, x: ValueId, y: ValueId) -> Result<ValueId, String> {
    let a = k(ctx, x, a);
    let ax = ctx.op(OpKind::Mul, &[a, x])?;
    ctx.op(OpKind::Add, &[ax, y])
}

/// Whether this is past the first step (`T > 0`), as a bool scalar.
fn past_first(ctx: &mut Ctx, t: ValueId) -> Result<ValueId, String> {
    let zero = ctx.scalar(ctx.ty(t).dtype, 0.0);
    ctx.op(OpKind::Greater, &[t, zero])
}

fn adagrad(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let decay = ctx.node.float("decay_factor", 0.0)? as f64;
    let epsilon = ctx.node.float("epsilon", 0.0)? as f64;
    let norm = ctx.node.float("norm_coefficient", 0.0)? as f64;
    let (r, t, tensors) = groups(ctx, 3)?;
    // r / (1 + t * decay)
    let tf = ctx.cast(t, ctx.ty(r).dtype)?;
    let decayed = k(ctx, r, decay);
    let slowed = ctx.op(OpKind::Mul, &[tf, decayed])?;
    let one = k(ctx, r, 1.0);
    let divisor = ctx.op(OpKind::Add, &[one, slowed])?;
    let rate = ctx.op(OpKind::Div, &[r, divisor])?;
    let (mut xs, mut hs) = (Vec::new(), Vec::new());
    for group in tensors {
        let [x, g, h] = group[..] else {
            unreachable!("three inputs per tensor")
        };
        let regularised = scaled_plus(ctx, norm, x, g)?;
        let square = ctx.op(OpKind::Mul, &[regularised, regularised])?;
        let h_new = ctx.op(OpKind::Add, &[h, square])?;
        let root = ctx.op(OpKind::Sqrt, &[h_new])?;
        let eps = k(ctx, x, epsilon);
        let scale = ctx.op(OpKind::Add, &[root, eps])?;
        let step = ctx.op(OpKind::Div, &[regularised, scale])?;
        let step = ctx.op(OpKind::Mul, &[rate, step])?;
        xs.push(ctx.op(OpKind::Sub, &[x, step])?);
        hs.push(h_new);
    }
    Ok(xs.into_iter().chain(hs).collect())
}

fn momentum(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let nesterov = match ctx.node.opt_string("mode")?.as_deref() {
        Some("standard") => false,
        Some("nesterov") => true,
        Some(other) => return Err(format!("mode {other:?} is not \"standard\" or \"nesterov\"")),
        None => return Err("missing attribute `mode`".into()),
    };
    let alpha = ctx.node.opt_float("alpha")?.ok_or("missing attribute `alpha`")? as f64;
    let beta = ctx.node.opt_float("beta")?.ok_or("missing attribute `beta`")? as f64;
    let norm = ctx
        .node
        .opt_float("norm_coefficient")?
        .ok_or("missing attribute `norm_coefficient`")? as f64;
    let (r, t, tensors) = groups(ctx, 3)?;
    let later = past_first(ctx, t)?;
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for group in tensors {
        let [x, g, v] = group[..] else {
            unreachable!("three inputs per tensor")
        };
        let regularised = scaled_plus(ctx, norm, x, g)?;
        // the gradient's coefficient is 1 at the first step
        let (b, one) = (k(ctx, x, beta), k(ctx, x, 1.0));
        let coefficient = ctx.op(OpKind::Where, &[later, b, one])?;
        let pushed = ctx.op(OpKind::Mul, &[coefficient, regularised])?;
        let v_new = scaled_plus(ctx, alpha, v, pushed)?;
        let direction = if nesterov {
            scaled_plus(ctx, alpha, v_new, regularised)?
        } else {
            v_new
        };
        let step = ctx.op(OpKind::Mul, &[r, direction])?;
        xs.push(ctx.op(OpKind::Sub, &[x, step])?);
        vs.push(v_new);
    }
    Ok(xs.into_iter().chain(vs).collect())
}

fn adam(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let alpha = ctx.node.float("alpha", 0.9)? as f64;
    let beta = ctx.node.float("beta", 0.999)? as f64;
    let epsilon = ctx.node.float("epsilon", 1e-6)? as f64;
    let norm = ctx.node.float("norm_coefficient", 0.0)? as f64;
    let norm_post = ctx.node.float("norm_coefficient_post", 0.0)? as f64;
    let (r, t, tensors) = groups(ctx, 4)?;
    // past the first step the rate is corrected for the momentums' bias:
    // r * sqrt(1 - beta^t) / (1 - alpha^t)
    let dtype = ctx.ty(r).dtype;
    let wide = float_compute_type(dtype);
    let tf = ctx.cast(t, wide)?;
    let bias = |ctx: &mut Ctx, base: f64| -> Result<ValueId, String> {
        let base = ctx.scalar(wide, base);
        let power = ctx.op(OpKind::Pow, &[base, tf])?;
        let one = ctx.scalar(wide, 1.0);
        ctx.op(OpKind::Sub, &[one, power])
    };
    let (second, first) = (bias(ctx, beta)?, bias(ctx, alpha)?);
    let root = ctx.op(OpKind::Sqrt, &[second])?;
    let correction = ctx.op(OpKind::Div, &[root, first])?;
    let correction = ctx.cast(correction, dtype)?;
    let corrected = ctx.op(OpKind::Mul, &[r, correction])?;
    let later = past_first(ctx, t)?;
    let rate = ctx.op(OpKind::Where, &[later, corrected, r])?;
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for group in tensors {
        let [x, g, v, h] = group[..] else {
            unreachable!("four inputs per tensor")
        };
        let regularised = scaled_plus(ctx, norm, x, g)?;
        let kept = k(ctx, v, alpha);
        let v_kept = ctx.op(OpKind::Mul, &[kept, v])?;
        let v_new = scaled_plus(ctx, 1.0 - alpha, regularised, v_kept)?;
        let square = ctx.op(OpKind::Mul, &[regularised, regularised])?;
        let kept = k(ctx, h, beta);
        let h_kept = ctx.op(OpKind::Mul, &[kept, h])?;
        let h_new = scaled_plus(ctx, 1.0 - beta, square, h_kept)?;
        let root = ctx.op(OpKind::Sqrt, &[h_new])?;
        let eps = k(ctx, x, epsilon);
        let scale = ctx.op(OpKind::Add, &[root, eps])?;
        let ratio = ctx.op(OpKind::Div, &[v_new, scale])?;
        let step = ctx.op(OpKind::Mul, &[rate, ratio])?;
        let x_new = ctx.op(OpKind::Sub, &[x, step])?;
        let shrink = k(ctx, x, 1.0 - norm_post);
        xs.push(ctx.op(OpKind::Mul, &[shrink, x_new])?);
        vs.push(v_new);
        hs.push(h_new);
    }
    Ok(xs.into_iter().chain(vs).chain(hs).collect())
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;

    fn momentum_node() -> super::super::super::proto::NodeProto {
        let mut n = node(
            "Momentum",
            &["r", "t", "x", "x", "x"],
            &["y", "v"],
            vec![str_attr("mode", "heavy")],
        );
        n.domain = Some(super::DOMAIN.into());
        n
    }

    #[test]
    fn an_unknown_momentum_mode_is_refused() {
        let err = ModelBuilder::new(17)
            .domain(super::DOMAIN, 1)
            .input("r", DataType::Float, &[])
            .input("t", DataType::Int64, &[])
            .input("x", DataType::Float, &[2])
            .node(momentum_node())
            .output("y")
            .error();
        assert!(err.contains("mode \"heavy\" is not"), "{err}");
    }
}
