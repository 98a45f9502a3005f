//! ONNX sequences whose length is known when the graph is imported: a sequence is the list of
//! mx values it holds (`importer::Sequence`), so `SequenceConstruct`, `SequenceEmpty`,
//! `SequenceInsert`, `SequenceErase`, `SequenceLength`, `SplitToSequence` and
//! `ConcatFromSequence` cost nothing at run time, and `SequenceAt` picks a value, or, at a
//! position known only at run time, gathers from the elements stacked (they must share a type).
//! Insert and erase positions, and split sizes, must be known at import (constants, or the
//! inputs `mxc run` is given). `SequenceMap` imports its body once per element. A sequence
//! whose length would change at run time (in an `mx.loop`) is not supported; a `Loop` carrying
//! one is unrolled at import (`control/unroll.rs`).

use super::super::ctx::{one_number, Ctx};
use super::super::importer::{OnnxValue, Sequence};
use super::super::registry::Registry;
use super::super::tensor::{dtype_of, require_dtype};
use super::axes::axis;
use super::layout::{concat_values, slice_value, DimSlice};
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("SequenceEmpty", sequence_empty);
    r.add_all("SequenceConstruct", sequence_construct);
    r.add_all("SequenceInsert", sequence_insert);
    r.add_all("SequenceErase", sequence_erase);
    r.add_all("SequenceAt", sequence_at);
    r.add_all("SequenceLength", sequence_length);
    r.add_all("SplitToSequence", split_to_sequence);
    r.add_all("ConcatFromSequence", concat_from_sequence);
    r.add("", "SequenceMap", 17, super::super::registry::LATEST, sequence_map);
}

fn sequence_empty(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let dtype = match ctx.node.opt_int("dtype")? {
        Some(code) => require_dtype(code as i32)?,
        None => DType::F32,
    };
    ctx.set_sequence_output(
        0,
        Sequence {
            dtype,
            elements: vec![],
        },
    );
    Ok(vec![])
}

fn sequence_construct(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let elements = ctx.all_inputs()?;
    let Some(&first) = elements.first() else {
        return Err("it takes at least one tensor (an empty sequence is SequenceEmpty)".into());
    };
    let dtype = ctx.ty(first).dtype;
    if let Some(&other) = elements.iter().find(|&&v| ctx.ty(v).dtype != dtype) {
        return Err(format!(
            "elements of {dtype} and {} in one sequence",
            ctx.ty(other).dtype
        ));
    }
    ctx.set_sequence_output(0, Sequence { dtype, elements });
    Ok(vec![])
}

/// The position input `i`, made non-negative: `None` when absent. `len` is the sequence's
/// length; insertion may also name the end (`len` itself).
fn position(ctx: &Ctx, i: usize, len: usize, insert: bool) -> Result<Option<usize>, String> {
    ctx.opt_const_number(i, "position")?
        .map(|p| resolve(p.get_i64(0), len, insert))
        .transpose()
}

/// Position `p` of a sequence of `len` tensors, made non-negative.
fn resolve(p: i64, len: usize, insert: bool) -> Result<usize, String> {
    let n = len as i64;
    let last = if insert { n } else { n - 1 };
    let at = if p < 0 { p + n } else { p };
    if !(0..=last).contains(&at) {
        return Err(format!("position {p} is outside a sequence of {len} tensors"));
    }
    Ok(at as usize)
}

fn sequence_insert(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut s = ctx.sequence_input(0)?.clone();
    let x = ctx.input(1)?;
    if ctx.ty(x).dtype != s.dtype {
        return Err(format!("inserting {} into a sequence of {}", ctx.ty(x).dtype, s.dtype));
    }
    let at = position(ctx, 2, s.elements.len(), true)?.unwrap_or(s.elements.len());
    s.elements.insert(at, x);
    ctx.set_sequence_output(0, s);
    Ok(vec![])
}

fn sequence_erase(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let mut s = ctx.sequence_input(0)?.clone();
    if s.elements.is_empty() {
        return Err("erasing from an empty sequence".into());
    }
    let at = position(ctx, 1, s.elements.len(), false)?.unwrap_or(s.elements.len() - 1);
    s.elements.remove(at);
    ctx.set_sequence_output(0, s);
    Ok(vec![])
}

fn sequence_length(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let n = ctx.sequence_input(0)?.elements.len();
    Ok(vec![ctx.scalar(DType::I64, n as f64)])
}

/// The element at a position known at import, or, at one known only at run time, a gather
/// from the elements stacked along a new first axis.
fn sequence_at(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let s = ctx.sequence_input(0)?.clone();
    let p = ctx.input(1)?;
    if let Some(known) = ctx.known(p) {
        let at = resolve(one_number(known, "position")?.get_i64(0), s.elements.len(), false)?;
        return Ok(vec![s.elements[at]]);
    }
    let Some(&first) = s.elements.first() else {
        return Err("reading from an empty sequence".into());
    };
    let ty = ctx.ty(first).clone();
    if s.elements.iter().any(|&v| *ctx.ty(v) != ty) {
        return Err(
            "the position is known only at run time and the elements differ in shape (they are read by stacking them)"
                .into(),
        );
    }
    let stacked_shape: Vec<usize> = [vec![1], ty.shape.clone()].concat();
    let rows = s
        .elements
        .iter()
        .map(|&v| reshape(ctx, v, &stacked_shape))
        .collect::<Result<Vec<_>, _>>()?;
    let stacked = concat_values(ctx, rows, 0)?;
    let index = reshape(ctx, p, &[])?;
    Ok(vec![ctx.build1(
        OpKind::Gather,
        vec![stacked, index],
        Attrs::new().with("axis", Attr::Int(0)),
    )?])
}

/// The most tensors a sequence made at import may hold: each is a value of the graph.
const MAX_ELEMENTS: usize = 1 << 16;

/// `SplitToSequence`: pieces of the sizes `split` gives (one size: pieces of it, the last
/// smaller), or without it, every entry of the axis (`keepdims = 0` drops the axis then).
fn split_to_sequence(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let ax = axis(ctx.node.int("axis", 0)?, shape.len())?;
    let keepdims = ctx.node.int("keepdims", 1)? != 0;
    let dim = shape[ax];
    let split = ctx.opt_const_input(1, "split")?;
    let sizes: Vec<usize> = match &split {
        None => vec![1; dim],
        Some(t) if t.shape().is_empty() => {
            let size = usize::try_from(t.get_i64(0)).ok().filter(|&n| n > 0);
            let size = size.ok_or_else(|| format!("split {} is not a positive size", t.get_i64(0)))?;
            (0..dim).step_by(size).map(|start| size.min(dim - start)).collect()
        }
        Some(t) => {
            let sizes = t
                .to_i64_vec()
                .into_iter()
                .map(|n| usize::try_from(n).map_err(|_| format!("split size {n} is negative")))
                .collect::<Result<Vec<_>, _>>()?;
            if sizes.iter().try_fold(0usize, |n, &s| n.checked_add(s)) != Some(dim) {
                return Err(format!("split sizes {sizes:?} do not add up to axis {ax}'s {dim}"));
            }
            sizes
        }
    };
    if sizes.len() > MAX_ELEMENTS {
        return Err(format!(
            "splitting into {} tensors: a sequence holds at most {MAX_ELEMENTS} (its elements are values of the graph)",
            sizes.len()
        ));
    }
    let mut elements = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for size in sizes {
        let bounds = DimSlice {
            start: start as i64,
            end: (start + size) as i64,
            step: 1,
        };
        let mut piece = slice_value(ctx, x, &[(ax, bounds)])?;
        if split.is_none() && !keepdims {
            let mut squeezed = shape.clone();
            squeezed.remove(ax);
            piece = reshape(ctx, piece, &squeezed)?;
        }
        elements.push(piece);
        start += size;
    }
    let dtype = ctx.ty(x).dtype;
    ctx.set_sequence_output(0, Sequence { dtype, elements });
    Ok(vec![])
}

/// `ConcatFromSequence`: the elements joined along `axis`, or with `new_axis = 1` stacked
/// along a new one there.
fn concat_from_sequence(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let s = ctx.sequence_input(0)?.clone();
    let Some(&first) = s.elements.first() else {
        return Err("concatenating an empty sequence".into());
    };
    let rank = ctx.ty(first).rank();
    if let Some(other) = s.elements.iter().find(|v| ctx.ty(**v).rank() != rank) {
        return Err(format!(
            "the sequence's tensors differ in rank: {} and {}",
            ctx.ty(first),
            ctx.ty(*other)
        ));
    }
    let new_axis = match ctx.node.int("new_axis", 0)? {
        0 => false,
        1 => true,
        other => return Err(format!("new_axis {other} is not 0 or 1")),
    };
    let raw = ctx.node.opt_int("axis")?.ok_or("missing attribute `axis`")?;
    let ax = axis(raw, rank + new_axis as usize)?;
    let mut parts = s.elements.clone();
    if new_axis {
        for v in &mut parts {
            let mut shape = ctx.ty(*v).shape.clone();
            shape.insert(ax, 1);
            *v = reshape(ctx, *v, &shape)?;
        }
    }
    Ok(vec![concat_values(ctx, parts, ax)?])
}

/// `SequenceMap`: the body applied to each position of the input sequences (which must have
/// the same length; tensor inputs are passed whole each time), imported once per position; its
/// outputs make the output sequences.
fn sequence_map(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let body = ctx.node.graph("body")?.ok_or("missing attribute `body`")?;
    let inputs: Vec<OnnxValue> = (0..ctx.num_inputs())
        .map(|i| ctx.value_input(i).ok_or_else(|| format!("missing input #{i}")))
        .collect::<Result<_, _>>()?;
    let len = ctx.sequence_input(0)?.elements.len();
    for (i, input) in inputs.iter().enumerate() {
        match input {
            OnnxValue::Sequence(s) if s.elements.len() != len => {
                return Err(format!(
                    "input #{i} is a sequence of {} tensors, input #0 of {len}",
                    s.elements.len()
                ))
            }
            OnnxValue::Sequence(_) | OnnxValue::Tensor(_) => {}
            other => {
                return Err(format!(
                    "input #{i} is {}: only sequences and tensors are mapped",
                    other.kind()
                ))
            }
        }
    }
    let mut outputs: Vec<Vec<ValueId>> = vec![Vec::new(); body.output.len()];
    for position in 0..len {
        let args: Vec<OnnxValue> = inputs
            .iter()
            .map(|input| match input {
                OnnxValue::Sequence(s) => OnnxValue::Tensor(s.elements[position]),
                other => other.clone(),
            })
            .collect();
        for (k, value) in ctx.inline_subgraph(body, &args)?.into_iter().enumerate() {
            match value {
                OnnxValue::Tensor(v) => outputs[k].push(v),
                other => return Err(format!("the body's output #{k} is {}, not a tensor", other.kind())),
            }
        }
    }
    for (k, (elements, vi)) in outputs.into_iter().zip(&body.output).enumerate() {
        let dtype = match elements.first() {
            Some(&v) => ctx.ty(v).dtype,
            None => declared_dtype(vi).ok_or_else(|| {
                format!("the body's output #{k} declares no element type (the sequences mapped are empty)")
            })?,
        };
        ctx.set_sequence_output(k, Sequence { dtype, elements });
    }
    Ok(vec![])
}

/// The element type a value info declares for a tensor, if it does.
fn declared_dtype(vi: &super::super::proto::ValueInfoProto) -> Option<DType> {
    use super::super::proto::type_proto::Value as TypeValue;
    match vi.r#type.as_ref()?.value.as_ref()? {
        TypeValue::TensorType(t) => dtype_of(t.elem_type()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::{i64_tensor, int_attr, node, ModelBuilder};

    fn three_inputs() -> ModelBuilder {
        ModelBuilder::new(12)
            .input("x", DataType::Float, &[2])
            .input("y", DataType::Float, &[2])
            .input("z", DataType::Float, &[2])
            .node(node("SequenceConstruct", &["x", "y", "z"], &["s"], vec![]))
    }

    #[test]
    fn a_sequence_of_no_tensors_is_refused_naming_the_node() {
        // found by the fuzzer: the element type was read off a first element that is not there
        let err = ModelBuilder::new(12)
            .node(node("SequenceConstruct", &[], &["s"], vec![]))
            .output("s")
            .error();
        assert!(
            err.contains("SequenceConstruct") && err.contains("it takes at least one tensor"),
            "{err}"
        );
    }

    #[test]
    fn known_positions_pick_values_at_import() {
        let text = three_inputs()
            .init(i64_tensor("p", &[], &[-3]))
            .node(node("SequenceErase", &["s", "p"], &["t"], vec![]))
            .node(node("SequenceInsert", &["t", "x"], &["u"], vec![]))
            .node(node("SequenceLength", &["u"], &["n"], vec![]))
            .node(node("ConcatFromSequence", &["u"], &["c"], vec![int_attr("axis", 0)]))
            .output("n")
            .output("c")
            .text();
        // y, z, x joined; the length is a constant
        assert!(
            text.contains("mx.concat %arg1, %arg2, %arg0 {axis = 0} : tensor<6xf32>"),
            "{text}"
        );
        assert!(text.contains("dense<[3]> : tensor<i64>"), "{text}");
    }

    #[test]
    fn sequence_map_imports_its_body_per_element() {
        use super::super::super::testutil::graph_attr;
        use super::super::control::tests::{run, subgraph, untyped};
        // each element plus the tensor w, and each element's length
        let body = subgraph(
            "body",
            vec![untyped("e"), untyped("w")],
            vec![
                node("Add", &["e", "w"], &["sum"], vec![]),
                node("Size", &["e"], &["n"], vec![]),
            ],
            vec![untyped("sum"), untyped("n")],
        );
        let mut model = three_inputs().input("w", DataType::Float, &[2]);
        model.opset = 17;
        let g = model
            .node(node(
                "SequenceMap",
                &["s", "w"],
                &["sums", "sizes"],
                vec![graph_attr("body", body)],
            ))
            .node(node("ConcatFromSequence", &["sums"], &["c"], vec![int_attr("axis", 0)]))
            .node(node(
                "ConcatFromSequence",
                &["sizes"],
                &["n"],
                vec![int_attr("axis", 0), int_attr("new_axis", 1)],
            ))
            .output("c")
            .output("n")
            .import()
            .unwrap();
        let two = |a: f32, b: f32| mxc_dialects::Tensor::from_f32s(vec![2], &[a, b]);
        let out = run(&g, &[two(1., 2.), two(3., 4.), two(5., 6.), two(10., 20.)]);
        assert_eq!(out[0].to_f64_vec(), [11., 22., 13., 24., 15., 26.]);
        assert_eq!(out[1].to_i64_vec(), [2, 2, 2]);
    }

    #[test]
    fn a_run_time_position_gathers_from_the_stacked_elements() {
        let text = three_inputs()
            .input("p", DataType::Int64, &[])
            .node(node("SequenceAt", &["s", "p"], &["e"], vec![]))
            .output("e")
            .text();
        assert!(text.contains("mx.concat"), "{text}");
        assert!(text.contains("mx.gather"), "{text}");
        assert!(text.contains("tensor<2xf32>\n  return"), "{text}");
    }

    #[test]
    fn bad_positions_are_refused_by_name() {
        let err = three_inputs()
            .init(i64_tensor("p", &[], &[3]))
            .node(node("SequenceAt", &["s", "p"], &["e"], vec![]))
            .output("e")
            .error();
        assert!(err.contains("position 3 is outside a sequence of 3 tensors"), "{err}");
    }
}
