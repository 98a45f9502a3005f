//! Attention: the cpu target's tiled kernel against `ref`'s definition (key tiles, ragged
//! micro-tiles, both layouts, masks that vary per query or only per key, rows whose softmax is
//! NaN), and the built-in `attention` rules recognising the chain PyTorch's exporters write.

use crate::common::{cache_dir, mismatch, op_names, read_for_target, run_case};
use crate::cpu_kernels::{cpu_against_ref, f32s, run, values};
use mxc_codegen::Target;
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// The shapes of q, k and v.
type Shapes<'a> = [&'a [usize]; 3];

fn attention_attrs(layout: &str, scale: f64, zero_nan_rows: i64) -> Attrs {
    Attrs::new()
        .with("layout", Attr::Str(layout.into()))
        .with("scale", Attr::Float(scale))
        .with("zero_nan_rows", Attr::Int(zero_nan_rows))
}

/// One `attention` op over inputs `q`, `k`, `v` (and `mask` when `mask` is given).
fn attention_graph(shapes: [&[usize]; 3], mask: Option<&[usize]>, attrs: Attrs) -> Graph {
    let mut g = Graph::new("attention");
    let mut operands: Vec<_> = ["q", "k", "v"]
        .iter()
        .zip(shapes)
        .map(|(name, shape)| g.add_input(name, f32s(shape)))
        .collect();
    if let Some(m) = mask {
        operands.push(g.add_input("mask", f32s(m)));
    }
    let y = g.build1(OpKind::Attention, operands, attrs).unwrap();
    g.add_output("y", y);
    g
}

#[test]
fn the_tiled_kernel_matches_ref_across_key_tiles_layouts_and_masks() {
    // 300 keys: a whole tile of 256 and a ragged one; 37 queries: the last block of rows partial;
    // value depth 20: the last micro-tile of depths ragged
    let cases: [(Shapes, Option<&[usize]>, &str); 5] = [
        (
            [&[2, 3, 37, 24], &[2, 3, 300, 24], &[2, 3, 300, 20]],
            Some(&[1, 1, 37, 300]),
            "bhsd",
        ),
        (
            [&[1, 37, 3, 24], &[1, 300, 3, 24], &[1, 300, 3, 20]],
            Some(&[300]),
            "bshd",
        ),
        (
            [&[1, 128, 4, 64], &[1, 128, 4, 64], &[1, 128, 4, 64]],
            Some(&[1, 1, 128, 128]),
            "bshd",
        ),
        ([&[2, 1, 5, 7], &[2, 1, 3, 7], &[2, 1, 3, 9]], None, "bhsd"),
        // no keys: every output is an empty sum, 0
        ([&[1, 2, 3, 4], &[1, 2, 0, 4], &[1, 2, 0, 5]], None, "bhsd"),
    ];
    for (shapes, mask, layout) in cases {
        let g = attention_graph(shapes, mask, attention_attrs(layout, 0.3, 0));
        let kinds = cpu_against_ref(&g, 1e-4, 1e-5);
        assert_eq!(kinds, [OpKind::Attention], "{shapes:?}");
    }
}

/// A mask over 300 keys: row 1 masks every key, row 2 every key of the first tile (256) and
/// not the rest, the other rows none.
fn masking_mask() -> Tensor {
    let (queries, keys) = (5, 300);
    let v: Vec<f64> = (0..queries * keys)
        .map(|i| match (i / keys, i % keys) {
            (1, _) => f64::NEG_INFINITY,
            (2, j) if j < 256 => f64::NEG_INFINITY,
            _ => 0.0,
        })
        .collect();
    Tensor::from_f64s(DType::F32, vec![1, 1, queries, keys], &v)
}

#[test]
fn fully_masked_rows_are_nan_or_zero_as_the_chain_gives_them() {
    for zero_nan_rows in [0, 1] {
        let shapes: [&[usize]; 3] = [&[1, 2, 5, 8], &[1, 2, 300, 8], &[1, 2, 300, 8]];
        let g = attention_graph(
            shapes,
            Some(&[1, 1, 5, 300]),
            attention_attrs("bhsd", 1.0, zero_nan_rows),
        );
        let mut inputs: HashMap<String, Tensor> = ["q", "k", "v"]
            .iter()
            .zip(shapes)
            .enumerate()
            .map(|(i, (name, shape))| (name.to_string(), values(shape, i + 1)))
            .collect();
        inputs.insert("mask".into(), masking_mask());
        let (want, _) = run(&g, Target::Ref, &inputs);
        let (got, _) = run(&g, Target::Cpu, &inputs);
        if let Some(why) = mismatch(&got[0], &want[0], 1e-4, 1e-5) {
            panic!("zero_nan_rows {zero_nan_rows}: cpu differs from ref: {why}");
        }
        // [1, 2, 5, 8]: row 1 of each head is NaN (or 0), row 2 a number
        let row = |head: usize, r: usize| (0..8).map(move |c| (head * 5 + r) * 8 + c);
        for head in 0..2 {
            for i in row(head, 1) {
                let x = got[0].get_f64(i);
                assert!(if zero_nan_rows == 1 { x == 0.0 } else { x.is_nan() }, "{x}");
            }
            assert!(row(head, 2).all(|i| got[0].get_f64(i).is_finite()));
        }
    }
}

#[test]
fn the_encoders_attention_chains_become_one_op_each_reading_the_heads_in_place() {
    let model = cache_dir("models/encoder").join("model.onnx");
    let model = model.to_str().unwrap();
    let (imported, rewritten) = (read_for_target(model, "ref", &[]), read_for_target(model, "cpu", &[]));
    let (before, after) = (op_names(&imported), op_names(&rewritten));
    let count = |ops: &[&str], name: &str| ops.iter().filter(|o| **o == name).count();
    // per layer: Q·Kᵀ / 4 + mask, softmax, ·V, with the heads split and merged by transposes
    assert_eq!((count(&before, "softmax"), count(&before, "transpose")), (2, 8));
    assert_eq!(count(&after, "attention"), 2, "{rewritten}");
    for gone in ["softmax", "transpose", "div"] {
        assert_eq!(count(&after, gone), 0, "{gone} left in:\n{rewritten}");
    }
    // the heads read where the projections wrote them, the division by sqrt(16) a scale
    let line = rewritten.lines().find(|l| l.contains("mx.attention")).unwrap();
    assert!(
        line.contains(r#"layout = "bshd", scale = 0.25, zero_nan_rows = 0"#),
        "{line}"
    );
    // the program with them computes what ref computes
    let set = cache_dir("models/encoder").join("test_data_set_0");
    let dir = tempfile::tempdir().unwrap();
    let outputs = |target: &str| {
        let out = dir.path().join(target);
        run_case(Path::new(model), &set, target, &[], &out).unwrap_or_else(|e| panic!("{target}: {e}"))
    };
    let (want, got) = (outputs("ref"), outputs("cpu"));
    for (w, o) in want.iter().zip(&got) {
        if let Some(why) = mismatch(o, w, 1e-4, 1e-5) {
            panic!("cpu differs from ref: {why}");
        }
    }
}
