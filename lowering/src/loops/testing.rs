//! Helpers for the text tests of the lowering: one-op graphs, FileCheck-style ordered
//! matching and loop-depth measurement of the MLIR a kernel becomes.

use super::{lower_graph, LoopModule, VectorIsa};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, TensorType};

pub fn t(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

/// Attributes from `(name, value)` pairs.
pub fn attrs(pairs: &[(&str, Attr)]) -> Attrs {
    pairs.iter().fold(Attrs::new(), |a, (k, v)| a.with(k, v.clone()))
}

pub fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// A graph of one op over fresh inputs of the given types, all results returned.
pub fn one_op(kind: OpKind, inputs: &[TensorType], attrs: Attrs) -> Graph {
    let mut g = Graph::new("test");
    let operands = inputs
        .iter()
        .enumerate()
        .map(|(i, ty)| g.add_input(&format!("x{i}"), ty.clone()))
        .collect();
    let results = g.build(kind, operands, attrs).unwrap_or_else(|e| panic!("{kind}: {e}"));
    for (i, r) in results.into_iter().enumerate() {
        g.add_output(&format!("y{i}"), r);
    }
    g
}

/// The MLIR of a one-op graph.
pub fn lower_one(kind: OpKind, inputs: &[TensorType], attrs: Attrs) -> LoopModule {
    lower_graph(&one_op(kind, inputs, attrs), None).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

/// AVX2's vector unit: 8 f32 lanes, 16 registers, fused multiply-add.
pub const AVX2: VectorIsa = VectorIsa {
    lanes: 8,
    registers: 16,
    fma: true,
    f16c: true,
    amx_bf16: false,
    amx_int8: false,
    vnni: false,
    vbmi: false,
};

/// AVX-512's vector unit: 16 f32 lanes, 32 registers, fused multiply-add.
pub const AVX512: VectorIsa = VectorIsa {
    lanes: 16,
    registers: 32,
    fma: true,
    f16c: true,
    amx_bf16: false,
    amx_int8: false,
    vnni: false,
    vbmi: false,
};

/// The MLIR of a one-op graph for AVX2 (the cpu target's form), checked to translate.
pub fn lower_one_vector(kind: OpKind, inputs: &[TensorType], attrs: Attrs) -> String {
    lower_one_for(AVX2, kind, inputs, attrs)
}

/// The MLIR of a one-op graph for the vector unit `isa`, checked to translate.
pub fn lower_one_for(isa: VectorIsa, kind: OpKind, inputs: &[TensorType], attrs: Attrs) -> String {
    let m = lower_graph(&one_op(kind, inputs, attrs), Some(isa)).unwrap_or_else(|e| panic!("{kind}: {e}"));
    super::to_llvm_ir(&m.mlir).unwrap_or_else(|e| panic!("{kind}: {e}\n{}", m.mlir));
    m.mlir
}

/// Checks that `patterns` occur in `text` in this order (like FileCheck's `CHECK:` lines).
pub fn check_in_order(text: &str, patterns: &[&str]) {
    let mut rest = text;
    for p in patterns {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => panic!("`{p}` not found (in order) in:\n{text}"),
        }
    }
}

/// The deepest nesting of `scf.for` loops in `text`, counting the parallel loop as the loops
/// over the dimensions it collapses (its comment names them: `over 2x3 of 2x3x4`).
pub fn loop_depth(text: &str) -> usize {
    let (mut open, mut depth, mut deepest) = (Vec::new(), 0, 0);
    for line in text.lines().map(str::trim) {
        let (code, comment) = line.split_once("//").unwrap_or((line, ""));
        let code = code.trim_end();
        let (opens, closes) = (code.ends_with('{'), code.starts_with('}'));
        if opens && closes {
            // `} else {`, `} do {`: one op's next region
            continue;
        }
        if opens {
            let loops = match comment.split_once("parallel loop over ") {
                Some((_, dims)) => dims.split(' ').next().unwrap_or_default().split('x').count(),
                None => usize::from(code.contains("scf.for")),
            };
            open.push(loops);
            depth += loops;
            deepest = deepest.max(depth);
        } else if closes {
            depth -= open.pop().unwrap_or(0);
        }
    }
    deepest
}
