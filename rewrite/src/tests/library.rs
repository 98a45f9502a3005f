//! Library calls as extraction sees them: offered for the products a library computes, chosen
//! where the gpu cost model prices them below the generated kernel, and explained.

use super::f32s;
use crate::explain::explain;
use crate::{optimize, LinearCost, OptimizeOptions};
use mxc_dialects::mx::call::Callee;
use mxc_dialects::{Attr, Attrs, Graph, OpKind};
use std::sync::Arc;

fn gpu() -> OptimizeOptions {
    OptimizeOptions {
        fuse: true,
        library_calls: true,
        cost_model: Arc::new(LinearCost::gpu()),
        ..OptimizeOptions::default()
    }
}

/// `activation(x · w + b)` for x of `m x k` and w of `k x n`.
fn dense(m: usize, k: usize, n: usize, activation: OpKind, attrs: Attrs) -> Graph {
    let mut g = Graph::new("g");
    let x = g.add_input("x", f32s(&[m, k]));
    let w = g.add_input("w", f32s(&[k, n]));
    let b = g.add_input("b", f32s(&[n]));
    let y = g.build1(OpKind::MatMul, vec![x, w], Attrs::new()).unwrap();
    let y = g.build1(OpKind::Add, vec![y, b], Attrs::new()).unwrap();
    let y = g.build1(activation, vec![y], attrs).unwrap();
    g.add_output("y", y);
    g
}

/// The kernels of `g`: each op's name, a call's callee and its body's ops.
fn kernels(g: &Graph) -> Vec<String> {
    g.ops
        .iter()
        .map(|op| match &op.body {
            Some(body) => {
                let ops: Vec<&str> = body.ops.iter().map(|o| o.kind.name()).collect();
                let callee = op.attrs.str("callee").map(|c| format!(" {c}")).unwrap_or_default();
                format!("{}{callee}({})", op.kind.name(), ops.join(", "))
            }
            None => op.kind.name().to_string(),
        })
        .collect()
}

#[test]
fn a_large_product_with_its_epilogue_becomes_one_library_call() {
    let g = dense(256, 512, 512, OpKind::Relu, Attrs::new());
    let out = optimize(&g, &[], &gpu()).unwrap().graph;
    assert_eq!(kernels(&out), ["call blaslt.matmul(matmul, add, relu)"]);
    // without library calls (or on a target whose cost model has none) it is generated
    let generated = optimize(
        &g,
        &[],
        &OptimizeOptions {
            library_calls: false,
            ..gpu()
        },
    )
    .unwrap()
    .graph;
    assert_eq!(kernels(&generated), ["fused(matmul, add, relu)"]);
    let cpu = OptimizeOptions {
        cost_model: Arc::new(LinearCost::cpu()),
        ..gpu()
    };
    assert_eq!(
        kernels(&optimize(&g, &[], &cpu).unwrap().graph),
        ["fused(matmul, add, relu)"]
    );
}

#[test]
fn an_epilogue_the_library_lacks_runs_after_the_call_and_small_products_stay_generated() {
    // GELU is no library epilogue: the call adds the bias, a kernel applies GELU
    let exact = Attrs::new().with("approximate", Attr::Str("none".into()));
    let g = dense(256, 512, 512, OpKind::Gelu, exact.clone());
    let out = optimize(&g, &[], &gpu()).unwrap().graph;
    assert_eq!(kernels(&out), ["call blaslt.matmul(matmul, add)", "gelu"]);
    // a small product costs less than the call itself: one generated kernel
    let g = dense(4, 8, 8, OpKind::Gelu, exact);
    let out = optimize(&g, &[], &gpu()).unwrap().graph;
    assert_eq!(kernels(&out), ["fused(matmul, add, gelu)"]);
}

#[test]
fn explain_shows_the_call_and_the_generated_kernel_it_beat_and_the_reverse() {
    let g = dense(256, 512, 512, OpKind::Relu, Attrs::new());
    let e = explain(&g, &[], &gpu()).unwrap();
    let [note] = &e.kernels[..] else {
        panic!("{:?}", e.kernels)
    };
    let library = note.library.as_ref().expect("a library note");
    assert_eq!((library.callee, library.called), (Callee::BlasLtMatmul, true));
    assert_eq!(library.generated.0, "fused(matmul, add, relu)");
    assert!(library.call_cost < library.generated.1, "{library:?}");
    assert!(
        note.value.rules.iter().any(|r| r == crate::library::LIBRARY),
        "{:?}",
        note.value
    );
    let g = dense(4, 8, 8, OpKind::Relu, Attrs::new());
    let e = explain(&g, &[], &gpu()).unwrap();
    let library = e.kernels[0].library.as_ref().expect("a library note");
    assert!(
        !library.called && library.call_cost > library.generated.1,
        "{library:?}"
    );
}
