//! Fused element-wise kernels of one byte as a table lookup. A kernel whose one operand is a
//! u8 or i8 tensor of the result's shape, and whose body holds no constant of more than one
//! element, computes a function of the byte alone: 256 values. Quantised models are full of
//! them (a dequantised SiLU or sigmoid, requantised or dequantised again, in EfficientNet), and
//! their bodies are long: exponentials, divisions, rounding and clamping per element. Here the
//! kernel first computes its body on the 256 byte values (the same code it would run per
//! element, so every value is the one the plain kernel computes), into a table on the stack,
//! then looks every element up in it.
//!
//! A result of one byte: with AVX-512 VBMI the table sits in four 512-bit registers and
//! `vpermi2b` picks 64 bytes at once from each half of it by the low seven bits of the index,
//! the top bit choosing the half: three instructions per 64 elements; without VBMI, each
//! element is one load from the table. A result of four bytes (f32, i32): a vector gather from
//! the table by the widened bytes. A lookup that is not `vpermi2b` beats only a long body, so
//! then the body must hold a transcendental op. A tensor too small to repay the table stays a
//! plain kernel.

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::rows;
use mxc_dialects::{DType, Graph, OpKind, Trait};

/// Elements below which the table (256 evaluations of the body) costs more than it saves.
pub const LEAST_ELEMENTS: usize = 4096;

/// Bytes one `vpermi2b` looks up.
const BYTES: usize = 64;

/// Whether the kernel of an anchor-less fused `body` with operands `ins` and result `out` is
/// a lookup on this machine.
pub fn usable(e: &Emitter, body: &Graph, ins: &[Buf], out: &Buf) -> bool {
    let Some(isa) = e.isa else {
        return false;
    };
    let byte = |d: DType| matches!(d, DType::U8 | DType::I8);
    let one_byte_in = matches!(ins, [x] if x.shape == out.shape && byte(x.dtype));
    let function_of_the_byte = body
        .ops
        .iter()
        .filter(|op| op.kind == OpKind::Constant)
        .all(|op| body.ty(op.results[0]).num_elements() == 1);
    let long = body.ops.iter().any(|op| op.kind.has(Trait::Transcendental));
    let worth_it = match out.dtype.size() {
        1 => isa.vbmi || long,
        4 => long,
        _ => false,
    };
    one_byte_in
        && worth_it
        && out.len() >= LEAST_ELEMENTS
        && out.holds_vectors()
        && function_of_the_byte
        && body.ops.iter().filter(|op| op.kind != OpKind::Constant).count() >= 2
}

/// Writes the lookup kernel: the table from `value` (the body's value at one element, given
/// its input there), then every element looked up.
pub fn emit(e: &mut Emitter, x: &Buf, out: &Buf, value: &dyn Fn(&mut Emitter, V) -> V) {
    let table = table(e, x.dtype, out.dtype, value);
    let (x, out) = (e.flat(x), e.flat(out));
    let vbmi = e.isa.is_some_and(|isa| isa.vbmi);
    match out.dtype.size() {
        1 if vbmi => in_registers(e, &table, &x, &out),
        4 => {
            let lanes = e.f32_lanes().expect("a vector unit");
            rows::each(e, (out.len(), lanes), &|e, at, lanes| {
                let at = [at.clone()];
                let bytes = e.vload(&x, &at, lanes);
                let y = look_up(e, &table, &bytes);
                e.vstore(&out, &at, &y);
            });
        }
        _ => e.for_each(out.len(), |e, i| {
            let byte = e.read(&x, std::slice::from_ref(&i));
            let y = look_up(e, &table, &byte);
            e.write(&out, &[i], &y);
        }),
    }
}

/// The 256 values `value` gives at the bytes of type `byte`, in order of their bits (an i8
/// `-1` is entry 255), as `entry`s in a table on the stack, written as the kernel's preamble.
pub fn table(e: &mut Emitter, byte: DType, entry: DType, value: &dyn Fn(&mut Emitter, V) -> V) -> Buf {
    e.preamble(|e| {
        let bytes = Buf::new(&e.fresh("bytes"), byte, &[256]);
        let table = Buf::new(&e.fresh("table"), entry, &[256]);
        for b in [&bytes, &table] {
            e.line(&format!("{} = memref.alloca() : {}", b.name, b.memref()));
        }
        let values: Vec<String> = (0..256).map(|b| (b as u8 as i8).to_string()).collect();
        let all = e.fresh("all_bytes");
        e.line(&format!(
            "{all} = arith.constant dense<[{}]> : vector<256xi8>",
            values.join(", ")
        ));
        let zero = e.idx(0);
        e.store_line(&format!(
            "vector.store {all}, {}[{zero}] : {}, vector<256xi8>",
            bytes.name,
            bytes.memref()
        ));
        let lanes = e.f32_lanes().expect("a vector unit");
        rows::each(e, (256, lanes), &|e, at, lanes| {
            let at = [at.clone()];
            let x = e.read_lanes(&bytes, &at, lanes);
            let y = value(e, x);
            e.write(&table, &at, &y);
        });
        table
    })
}

/// The entries of `table` at `bytes` (a byte or a vector of them): one load for a byte, a
/// vector gather by the bytes widened to i32 for a vector.
pub fn look_up(e: &mut Emitter, table: &Buf, bytes: &V) -> V {
    let word = Ty::Int {
        bits: 32,
        signed: false,
    };
    let lanes = bytes.lanes;
    if lanes == 1 {
        let w = e.op("w", word, &format!("arith.extui {bytes} : i8 to i32"));
        let at = e.op("i", Ty::Index, &format!("arith.index_cast {w} : i32 to index"));
        return e.read(table, &[at]);
    }
    let words = format!("vector<{lanes}xi32>");
    let index = e.op_lanes(
        "w",
        word,
        lanes,
        &format!("arith.extui {bytes} : vector<{lanes}xi8> to {words}"),
    );
    let mask = match e.mask.clone() {
        Some(mask) => mask,
        None => e.first_lanes(lanes, lanes),
    };
    let ty = super::buffer::storage_ty(table.dtype);
    let zero = e.zero(ty);
    let pass = e.splat(&zero, lanes);
    let start = e.idx(0);
    e.op_lanes(
        "y",
        ty,
        lanes,
        &format!(
            "vector.gather {}[{start}] [{index}], {mask}, {pass} : {}, {words}, vector<{lanes}xi1>, {} into {}",
            table.name,
            table.memref(),
            pass.mlir_ty(),
            pass.mlir_ty()
        ),
    )
}

/// The lookup with the table in four registers: per 64 elements, `vpermi2b` into each half of
/// the table and a select by the index's top bit.
fn in_registers(e: &mut Emitter, table: &Buf, x: &Buf, out: &Buf) {
    let ty = format!("vector<{BYTES}xi8>");
    let quarters: Vec<String> = (0..4)
        .map(|q| {
            let at = e.idx((q * BYTES) as i64);
            let name = e.fresh("quarter");
            e.line(&format!(
                "{name} = vector.load {}[{at}] : {}, {ty}",
                table.name,
                table.memref()
            ));
            name
        })
        .collect();
    let zero = e.fresh("zeros");
    e.line(&format!("{zero} = arith.constant dense<0> : {ty}"));
    rows::each(e, (out.len(), BYTES), &|e, at, _| {
        let at = [at.clone()];
        let index = e.vload(x, &at, BYTES);
        let half = |e: &mut Emitter, low: &str, high: &str| {
            e.op_lanes(
                "half",
                index.ty,
                BYTES,
                &format!(
                    "llvm.call_intrinsic \"llvm.x86.avx512.vpermi2var.qi.512\"({low}, {index}, {high}) : ({ty}, {ty}, {ty}) -> {ty}"
                ),
            )
        };
        let first = half(e, &quarters[0], &quarters[1]);
        let second = half(e, &quarters[2], &quarters[3]);
        let top = e.op_lanes(
            "top",
            super::emit::Ty::I1,
            BYTES,
            &format!("arith.cmpi slt, {index}, {zero} : {ty}"),
        );
        let y = e.op_lanes(
            "y",
            index.ty,
            BYTES,
            &format!("arith.select {top}, {second}, {first} : vector<{BYTES}xi1>, {ty}"),
        );
        e.vstore(out, &at, &y);
    });
}
