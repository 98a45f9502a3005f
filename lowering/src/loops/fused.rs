//! `mx.fused` kernels, one loop nest per fused group (the body's rules are in
//! `mxc_dialects::mx::fused`).
//!
//! Without an anchor, one pass over the result evaluates the body's element-wise ops at each
//! element, each operand read where broadcasting maps the element's index. With an anchor (a
//! conv, matmul, pooling, softmax, reduction, ...), the anchor's own lowering runs with its
//! result buffer carrying an `Epilogue`: each value it stores goes through the element-wise
//! ops after it, at the same index, and the final value is stored to the kernel's result.
//!
//! Intermediate values stay in registers and are rounded to their element type
//! (`Emitter::round_to`), so a fused kernel computes the numbers the unfused kernels do.

use super::buffer::{compute_ty, Buf};
use super::elementwise;
use super::emit::{Emitter, V};
use super::lookup;
use super::saturate;
use mxc_dialects::{mx, DType, Def, Graph, Op, OpKind, Trait, ValueId};
use std::rc::Rc;
use std::sync::Arc;

/// The element-wise ops after a fused kernel's anchor, applied to each value it stores.
#[derive(Debug)]
pub struct Epilogue {
    body: Arc<Graph>,
    /// The anchor's result in the body.
    anchor: ValueId,
    /// The kernel's operands (the body's inputs, in order).
    ins: Vec<Buf>,
    /// The kernel's result.
    pub out: Buf,
    /// Functions of one byte it looks up instead of computing (`ByteTable`).
    tables: Vec<ByteTable>,
}

/// A function of one byte inside a fused body, looked up in a table of its 256 values
/// (`lookup.rs`) instead of computed per element: the value `to` depends on the byte value
/// `from` and single-element constants alone. A quantised model's SiLU after a convolution is
/// one: the convolution's sums requantised to a byte, then dequantised, a sigmoid of it
/// requantised, dequantised, multiplied by the first and requantised again, all of one byte.
#[derive(Clone, Debug)]
struct ByteTable {
    from: ValueId,
    to: ValueId,
    table: Buf,
}

impl Epilogue {
    /// The epilogue of an anchor writing `anchor` seen as a matrix (`Emitter::as_matrix`): each
    /// operand of `anchor`'s shape as the same matrix, each one that varies along the last
    /// dimension alone (a bias) as a row, scalars as they are; `None` for any other operand.
    pub fn as_matrix(&self, e: &mut Emitter, anchor: &Buf) -> Option<Epilogue> {
        let cols = *anchor.shape.last()?;
        let rows = anchor.len() / cols;
        let ins = self
            .ins
            .iter()
            .enumerate()
            .map(|(i, b)| (b, self.reads(i)))
            .map(|(b, read)| match b.shape.split_last() {
                _ if !read => Some(b.clone()),
                _ if b.shape == anchor.shape => Some(e.view(b, &[rows, cols])),
                Some((&last, lead)) if lead.iter().all(|&d| d == 1) && b.rank() <= anchor.rank() => {
                    Some(e.view(b, &[last]))
                }
                None => Some(b.clone()),
                _ => None,
            })
            .collect::<Option<Vec<Buf>>>()?;
        if self.out.shape != anchor.shape {
            return None;
        }
        let out = e.view(&self.out, &[rows, cols]);
        Some(Epilogue {
            body: self.body.clone(),
            anchor: self.anchor,
            ins,
            out,
            tables: self.tables.clone(),
        })
    }

    /// Whether the ops after the anchor read body input `i` (the anchor's own operands are
    /// never read here).
    fn reads(&self, i: usize) -> bool {
        self.body
            .ops
            .iter()
            .filter(|op| op.results[0] != self.anchor)
            .any(|op| {
                op.operands
                    .iter()
                    .any(|v| matches!(self.body.def(*v), Def::Input(j) if j == i))
            })
    }

    /// The operands the epilogue reads that are as large as the result (residuals): an anchor
    /// may prefetch them, at the result's index, to have them come from memory while it
    /// computes the values they meet.
    pub fn residuals(&self) -> Vec<&Buf> {
        (0..self.ins.len())
            .filter(|&i| self.ins[i].same_dims(&self.out) && self.reads(i))
            .map(|i| &self.ins[i])
            .collect()
    }

    /// Whether the epilogue holds an op whose vector form is long (a polynomial or rational
    /// function: many constants), so that an anchor whose sums fill the registers does better
    /// to store them first and apply the epilogue in a pass of its own.
    pub fn is_long(&self) -> bool {
        let looked_up = looked_up(&self.body, &self.tables);
        self.body
            .ops
            .iter()
            .any(|op| op.kind.is_transcendental() && !looked_up[op.results[0].index()])
    }

    /// Whether every buffer the epilogue reads, and the one it writes, holds whole vectors
    /// (`Buf::holds_vectors`).
    pub fn all_vectors(&self) -> bool {
        self.ins.iter().chain([&self.out]).all(Buf::holds_vectors)
    }

    /// The kernel's result at `idx`, where the anchor's result is `value`.
    pub fn apply(&self, e: &mut Emitter, idx: &[V], value: V) -> V {
        let lanes = value.lanes;
        let read = |e: &mut Emitter, i: usize| e.read_bcast_lanes(&self.ins[i], idx, lanes);
        evaluate(e, &self.body, read, &[(self.anchor, value)], &self.tables)
    }
}

/// Writes the kernel of an `mx.fused` op with `body`, operands `ins` and result `out`.
pub fn lower(e: &mut Emitter, body: &Arc<Graph>, ins: &[Buf], out: &Buf) -> Result<(), String> {
    match anchored(body, ins, out)? {
        Some((anchor, anchor_ins, mut anchor_out)) => {
            let tables = byte_tables(e, body, out);
            if let Some(epilogue) = anchor_out.epilogue.as_mut().and_then(Rc::get_mut) {
                epilogue.tables = tables;
            }
            super::lower_body(e, anchor.kind, &anchor.attrs, &anchor_ins, &[anchor_out])
        }
        None if !out.is_sized_at_run_time() && lookup::usable(e, body, ins, out) => {
            let whole = body.outputs[0].value;
            lookup::emit(e, &ins[0], out, &|e, x| {
                evaluate_value(e, body, &mut |_, _| x.clone(), &[], &[], whole)
            });
            Ok(())
        }
        None => {
            let tables = byte_tables(e, body, out);
            elementwise::for_each_element(e, ins, out, |e, x| evaluate(e, body, |_, i| x[i].clone(), &[], &tables));
            Ok(())
        }
    }
}

/// A fused kernel's anchor, its operands and its result carrying the epilogue (`anchored`).
pub type Anchored<'b> = (&'b Op, Vec<Buf>, Buf);

/// The anchor of a fused kernel with `body`, operands `ins` and result `out`, with the
/// buffers its own lowering takes: its operands, and its result carrying the `Epilogue` that
/// takes each stored value on to `out`. `None` for a body without an anchor.
pub fn anchored<'b>(body: &'b Arc<Graph>, ins: &[Buf], out: &Buf) -> Result<Option<Anchored<'b>>, String> {
    let Some(a) = mx::fused::anchor(body) else {
        return Ok(None);
    };
    let anchor = &body.ops[a];
    let anchor_ins = anchor
        .operands
        .iter()
        .map(|v| match body.def(*v) {
            Def::Input(i) => Ok(ins[i].clone()),
            Def::Op { .. } => Err(format!("{}: an anchor's operands must be body inputs", anchor.kind)),
        })
        .collect::<Result<Vec<Buf>, String>>()?;
    let ty = body.ty(anchor.results[0]);
    // over symbolic sizes the anchor's result has the kernel result's dimensions (`generic.rs`)
    let mut anchor_out = match out.is_sized_at_run_time() {
        true => Buf::with_extents(&out.name, ty.dtype, out.extents()),
        false => Buf::new(&out.name, ty.dtype, &ty.shape),
    };
    anchor_out.epilogue = Some(Rc::new(Epilogue {
        body: body.clone(),
        anchor: anchor.results[0],
        ins: ins.to_vec(),
        out: out.clone(),
        tables: Vec::new(),
    }));
    Ok(Some((anchor, anchor_ins, anchor_out)))
}

/// The value of the body's output at one element: `input(e, i)` gives body input `i` there
/// (asked at most once each), `given` the values already known (the anchor's result), and
/// `tables` the functions of one byte looked up. The body was verified, so its element-wise
/// ops have their attributes.
fn evaluate(
    e: &mut Emitter,
    body: &Graph,
    mut input: impl FnMut(&mut Emitter, usize) -> V,
    given: &[(ValueId, V)],
    tables: &[ByteTable],
) -> V {
    evaluate_value(e, body, &mut input, given, tables, body.outputs[0].value)
}

/// The value `wanted` at one element, as `evaluate` computes the output: only the ops it
/// needs, a looked-up value from its byte alone.
fn evaluate_value(
    e: &mut Emitter,
    body: &Graph,
    input: &mut dyn FnMut(&mut Emitter, usize) -> V,
    given: &[(ValueId, V)],
    tables: &[ByteTable],
    wanted: ValueId,
) -> V {
    let mut values: Vec<Option<V>> = vec![None; body.num_values()];
    for (id, v) in given {
        values[id.index()] = Some(v.clone());
    }
    let table_of = |v: ValueId| tables.iter().find(|t| t.to == v);
    let saturations = saturate::saturations(body);
    let saturation_of = |v: ValueId| saturations.iter().find(|s| s.to == v);
    let shortcut = |v: ValueId| table_of(v).map(|t| t.from).or_else(|| saturation_of(v).map(|s| s.from));
    let needed = needed(body, wanted, &|v| values[v.index()].is_some(), &shortcut);
    for op in &body.ops {
        let result = op.results[0];
        if values[result.index()].is_some() || !needed[result.index()] {
            continue;
        }
        let dtype = body.ty(result).dtype;
        let y = if let Some(t) = table_of(result) {
            let byte = value_of(e, body, &mut values, input, t.from);
            let entry = lookup::look_up(e, &t.table, &byte);
            match t.table.dtype == dtype {
                true => entry,
                false => e.convert(&entry, compute_ty(dtype)),
            }
        } else if let Some(s) = saturation_of(result) {
            let x = value_of(e, body, &mut values, input, s.from);
            e.saturate(s, &x)
        } else if op.kind == OpKind::Constant {
            let t = body.constant_value(result).expect("a constant has its value");
            let ty = compute_ty(dtype);
            match dtype.is_float() {
                true => e.float(ty, t.get_f64(0)),
                false => e.int(ty, t.get_i64(0)),
            }
        } else {
            let x: Vec<V> = op
                .operands
                .iter()
                .map(|v| value_of(e, body, &mut values, input, *v))
                .collect();
            let y = elementwise::apply(e, op.kind, &op.attrs, &x).expect("a verified body");
            e.round_to(&y, dtype)
        };
        values[result.index()] = Some(y);
    }
    value_of(e, body, &mut values, input, wanted)
}

/// The value of `v`, read from its input when it is one and not read yet.
fn value_of(
    e: &mut Emitter,
    body: &Graph,
    values: &mut [Option<V>],
    input: &mut dyn FnMut(&mut Emitter, usize) -> V,
    v: ValueId,
) -> V {
    if let Some(known) = &values[v.index()] {
        return known.clone();
    }
    let Def::Input(i) = body.def(v) else {
        unreachable!("operands are defined before use")
    };
    let x = input(e, i);
    values[v.index()] = Some(x.clone());
    x
}

/// The values `wanted` is computed from (itself included), not looking past `known` values and
/// looking past a value computed in one step from another (`shortcut`: a looked-up value from
/// its byte, a saturated byte from its float) only to that one.
fn needed(
    body: &Graph,
    wanted: ValueId,
    known: &dyn Fn(ValueId) -> bool,
    shortcut: &dyn Fn(ValueId) -> Option<ValueId>,
) -> Vec<bool> {
    let mut needed = vec![false; body.num_values()];
    let mut stack = vec![wanted];
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut needed[v.index()], true) || known(v) {
            continue;
        }
        match (shortcut(v), body.def(v)) {
            (Some(from), _) => stack.push(from),
            (None, Def::Op { op, .. }) => stack.extend(body.ops[op].operands.iter().copied()),
            (None, Def::Input(_)) => {}
        }
    }
    needed
}

/// The tables of the functions of one byte in `body` (`byte_functions`), written as the
/// kernel's preamble, for a kernel on a vector unit with a result large enough to repay them.
fn byte_tables(e: &mut Emitter, body: &Graph, out: &Buf) -> Vec<ByteTable> {
    if e.isa.is_none() || out.len() < lookup::LEAST_ELEMENTS {
        return Vec::new();
    }
    byte_functions(body)
        .into_iter()
        .map(|(from, to)| {
            let result = body.ty(to).dtype;
            let entry = match result.size() {
                4 => result,
                _ => DType::I32,
            };
            let byte = body.ty(from).dtype;
            let table = lookup::table(e, byte, entry, &|e, x| {
                let y = evaluate_value(
                    e,
                    body,
                    &mut |_, _| unreachable!("a function of the byte"),
                    &[(from, x)],
                    &[],
                    to,
                );
                match entry == result {
                    true => y,
                    false => e.convert(&y, compute_ty(entry)),
                }
            });
            ByteTable { from, to, table }
        })
        .collect()
}

/// The functions of one byte in `body` worth a table, as (byte, value) pairs: from each byte
/// an op computes (a requantised value), the values computed from it and single-element
/// constants alone, when the rest of the body reads one of them only and they hold a
/// transcendental op (a few shifts and compares cost less than the lookup). Each op is in
/// one such function at most.
fn byte_functions(body: &Graph) -> Vec<(ValueId, ValueId)> {
    let n = body.num_values();
    let scalar_constant = |v: ValueId| {
        matches!(body.def(v), Def::Op { op, .. } if body.ops[op].kind == OpKind::Constant)
            && body.ty(v).num_elements() == 1
    };
    let mut covered = vec![false; n];
    let mut found = Vec::new();
    for (k, op) in body.ops.iter().enumerate() {
        let byte = op.results[0];
        let dtype = body.ty(byte).dtype;
        if op.kind == OpKind::Constant || covered[byte.index()] || !matches!(dtype, DType::U8 | DType::I8) {
            continue;
        }
        let mut of_byte = vec![false; n];
        of_byte[byte.index()] = true;
        let mut long = false;
        for later in &body.ops[k + 1..] {
            let reads_byte = later.operands.iter().any(|v| of_byte[v.index()]);
            let only_byte = later.operands.iter().all(|v| of_byte[v.index()] || scalar_constant(*v));
            if later.kind.has(Trait::Elementwise) && reads_byte && only_byte {
                of_byte[later.results[0].index()] = true;
                long |= later.kind.is_transcendental();
            }
        }
        let read_elsewhere = |v: ValueId| {
            body.outputs.iter().any(|o| o.value == v)
                || body
                    .ops
                    .iter()
                    .any(|o| !of_byte[o.results[0].index()] && o.operands.contains(&v))
        };
        let frontier: Vec<ValueId> = body.ops[k + 1..]
            .iter()
            .map(|o| o.results[0])
            .filter(|&v| of_byte[v.index()] && read_elsewhere(v))
            .collect();
        if let ([to], true) = (frontier.as_slice(), long) {
            found.push((byte, *to));
            for (c, &f) in covered.iter_mut().zip(&of_byte) {
                *c |= f;
            }
        }
    }
    found
}

/// The values `tables` look up in place of computing them (their bytes excepted).
fn looked_up(body: &Graph, tables: &[ByteTable]) -> Vec<bool> {
    let mut inside = vec![false; body.num_values()];
    for t in tables {
        for (i, needed) in needed(body, t.to, &|v| v == t.from, &|_| None).into_iter().enumerate() {
            inside[i] |= needed && i != t.from.index();
        }
    }
    inside
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_in_order, loop_depth, t, AVX2, AVX512};
    use super::super::{lower_graph, to_llvm_ir};
    use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType, ValueId};
    use std::sync::Arc;

    /// A graph of one `mx.fused` op over fresh inputs of `inputs`' types.
    fn fused(inputs: &[TensorType], build: impl FnOnce(&mut Graph, &[mxc_dialects::ValueId])) -> Graph {
        let mut body = Graph::new("kernel");
        let args: Vec<_> = inputs
            .iter()
            .enumerate()
            .map(|(i, ty)| body.add_input(&format!("in{i}"), ty.clone()))
            .collect();
        build(&mut body, &args);
        let mut g = Graph::new("test");
        let xs = inputs
            .iter()
            .enumerate()
            .map(|(i, ty)| g.add_input(&format!("x{i}"), ty.clone()))
            .collect();
        let y = g.build_fused(Arc::new(body), xs).unwrap();
        g.add_output("y", y);
        g
    }

    #[test]
    fn an_element_wise_chain_is_one_loop_with_one_store() {
        let f32s = |s: &[usize]| t(DType::F32, s);
        let g = fused(&[f32s(&[2, 3]), f32s(&[3])], |b, x| {
            let s = b.build1(OpKind::Add, vec![x[0], x[1]], Attrs::new()).unwrap();
            let half = b.constant(Tensor::from_f64s(DType::F32, vec![], &[0.5]));
            let m = b.build1(OpKind::Mul, vec![s, half], Attrs::new()).unwrap();
            let r = b.build1(OpKind::Relu, vec![m], Attrs::new()).unwrap();
            b.add_output("out0", r);
        });
        let m = lower_graph(&g, None).unwrap();
        assert_eq!(m.kernels.len(), 1);
        assert_eq!(m.kernels[0].symbol, "k0_add_mul_relu");
        assert_eq!(loop_depth(&m.mlir), 2, "{}", m.mlir);
        assert_eq!(m.mlir.matches("memref.store").count(), 1, "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &[
                "5.0e-1",
                "memref.load %in0",
                "memref.load %in1",
                "arith.addf",
                "arith.mulf",
                "arith.maximumf",
                "memref.store",
            ],
        );
        to_llvm_ir(&m.mlir).unwrap();
    }

    /// A dequantised SiLU of the bytes `x`: requantised to u8 when `to` is u8, else left as
    /// `to`.
    fn silu_of_bytes(b: &mut Graph, x: ValueId, to: DType) -> ValueId {
        let scalar = |b: &mut Graph, d: DType, v: f64| b.constant(Tensor::from_f64s(d, vec![], &[v]));
        let (scale, zero) = (scalar(b, DType::F32, 0.06), scalar(b, DType::U8, 133.0));
        let dq = b
            .build1(OpKind::DequantizeLinear, vec![x, scale, zero], Attrs::new())
            .unwrap();
        let sigmoid = b.build1(OpKind::Sigmoid, vec![dq], Attrs::new()).unwrap();
        let mut y = b.build1(OpKind::Mul, vec![dq, sigmoid], Attrs::new()).unwrap();
        if to == DType::U8 {
            let step = scalar(b, DType::F32, 0.03);
            let q = b.build1(OpKind::Div, vec![y, step], Attrs::new()).unwrap();
            y = b.build1(OpKind::Round, vec![q], Attrs::new()).unwrap();
        }
        b.build1(OpKind::Cast, vec![y], Attrs::new().with("to", Attr::DType(to)))
            .unwrap()
    }

    /// A dequantised SiLU of `n` bytes (`silu_of_bytes`).
    fn byte_silu(n: usize, to: DType) -> Graph {
        fused(&[t(DType::U8, &[n])], |b, x| {
            let y = silu_of_bytes(b, x[0], to);
            b.add_output("out0", y);
        })
    }

    #[test]
    fn a_long_function_of_one_byte_is_a_table_lookup() {
        let vbmi = super::super::VectorIsa { vbmi: true, ..AVX512 };
        // one byte to one byte with VBMI: the table in registers, vpermi2b into each half
        let m = lower_graph(&byte_silu(8192, DType::U8), Some(vbmi)).unwrap();
        check_in_order(
            &m.mlir,
            &[
                "memref.alloca() : memref<256xi8>",
                "arith.constant dense<[0, 1, 2",
                "math.",
                "vector.load %table",
                "vpermi2var.qi.512",
                "vpermi2var.qi.512",
                "arith.select",
                "vector.store",
            ],
        );
        to_llvm_ir(&m.mlir).unwrap();
        // without VBMI one load from the table per element; to f32, a vector gather
        let scalar = lower_graph(&byte_silu(8192, DType::U8), Some(AVX512)).unwrap();
        check_in_order(&scalar.mlir, &["arith.extui", "arith.index_cast", "memref.load %table"]);
        let wide = lower_graph(&byte_silu(8192, DType::F32), Some(AVX2)).unwrap();
        check_in_order(&wide.mlir, &["memref<256xf32>", "arith.extui", "vector.gather %table"]);
        for m in [&scalar, &wide] {
            to_llvm_ir(&m.mlir).unwrap();
        }
        // too few elements to repay the table, or scalar code (ref): the body per element
        for (n, isa) in [(1024, Some(vbmi)), (8192, None)] {
            let plain = lower_graph(&byte_silu(n, DType::U8), isa).unwrap();
            assert!(!plain.mlir.contains("%table"), "{}", plain.mlir);
        }
    }

    #[test]
    fn a_function_of_one_byte_in_an_epilogue_is_looked_up_in_a_table_made_before_the_loops() {
        // a product requantised to bytes, then the dequantised SiLU of those bytes: the SiLU's
        // table (its one-byte result widened to i32 for the gather) is made before the
        // product's parallel loop, which the kernel still splits; the loop looks it up
        let product = |rows: usize, to: DType| {
            fused(&[t(DType::F32, &[rows, 8]), t(DType::F32, &[8, 128])], |b, x| {
                let y = b.build1(OpKind::MatMul, vec![x[0], x[1]], Attrs::new()).unwrap();
                let step = b.constant(Tensor::from_f64s(DType::F32, vec![], &[0.5]));
                let q = b.build1(OpKind::Div, vec![y, step], Attrs::new()).unwrap();
                let r = b.build1(OpKind::Round, vec![q], Attrs::new()).unwrap();
                let bytes = b
                    .build1(OpKind::Cast, vec![r], Attrs::new().with("to", Attr::DType(DType::U8)))
                    .unwrap();
                let out = silu_of_bytes(b, bytes, to);
                b.add_output("out0", out);
            })
        };
        for (to, entry) in [(DType::U8, "i32"), (DType::F32, "f32")] {
            let m = lower_graph(&product(64, to), Some(AVX512)).unwrap();
            check_in_order(
                &m.mlir,
                &[
                    &format!("memref.alloca() : memref<256x{entry}>"),
                    "math.",
                    "%lo to",
                    "math.fma",
                    "vector.gather %table",
                ],
            );
            // per stored vector one division (the requantisation) and one gather: the SiLU's
            // own divisions are in the table's code alone
            let loop_body = &m.mlir[m.mlir.find("%lo to").unwrap()..];
            let gathers = loop_body.matches("vector.gather %table").count();
            assert_eq!(loop_body.matches("arith.divf").count(), gathers, "{}", m.mlir);
            assert!(m.kernels[0].parallel.splittable, "{:?}", m.kernels[0].parallel);
            to_llvm_ir(&m.mlir).unwrap();
        }
        // a result too small to repay the table computes the SiLU per element
        let small = lower_graph(&product(4, DType::U8), Some(AVX512)).unwrap();
        assert!(!small.mlir.contains("%table"), "{}", small.mlir);
    }

    #[test]
    fn fused_kernels_translate_for_every_element_type() {
        for d in [
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::F64,
            DType::I8,
            DType::U32,
            DType::I64,
        ] {
            let g = fused(&[t(d, &[3, 4]), t(d, &[4, 2]), t(d, &[2])], |b, x| {
                let y = b.build1(OpKind::MatMul, vec![x[0], x[1]], Attrs::new()).unwrap();
                let z = b.build1(OpKind::Max, vec![y, x[2]], Attrs::new()).unwrap();
                let one = b.constant(Tensor::from_f64s(d, vec![1], &[1.0]));
                let w = b.build1(OpKind::Sub, vec![z, one], Attrs::new()).unwrap();
                let c = b
                    .build1(
                        OpKind::Cast,
                        vec![w],
                        Attrs::new().with("to", mxc_dialects::Attr::DType(DType::F32)),
                    )
                    .unwrap();
                b.add_output("out0", c);
            });
            let m = lower_graph(&g, None).unwrap_or_else(|e| panic!("{d}: {e}"));
            to_llvm_ir(&m.mlir).unwrap_or_else(|e| panic!("{d}: {e}\n{}", m.mlir));
        }
    }

    #[test]
    fn an_epilogue_runs_after_the_anchors_reduction_before_its_one_store() {
        let g = fused(
            &[t(DType::F32, &[4, 8]), t(DType::F32, &[8, 5]), t(DType::F32, &[5])],
            |b, x| {
                let y = b.build1(OpKind::MatMul, vec![x[0], x[1]], Attrs::new()).unwrap();
                let z = b.build1(OpKind::Add, vec![y, x[2]], Attrs::new()).unwrap();
                let h = b
                    .build1(
                        OpKind::Cast,
                        vec![z],
                        Attrs::new().with("to", mxc_dialects::Attr::DType(DType::F16)),
                    )
                    .unwrap();
                b.add_output("out0", h);
            },
        );
        let m = lower_graph(&g, None).unwrap();
        assert_eq!(m.mlir.matches("memref.store").count(), 1, "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &[
                "iter_args",
                "arith.mulf",
                "arith.addf",
                "scf.yield",
                "memref.load %in2",
                "arith.addf",
                "memref.store",
                "memref<4x5xf16>",
            ],
        );
        to_llvm_ir(&m.mlir).unwrap();
    }

    #[test]
    fn a_residual_is_prefetched_before_the_products_and_a_bias_is_not() {
        let f32s = |s: &[usize]| t(DType::F32, s);
        let g = fused(
            &[f32s(&[64, 32]), f32s(&[32, 48]), f32s(&[48]), f32s(&[64, 48])],
            |b, x| {
                let y = b.build1(OpKind::MatMul, vec![x[0], x[1]], Attrs::new()).unwrap();
                let biased = b.build1(OpKind::Add, vec![y, x[2]], Attrs::new()).unwrap();
                let z = b.build1(OpKind::Add, vec![biased, x[3]], Attrs::new()).unwrap();
                b.add_output("out0", z);
            },
        );
        let m = lower_graph(&g, Some(AVX2)).unwrap().mlir;
        to_llvm_ir(&m).unwrap();
        // a micro-tile of 4 rows x 3 vectors of 8: per row its 96 bytes of the residual, two
        // prefetches a cache line apart, then the depth loop, then the residual read
        assert_eq!(m.matches("memref.prefetch %in3").count(), 4 * 2, "{m}");
        assert!(!m.contains("memref.prefetch %in2"), "{m}");
        check_in_order(&m, &["memref.prefetch %in3", "math.fma", "vector.load %in3"]);
    }
}
