//! The built-in `fold` rules with the real analysis: a batch normalisation with constant
//! parameters after a convolution or a gemm with constant weights becomes one op whose folded
//! weights and bias are the ones computed here by hand, and nothing happens when a parameter
//! is not a constant. (Neither `conv` nor `gemm` has an evaluator, so the integration tests
//! compare the programs' outputs through the `ref` target.)

use super::*;
use mxc_dialects::text::print;

const EPS: f64 = 1e-5;

/// `n` distinct values in `[lo, lo + 1)`.
fn values(n: usize, lo: f32) -> Vec<f32> {
    (0..n).map(|i| lo + ((i * 7) % 11) as f32 / 11.0).collect()
}

fn constant(g: &mut Graph, shape: &[usize], lo: f32) -> ValueId {
    let n = shape.iter().product();
    g.constant(Tensor::from_f32s(shape.to_vec(), &values(n, lo)))
}

/// Per-channel parameters `scale, bias, mean, var` of `c` channels (var > 0).
struct Bn {
    params: [Vec<f32>; 4],
}

impl Bn {
    fn new(c: usize) -> Bn {
        Bn {
            params: [values(c, 0.5), values(c, -0.5), values(c, -0.25), values(c, 0.1)],
        }
    }

    fn k(&self, i: usize) -> f64 {
        let [scale, _, _, var] = &self.params;
        scale[i] as f64 / (var[i] as f64 + EPS).sqrt()
    }

    /// `batch_norm(y)` with these parameters, as constants of `g`.
    fn apply(&self, g: &mut Graph, y: ValueId) -> ValueId {
        let c = self.params[0].len();
        let mut operands = vec![y];
        operands.extend(self.params.iter().map(|p| g.constant(Tensor::from_f32s(vec![c], p))));
        let attrs = Attrs::new().with("epsilon", Attr::Float(EPS));
        op(g, OpKind::BatchNorm, &operands, attrs)
    }
}

fn conv_attrs(group: i64) -> Attrs {
    Attrs::new()
        .with("dilations", Attr::Ints(vec![1, 1]))
        .with("group", Attr::Int(group))
        .with("pads", Attr::Ints(vec![0, 0, 0, 0]))
        .with("strides", Attr::Ints(vec![1, 1]))
}

fn fold(g: &Graph) -> Graph {
    with_builtin(g, "fold")
}

/// Asserts `actual[i]` is `expected(i)` up to f32 rounding.
fn assert_close(actual: &Tensor, expected: impl Fn(usize) -> f64, what: &str) {
    for i in 0..actual.len() {
        let (a, e) = (actual.get_f64(i), expected(i));
        assert!(
            (a - e).abs() <= 1e-6 * (1.0 + e.abs()),
            "{what}[{i}]: {a} instead of {e}"
        );
    }
}

#[test]
fn conv_then_batch_norm_becomes_one_conv_with_folded_weights() {
    let (m, c, k) = (4, 2, 2);
    let mut g = Graph::new("conv_bn");
    let x = g.add_input("x", f32s(&[1, c, 3, 3]));
    let w = constant(&mut g, &[m, c, k, k], -0.5);
    let b = constant(&mut g, &[m], 0.25);
    let y = op(&mut g, OpKind::Conv, &[x, w, b], conv_attrs(1));
    let bn = Bn::new(m);
    let z = bn.apply(&mut g, y);
    g.add_output("z", z);

    let out = fold(&g);
    assert_eq!(kinds(&out), [OpKind::Conv], "{}", print(&out));
    let conv = out.ops.iter().find(|o| o.kind == OpKind::Conv).unwrap();
    assert_eq!(conv.operands[0], out.inputs[0].value);
    assert_eq!(conv.attrs, conv_attrs(1));
    let (w0, b0) = (g.constant_value(w).unwrap(), g.constant_value(b).unwrap());
    let per_out = c * k * k;
    assert_close(
        out.constant_value(conv.operands[1]).unwrap(),
        |i| w0.get_f64(i) * bn.k(i / per_out),
        "w",
    );
    let [_, bias, mean, _] = &bn.params;
    assert_close(
        out.constant_value(conv.operands[2]).unwrap(),
        |i| (b0.get_f64(i) - mean[i] as f64) * bn.k(i) + bias[i] as f64,
        "b",
    );
}

#[test]
fn a_depthwise_conv_without_bias_gets_one() {
    let c = 3;
    let mut g = Graph::new("dw_bn");
    let x = g.add_input("x", f32s(&[2, c, 4, 4]));
    let w = constant(&mut g, &[c, 1, 3, 3], 0.0);
    let y = op(&mut g, OpKind::Conv, &[x, w], conv_attrs(c as i64));
    let bn = Bn::new(c);
    let z = bn.apply(&mut g, y);
    g.add_output("z", z);

    let out = fold(&g);
    assert_eq!(kinds(&out), [OpKind::Conv], "{}", print(&out));
    let conv = out.ops.iter().find(|o| o.kind == OpKind::Conv).unwrap();
    assert_eq!(conv.operands.len(), 3, "the folded conv has a bias");
    let w0 = g.constant_value(w).unwrap();
    assert_close(
        out.constant_value(conv.operands[1]).unwrap(),
        |i| w0.get_f64(i) * bn.k(i / 9),
        "w",
    );
    let [_, bias, mean, _] = &bn.params;
    assert_close(
        out.constant_value(conv.operands[2]).unwrap(),
        |i| bias[i] as f64 - mean[i] as f64 * bn.k(i),
        "b",
    );
}

#[test]
fn gemm_then_batch_norm_becomes_one_gemm() {
    // alpha * a b^T + beta * c, b of shape [M, K] (trans_b = 1): row m of b is scaled by k[m].
    let (n, kk, m) = (2, 3, 4);
    let mut g = Graph::new("gemm_bn");
    let a = g.add_input("a", f32s(&[n, kk]));
    let b = constant(&mut g, &[m, kk], -0.5);
    let c = constant(&mut g, &[m], 0.5);
    let attrs = Attrs::new()
        .with("alpha", Attr::Float(0.5))
        .with("beta", Attr::Float(2.0))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(1));
    let y = op(&mut g, OpKind::Gemm, &[a, b, c], attrs.clone());
    let bn = Bn::new(m);
    let z = bn.apply(&mut g, y);
    g.add_output("z", z);

    let out = fold(&g);
    assert_eq!(kinds(&out), [OpKind::Gemm], "{}", print(&out));
    let gemm = out.ops.iter().find(|o| o.kind == OpKind::Gemm).unwrap();
    assert_eq!(gemm.attrs, attrs.with("beta", Attr::Float(1.0)));
    let (b0, c0) = (g.constant_value(b).unwrap(), g.constant_value(c).unwrap());
    assert_close(
        out.constant_value(gemm.operands[1]).unwrap(),
        |i| b0.get_f64(i) * bn.k(i / kk),
        "b",
    );
    let [_, bias, mean, _] = &bn.params;
    assert_close(
        out.constant_value(gemm.operands[2]).unwrap(),
        |i| (2.0 * c0.get_f64(i) - mean[i] as f64) * bn.k(i) + bias[i] as f64,
        "c",
    );
}

#[test]
fn gemm_without_bias_scales_the_columns_of_b() {
    let (n, kk, m) = (2, 3, 4);
    let mut g = Graph::new("gemm_bn");
    let a = g.add_input("a", f32s(&[n, kk]));
    let b = constant(&mut g, &[kk, m], -0.5);
    let attrs = Attrs::new()
        .with("alpha", Attr::Float(1.0))
        .with("beta", Attr::Float(1.0))
        .with("trans_a", Attr::Int(0))
        .with("trans_b", Attr::Int(0));
    let y = op(&mut g, OpKind::Gemm, &[a, b], attrs);
    let bn = Bn::new(m);
    let z = bn.apply(&mut g, y);
    g.add_output("z", z);

    let out = fold(&g);
    assert_eq!(kinds(&out), [OpKind::Gemm], "{}", print(&out));
    let gemm = out.ops.iter().find(|o| o.kind == OpKind::Gemm).unwrap();
    let b0 = g.constant_value(b).unwrap();
    assert_close(
        out.constant_value(gemm.operands[1]).unwrap(),
        |i| b0.get_f64(i) * bn.k(i % m),
        "b",
    );
    assert_eq!(out.constant_value(gemm.operands[2]).unwrap().shape(), &[m]);
}

#[test]
fn nothing_is_folded_when_a_parameter_is_not_constant() {
    let mut g = Graph::new("conv_bn_input_scale");
    let x = g.add_input("x", f32s(&[1, 2, 3, 3]));
    let scale = g.add_input("scale", f32s(&[4]));
    let w = constant(&mut g, &[4, 2, 2, 2], -0.5);
    let y = op(&mut g, OpKind::Conv, &[x, w], conv_attrs(1));
    let rest: Vec<ValueId> = (0..3).map(|i| constant(&mut g, &[4], 0.1 + i as f32)).collect();
    let z = op(
        &mut g,
        OpKind::BatchNorm,
        &[y, scale, rest[0], rest[1], rest[2]],
        Attrs::new().with("epsilon", Attr::Float(EPS)),
    );
    g.add_output("z", z);
    assert_eq!(print(&fold(&g)), print(&g));
}
