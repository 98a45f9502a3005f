//! `mxc explain`: the cpu target's decisions on the repo's conv net and on a user rule file,
//! a value a model computes twice, the dot graph's clusters, the ref target, a gpu library
//! call, and a model that is not there.

use crate::common::{cache_dir, mxc, repo, stderr};
use std::path::Path;

fn explain(model: &Path, extra: &[&str]) -> String {
    let mut args = vec!["explain", model.to_str().unwrap()];
    args.extend(extra);
    let out = mxc(&args);
    assert!(out.status.success(), "mxc {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The kernel entries (blocks of lines after the header), in order.
fn kernels(text: &str) -> Vec<&str> {
    text.split("\n\n").skip(1).collect()
}

/// Each line with runs of spaces squeezed to one.
fn squeezed(text: &str) -> String {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn convnet_convs_come_from_folded_batch_norms_and_fuse_with_their_epilogues() {
    let model = cache_dir("models/convnet").join("model.onnx");
    let text = explain(&model, &["--target", "cpu"]);
    let n = kernels(&text).len();
    assert!(text.contains(&format!("  kernels   74 -> {n}\n")), "{text}");
    assert!(text.contains("  removed   21 batch_norm"), "{text}");
    // every conv, in a fused kernel or alone, channels first or last: 21, and none is a batch
    // norm any more
    let flat = squeezed(&text);
    assert!(
        !flat.contains("= mx.batch_norm") && !flat.contains("= batch_norm"),
        "{text}"
    );
    // every conv runs channels last, on packed weights or as Winograd's (3x3 ones the cost
    // model finds cheaper that way), each named with the algorithm it rejected
    let algorithms: Vec<&str> = flat.lines().filter(|l| l.starts_with("algorithm ")).collect();
    let convs = |name: &str| algorithms.iter().filter(|l| l.starts_with(name)).count();
    let (winograd, gemm) = (convs("algorithm Winograd"), convs("algorithm implicit GEMM"));
    assert_eq!((winograd + gemm, winograd > 0, gemm > 0), (21, true, true), "{text}");
    assert!(
        flat.contains("rejected implicit GEMM on packed weights: conv_nhwc_packed(")
            && flat.contains("rejected direct loops: conv_nhwc("),
        "{text}"
    );
    // a batch norm folded into each
    for k in kernels(&text).into_iter().map(squeezed) {
        if k.contains("algorithm Winograd") || k.contains("algorithm implicit GEMM") {
            assert!(k.contains("batch-norm"), "{k}");
        }
    }
    // a residual block's second conv takes the add and the relu after it into its kernel, and
    // the relu as a kernel of its own is what extraction rejected
    let block = kernels(&text)
        .into_iter()
        .map(squeezed)
        .find(|k| k.contains("= add ") && k.contains("= relu ") && k.contains("= conv"))
        .expect("a conv + add + relu kernel");
    assert!(block.contains("rejected relu(fused(conv"), "{block}");
    assert_eq!(
        text,
        explain(&model, &[]),
        "the output is deterministic and cpu is the default"
    );
}

#[test]
fn without_fusion_each_op_is_a_kernel_and_the_conv_comes_from_the_batch_norm() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let text = squeezed(&explain(&model, &["--no-fusion"]));
    // channels last: a transpose in, and one out after the global pool (a mean over H and W)
    assert!(text.contains("kernels 6 -> 8\n"), "{text}");
    assert!(!text.contains("mx.fused"), "{text}");
    assert!(text.contains("= mx.conv_nhwc_packed "), "{text}");
}

#[test]
fn user_rule_is_named_for_the_relu_it_moved_into_the_pools_kernel() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let rules = repo().join("examples/rules/pool-before-relu.rules");
    let text = squeezed(&explain(&model, &["--rules", rules.to_str().unwrap()]));
    // the pool (channels last) now runs before the relu, in one kernel
    let fused = kernels(&text).into_iter().find(|k| k.contains("= mx.fused ")).unwrap();
    assert!(
        fused.contains("fuses %0 = max_pool_nhwc ") && fused.contains("%1 = relu "),
        "{fused}"
    );
    assert!(
        fused.contains("rejected relu(max_pool_nhwc: tensor<1x4x4x4xf32>): cost "),
        "{fused}"
    );
    // the user's rule is among those that made it
    assert!(
        text.contains("rewritten 1 fused created by pool-before-relu, "),
        "{text}"
    );

    let plain = squeezed(&explain(&model, &[]));
    let fused = kernels(&plain).into_iter().find(|k| k.contains("= mx.fused ")).unwrap();
    assert!(
        fused.contains("fuses %0 = conv_nhwc_packed ") && fused.contains("%1 = relu "),
        "{fused}"
    );
    assert!(!plain.contains("pool-before-relu"), "{plain}");
    assert!(plain.contains("kernels 6 -> 7\n"), "{plain}");
}

#[test]
fn dot_has_one_cluster_per_kernel_with_a_box_per_fused_op() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("tiny.dot");
    let text = explain(&model, &["--dot", dot.to_str().unwrap()]);
    let graph = std::fs::read_to_string(&dot).unwrap();
    assert!(graph.starts_with("digraph"), "{graph}");
    assert_eq!(graph.matches("subgraph cluster_").count(), kernels(&text).len());
    assert_eq!(graph.matches("subgraph cluster_").count(), 7);
    // the conv + relu kernel (op 3): two boxes, an edge between them, the transposed image
    // read by the conv
    assert!(
        graph.contains("op3_0 [label=\"conv_nhwc_packed\"]") && graph.contains("op3_1 [label=\"relu\"]"),
        "{graph}"
    );
    assert!(graph.contains("op3_0 -> op3_1;"), "{graph}");
    assert!(graph.contains("op0 -> op3_0 [label="), "{graph}");
    assert!(graph.contains("op3_1 -> op4 [label="), "{graph}");
}

#[test]
fn ref_lists_kernels_and_says_it_rewrites_nothing() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let text = explain(&model, &["--target", "ref"]);
    assert!(text.contains("ref rewrites nothing"), "{text}");
    assert_eq!(kernels(&text).len(), 6);
    assert!(kernels(&text).iter().all(|k| k.contains("  cost      ")), "{text}");
}

#[test]
fn missing_model_is_a_one_line_error() {
    let out = mxc(&["explain", "no/such/model.onnx"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("no/such/model.onnx"),
        "{err}"
    );
}

#[test]
fn a_value_computed_twice_is_one_kernel_that_replaces_the_other_op() {
    use crate::common::{float_value, model_bytes, node};
    let dir = tempfile::tempdir().unwrap();
    let graph = mxc_onnx::proto::GraphProto {
        name: Some("twice".into()),
        node: vec![
            node("Exp", &["x"], "a", vec![]),
            node("Exp", &["x"], "b", vec![]),
            node("Add", &["a", "b"], "y", vec![]),
        ],
        input: vec![float_value("x", &["4", "8"])],
        output: vec![float_value("y", &["4", "8"])],
        ..Default::default()
    };
    let model = dir.path().join("twice.onnx");
    std::fs::write(&model, model_bytes(graph)).unwrap();
    let text = squeezed(&explain(&model, &["--no-fusion"]));
    assert!(
        text.contains("replaces exp, as the same op on the same operands"),
        "{text}"
    );
    assert!(
        text.contains("rewritten 1 exp -> exp as the same op on the same operands"),
        "{text}"
    );
    assert!(!text.contains(" by \n") && !text.ends_with(" by"), "{text}");
}

#[test]
fn a_large_product_on_the_gpu_is_a_library_call_explained_against_the_generated_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let model = crate::common::dense_model(dir.path());
    let text = squeezed(&explain(&model, &["--target", "gpu"]));
    let [kernel] = kernels(&text)[..] else { panic!("{text}") };
    assert!(kernel.contains("= mx.call %arg0"), "{kernel}");
    assert!(kernel.contains("computes %0 = matmul"), "{kernel}");
    assert!(kernel.contains("from relu, by fusion, library call"), "{kernel}");
    let call = "library call blaslt.matmul (hipBLASLt on AMD GPUs, cuBLASLt on NVIDIA GPUs), cost ";
    assert!(kernel.contains(call), "{kernel}");
    assert!(
        kernel.contains("rejected generated fused(matmul, add, relu): cost "),
        "{kernel}"
    );
    // the call is cheaper than the generated kernel, by the costs printed
    let cost_after = |label: &str| -> f64 {
        let at = kernel.find(label).unwrap() + label.len();
        kernel[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(cost_after(call) < cost_after("relu): cost "), "{kernel}");
    // without library calls: the fused kernel, no library line
    let text = explain(&model, &["--target", "gpu", "--no-library-calls"]);
    assert!(text.contains("mx.fused") && !text.contains("library"), "{text}");
}
