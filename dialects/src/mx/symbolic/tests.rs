//! Symbolic shape inference per op family: each result is checked as expressions, and
//! evaluated at sizes across the range (the ends, the cost point, primes, a tile size and
//! its neighbours) against the fixed-size rule run at those sizes, so the two rules agree at
//! every size tried, not only at the cost point.

use crate::dim::{self, Dim};
use crate::{mx, Attr, Attrs, DType, OpKind, TensorType};
use std::collections::BTreeMap;

/// `[b, s, 64]` written as `"b[1..8]{1}, s[1..512]{128}, 64"`: a dimension per item.
fn dims(text: &str) -> Vec<Dim> {
    crate::text::lexer::split_top_level(text, ',')
        .into_iter()
        .filter(|d| !d.trim().is_empty())
        .map(|d| dim::parse(d.trim()).unwrap())
        .collect()
}

fn f32s(text: &str) -> TensorType {
    TensorType::of_dims(DType::F32, dims(text))
}

fn shown(t: &TensorType) -> String {
    t.to_string()
}

fn attrs(items: &[(&str, Attr)]) -> Attrs {
    items.iter().fold(Attrs::new(), |a, (k, v)| a.with(k, v.clone()))
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// The one result type of `kind`, checked against the fixed-size rule at sizes across the
/// symbols' ranges.
fn infer(kind: OpKind, operands: &[TensorType], a: &Attrs) -> TensorType {
    let results = mx::infer(kind, operands, a).unwrap_or_else(|e| panic!("{kind}: {e}"));
    agrees_across_range(kind, operands, a, &results);
    results.into_iter().next().unwrap()
}

fn refused(kind: OpKind, operands: &[TensorType], a: &Attrs) -> String {
    mx::infer(kind, operands, a).map(|r| format!("{r:?}")).unwrap_err()
}

/// Every symbol of the operands at its least and greatest size, its cost point, 7, 13, 15,
/// 16 and 17 (where in range), each alone: the results' dimensions evaluated there are what
/// the fixed-size rule gives for the operands' sizes there.
fn agrees_across_range(kind: OpKind, operands: &[TensorType], a: &Attrs, results: &[TensorType]) {
    let sizes = a.0.values().filter_map(|v| match v {
        Attr::Sizes(sizes) => Some(sizes.clone()),
        _ => None,
    });
    let all: Vec<Dim> = operands
        .iter()
        .chain(results)
        .map(TensorType::dims)
        .chain(sizes)
        .flatten()
        .collect();
    let symbols: BTreeMap<String, dim::Symbol> = all
        .iter()
        .flat_map(Dim::symbols)
        .map(|s| (s.name.clone(), s.clone()))
        .collect();
    let base: BTreeMap<String, u64> = all.iter().flat_map(|d| d.cost_point()).collect();
    for (name, s) in &symbols {
        let (lo, hi) = s.bounds();
        for size in [lo, hi, 7, 13, 15, 16, 17]
            .into_iter()
            .filter(|v| (lo..=hi).contains(v))
        {
            let mut at = base.clone();
            at.insert(name.clone(), size);
            let fixed = |t: &TensorType| {
                let shape = t.dims().iter().map(|d| d.eval(&at).unwrap() as usize).collect();
                TensorType::new(t.dtype, shape)
            };
            let sized: Vec<TensorType> = operands.iter().map(fixed).collect();
            let want = mx::infer(kind, &sized, &at_sizes(a, &at)).unwrap_or_else(|e| panic!("{kind} at {at:?}: {e}"));
            let got: Vec<TensorType> = results.iter().map(fixed).collect();
            assert_eq!(got, want, "{kind} at {at:?}");
        }
    }
}

/// The attributes with symbolic sizes evaluated at `at`.
fn at_sizes(a: &Attrs, at: &BTreeMap<String, u64>) -> Attrs {
    let mut out = a.clone();
    for (name, v) in &a.0 {
        if let Attr::Sizes(sizes) = v {
            out.set(
                name,
                Attr::Ints(sizes.iter().map(|d| d.eval(at).unwrap() as i64).collect()),
            );
        }
    }
    out
}

const BS: &str = "b[1..8]{1}, s[1..512]{128}";

#[test]
fn elementwise_ops_broadcast_symbolic_dimensions() {
    let x = f32s(&format!("{BS}, 64"));
    assert_eq!(
        shown(&infer(OpKind::Add, &[x.clone(), f32s("64")], &Attrs::new())),
        "tensor<(b)x(s)x64xf32>"
    );
    let mask = f32s("b[1..8]{1}, 1, 1, s[1..512]{128}");
    let scores = f32s("b[1..8]{1}, 4, s[1..512]{128}, s[1..512]{128}");
    assert_eq!(
        shown(&infer(OpKind::Add, &[scores, mask], &Attrs::new())),
        "tensor<(b)x4x(s)x(s)xf32>"
    );
    for kind in [OpKind::Exp, OpKind::Relu, OpKind::Sqrt] {
        assert_eq!(infer(kind, std::slice::from_ref(&x), &Attrs::new()), x);
    }
    let cast = infer(
        OpKind::Cast,
        std::slice::from_ref(&x),
        &attrs(&[("to", Attr::DType(DType::F16))]),
    );
    assert_eq!(shown(&cast), "tensor<(b)x(s)x64xf16>");
    let bool_x = TensorType::of_dims(DType::Bool, dims(&format!("{BS}, 1")));
    let selected = infer(OpKind::Where, &[bool_x, x.clone(), f32s("1")], &Attrs::new());
    assert_eq!(selected, x);
    // two symbols are not the same size, though they are at the cost point
    let err = refused(
        OpKind::Add,
        &[f32s("s[1..512]{128}"), f32s("t[1..512]{128}")],
        &Attrs::new(),
    );
    assert_eq!(
        err,
        "[s[1..512]{128}] and [t[1..512]{128}] do not broadcast: s[1..512]{128} and t[1..512]{128} are not the same size, and neither is 1"
    );
}

#[test]
fn products_take_rows_and_columns_and_prove_the_depths_equal() {
    let x = f32s(&format!("{BS}, 64"));
    assert_eq!(
        shown(&infer(OpKind::MatMul, &[x.clone(), f32s("64, 32")], &Attrs::new())),
        "tensor<(b)x(s)x32xf32>"
    );
    let q = f32s("b[1..8]{1}, 4, s[1..512]{128}, 16");
    let kt = f32s("b[1..8]{1}, 4, 16, s[1..512]{128}");
    assert_eq!(
        shown(&infer(OpKind::MatMul, &[q, kt], &Attrs::new())),
        "tensor<(b)x4x(s)x(s)xf32>"
    );
    // a vector on either side
    assert_eq!(
        shown(&infer(OpKind::MatMul, &[x.clone(), f32s("64")], &Attrs::new())),
        "tensor<(b)x(s)xf32>"
    );
    assert_eq!(
        shown(&infer(
            OpKind::MatMul,
            &[f32s("s[1..512]{128}"), f32s("s[1..512]{128}, 8")],
            &Attrs::new()
        )),
        "tensor<8xf32>"
    );
    let err = refused(
        OpKind::MatMul,
        &[f32s("4, s[1..512]{128}"), f32s("t[1..512]{128}, 4")],
        &Attrs::new(),
    );
    assert!(
        err.contains("columns and t[1..512]{128} rows are not the same size"),
        "{err}"
    );
    let gemm = attrs(&[
        ("alpha", Attr::Float(1.0)),
        ("beta", Attr::Float(1.0)),
        ("trans_a", Attr::Int(0)),
        ("trans_b", Attr::Int(1)),
    ]);
    let rows = f32s("n[1..64]{4}, 256");
    let y = infer(OpKind::Gemm, &[rows, f32s("10, 256"), f32s("10")], &gemm);
    assert_eq!(shown(&y), "tensor<(n)x10xf32>");
    let err = refused(OpKind::Gemm, &[f32s("4, n[1..64]{4}"), f32s("10, 256")], &gemm);
    assert!(err.contains("inner dimensions"), "{err}");
}

#[test]
fn reductions_and_normalisations_keep_or_drop_their_axes() {
    let x = f32s(&format!("{BS}, 64"));
    let mean = |keep: i64| attrs(&[("axes", ints(&[1])), ("keepdims", Attr::Int(keep))]);
    assert_eq!(
        shown(&infer(OpKind::ReduceMean, std::slice::from_ref(&x), &mean(0))),
        "tensor<(b)x64xf32>"
    );
    assert_eq!(
        shown(&infer(OpKind::ReduceSum, std::slice::from_ref(&x), &mean(1))),
        "tensor<(b)x1x64xf32>"
    );
    assert_eq!(
        infer(
            OpKind::Softmax,
            std::slice::from_ref(&x),
            &attrs(&[("axis", Attr::Int(1))])
        ),
        x
    );
    let norm = attrs(&[("axis", Attr::Int(2)), ("epsilon", Attr::Float(1e-5))]);
    let results = mx::infer(OpKind::LayerNorm, &[x.clone(), f32s("64"), f32s("64")], &norm).unwrap();
    agrees_across_range(OpKind::LayerNorm, &[x.clone(), f32s("64"), f32s("64")], &norm, &results);
    let shapes: Vec<String> = results.iter().map(shown).collect();
    assert_eq!(
        shapes,
        [
            "tensor<(b)x(s)x64xf32>",
            "tensor<(b)x(s)x1xf32>",
            "tensor<(b)x(s)x1xf32>"
        ]
    );
    // normalised over the sequence, a per-position scale must be the sequence's size
    let over_s = attrs(&[("axis", Attr::Int(1)), ("epsilon", Attr::Float(1e-5))]);
    let err = refused(OpKind::LayerNorm, &[x, f32s("128, 64")], &over_s);
    assert!(
        err.contains("does not broadcast") || err.contains("not the same size"),
        "{err}"
    );
}

#[test]
fn data_movement_follows_its_symbolic_sizes() {
    let x = f32s(&format!("{BS}, 64"));
    let heads = attrs(&[("shape", Attr::Sizes(dims(&format!("{BS}, 4, 16"))))]);
    let split = infer(OpKind::Reshape, std::slice::from_ref(&x), &heads);
    assert_eq!(shown(&split), "tensor<(b)x(s)x4x16xf32>");
    let rows = attrs(&[("shape", Attr::Sizes(dims("b[1..8]{1} * s[1..512]{128}, 64")))]);
    assert_eq!(
        shown(&infer(OpKind::Reshape, std::slice::from_ref(&x), &rows)),
        "tensor<(b * s)x64xf32>"
    );
    let wrong = attrs(&[("shape", Attr::Sizes(dims(&format!("{BS}, 4, 15"))))]);
    let err = refused(OpKind::Reshape, std::slice::from_ref(&x), &wrong);
    assert!(
        err.starts_with("cannot reshape") || err.contains("not the same size"),
        "{err}"
    );
    let perm = attrs(&[("perm", ints(&[0, 2, 1, 3]))]);
    assert_eq!(
        shown(&infer(OpKind::Transpose, &[split], &perm)),
        "tensor<(b)x4x(s)x16xf32>"
    );
    // a class token in front of the sequence, and the token taken back out
    let axis1 = attrs(&[("axis", Attr::Int(1))]);
    let joined = infer(OpKind::Concat, &[f32s("b[1..8]{1}, 1, 64"), x.clone()], &axis1);
    assert_eq!(shown(&joined), "tensor<(b)x(s + 1)x64xf32>");
    // t and s are both 128 at the cost point, but not one size
    let axis2 = attrs(&[("axis", Attr::Int(2))]);
    let err = refused(
        OpKind::Concat,
        &[f32s("b[1..8]{1}, t[1..512]{128}, 32"), x.clone()],
        &axis2,
    );
    assert!(err.contains("differ other than along axis 2"), "{err}");
    let first = attrs(&[
        ("starts", ints(&[0, 0, 0])),
        ("ends", ints(&[1, 1, 64])),
        ("steps", ints(&[1, 1, 1])),
    ]);
    // b's least size is 1, so the slice along it reads the same element at every size
    assert_eq!(
        shown(&infer(OpKind::Slice, std::slice::from_ref(&x), &first)),
        "tensor<1x1x64xf32>"
    );
    let past = attrs(&[
        ("starts", ints(&[0, 0, 0])),
        ("ends", ints(&[1, 8, 64])),
        ("steps", ints(&[1, 1, 1])),
    ]);
    let err = refused(OpKind::Slice, std::slice::from_ref(&x), &past);
    assert!(err.contains("reads past its least size 1"), "{err}");
    let ids = TensorType::of_dims(DType::I64, dims(BS));
    let embedded = infer(
        OpKind::Gather,
        &[f32s("30522, 64"), ids],
        &attrs(&[("axis", Attr::Int(0))]),
    );
    assert_eq!(shown(&embedded), "tensor<(b)x(s)x64xf32>");
    let expand = attrs(&[("shape", Attr::Sizes(dims(&format!("{BS}, 64"))))]);
    assert_eq!(infer(OpKind::Expand, &[f32s("1, 1, 64")], &expand), x);
}

#[test]
fn windows_slide_over_symbolic_heights_and_widths() {
    let image = f32s("n[1..4]{1}, 3, h[32..640]{320}, w[32..640]{320}");
    let conv = attrs(&[
        ("dilations", ints(&[1, 1])),
        ("group", Attr::Int(1)),
        ("pads", ints(&[1, 1, 1, 1])),
        ("strides", ints(&[2, 2])),
    ]);
    let y = infer(OpKind::Conv, &[image.clone(), f32s("16, 3, 3, 3"), f32s("16")], &conv);
    assert_eq!(shown(&y), "tensor<(n)x16x((h + 1) / 2)x((w + 1) / 2)xf32>");
    let pool = attrs(&[
        ("ceil_mode", Attr::Int(1)),
        ("dilations", ints(&[1, 1])),
        ("kernel", ints(&[3, 3])),
        ("pads", ints(&[0, 0, 0, 0])),
        ("strides", ints(&[2, 2])),
    ]);
    let pooled = infer(OpKind::MaxPool, std::slice::from_ref(&y), &pool);
    assert!(shown(&pooled).starts_with("tensor<(n)x16x("), "{pooled}");
    let global = infer(OpKind::GlobalAveragePool, &[y], &Attrs::new());
    assert_eq!(shown(&global), "tensor<(n)x16x1x1xf32>");
    let nhwc = f32s("n[1..4]{1}, h[32..640]{320}, w[32..640]{320}, 3");
    let y = infer(OpKind::ConvNhwc, &[nhwc, f32s("16, 3, 3, 3")], &conv);
    assert_eq!(shown(&y), "tensor<(n)x((h + 1) / 2)x((w + 1) / 2)x16xf32>");
    let up = attrs(&[
        ("dilations", ints(&[1, 1])),
        ("group", Attr::Int(1)),
        ("output_padding", ints(&[1, 1])),
        ("pads", ints(&[1, 1, 1, 1])),
        ("strides", ints(&[2, 2])),
    ]);
    let grown = infer(OpKind::ConvTranspose, &[image.clone(), f32s("3, 8, 3, 3")], &up);
    assert_eq!(shown(&grown), "tensor<(n)x8x(h * 2)x(w * 2)xf32>");
    // a window larger than the least height does not fit every image
    let wide = attrs(&[
        ("dilations", ints(&[1, 1])),
        ("group", Attr::Int(1)),
        ("pads", ints(&[0, 0, 0, 0])),
        ("strides", ints(&[1, 1])),
    ]);
    let small = f32s("n[1..4]{1}, 3, h[1..640]{320}, 8");
    let err = refused(OpKind::Conv, &[small, f32s("4, 3, 5, 5")], &wide);
    assert!(err.contains("window spanning 5 must be at least 5"), "{err}");
    let channels = f32s("n[1..4]{1}, c[1..8]{3}, 8, 8");
    let err = refused(OpKind::Conv, &[channels, f32s("4, 3, 3, 3")], &wide);
    assert!(err.contains("input channels must be a fixed size"), "{err}");
}

#[test]
fn attention_proves_its_operands_share_batch_heads_and_keys() {
    let q = f32s("b[1..8]{1}, s[1..512]{128}, 4, 16");
    let a = attrs(&[
        ("layout", Attr::Str("bshd".into())),
        ("scale", Attr::Float(0.25)),
        ("zero_nan_rows", Attr::Int(0)),
    ]);
    let mask = f32s("b[1..8]{1}, 1, 1, s[1..512]{128}");
    let y = infer(OpKind::Attention, &[q.clone(), q.clone(), q.clone(), mask], &a);
    assert_eq!(y, q);
    let other_keys = f32s("b[1..8]{1}, t[1..512]{128}, 4, 16");
    let y = infer(
        OpKind::Attention,
        &[q.clone(), other_keys.clone(), other_keys.clone()],
        &a,
    );
    assert_eq!(y, q);
    let err = refused(OpKind::Attention, &[q.clone(), q.clone(), other_keys], &a);
    assert!(err.contains("the keys of v and k"), "{err}");
}

#[test]
fn ops_without_a_symbolic_rule_are_refused_by_name() {
    let filters = f32s("m[1..8], 3, 3, 4");
    let err = refused(OpKind::WinogradWeights, &[filters], &Attrs::new());
    assert_eq!(
        err,
        "mx.winograd_weights does not take symbolic dimensions: weights are laid out at fixed sizes"
    );
}

#[test]
fn winograd_transforms_count_their_tiles_over_symbolic_images() {
    let image = f32s("n[1..4]{1}, h[8..64]{32}, w[8..64]{32}, 8");
    let patches = infer(
        OpKind::WinogradInput,
        &[image],
        &attrs(&[("pads", ints(&[1, 1, 1, 1]))]),
    );
    // a 4x4 output tile per 6x6 patch: ceil(h / 4) tiles down, ceil(w / 4) across
    assert_eq!(shown(&patches), "tensor<36x(n * ((h + 3) / 4) * ((w + 3) / 4))x8xf32>");
    let shape = Attr::Sizes(dims("n[1..4]{1}, h[8..64]{32}, w[8..64]{32}, 16"));
    let products = f32s("36, n[1..4]{1} * ((h[8..64]{32} + 3) / 4) * ((w[8..64]{32} + 3) / 4), 16");
    let out = infer(OpKind::WinogradOutput, &[products], &attrs(&[("shape", shape)]));
    assert_eq!(shown(&out), "tensor<(n)x(h)x(w)x16xf32>");
    // products of other tiles than the output's are refused
    let shape = Attr::Sizes(dims("n[1..4]{1}, h[8..64]{32}, w[8..64]{32}, 16"));
    let wrong = f32s("36, n[1..4]{1} * ((h[8..64]{32} + 3) / 4), 16");
    let err = refused(OpKind::WinogradOutput, &[wrong], &attrs(&[("shape", shape)]));
    assert!(err.contains("for an output of shape [1, 32, 32, 16]"), "{err}");
}

#[test]
fn a_symbolic_type_holds_its_sizes_at_the_cost_point_and_is_measured_at_its_largest() {
    let t = f32s("b[1..8], s[1..512]{128}, 64");
    // b has no optimal size: the middle of its range
    assert_eq!(t.shape, [4, 128, 64]);
    assert_eq!(t.largest_shape(), [8, 512, 64]);
    assert_eq!(t.checked_num_bytes(), Some(8 * 512 * 64 * 4));
    assert_eq!(
        (t.fixed_shape(), t.fixed_dim(2), t.fixed_dim(1)),
        (None, Some(64), None)
    );
    // constants only: a fixed type
    assert_eq!(f32s("2, 3"), TensorType::new(DType::F32, vec![2, 3]));
}
