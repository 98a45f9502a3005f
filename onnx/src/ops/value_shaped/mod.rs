//! The ops whose output shape depends on the values of their inputs, not only on their
//! shapes: `NonZero`, `Compress`, `Unique` and `NonMaxSuppression`. mx has static shapes
//! only, so these are evaluated at import, where the values that decide the shape are known
//! at compile time (constants, the results of ops on them, or graph inputs whose values
//! `mxc run` was given), and their results become constants (`Compress` only needs its
//! condition: it gathers the selected slices of an input known only at run time). Where such
//! a value is known only at run time the node is refused, naming the input: it needs dynamic
//! shapes.

mod compress;
mod nms;
mod nonzero;
mod unique;

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};
use std::cmp::Ordering;

pub fn register(r: &mut Registry) {
    r.add("", "NonZero", 9, LATEST, nonzero::non_zero);
    r.add("", "Compress", 9, LATEST, compress::compress);
    r.add("", "Unique", 11, LATEST, unique::unique);
    r.add("", "NonMaxSuppression", 10, LATEST, nms::non_max_suppression);
}

/// Input `i` (named `name` in the op's schema), whose values the output's shape depends on:
/// `None` when the node leaves it out, an error when it is known only at run time or holds
/// strings (the values are read as numbers).
fn opt_known_input(ctx: &Ctx, i: usize, name: &str) -> Result<Option<Tensor>, String> {
    let Some(v) = ctx.opt_input(i) else {
        return Ok(None);
    };
    let t = ctx.known(v).ok_or_else(|| {
        format!(
            "{}'s output shape depends on the values of input \"{name}\", known only at run \
             time: not supported without dynamic shapes",
            ctx.node.proto.op_type()
        )
    })?;
    if t.dtype() == DType::Str {
        return Err(format!("input \"{name}\" holds strings, not numbers"));
    }
    Ok(Some(t))
}

/// `opt_known_input` for an input the op requires.
fn known_input(ctx: &Ctx, i: usize, name: &str) -> Result<Tensor, String> {
    opt_known_input(ctx, i, name)?.ok_or_else(|| format!("missing input \"{name}\""))
}

/// The positions of the elements of `t` that are not zero (a NaN is not).
fn nonzero_positions(t: &Tensor) -> Vec<usize> {
    (0..t.len()).filter(|&i| t.get_f64(i) != 0.0).collect()
}

/// An order of floats that is total: numeric, `-0.0` equal to `0.0`, NaN after every number
/// and equal to itself (where numpy sorts NaN).
fn float_order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// A 1-D int64 constant.
fn i64_vector(ctx: &mut Ctx, values: &[i64]) -> ValueId {
    ctx.constant(Tensor::from_i64s(DType::I64, vec![values.len()], values))
}

/// The slices `picks` of `x` along `axis` (of `x` flattened when `None`), in that order: a
/// gather, evaluated at import when `x` is a small constant.
fn take(ctx: &mut Ctx, x: ValueId, axis: Option<usize>, picks: &[usize]) -> Result<ValueId, String> {
    let (x, axis) = match axis {
        Some(axis) => (x, axis),
        None => {
            let len = ctx.ty(x).num_elements();
            (reshape(ctx, x, &[len])?, 0)
        }
    };
    let picks: Vec<i64> = picks.iter().map(|&p| p as i64).collect();
    let indices = i64_vector(ctx, &picks);
    ctx.build1(
        OpKind::Gather,
        vec![x, indices],
        Attrs::new().with("axis", Attr::Int(axis as i64)),
    )
}

/// What the tests of these parsers share.
#[cfg(test)]
mod testing {
    use super::super::super::testutil::ModelBuilder;
    use mxc_dialects::Tensor;

    /// The outputs of a model without inputs, imported (verified) and run.
    pub fn outputs(b: ModelBuilder) -> Vec<Tensor> {
        let g = b.import().unwrap_or_else(|e| panic!("import failed: {e}"));
        mxc_dialects::verify(&g).unwrap();
        mxc_dialects::eval::run(&g, &[]).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_order_with_nan_last_and_signed_zeros_equal() {
        assert_eq!(float_order(-0.0, 0.0), Ordering::Equal);
        assert_eq!(float_order(f64::NAN, f64::INFINITY), Ordering::Greater);
        assert_eq!(float_order(1.0, f64::NAN), Ordering::Less);
        assert_eq!(float_order(f64::NAN, f64::NAN), Ordering::Equal);
        assert_eq!(float_order(-1.0, 2.0), Ordering::Less);
    }
}
