//! Fusion with the real analysis and extraction, in text: a program goes in as IR, and the
//! fused program that comes out is compared with the expected IR. What is fused depends on
//! the cost model: a value two kernels need is recomputed in both when that is cheaper than
//! a kernel of its own, and computed once otherwise (the calibrated cpu model computes `exp`
//! once: it measured arithmetic dearer than memory on this machine's scalar kernels).

use super::same_ir;
use crate::cost::{FlopCost, LinearCost};
use crate::{optimize, OptimizeOptions};
use mxc_dialects::text::{parse, print};
use std::sync::Arc;

/// `src` optimised with no rules, fusion on, under `model`.
fn fused_with(src: &str, model: LinearCost) -> String {
    let g = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let opts = OptimizeOptions {
        fuse: true,
        cost_model: Arc::new(model),
        ..OptimizeOptions::default()
    };
    print(&optimize(&g, &[], &opts).expect("optimises").graph)
}

fn fused(src: &str) -> String {
    fused_with(src, LinearCost::cpu())
}

#[test]
fn an_element_wise_chain_becomes_one_kernel_with_its_scalar_inlined() {
    let out = fused(
        r#"graph "g" (%arg0: tensor<4x8xf32> "x", %arg1: tensor<8xf32> "b") {
  %0 = mx.add %arg0, %arg1 : tensor<4x8xf32>
  %1 = mx.constant {value = dense<[0.5]> : tensor<f32>} : tensor<f32>
  %2 = mx.mul %0, %1 : tensor<4x8xf32>
  %3 = mx.relu %2 : tensor<4x8xf32>
  return "y" = %3
}"#,
    );
    same_ir(
        &out,
        r#"graph "g" (%arg0: tensor<4x8xf32> "x", %arg1: tensor<8xf32> "b") {
      %0 = mx.fused %arg0, %arg1 : tensor<4x8xf32> graph "kernel" (%arg0: tensor<4x8xf32> "in0", %arg1: tensor<8xf32> "in1") {
        %0 = mx.add %arg0, %arg1 : tensor<4x8xf32>
        %1 = mx.constant {value = dense<[0.5]> : tensor<f32>} : tensor<f32>
        %2 = mx.mul %0, %1 : tensor<4x8xf32>
        %3 = mx.relu %2 : tensor<4x8xf32>
        return "out0" = %3
      }
      return "y" = %0
    }"#,
    );
}

#[test]
fn bias_and_activation_become_the_epilogue_of_the_matmul_before_them() {
    let out = fused(
        r#"graph "g" (%arg0: tensor<4x16xf32> "x", %arg1: tensor<16x8xf32> "w", %arg2: tensor<8xf32> "b") {
  %0 = mx.matmul %arg0, %arg1 : tensor<4x8xf32>
  %1 = mx.add %0, %arg2 : tensor<4x8xf32>
  %2 = mx.tanh %1 : tensor<4x8xf32>
  return "y" = %2
}"#,
    );
    same_ir(
        &out,
        r#"graph "g" (%arg0: tensor<4x16xf32> "x", %arg1: tensor<16x8xf32> "w", %arg2: tensor<8xf32> "b") {
      %0 = mx.fused %arg0, %arg1, %arg2 : tensor<4x8xf32> graph "kernel" (%arg0: tensor<4x16xf32> "in0", %arg1: tensor<16x8xf32> "in1", %arg2: tensor<8xf32> "in2") {
        %0 = mx.matmul %arg0, %arg1 : tensor<4x8xf32>
        %1 = mx.add %0, %arg2 : tensor<4x8xf32>
        %2 = mx.tanh %1 : tensor<4x8xf32>
        return "out0" = %2
      }
      return "y" = %0
    }"#,
    );
}

/// `e = exp(x)` read by two kernels, each with more work after it.
const SHARED: &str = r#"graph "g" (%arg0: tensor<64x64xf32> "x") {
  %0 = mx.exp %arg0 : tensor<64x64xf32>
  %1 = mx.neg %0 : tensor<64x64xf32>
  %2 = mx.relu %1 : tensor<64x64xf32>
  %3 = mx.abs %0 : tensor<64x64xf32>
  %4 = mx.sqrt %3 : tensor<64x64xf32>
  return "a" = %2, "b" = %4
}"#;

#[test]
fn a_shared_value_is_recomputed_where_arithmetic_is_cheaper_than_memory() {
    // exp's 8 FLOPs per element cost less than a kernel storing it and both consumers
    // loading it, so each consumer's kernel computes exp itself
    let cheap_flops = LinearCost {
        launch: 500.0,
        per_byte: 0.1,
        per_flop: FlopCost::flat(0.01),
        ..LinearCost::cpu()
    };
    same_ir(
        &fused_with(SHARED, cheap_flops),
        r#"graph "g" (%arg0: tensor<64x64xf32> "x") {
      %0 = mx.fused %arg0 : tensor<64x64xf32> graph "kernel" (%arg0: tensor<64x64xf32> "in0") {
        %0 = mx.exp %arg0 : tensor<64x64xf32>
        %1 = mx.neg %0 : tensor<64x64xf32>
        %2 = mx.relu %1 : tensor<64x64xf32>
        return "out0" = %2
      }
      %1 = mx.fused %arg0 : tensor<64x64xf32> graph "kernel" (%arg0: tensor<64x64xf32> "in0") {
        %0 = mx.exp %arg0 : tensor<64x64xf32>
        %1 = mx.abs %0 : tensor<64x64xf32>
        %2 = mx.sqrt %1 : tensor<64x64xf32>
        return "out0" = %2
      }
      return "a" = %0, "b" = %1
    }"#,
    );
}

#[test]
fn a_shared_value_is_computed_once_where_arithmetic_is_dear() {
    let dear_flops = LinearCost {
        launch: 1.0,
        per_byte: 0.01,
        per_flop: FlopCost::flat(10.0),
        ..LinearCost::cpu()
    };
    same_ir(
        &fused_with(SHARED, dear_flops),
        r#"graph "g" (%arg0: tensor<64x64xf32> "x") {
      %0 = mx.exp %arg0 : tensor<64x64xf32>
      %1 = mx.fused %0 : tensor<64x64xf32> graph "kernel" (%arg0: tensor<64x64xf32> "in0") {
        %0 = mx.neg %arg0 : tensor<64x64xf32>
        %1 = mx.relu %0 : tensor<64x64xf32>
        return "out0" = %1
      }
      %2 = mx.fused %0 : tensor<64x64xf32> graph "kernel" (%arg0: tensor<64x64xf32> "in0") {
        %0 = mx.abs %arg0 : tensor<64x64xf32>
        %1 = mx.sqrt %0 : tensor<64x64xf32>
        return "out0" = %1
      }
      return "a" = %1, "b" = %2
    }"#,
    );
}

#[test]
fn an_anchor_two_kernels_read_and_a_program_output_are_never_inlined() {
    let out = fused(
        r#"graph "g" (%arg0: tensor<8x8xf32> "x") {
  %0 = mx.matmul %arg0, %arg0 : tensor<8x8xf32>
  %1 = mx.relu %0 : tensor<8x8xf32>
  %2 = mx.sigmoid %0 : tensor<8x8xf32>
  %3 = mx.exp %1 : tensor<8x8xf32>
  return "r" = %1, "s" = %2, "e" = %3
}"#,
    );
    // one matmul kernel, read by relu's and sigmoid's; relu's value is an output, so exp
    // reads it from memory
    assert_eq!(out.matches("mx.matmul").count(), 1, "{out}");
    assert!(
        out.contains("  %0 = mx.matmul %arg0, %arg0 : tensor<8x8xf32>\n"),
        "{out}"
    );
    assert!(out.contains("  %1 = mx.relu %0 : tensor<8x8xf32>\n"), "{out}");
    assert!(out.contains("  %2 = mx.sigmoid %0 : tensor<8x8xf32>\n"), "{out}");
    assert!(out.contains("  %3 = mx.exp %1 : tensor<8x8xf32>\n"), "{out}");
}

#[test]
fn the_cpu_model_computes_a_shared_exp_once() {
    let out = fused(SHARED);
    assert!(out.contains("  %0 = mx.exp %arg0 : tensor<64x64xf32>\n"), "{out}");
    assert_eq!(out.matches("mx.exp").count(), 1, "{out}");
}

#[test]
fn a_fused_program_prints_parses_and_reoptimises_to_itself() {
    let once = fused(SHARED);
    assert_eq!(fused(&once), once);
}
