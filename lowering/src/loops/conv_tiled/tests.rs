//! Tests of `conv_tiled.rs`: the implicit GEMM's and the depthwise kernel's code shapes.

use super::super::lower_graph;
use super::super::testing::{attrs, check_in_order, ints, lower_one_for, lower_one_vector, t, AVX2, AVX512};
use mxc_dialects::{Attr, Attrs, DType, Graph, OpKind};
use std::sync::Arc;

fn packed(group: i64, kernel: i64, channels: i64, pads: i64) -> Attrs {
    strided(group, kernel, channels, pads, 1)
}

fn strided(group: i64, kernel: i64, channels: i64, pads: i64, stride: i64) -> Attrs {
    attrs(&[
        ("dilations", ints(&[1, 1])),
        ("group", Attr::Int(group)),
        ("kernel", ints(&[kernel, kernel])),
        ("out_channels", Attr::Int(channels)),
        ("pads", ints(&[pads; 4])),
        ("strides", ints(&[stride, stride])),
    ])
}

#[test]
fn a_window_positions_many_channels_are_read_in_parts_summed_in_scratch() {
    // 1x1 with stride 2 gathers: one window position of 512 channels, 64 KiB of B for a
    // tile of 32 columns, is read in 4 parts of 128, the sums kept between them
    let m = lower_one_for(
        AVX512,
        OpKind::ConvNhwcPacked,
        &[t(DType::F32, &[1, 14, 14, 512]), t(DType::F32, &[2, 512, 16])],
        strided(1, 1, 32, 0, 2),
    );
    // 49 pixels: 4 micro-tiles of 13 rows, 2 vectors each
    assert!(m.contains("memref.alloca() : memref<52x32xf32>"), "{m}");
    check_in_order(
        &m,
        &["the parallel loop", "scf.for", "iter_args", "math.fma", "vector.store"],
    );
}

#[test]
fn short_kernel_rows_take_a_tile_of_6_rows_by_4_vectors() {
    // the first convolution's kernel rows of 3 channels are short: 6 rows of 4 vectors
    let m = lower_one_for(
        AVX512,
        OpKind::ConvNhwcPacked,
        &[t(DType::F32, &[1, 20, 20, 3]), t(DType::F32, &[4, 147, 16])],
        strided(1, 7, 64, 3, 2),
    );
    let accumulators = m.lines().find(|l| l.contains("iter_args")).unwrap();
    assert_eq!(accumulators.matches("vector<16xf32>").count(), 24, "{accumulators}");
}

#[test]
fn a_padded_implicit_gemm_reads_zeros_outside_the_image_by_a_pointer_select_at_the_border() {
    let m = lower_one_vector(
        OpKind::ConvNhwcPacked,
        // 24 output channels: one tile's width with 16 registers (4 rows x 3 vectors)
        &[
            t(DType::F32, &[1, 6, 6, 8]),
            t(DType::F32, &[2, 72, 16]),
            t(DType::F32, &[24]),
        ],
        packed(1, 3, 24, 1),
    );
    check_in_order(
        &m,
        &[
            "memref.reinterpret_cast %in0",
            "memref.alloca() : memref<96xf32>",
            "the parallel loop",
            "memref.store",
            "arith.select",
            ": memref<?xf32>",
            "math.fma",
            "vector.load %in2",
        ],
    );
    // the depth loop twice: for a tile whose windows all lie inside the image, untested,
    // and for one at the border, which picks each row's source per step
    let interior = m.find("scf.if").expect("a test of the tile's windows");
    let border = m[interior..].find("} else {").expect("a border branch") + interior;
    let (inside, at_border) = (&m[interior..border], &m[border..]);
    assert!(inside.contains("math.fma") && at_border.contains("math.fma"), "{m}");
    assert!(!inside.contains("arith.select"), "{inside}");
    assert!(at_border.contains("arith.select"), "{at_border}");
}

#[test]
fn a_pointwise_conv_is_a_product_of_matrices() {
    let m = lower_one_vector(
        OpKind::ConvNhwcPacked,
        &[t(DType::F32, &[1, 5, 5, 8]), t(DType::F32, &[1, 8, 16])],
        packed(1, 1, 16, 0),
    );
    assert!(
        m.contains("to memref<25x8xf32>") && m.contains("to memref<25x16xf32>"),
        "{m}"
    );
    assert!(!m.contains("memref<?xf32>"), "{m}");
}

#[test]
fn depthwise_computes_interior_pixels_together_and_loops_over_the_window_at_the_border() {
    let m = lower_one_vector(
        OpKind::ConvNhwcPacked,
        &[t(DType::F32, &[1, 7, 7, 40]), t(DType::F32, &[3, 9, 16])],
        packed(40, 3, 40, 1),
    );
    check_in_order(
        &m,
        &[
            // rows 1 to 5 read inside the image in height
            "the parallel loop over 1x7",
            "arith.cmpi sge",
            "scf.if",
            // the left border pixel: its window clipped to the image
            "arith.ceildivsi",
            "arith.maxsi",
            "arith.minsi",
            "iter_args",
            "math.fma",
            "vector.store",
            // pixels 1 to 5 at once: no loop over the window
            "arith.mulf",
            "math.fma",
            "vector.store",
            // the right border pixel
            "arith.ceildivsi",
            "math.fma",
            "} else {",
            // rows 0 and 6: every pixel at the border
            "arith.ceildivsi",
            "math.fma",
        ],
    );
    // pixels 1 to 5 at once, a vector of channels at a time (16 registers hold the sums
    // of 5 pixels, a kernel row's 3 weights and an input vector): each sum starts with a
    // product and takes the other 8 taps by fused multiply-adds, and each kernel row's 7
    // input columns are loaded once, not once per tap and pixel (15)
    let inside = &m[m.find("scf.if").unwrap()..m.find("} else {").unwrap()];
    let first_product = inside.find("arith.mulf").unwrap();
    let block_start = inside[..first_product].rfind("scf.for").unwrap();
    let block_end = first_product + inside[first_product..].find("vector.store").unwrap();
    let block = &inside[block_start..block_end];
    assert_eq!(block.matches("arith.mulf").count(), 5, "{block}");
    assert_eq!(block.matches("math.fma").count(), 5 * 8, "{block}");
    assert_eq!(block.matches("vector.load").count(), 3 * (3 + 7), "{block}");
}

#[test]
fn a_depthwise_kernel_applies_a_long_epilogue_to_each_row_after_its_sums() {
    let mut body = Graph::new("kernel");
    let x = body.add_input("in0", t(DType::F32, &[1, 7, 7, 40]));
    let w = body.add_input("in1", t(DType::F32, &[3, 9, 16]));
    let c = body
        .build1(OpKind::ConvNhwcPacked, vec![x, w], packed(40, 3, 40, 1))
        .unwrap();
    let s = body.build1(OpKind::Sigmoid, vec![c], Attrs::new()).unwrap();
    let y = body.build1(OpKind::Mul, vec![c, s], Attrs::new()).unwrap();
    body.add_output("out0", y);
    let mut g = Graph::new("silu");
    let xs = vec![
        g.add_input("x", t(DType::F32, &[1, 7, 7, 40])),
        g.add_input("w", t(DType::F32, &[3, 9, 16])),
    ];
    let y = g.build_fused(Arc::new(body), xs).unwrap();
    g.add_output("y", y);
    let m = lower_graph(&g, Some(AVX2)).unwrap().mlir;
    super::super::to_llvm_ir(&m).unwrap();
    // the row's sums are stored as they are (no sigmoid among them), then each row is read
    // back and finished in a pass of its own: the sigmoid's division once per vector of
    // its 40 channels (a block of 4 vectors and 1)
    let rows_done = m.rfind("} else {").unwrap();
    assert!(!m[..rows_done].contains("arith.divf"), "{m}");
    check_in_order(&m[rows_done..], &["vector.load %out0", "arith.divf", "vector.store"]);
    assert_eq!(m.matches("arith.divf").count(), 5, "{m}");
}

/// `conv_nhwc_integer_depthwise` of a 7 x 7 image of `channels` bytes, 3 x 3, padded by 1,
/// for `isa`.
fn integer_depthwise(isa: super::VectorIsa, channels: usize) -> String {
    let taps_attrs = attrs(&[
        ("dilations", ints(&[1, 1])),
        ("kernel", ints(&[3, 3])),
        ("pads", ints(&[1; 4])),
        ("strides", ints(&[1, 1])),
    ]);
    lower_one_for(
        isa,
        OpKind::ConvNhwcIntegerDepthwise,
        &[
            t(DType::U8, &[1, 7, 7, channels]),
            t(DType::I8, &[channels.div_ceil(16), 9, 16]),
            t(DType::U8, &[]),
        ],
        taps_attrs,
    )
}

#[test]
fn an_integer_depthwise_kernel_on_vnni_sums_three_kernel_rows_per_vpdpbusd() {
    let vnni = super::VectorIsa { vnni: true, ..AVX512 };
    let m = integer_depthwise(vnni, 32);
    // the preamble interleaves each kernel column's three rows of weights (and a row of
    // zeros) into words, before the parallel loop
    let parallel = m.find("the parallel loop").unwrap();
    assert!(m[..parallel].contains("vector.shuffle"), "{m}");
    assert!(m[..parallel].contains("memref<2x3x16xi32>"), "{m}");
    // inside the image, the 5 middle pixels of a row: per input column its three rows of
    // bytes interleaved once, then one vpdpbusd for each pixel reading it with a kernel
    // column (15 for the 5 pixels' 3 columns each), a block of both vectors of channels;
    // no byte is converted to f32 there
    let inside = &m[m[parallel..].find("scf.if").unwrap() + parallel..m.find("} else {").unwrap()];
    let first = inside.find("vpdpbusd").unwrap();
    let block = &inside[inside[..first].rfind("scf.for").unwrap()..];
    let block = &block[..block.find("vector.store").unwrap()];
    assert_eq!(block.matches("vpdpbusd").count(), 2 * 15, "{block}");
    assert_eq!(block.matches("vector.shuffle").count(), 2 * 7 * 3, "{block}");
    assert!(!block.contains("math.fma"), "{block}");
    // the border pixels keep the f32 lanes; and without VNNI, so does every pixel
    assert!(m.contains("math.fma"), "{m}");
    let plain = integer_depthwise(AVX512, 32);
    assert!(
        !plain.contains("vpdpbusd") && !plain.contains("vector.shuffle"),
        "{plain}"
    );
}
