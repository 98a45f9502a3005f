//! Control flow. An `If` whose condition is known at compile time is replaced by the branch it
//! takes, imported in place; any other `If` is an `mx.if` whose branches are regions
//! (`Ctx::region`) taking the values either branch reads from around it. `Loop` is an
//! `mx.loop` (`loops.rs`), unless it carries sequences or optionals (then it is unrolled at
//! import, `unroll.rs`), and so is `Scan`, its body slicing the scan inputs (`scan.rs`).

mod loops;
mod scan;
#[cfg(test)]
pub(super) mod tests;
mod unroll;

use super::super::ctx::Ctx;
use super::super::proto::GraphProto;
use super::super::registry::{Registry, LATEST};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, ValueId};
use std::sync::Arc;

pub fn register(r: &mut Registry) {
    r.add_all("If", if_op);
    r.add_all("Loop", loops::loop_op);
    r.add("", "Scan", 8, 8, scan::scan_with_batch_axis);
    r.add("", "Scan", 9, LATEST, scan::scan);
}

/// The subgraph attribute `name`, which the op requires.
fn required_graph<'a>(ctx: &Ctx<'a>, name: &str) -> Result<&'a GraphProto, String> {
    ctx.node
        .graph(name)?
        .ok_or_else(|| format!("missing attribute `{name}`"))
}

/// `v` (the op's `what`) as a rank-0 value: it must be of `dtype` and have one element.
fn scalar_operand(ctx: &mut Ctx, v: ValueId, dtype: DType, what: &str) -> Result<ValueId, String> {
    let ty = ctx.ty(v);
    if ty.dtype != dtype || ty.num_elements() != 1 {
        return Err(format!("{what} must be a {dtype} tensor of one element, got {ty}"));
    }
    reshape(ctx, v, &[])
}

fn if_op(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let cond = ctx.input(0)?;
    let then_branch = required_graph(ctx, "then_branch")?;
    let else_branch = required_graph(ctx, "else_branch")?;
    if let Some(known) = ctx.known(cond) {
        if known.len() != 1 {
            return Err(format!("cond must have one element, got shape {:?}", known.shape()));
        }
        // the branch not taken is dropped
        let branch = if known.get_i64(0) != 0 {
            then_branch
        } else {
            else_branch
        };
        for (k, value) in ctx.inline_subgraph(branch, &[])?.into_iter().enumerate() {
            ctx.set_output(k, value);
        }
        return Ok(vec![]);
    }
    let cond = scalar_operand(ctx, cond, DType::Bool, "cond")?;
    // both branches take what either reads, in the same order
    let reads = [then_branch, else_branch];
    let then_region = ctx.region("then_branch", &reads, &[], |ctx, _| ctx.import_body(then_branch, &[]))?;
    let else_region = ctx.region("else_branch", &reads, &[], |ctx, _| ctx.import_body(else_branch, &[]))?;
    let (then_types, else_types) = (output_types(&then_region.graph), output_types(&else_region.graph));
    if then_types != else_types {
        return Err(format!(
            "the branches give different types: then ({then_types}), else ({else_types}); results whose \
             shapes depend on the branch taken are not supported (they need dynamic shapes)"
        ));
    }
    let mut operands = vec![cond];
    operands.extend(then_region.captures);
    let attrs = Attrs::new()
        .with("then_branch", Attr::Graph(Arc::new(then_region.graph)))
        .with("else_branch", Attr::Graph(Arc::new(else_region.graph)));
    ctx.build(OpKind::If, operands, attrs)
}

/// The types of `g`'s outputs, as a list for messages.
fn output_types(g: &Graph) -> String {
    let types: Vec<String> = g.outputs.iter().map(|p| g.ty(p.value).to_string()).collect();
    types.join(", ")
}
