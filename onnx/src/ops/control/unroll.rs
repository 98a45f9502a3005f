//! A `Loop` that carries sequences or optionals, or reads them from around it, is unrolled at
//! import: mx values are tensors, so such a loop cannot be an `mx.loop`, but its structure is
//! fixed when its trip count and conditions are known at compile time (constants, or the inputs
//! `mxc run` is given). So is a loop whose body needs a compile-time value that depends on the
//! iteration (`loops.rs`). The body is imported once per iteration, bound to the iteration number,
//! the condition and the values the previous iteration carried; scan outputs are stacked.

use super::super::super::ctx::Ctx;
use super::super::super::importer::OnnxValue;
use super::super::super::proto::GraphProto;
use super::super::layout::concat_values;
use super::super::shape::reshape;
use super::loops::as_declared;
use mxc_dialects::{DType, Tensor, ValueId};

/// The most iterations a loop is unrolled to.
pub const MAX_UNROLLED: i64 = 4096;

pub fn unrolled_loop(ctx: &mut Ctx, body: &GraphProto) -> Result<Vec<ValueId>, String> {
    let n = ctx.num_inputs().saturating_sub(2);
    let known = |ctx: &Ctx, i: usize, what: &str| -> Result<Option<i64>, String> {
        ctx.opt_input(i)
            .map(|v| {
                ctx.known(v).map(|t| t.get_i64(0)).ok_or_else(|| {
                    format!(
                        "{what} must be known at compile time: the loop carries sequences or optionals, so it is \
                         unrolled at import"
                    )
                })
            })
            .transpose()
    };
    let max_trips = known(ctx, 0, "M")?.unwrap_or(i64::MAX);
    let mut cond = known(ctx, 1, "cond")?.is_none_or(|c| c != 0);
    let mut carried: Vec<OnnxValue> = (2..ctx.num_inputs())
        .map(|i| {
            ctx.value_input(i)
                .ok_or_else(|| format!("missing loop-carried value #{}", i - 2))
        })
        .collect::<Result<_, _>>()?;
    let scans = body.output.len() - 1 - n;
    let mut stacked: Vec<Vec<ValueId>> = vec![Vec::new(); scans];
    let mut iteration = 0;
    while cond && iteration < max_trips {
        if iteration == MAX_UNROLLED {
            return Err(format!(
                "the loop runs more than {MAX_UNROLLED} iterations: a loop carrying sequences or optionals is \
                 unrolled at import, up to {MAX_UNROLLED}"
            ));
        }
        let i = ctx.constant(Tensor::from_i64s(DType::I64, vec![], &[iteration]));
        let c = ctx.constant(Tensor::from_i64s(DType::Bool, vec![], &[1]));
        let mut args = vec![
            OnnxValue::Tensor(as_declared(ctx, i, &body.input[0])?),
            OnnxValue::Tensor(as_declared(ctx, c, &body.input[1])?),
        ];
        args.extend(carried);
        let mut outputs = ctx.inline_subgraph(body, &args)?.into_iter();
        let next = match outputs.next() {
            Some(OnnxValue::Tensor(v)) => ctx.known(v),
            _ => None,
        };
        cond = next
            .ok_or("the body's condition must be known at compile time: the loop is unrolled at import")?
            .get_i64(0)
            != 0;
        carried = outputs.by_ref().take(n).collect();
        for (k, value) in outputs.enumerate() {
            match value {
                OnnxValue::Tensor(v) => stacked[k].push(v),
                other => return Err(format!("scan output #{k} is {}, not a tensor", other.kind())),
            }
        }
        iteration += 1;
    }
    for (k, value) in carried.into_iter().enumerate() {
        ctx.set_output(k, value);
    }
    for (k, values) in stacked.into_iter().enumerate() {
        if values.is_empty() {
            return Err(format!(
                "scan output #{k} is empty (the loop runs no iteration): its shape is not known"
            ));
        }
        let rows = values
            .into_iter()
            .map(|v| {
                let shape = [vec![1], ctx.ty(v).shape.clone()].concat();
                reshape(ctx, v, &shape)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let scan = concat_values(ctx, rows, 0)?;
        ctx.set_output(n + k, OnnxValue::Tensor(scan));
    }
    Ok(vec![])
}
