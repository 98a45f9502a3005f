//! Kernels over symbolic types: what they take and how they compute their extents.

use super::super::testing::AVX512;
use super::super::{lower_graph, to_llvm_ir};
use mxc_dialects::text::parse;

const SCALED_GELU: &str = r#"graph "g" symbols<b[1..8], s[1..512]{128}> (%x: tensor<(b)x(s)x64xf32> "x", %bias: tensor<64xf32> "bias") {
  %y = mx.add %x, %bias : tensor<(b)x(s)x64xf32>
  %z = mx.gelu %y {approximate = "none"} : tensor<(b)x(s)x64xf32>
  %w = mx.mul %z, %z : tensor<(b)x(s)x64xf32>
  return "y" = %w
}
"#;

#[test]
fn element_wise_kernels_take_sizes_and_view_their_buffers_at_run_time() {
    let g = parse(SCALED_GELU).unwrap();
    for isa in [None, Some(AVX512)] {
        let m = lower_graph(&g, isa).unwrap();
        assert_eq!(m.kernels.len(), 3);
        for k in &m.kernels {
            assert!(k.takes_sizes, "{}", k.func);
            assert!(k.func.contains("%sizes: memref<2xi64>"), "{}", k.func);
            // b is the first symbol, s the second; the parallel loop runs over b * s rows
            assert!(k.func.contains("memref.load %sizes[%c0]"), "{}", k.func);
            assert!(k.func.contains("memref.load %sizes[%c1]"), "{}", k.func);
            assert!(k.func.contains("memref<?x?x64xf32>"), "{}", k.func);
            // the pointer parameter holds the largest sizes' elements: 8 * 512 * 64
            assert!(k.func.contains("%in0_ptr: memref<262144xf32>"), "{}", k.func);
            let range = k.range_dim.as_ref().expect("the parallel range is symbolic");
            assert_eq!(range.symbols().count(), 2, "{range}");
        }
        // the bias keeps its fixed type and parameter
        assert!(
            m.kernels[0].func.contains("%in1: memref<64xf32>"),
            "{}",
            m.kernels[0].func
        );
        to_llvm_ir(&m.mlir).unwrap_or_else(|e| panic!("{e}\n{}", m.mlir));
    }
}

#[test]
fn vector_rows_of_a_run_time_length_end_under_a_run_time_mask() {
    let text = r#"graph "g" symbols<n[1..100]> (%x: tensor<(n)xf32> "x") {
  %y = mx.exp %x : tensor<(n)xf32>
  return "y" = %y
}
"#;
    let m = lower_graph(&parse(text).unwrap(), Some(AVX512)).unwrap();
    assert!(m.mlir.contains("vector.create_mask"), "{}", m.mlir);
    assert!(m.mlir.contains("vector.maskedstore"), "{}", m.mlir);
    to_llvm_ir(&m.mlir).unwrap_or_else(|e| panic!("{e}\n{}", m.mlir));
}

#[test]
fn kernels_without_a_size_generic_generator_are_refused_by_op() {
    // a product whose columns are symbolic (rows and batch may be)
    let text = r#"graph "g" symbols<n[1..100]> (%x: tensor<4x8xf32> "x", %w: tensor<8x(n)xf32> "w") {
  %y = mx.matmul %x, %w : tensor<4x(n)xf32>
  return "y" = %y
}
"#;
    let err = lower_graph(&parse(text).unwrap(), None).unwrap_err();
    assert!(matches!(err, super::super::LoopError::NotSizeGeneric { .. }), "{err}");
    let err = err.to_string();
    assert!(err.contains("matmul") && err.contains("not built yet"), "{err}");
}
