//! The built-in `fusion` rules with the real analysis and extraction: a layer normalisation
//! written out as exporters write it becomes one `layer_norm` whose first result replaces the
//! chain, and a chain that is not one (a reduction over another axis, an `eps` that is not a
//! constant) is left alone. (`layer_norm` has no evaluator; `mxc rules check` and the model
//! tests compare the outputs through the `ref` target.)

use super::*;
use mxc_dialects::text::print;

/// `x - mean(x)` ... `* scale + bias` over `axis` of `x` (`[2, 4, 8]`), with `eps` a given value.
fn chain(g: &mut Graph, x: ValueId, axis: i64, eps: ValueId) -> ValueId {
    let reduce = || {
        Attrs::new()
            .with("axes", Attr::Ints(vec![axis]))
            .with("keepdims", Attr::Int(1))
    };
    let mean = op(g, OpKind::ReduceMean, &[x], reduce());
    let d = op(g, OpKind::Sub, &[x, mean], Attrs::new());
    let two = g.constant(Tensor::from_f32s(vec![], &[2.0]));
    let sq = op(g, OpKind::Pow, &[d, two], Attrs::new());
    let var = op(g, OpKind::ReduceMean, &[sq], reduce());
    let var_eps = op(g, OpKind::Add, &[var, eps], Attrs::new());
    let std = op(g, OpKind::Sqrt, &[var_eps], Attrs::new());
    let n = op(g, OpKind::Div, &[d, std], Attrs::new());
    let scale = g.constant(Tensor::from_f32s(vec![8], &[0.5; 8]));
    let bias = g.constant(Tensor::from_f32s(vec![8], &[0.25; 8]));
    let y = op(g, OpKind::Mul, &[n, scale], Attrs::new());
    op(g, OpKind::Add, &[y, bias], Attrs::new())
}

fn fuse(g: &Graph) -> Graph {
    with_builtin(g, "fusion")
}

#[test]
fn a_layer_norm_written_out_becomes_one_op() {
    let mut g = Graph::new("ln");
    let x = g.add_input("x", f32s(&[2, 4, 8]));
    let eps = g.constant(Tensor::from_f32s(vec![], &[1e-12]));
    let y = chain(&mut g, x, 2, eps);
    g.add_output("y", y);

    let out = fuse(&g);
    assert_eq!(kinds(&out), [OpKind::LayerNorm], "{}", print(&out));
    let ln = out.ops.iter().find(|o| o.kind == OpKind::LayerNorm).unwrap();
    assert_eq!(ln.operands[0], out.inputs[0].value);
    assert_eq!(ln.attrs.int("axis").unwrap(), 2);
    assert_eq!(ln.attrs.float("epsilon").unwrap(), 1e-12f32 as f64);
    assert_eq!(out.outputs[0].value, ln.results[0]);
    assert_eq!(out.ty(ln.results[0]), &f32s(&[2, 4, 8]));
}

#[test]
fn chains_that_are_not_a_layer_norm_stay() {
    // over the middle axis
    let mut g = Graph::new("middle");
    let x = g.add_input("x", f32s(&[2, 8, 8]));
    let eps = g.constant(Tensor::from_f32s(vec![], &[1e-5]));
    let y = chain(&mut g, x, 1, eps);
    g.add_output("y", y);
    assert!(!kinds(&fuse(&g)).contains(&OpKind::LayerNorm));

    // eps is an input, not a constant
    let mut g = Graph::new("input_eps");
    let x = g.add_input("x", f32s(&[2, 4, 8]));
    let eps = g.add_input("eps", f32s(&[]));
    let y = chain(&mut g, x, 2, eps);
    g.add_output("y", y);
    assert!(!kinds(&fuse(&g)).contains(&OpKind::LayerNorm));
}
