//! Tests of `amx.rs`: the tiles' ops in the kernels written for bf16 and byte products and
//! convolutions, and the vector kernels where tiles do not fit.

use super::super::testing::{attrs, check_in_order, ints, lower_one_for, t, AVX512};
use super::*;
use mxc_dialects::{Attr, OpKind};

const AMX: VectorIsa = VectorIsa {
    amx_bf16: true,
    ..AVX512
};

/// `matmul_packed` of bf16 `a` by `panels` bf16 pair panels of depth `k` into `n` columns.
fn product(isa: VectorIsa, a: &[usize], panels: usize, n: usize) -> String {
    let k = a[a.len() - 1];
    let b = t(DType::BF16, &[panels, k.div_ceil(2), 2 * COLUMNS]);
    let n = attrs(&[("n", Attr::Int(n as i64))]);
    lower_one_for(isa, OpKind::MatMulPacked, &[t(DType::BF16, a), b], n)
}

#[test]
fn byte_products_run_on_tiles_unsigned_by_signed_and_subtract_the_zero_point_after() {
    let isa = VectorIsa {
        amx_int8: true,
        ..AVX512
    };
    // 45 rows (a partial row block), a depth of 100 (a step of 64, then one of 36 whose
    // last group is padded), 40 columns (a partial panel)
    let operands = [
        t(DType::U8, &[45, 100]),
        t(DType::I8, &[3, 25, 64]),
        t(DType::I32, &[40]),
        t(DType::I32, &[]),
    ];
    let mlir = lower_one_for(
        isa,
        OpKind::MatMulIntegerPacked,
        &operands,
        attrs(&[("n", Attr::Int(40))]),
    );
    check_in_order(
        &mlir,
        &[
            "amx.tile_zero : !amx.tile<16x16xi32>",
            "amx.tile_load",
            "!amx.tile<16x64xi8>",
            "amx.tile_muli",
            "zext",
            "amx.tile_store",
            "arith.muli",
            "arith.subi",
        ],
    );
    // without int8 tiles, the vector kernel
    let vnni = VectorIsa { vnni: true, ..AVX512 };
    let mlir = lower_one_for(
        vnni,
        OpKind::MatMulIntegerPacked,
        &operands,
        attrs(&[("n", Attr::Int(40))]),
    );
    assert!(!mlir.contains("amx."), "{mlir}");
}

#[test]
fn bf16_pair_products_run_on_tiles_and_translate_to_llvm() {
    // whole 32 x 32 blocks; a partial row block and a partial last panel with a depth step
    // of fewer than 32; a batch of matrices
    for (a, panels, n) in [(vec![64, 128], 4, 64), (vec![45, 96], 3, 40), (vec![2, 20, 34], 1, 16)] {
        let mlir = product(AMX, &a, panels, n);
        check_in_order(
            &mlir,
            &["amx.tile_zero", "amx.tile_load", "amx.tile_mulf", "amx.tile_store"],
        );
    }
}

#[test]
fn odd_depths_and_machines_without_tiles_take_the_vector_kernel() {
    for (isa, a) in [(AMX, vec![20, 33]), (AVX512, vec![20, 64])] {
        let mlir = product(isa, &a, 1, 16);
        assert!(!mlir.contains("amx."), "{isa:?} {a:?}");
    }
}

/// `conv_nhwc_packed` of a bf16 image `x` by `m` output channels of a square `kernel`.
fn conv(x: [usize; 4], m: usize, kernel: usize, pads: i64, stride: i64) -> String {
    let depth = kernel * kernel * x[3];
    let wp = t(DType::BF16, &[m.div_ceil(COLUMNS), depth.div_ceil(2), 2 * COLUMNS]);
    let a = attrs(&[
        ("dilations", ints(&[1, 1])),
        ("group", Attr::Int(1)),
        ("kernel", ints(&[kernel as i64; 2])),
        ("out_channels", Attr::Int(m as i64)),
        ("pads", ints(&[pads; 4])),
        ("strides", ints(&[stride; 2])),
    ]);
    let bias = t(DType::BF16, &[m]);
    lower_one_for(AMX, OpKind::ConvNhwcPacked, &[t(DType::BF16, &x), wp, bias], a)
}

#[test]
fn bf16_convolutions_run_on_tiles_pointwise_in_place_and_windows_gathered() {
    // a pointwise convolution reads its pixels in place, as a product does
    let pointwise = conv([1, 8, 8, 64], 32, 1, 0, 1);
    check_in_order(&pointwise, &["amx.tile_load", "amx.tile_mulf"]);
    assert!(
        !pointwise.contains("maskedload"),
        "a pointwise convolution gathers nothing"
    );
    // a padded, strided window gathers each tap's rows (masked where they are padding)
    let window = conv([2, 9, 7, 34], 19, 3, 1, 2);
    check_in_order(
        &window,
        &["vector.maskedload", "amx.tile_load", "amx.tile_mulf", "amx.tile_store"],
    );
}
