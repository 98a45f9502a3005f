//! Independent items: whether a graph treats the slices of its inputs along one axis each (the
//! items of a batch) independently, so that running it on a batch gives, item for item, what
//! running it on each part of the batch gives. Then a program compiled for a batch of `k`
//! runs a batch of any size in parts of `k` (`mxc_kernels::chunked`).
//!
//! The proof follows each value's *item axis*: the axis whose slices depend only on the same
//! item of the inputs, or none for a value that depends on no input's items (constants and
//! what is computed from them). Each op must keep items apart: an elementwise op over the same
//! item axis, a product whose rows are items, a convolution or pool over the batch axis, a
//! reduction, softmax or normalisation over other axes, a reshape or transpose that keeps the
//! axis whole. A value without an item axis that meets one with it must not vary along it (it
//! is broadcast), since a part of a batch sees its items at other positions. Anything else, and
//! every op this file does not know, is refused with the op and the reason.

use crate::{Graph, Op, OpKind, ValueId};
use std::collections::HashMap;

/// The item axis of each output of `graph` when its inputs carry items along `input_axes`
/// (by input port; the other inputs carry none), or why the graph mixes items.
pub fn output_item_axes(graph: &Graph, input_axes: &HashMap<String, usize>) -> Result<Vec<usize>, String> {
    let mut items: HashMap<ValueId, Items> = HashMap::new();
    for port in &graph.inputs {
        if let Some(&axis) = input_axes.get(&port.name) {
            items.insert(port.value, Items::whole(axis));
        }
    }
    for op in &graph.ops {
        let operands: Vec<Option<Items>> = op.operands.iter().map(|v| items.get(v).copied()).collect();
        if operands.iter().all(Option::is_none) {
            continue;
        }
        let result = result_items(graph, op, &operands)
            .map_err(|why| format!("{} ({}): {why}", op.kind, describe(graph, op)))?;
        if let Some(&r) = op.results.first() {
            items.insert(r, result);
        }
    }
    graph
        .outputs
        .iter()
        .map(|p| match items.get(&p.value) {
            Some(i) if i.inner == 1 => Ok(i.axis),
            Some(_) => Err(format!("output `{}` holds its items merged with another axis", p.name)),
            None => Err(format!("output `{}` does not depend on the items", p.name)),
        })
        .collect()
}

/// Where a value's items are: index `i` along `axis` belongs to item `i / inner` (`inner` is 1
/// but where a reshape merged the item axis with the axes after it: `[n, 7]` as `[n * 7]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Items {
    axis: usize,
    inner: usize,
}

impl Items {
    fn whole(axis: usize) -> Items {
        Items { axis, inner: 1 }
    }
}

/// The items of `op`'s result: reshapes and gathers follow merged items; every other op
/// takes whole ones (`result_axis`).
fn result_items(graph: &Graph, op: &Op, operands: &[Option<Items>]) -> Result<Items, String> {
    let shape = |i: usize| graph.ty(op.operands[i]).shape.clone();
    match (op.kind, operands) {
        (OpKind::Reshape, [Some(items)]) => reshape(&shape(0), &graph.ty(op.results[0]).shape, *items),
        (OpKind::Gather, [Some(items), None]) if op.attrs.int("axis")? == items.axis as i64 => {
            let indices = graph
                .constant_value(op.operands[1])
                .ok_or("it gathers along the item axis at indices known only at run time")?;
            gathered_items(indices, *items).map(|k| Items::whole(items.axis + k))
        }
        _ if operands.iter().flatten().any(|i| i.inner > 1) => {
            Err("an operand holds its items merged with another axis".into())
        }
        _ => {
            let axes: Vec<Option<usize>> = operands.iter().map(|o| o.map(|i| i.axis)).collect();
            result_axis(graph, op, &axes).map(Items::whole)
        }
    }
}

/// The axis `k` of constant gather indices along which each index picks from its own item:
/// `index / inner` is the index's position along `k` (as a model that flattens a batch and
/// gathers `item * size + position` does).
fn gathered_items(indices: &crate::Tensor, items: Items) -> Result<usize, String> {
    let shape = indices.shape();
    let values = indices.to_i64_vec();
    let strides = crate::strides_of(shape);
    (0..shape.len())
        .find(|&k| {
            values.iter().enumerate().all(|(flat, &index)| {
                let position = (flat / strides[k]) % shape[k];
                index >= 0 && index as usize / items.inner == position
            })
        })
        .ok_or_else(|| "its indices take items from other items' places".into())
}

/// The op's operand and result types, for messages.
fn describe(graph: &Graph, op: &Op) -> String {
    let tys: Vec<String> = op.operands.iter().map(|&v| graph.ty(v).to_string()).collect();
    format!("on {}", tys.join(", "))
}

/// The item axis of `op`'s result, given its operands' (`None`: no items).
fn result_axis(graph: &Graph, op: &Op, operands: &[Option<usize>]) -> Result<usize, String> {
    let shape = |i: usize| graph.ty(op.operands[i]).shape.clone();
    let out_rank = graph.ty(op.results[0]).rank();
    let attr_axis = |name: &str, rank: usize| -> Result<usize, String> {
        let a = op.attrs.int(name)?;
        Ok(if a < 0 { (a + rank as i64) as usize } else { a as usize })
    };
    let only_first = || match operands {
        [Some(a), rest @ ..] if rest.iter().all(Option::is_none) => Ok(*a),
        _ => Err("only its first operand may carry items".to_string()),
    };
    let kind = op.kind;
    match kind {
        _ if kind.is_elementwise() => elementwise(graph, op, operands, out_rank),
        OpKind::Softmax | OpKind::LayerNorm => {
            let a = only_first()?;
            let axis = attr_axis("axis", shape(0).len())?;
            let over = if kind == OpKind::Softmax { a == axis } else { a >= axis };
            match over {
                true => Err(format!("it normalises over the item axis {a}")),
                false => Ok(a),
            }
        }
        OpKind::Conv
        | OpKind::ConvTranspose
        | OpKind::MaxPool
        | OpKind::AveragePool
        | OpKind::GlobalAveragePool
        | OpKind::BatchNorm => match only_first()? {
            0 => Ok(0),
            a => Err(format!("its items must be the batch axis 0, not {a}")),
        },
        OpKind::Gemm => match (only_first()?, op.attrs.int("trans_a")?) {
            (0, 0) => broadcast_free(graph, op, 2, 0, out_rank).map(|_| 0),
            _ => Err("its items must be the rows of A".into()),
        },
        OpKind::MatMul => matmul(graph, op, operands, out_rank),
        OpKind::ReduceMean | OpKind::ReduceSum | OpKind::ReduceMax => {
            let a = only_first()?;
            let rank = shape(0).len();
            let axes: Vec<usize> = op
                .attrs
                .ints("axes")?
                .iter()
                .map(|&x| if x < 0 { (x + rank as i64) as usize } else { x as usize })
                .collect();
            let reduced_all = axes.is_empty();
            if reduced_all || axes.contains(&a) {
                return Err(format!("it reduces over the item axis {a}"));
            }
            Ok(match op.attrs.int("keepdims")? != 0 {
                true => a,
                false => a - axes.iter().filter(|&&x| x < a).count(),
            })
        }
        OpKind::Transpose => {
            let a = only_first()?;
            let perm = op.attrs.ints("perm")?;
            perm.iter()
                .position(|&p| p as usize == a)
                .ok_or_else(|| "its permutation drops the item axis".into())
        }
        OpKind::Concat => {
            let axis = attr_axis("axis", out_rank)?;
            match operands.first().copied().flatten() {
                Some(a) if a != axis && operands.iter().all(|o| *o == Some(a)) => Ok(a),
                _ => Err("every operand must carry items on one axis, not the one concatenated".into()),
            }
        }
        OpKind::Slice => {
            let a = only_first()?;
            let (starts, ends, steps) = (
                op.attrs.ints("starts")?,
                op.attrs.ints("ends")?,
                op.attrs.ints("steps")?,
            );
            let whole = starts[a] == 0 && ends[a] >= shape(0)[a] as i64 && steps[a] == 1;
            match whole {
                true => Ok(a),
                false => Err(format!("it slices the item axis {a}")),
            }
        }
        OpKind::Gather => {
            let axis = attr_axis("axis", shape(0).len())?;
            match operands {
                [Some(a), None] if *a != axis => Ok(if *a < axis { *a } else { *a + shape(1).len() - 1 }),
                [None, Some(a)] => Ok(axis + a),
                _ => Err("items must be in the data off the gathered axis, or in the indices alone".into()),
            }
        }
        OpKind::Expand => {
            let a = only_first()?;
            let at = a + out_rank - shape(0).len();
            match graph.ty(op.results[0]).shape[at] == shape(0)[a] {
                true => Ok(at),
                false => Err(format!("it expands the item axis {a}")),
            }
        }
        _ => Err("items through this op are not followed".into()),
    }
}

/// An elementwise op (operands broadcast numpy-style): every operand with items on the same
/// result axis, every other one broadcast along it.
fn elementwise(graph: &Graph, op: &Op, operands: &[Option<usize>], out_rank: usize) -> Result<usize, String> {
    let mut axis = None;
    for (i, a) in operands.iter().enumerate() {
        let Some(a) = a else { continue };
        let at = a + out_rank - graph.ty(op.operands[i]).rank();
        if axis.is_some_and(|x| x != at) {
            return Err("its operands carry items on different axes".into());
        }
        axis = Some(at);
    }
    let at = axis.expect("some operand carries items");
    for (i, a) in operands.iter().enumerate() {
        if a.is_none() {
            broadcast_free(graph, op, i, at, out_rank)?;
        }
    }
    Ok(at)
}

/// Operand `i` (without items) does not vary along the result axis `at`: it is shorter than
/// that or has size 1 there.
fn broadcast_free(graph: &Graph, op: &Op, i: usize, at: usize, out_rank: usize) -> Result<(), String> {
    let Some(&v) = op.operands.get(i) else { return Ok(()) };
    let shape = &graph.ty(v).shape;
    let skip = out_rank - shape.len().min(out_rank);
    match at < skip || shape[at - skip] == 1 {
        true => Ok(()),
        false => Err(format!(
            "operand {i} varies along the item axis: each item would meet another part of it"
        )),
    }
}

/// A matrix product: items in a batch axis (of one operand, the other broadcast along it, or
/// of both alike), in A's rows (B without items) or in B's columns (A without items).
fn matmul(graph: &Graph, op: &Op, operands: &[Option<usize>], out_rank: usize) -> Result<usize, String> {
    let ranks = [graph.ty(op.operands[0]).rank(), graph.ty(op.operands[1]).rank()];
    let at = |i: usize, a: usize| a + out_rank - ranks[i].max(2);
    let in_batch = |i: usize, a: usize| ranks[i] > 2 && a < ranks[i] - 2;
    match operands {
        // B has no rows of A's, A no columns of B's
        [Some(a), None] if ranks[0] >= 2 && *a == ranks[0] - 2 => Ok(at(0, *a)),
        [None, Some(b)] if ranks[1] >= 2 && *b == ranks[1] - 1 => Ok(at(1, *b)),
        [Some(a), None] if in_batch(0, *a) => broadcast_free(graph, op, 1, at(0, *a), out_rank).map(|_| at(0, *a)),
        [None, Some(b)] if in_batch(1, *b) => broadcast_free(graph, op, 0, at(1, *b), out_rank).map(|_| at(1, *b)),
        [Some(a), Some(b)] if in_batch(0, *a) && in_batch(1, *b) && at(0, *a) == at(1, *b) => Ok(at(0, *a)),
        _ => Err("its items must be a batch axis, A's rows or B's columns".into()),
    }
}

/// The items of a reshape's result: the elements before the items' axis are the same in
/// number (`pre`), and each item's block of elements (`inner` positions of the axis times the
/// elements after it) falls within one result axis `b` and the axes after it, as `inner`
/// positions of `b` (1 where the item axis stays whole, more where it is merged with the
/// axes after it).
fn reshape(from: &[usize], to: &[usize], items: Items) -> Result<Items, String> {
    let a = items.axis;
    let pre: usize = from[..a].iter().product();
    let block = items.inner * from[a + 1..].iter().product::<usize>();
    for b in 0..to.len() {
        let before: usize = to[..b].iter().product();
        let after: usize = to[b + 1..].iter().product();
        if before > pre {
            break;
        }
        if before == pre && after > 0 && block.is_multiple_of(after) && to[b].is_multiple_of(block / after) {
            return Ok(Items {
                axis: b,
                inner: block / after,
            });
        }
    }
    Err(format!("it splits or merges the item axis {a}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The item axes of the outputs of the graph `src`, its input `x` carrying items on axis 0.
    fn axes(src: &str) -> Result<Vec<usize>, String> {
        let g = crate::text::parse(src).unwrap_or_else(|e| panic!("{e}"));
        output_item_axes(&g, &HashMap::from([("x".to_string(), 0)]))
    }

    const W: &str =
        "%w = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<3x2xf32>} : tensor<3x2xf32>";

    #[test]
    fn rows_through_products_normalisations_and_transposes_stay_items() {
        let src = format!(
            "graph \"g\" (%x: tensor<4x3xf32> \"x\") {{
  {W}
  %b = mx.constant {{value = dense<[1.0, 2.0]> : tensor<2xf32>}} : tensor<2xf32>
  %0 = mx.matmul %x, %w : tensor<4x2xf32>
  %1 = mx.add %0, %b : tensor<4x2xf32>
  %2 = mx.softmax %1 {{axis = 1}} : tensor<4x2xf32>
  %3 = mx.transpose %2 {{perm = [1, 0]}} : tensor<2x4xf32>
  %4 = mx.reduce_sum %x {{axes = [1], keepdims = 0}} : tensor<4xf32>
  return \"t\" = %3, \"s\" = %4
}}"
        );
        assert_eq!(axes(&src), Ok(vec![1, 0]));
    }

    #[test]
    fn ops_that_mix_items_are_refused_naming_the_op_and_why() {
        let one = |body: &str, ty: &str| {
            format!("graph \"g\" (%x: tensor<4x3xf32> \"x\") {{\n  {W}\n  {body}\n  return \"y\" = %0\n}}")
                .replace("TY", ty)
        };
        assert_eq!(
            axes(&one("%0 = mx.softmax %x {axis = 0} : TY", "tensor<4x3xf32>")),
            Err("mx.softmax (on tensor<4x3xf32>): it normalises over the item axis 0".into())
        );
        assert_eq!(
            axes(&one("%0 = mx.reshape %x {shape = [12]} : TY", "tensor<12xf32>")),
            Err("output `y` holds its items merged with another axis".into())
        );
        let merged = "%m = mx.reshape %x {shape = [12]} : tensor<12xf32>\n  %0 = mx.relu %m : TY";
        assert_eq!(
            axes(&one(merged, "tensor<12xf32>")),
            Err("mx.relu (on tensor<12xf32>): an operand holds its items merged with another axis".into())
        );
        assert_eq!(
            axes(&one("%0 = mx.reshape %x {shape = [2, 6]} : TY", "tensor<2x6xf32>")),
            Err("mx.reshape (on tensor<4x3xf32>): it splits or merges the item axis 0".into())
        );
        assert_eq!(
            axes(&one(
                "%0 = mx.reduce_max %x {axes = [0], keepdims = 1} : TY",
                "tensor<1x3xf32>"
            )),
            Err("mx.reduce_max (on tensor<4x3xf32>): it reduces over the item axis 0".into())
        );
        // a weight that differs from row to row: a part of a batch would meet other rows of it
        let varying = "%c = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4x1xf32>} : tensor<4x1xf32>\n  %0 = mx.mul %x, %c : TY";
        assert_eq!(
            axes(&one(varying, "tensor<4x3xf32>")),
            Err("mx.mul (on tensor<4x3xf32>, tensor<4x1xf32>): operand 1 varies along the item axis: each item would meet another part of it".into())
        );
        // the items as the depth of a product are summed together
        let depth = "%0 = mx.matmul %w, %x : TY";
        let src = one(depth, "tensor<3x3xf32>").replace("tensor<4x3xf32> \"x\"", "tensor<2x3xf32> \"x\"");
        assert_eq!(
            axes(&src),
            Err("mx.matmul (on tensor<3x2xf32>, tensor<2x3xf32>): its items must be a batch axis, A's rows or B's columns".into())
        );
        assert_eq!(
            axes(&one("%0 = mx.relu %w : TY", "tensor<3x2xf32>")),
            Err("output `y` does not depend on the items".into())
        );
    }

    /// x: [2, 3] flattened, gathered at `indices` (of shape [2, 1, 3]) and reshaped back.
    fn flat_gather(indices: &[i64]) -> String {
        let list: Vec<String> = indices.iter().map(i64::to_string).collect();
        format!(
            "graph \"g\" (%x: tensor<2x3xf32> \"x\") {{
  %i = mx.constant {{value = dense<[{}]> : tensor<2x1x3xi64>}} : tensor<2x1x3xi64>
  %0 = mx.reshape %x {{shape = [6, 1]}} : tensor<6x1xf32>
  %1 = mx.gather %0, %i {{axis = 0}} : tensor<2x1x3x1xf32>
  %2 = mx.reshape %1 {{shape = [6]}} : tensor<6xf32>
  %3 = mx.reshape %2 {{shape = [2, 1, 3]}} : tensor<2x1x3xf32>
  return \"y\" = %3
}}",
            list.join(", ")
        )
    }

    #[test]
    fn a_flattened_batch_gathered_item_by_item_keeps_its_items() {
        // indices item * 3 + position, as a model that broadcasts a mask by gathering does
        assert_eq!(axes(&flat_gather(&[0, 1, 2, 3, 4, 5])), Ok(vec![0]));
        assert_eq!(axes(&flat_gather(&[2, 1, 0, 5, 4, 3])), Ok(vec![0]));
        assert_eq!(
            axes(&flat_gather(&[3, 4, 5, 0, 1, 2])),
            Err(
                "mx.gather (on tensor<6x1xf32>, tensor<2x1x3xi64>): its indices take items from other items' places"
                    .into()
            )
        );
    }
}
