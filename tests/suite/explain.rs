//! `mxc explain`: the cpu target's decisions on the repo's conv net and on a user rule file,
//! the dot graph's clusters, the ref target, and a model that is not there.

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

#[test]
fn convnet_convs_come_from_folded_batch_norms() {
    let model = cache_dir("models/convnet").join("model.onnx");
    let text = explain(&model, &["--target", "cpu"]);
    assert!(text.contains("  kernels   74 -> 53\n"), "{text}");
    assert!(text.contains("  removed   21 batch_norm\n"), "{text}");
    let convs: Vec<&str> = kernels(&text)
        .into_iter()
        .filter(|k| k.contains("= mx.conv "))
        .collect();
    assert_eq!(convs.len(), 21, "{text}");
    for conv in &convs {
        assert!(conv.contains("from      batch_norm, by conv-"), "{conv}");
        assert!(conv.contains("rejected  batch_norm(conv: "), "{conv}");
    }
    assert!(
        convs.iter().any(|k| k.contains("by conv-batch-norm, constant folding")),
        "{text}"
    );
    assert_eq!(kernels(&text).len(), 53);
    assert_eq!(
        text,
        explain(&model, &[]),
        "the output is deterministic and cpu is the default"
    );
}

#[test]
fn user_rule_is_named_for_the_relu_with_the_rejected_pool() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let rules = repo().join("examples/rules/pool-before-relu.rules");
    let text = explain(&model, &["--rules", rules.to_str().unwrap()]);
    let relu = kernels(&text).into_iter().find(|k| k.contains("= mx.relu ")).unwrap();
    assert!(relu.contains("from      max_pool, by pool-before-relu\n"), "{relu}");
    assert!(
        relu.contains("rejected  max_pool(relu: tensor<1x4x8x8xf32>): cost "),
        "{relu}"
    );
    let pool = kernels(&text)
        .into_iter()
        .find(|k| k.contains("= mx.max_pool "))
        .unwrap();
    assert!(pool.contains("created by pool-before-relu"), "{pool}");

    let plain = explain(&model, &[]);
    assert!(plain.contains("from      relu, as imported\n"), "{plain}");
    assert!(plain.contains("  kernels   6 -> 6\n"), "{plain}");
}

#[test]
fn dot_has_one_cluster_per_kernel() {
    let model = repo().join("examples/tiny_cnn.onnx");
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("tiny.dot");
    let text = explain(&model, &["--dot", dot.to_str().unwrap()]);
    let graph = std::fs::read_to_string(&dot).unwrap();
    assert!(graph.starts_with("digraph"), "{graph}");
    assert_eq!(graph.matches("subgraph cluster_").count(), kernels(&text).len());
    assert_eq!(graph.matches("subgraph cluster_").count(), 6);
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
