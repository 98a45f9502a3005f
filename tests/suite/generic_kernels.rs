//! Kernels that take sizes at run time (issue 37): a program over symbolic sizes is compiled
//! once (through an `.mxr` file's bytes), then run at many sizes in range (the ends, around the
//! vector width, primes, the cost point) and compared with the `ref` target's program compiled
//! for the graph specialised to those sizes (kernels of fixed sizes, the oracle); a size outside a symbol's range is refused, naming the input,
//! the symbol, its range and the size.

use crate::common::{compile_and_load, mismatch};
use mxc_codegen::Target;
use mxc_dialects::dim::Sizes;
use mxc_dialects::specialise::at_sizes;
use mxc_dialects::text::{parse, print};
use mxc_dialects::{DType, Tensor};
use std::collections::HashMap;

/// Seeded values in [-2, 2) (integers: 0..7) for an input of type `ty`.
fn input(ty: &mxc_dialects::TensorType, seed: u64) -> Tensor {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    let n = ty.num_elements();
    match ty.dtype.is_float() {
        true => Tensor::from_f64s(
            ty.dtype,
            ty.shape.clone(),
            &(0..n).map(|_| next() * 4.0 - 2.0).collect::<Vec<_>>(),
        ),
        false => Tensor::from_i64s(
            ty.dtype,
            ty.shape.clone(),
            &(0..n).map(|_| (next() * 7.0) as i64).collect::<Vec<_>>(),
        ),
    }
}

/// Compiles `src` for `target` once and runs it at each of `points`, comparing every output
/// with the oracle's within `tol` (relative and absolute).
fn runs_at_every_size(src: &str, target: Target, points: &[&[(&str, u64)]], tol: f64) {
    let g = parse(src).unwrap_or_else(|e| panic!("parsing: {e}"));
    let exe = compile_and_load(src, target);
    assert!(exe.program().is_sized(), "the program is over symbolic sizes");
    for point in points {
        let sizes: Sizes = point.iter().map(|(s, n)| (s.to_string(), *n)).collect();
        let fixed = at_sizes(&g, &sizes).unwrap_or_else(|e| panic!("at {sizes:?}: {e}"));
        let inputs: Vec<Tensor> = (fixed.inputs.iter().enumerate())
            .map(|(i, p)| input(fixed.ty(p.value), i as u64 + 1))
            .collect();
        let named: HashMap<String, Tensor> = fixed.inputs.iter().map(|p| p.name.clone()).zip(inputs).collect();
        let oracle = compile_and_load(&print(&fixed), Target::Ref);
        assert!(!oracle.program().is_sized());
        let expected = oracle
            .run(&named)
            .unwrap_or_else(|e| panic!("the oracle at {sizes:?}: {e}"));
        let outputs = exe.run(&named).unwrap_or_else(|e| panic!("{target} at {sizes:?}: {e}"));
        for ((name, got), (_, want)) in outputs.iter().zip(&expected) {
            assert_eq!(got.shape(), want.shape(), "{name} at {sizes:?}");
            if let Some(why) = mismatch(got, want, tol, tol) {
                panic!("{target}: output {name} at {sizes:?}: {why}");
            }
        }
    }
}

const ELEMENT_WISE: &str = r#"graph "g" symbols<b[1..4], n[1..300]> (%x: tensor<(b)x(n)x3xf32> "x", %r: tensor<(b)x1x3xf32> "r", %bias: tensor<3xf32> "bias") {
  %0 = mx.add %x, %bias : tensor<(b)x(n)x3xf32>
  %1 = mx.mul %0, %r : tensor<(b)x(n)x3xf32>
  %2 = mx.tanh %1 : tensor<(b)x(n)x3xf32>
  %3 = mx.sub %2, %x : tensor<(b)x(n)x3xf32>
  return "y" = %3, "t" = %2
}
"#;

/// Sizes around a vector's width and a parallel loop's, primes, and the range's ends.
const ELEMENT_WISE_POINTS: &[&[(&str, u64)]] = &[
    &[("b", 1), ("n", 1)],
    &[("b", 1), ("n", 5)],
    &[("b", 2), ("n", 16)],
    &[("b", 3), ("n", 17)],
    &[("b", 4), ("n", 131)],
    &[("b", 4), ("n", 300)],
];

#[test]
fn element_wise_kernels_run_every_size_in_range() {
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(ELEMENT_WISE, target, ELEMENT_WISE_POINTS, 1e-6);
    }
}

#[test]
fn a_size_outside_its_range_is_refused_naming_the_symbol_its_range_and_the_size() {
    let exe = compile_and_load(ELEMENT_WISE, Target::Cpu);
    let at = |b: usize, n: usize| -> HashMap<String, Tensor> {
        [("x", vec![b, n, 3]), ("r", vec![b, 1, 3]), ("bias", vec![3])]
            .into_iter()
            .map(|(name, shape)| {
                (
                    name.to_string(),
                    Tensor::zeros(mxc_dialects::TensorType::new(DType::F32, shape)),
                )
            })
            .collect()
    };
    let err = exe.run(&at(2, 301)).unwrap_err().to_string();
    assert!(
        err.contains("input `x` dimension 1") && err.contains("n is 301, outside its range [1..300]"),
        "{err}"
    );
    let err = exe.run(&at(5, 3)).unwrap_err().to_string();
    assert!(err.contains("b is 5, outside its range [1..4]"), "{err}");
    // two inputs that disagree on b
    let mut mixed = at(2, 3);
    mixed.insert(
        "r".into(),
        Tensor::zeros(mxc_dialects::TensorType::new(DType::F32, vec![3, 1, 3])),
    );
    let err = exe.run(&mixed).unwrap_err().to_string();
    assert!(err.contains("makes b 3") || err.contains("makes b 2"), "{err}");
    // and the program still runs a size in range afterwards
    exe.run(&at(1, 1)).expect("a size in range runs");
}

const ROWS: &str = r#"graph "g" symbols<b[1..3], s[1..70]> (%x: tensor<(b)x(s)x20xf32> "x", %scale: tensor<20xf32> "scale", %bias: tensor<20xf32> "bias") {
  %0, %m, %v = mx.layer_norm %x, %scale, %bias {axis = 2, epsilon = 1.0e-5} : tensor<(b)x(s)x20xf32>, tensor<(b)x(s)x1xf32>, tensor<(b)x(s)x1xf32>
  %1 = mx.reshape %0 {shape = sizes<(b)x(s)x4x5>} : tensor<(b)x(s)x4x5xf32>
  %2 = mx.transpose %1 {perm = [0, 2, 1, 3]} : tensor<(b)x4x(s)x5xf32>
  %3 = mx.transpose %2 {perm = [0, 1, 3, 2]} : tensor<(b)x4x5x(s)xf32>
  %4 = mx.softmax %3 {axis = 3} : tensor<(b)x4x5x(s)xf32>
  %5 = mx.softmax %2 {axis = 2} : tensor<(b)x4x(s)x5xf32>
  return "n" = %0, "v" = %v, "p" = %4, "q" = %5
}
"#;

#[test]
fn normalisations_and_data_movement_run_every_size_in_range() {
    let points: &[&[(&str, u64)]] = &[
        &[("b", 1), ("s", 1)],
        &[("b", 2), ("s", 7)],
        &[("b", 1), ("s", 16)],
        &[("b", 3), ("s", 17)],
        &[("b", 2), ("s", 33)],
        &[("b", 3), ("s", 70)],
    ];
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(ROWS, target, points, 1e-5);
    }
}

const EMBEDDING: &str = r#"graph "g" symbols<b[1..4], s[1..50]> (%ids: tensor<(b)x(s)xi64> "ids", %table: tensor<7x8xf32> "table") {
  %0 = mx.gather %table, %ids {axis = 0} : tensor<(b)x(s)x8xf32>
  %1 = mx.constant {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>} : tensor<8xf32>
  %2 = mx.expand %1 {shape = sizes<(b)x(s)x8>} : tensor<(b)x(s)x8xf32>
  %3 = mx.add %0, %2 : tensor<(b)x(s)x8xf32>
  %4 = mx.gather %3, %ids {axis = 1} : tensor<(b)x(b)x(s)x8xf32>
  return "e" = %3, "g" = %4
}
"#;

#[test]
fn gathers_and_expands_run_every_size_in_range() {
    let points: &[&[(&str, u64)]] = &[&[("b", 1), ("s", 1)], &[("b", 2), ("s", 9)], &[("b", 4), ("s", 50)]];
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(EMBEDDING, target, points, 1e-6);
    }
}

/// `mx.constant` of `rows x cols` f32 weights, the text form's.
fn weights(name: &str, rows: usize, cols: usize) -> String {
    constant(name, &[rows, cols])
}

/// `mx.constant` of f32 values of shape `dims`, the text form's.
fn constant(name: &str, dims: &[usize]) -> String {
    let values: Vec<String> = (0..dims.iter().product::<usize>())
        .map(|i| format!("{:.4}", ((i * 7) % 13) as f64 * 0.05 - 0.3))
        .collect();
    let shape: Vec<String> = dims.iter().map(usize::to_string).collect();
    let ty = format!("tensor<{}xf32>", shape.join("x"));
    format!(
        "  %{name} = mx.constant {{value = dense<[{}]> : {ty}}} : {ty}\n",
        values.join(", ")
    )
}

#[test]
fn products_over_run_time_rows_and_batches_run_every_size_in_range() {
    // a layer of constant weights (packed and fused with its bias and activation on cpu), and a
    // batched product of two activations
    let src = format!(
        r#"graph "g" symbols<b[1..3], s[1..512]> (%x: tensor<(b)x(s)x16xf32> "x", %p: tensor<(b)x2x(s)x8xf32> "p", %q: tensor<(b)x2x8x5xf32> "q", %bias: tensor<24xf32> "bias") {{
{}  %0 = mx.matmul %x, %w : tensor<(b)x(s)x24xf32>
  %1 = mx.add %0, %bias : tensor<(b)x(s)x24xf32>
  %2 = mx.gelu %1 {{approximate = "none"}} : tensor<(b)x(s)x24xf32>
  %3 = mx.matmul %p, %q : tensor<(b)x2x(s)x5xf32>
  %4 = mx.reshape %2 {{shape = sizes<(b * s)x24>}} : tensor<(b * s)x24xf32>
{}  %5 = mx.gemm %4, %v {{alpha = 0.5, beta = 0.0, trans_a = 0, trans_b = 0}} : tensor<(b * s)x7xf32>
  return "y" = %2, "z" = %3, "g" = %5
}}
"#,
        weights("w", 16, 24),
        weights("v", 24, 7)
    );
    let points: &[&[(&str, u64)]] = &[
        &[("b", 1), ("s", 1)],
        &[("b", 2), ("s", 3)],
        &[("b", 1), ("s", 14)],
        &[("b", 3), ("s", 15)],
        &[("b", 2), ("s", 29)],
        &[("b", 3), ("s", 40)],
        &[("b", 1), ("s", 512)],
    ];
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(&src, target, points, 1e-4);
    }
    // on cpu the layer's weights are packed into the register-tiled kernel's panels
    let cpu = compile_and_load(&src, Target::Cpu);
    let packed = cpu
        .program()
        .kernels
        .iter()
        .filter(|k| k.symbol.contains("matmul_packed"));
    assert!(packed.clone().any(|k| k.takes_sizes()), "{:?}", cpu.program().kernels);
}

#[test]
fn attention_over_run_time_queries_and_keys_runs_every_size_in_range() {
    // the masked attention the rewrite recognises (tests/rules/attention-symbolic.mx), and the
    // op itself in the other layout with a mask per query
    let recognised = r#"graph "g" symbols<b[1..2], s[1..300]> (%q: tensor<(b)x2x(s)x16xf32> "q", %k: tensor<(b)x2x(s)x16xf32> "k", %v: tensor<(b)x2x(s)x16xf32> "v", %mask: tensor<(b)x1x1x(s)xf32> "mask") {
  %0 = mx.transpose %k {perm = [0, 1, 3, 2]} : tensor<(b)x2x16x(s)xf32>
  %1 = mx.matmul %q, %0 : tensor<(b)x2x(s)x(s)xf32>
  %2 = mx.constant {value = dense<[4.0]> : tensor<f32>} : tensor<f32>
  %3 = mx.div %1, %2 : tensor<(b)x2x(s)x(s)xf32>
  %4 = mx.add %3, %mask : tensor<(b)x2x(s)x(s)xf32>
  %5 = mx.softmax %4 {axis = 3} : tensor<(b)x2x(s)x(s)xf32>
  %6 = mx.matmul %5, %v : tensor<(b)x2x(s)x16xf32>
  return "y" = %6
}
"#;
    let direct = r#"graph "g" symbols<b[1..2], s[1..300], t[1..300]> (%q: tensor<(b)x(s)x3x8xf32> "q", %k: tensor<(b)x(t)x3x8xf32> "k", %v: tensor<(b)x(t)x3x5xf32> "v", %mask: tensor<(b)x1x(s)x(t)xf32> "mask") {
  %0 = mx.attention %q, %k, %v, %mask {layout = "bshd", scale = 0.3, zero_nan_rows = 1} : tensor<(b)x(s)x3x5xf32>
  return "y" = %0
}
"#;
    let points: &[&[(&str, u64)]] = &[
        &[("b", 1), ("s", 1), ("t", 1)],
        &[("b", 2), ("s", 7), ("t", 33)],
        &[("b", 1), ("s", 33), ("t", 5)],
        &[("b", 2), ("s", 64), ("t", 257)],
        &[("b", 1), ("s", 300), ("t", 300)],
    ];
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(direct, target, points, 1e-4);
    }
    let points: Vec<Vec<(&str, u64)>> = points.iter().map(|p| p[..2].to_vec()).collect();
    let points: Vec<&[(&str, u64)]> = points.iter().map(Vec::as_slice).collect();
    runs_at_every_size(recognised, Target::Cpu, &points, 1e-4);
    let cpu = compile_and_load(recognised, Target::Cpu);
    assert!(
        cpu.program()
            .kernels
            .iter()
            .any(|k| k.symbol.contains("attention") && k.takes_sizes()),
        "{:?}",
        cpu.program().kernels
    );
}

#[test]
fn concatenations_run_every_size_in_range() {
    let src = r#"graph "g" symbols<b[1..3], s[1..40]> (%x: tensor<(b)x(s)x2xf32> "x", %y: tensor<(b)x(s)x3xf32> "y") {
  %0 = mx.concat %x, %y {axis = 2} : tensor<(b)x(s)x5xf32>
  %1 = mx.concat %x, %x {axis = 1} : tensor<(b)x(s * 2)x2xf32>
  return "c" = %0, "d" = %1
}
"#;
    let points: &[&[(&str, u64)]] = &[&[("b", 1), ("s", 1)], &[("b", 2), ("s", 17)], &[("b", 3), ("s", 40)]];
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(src, target, points, 0.0);
    }
}

#[test]
fn convolutions_and_pools_over_run_time_height_and_width_run_every_size_in_range() {
    // a small network's layers over a symbolic image: the first layer's three channels (read
    // a kernel row at a time), a pool with padding, a strided convolution (read a window
    // position at a time), a pointwise one, a depthwise and a transposed one, an average pool
    // that counts only the input and a global one, and a 3x3 one of 16 channels (Winograd's on
    // cpu)
    let window = |s: usize, p: usize| {
        format!("dilations = [1, 1], group = 1, pads = [{p}, {p}, {p}, {p}], strides = [{s}, {s}]")
    };
    let src = format!(
        r#"graph "g" symbols<b[1..2], h[5..40], w[5..40]> (%x: tensor<(b)x3x(h)x(w)xf32> "x") {{
{}{}{}{}{}{}{}{}  %0 = mx.conv %x, %k1, %b1 {{{}}} : tensor<(b)x8x(h)x(w)xf32>
  %1 = mx.relu %0 : tensor<(b)x8x(h)x(w)xf32>
  %2 = mx.max_pool %1 {{ceil_mode = 0, dilations = [1, 1], kernel = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}} : tensor<(b)x8x((h + 1) / 2)x((w + 1) / 2)xf32>
  %3 = mx.conv %2, %k2 {{{}}} : tensor<(b)x8x((((h + 1) / 2) + 1) / 2)x((((w + 1) / 2) + 1) / 2)xf32>
  %4 = mx.conv %3, %k3 {{{}}} : tensor<(b)x16x((((h + 1) / 2) + 1) / 2)x((((w + 1) / 2) + 1) / 2)xf32>
  %5 = mx.sigmoid %4 : tensor<(b)x16x((((h + 1) / 2) + 1) / 2)x((((w + 1) / 2) + 1) / 2)xf32>
  %6 = mx.mul %4, %5 : tensor<(b)x16x((((h + 1) / 2) + 1) / 2)x((((w + 1) / 2) + 1) / 2)xf32>
  %7 = mx.conv %6, %k4 {{dilations = [1, 1], group = 16, pads = [1, 1, 1, 1], strides = [1, 1]}} : tensor<(b)x16x((((h + 1) / 2) + 1) / 2)x((((w + 1) / 2) + 1) / 2)xf32>
  %8 = mx.conv_transpose %7, %k5 {{dilations = [1, 1], group = 1, output_padding = [0, 0], pads = [0, 0, 0, 0], strides = [2, 2]}} : tensor<(b)x4x(((((h + 1) / 2) + 1) / 2) * 2)x(((((w + 1) / 2) + 1) / 2) * 2)xf32>
  %9 = mx.average_pool %2 {{ceil_mode = 0, count_include_pad = 0, dilations = [1, 1], kernel = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]}} : tensor<(b)x8x((h + 1) / 2)x((w + 1) / 2)xf32>
  %10 = mx.global_average_pool %7 : tensor<(b)x16x1x1xf32>
  %11 = mx.conv %1, %k6 {{{}}} : tensor<(b)x16x(h)x(w)xf32>
  %12 = mx.conv %11, %k7 {{{}}} : tensor<(b)x32x(h)x(w)xf32>
  return "features" = %8, "pooled" = %9, "global" = %10, "wide" = %12
}}
"#,
        constant("k1", &[8, 3, 3, 3]),
        constant("b1", &[8]),
        constant("k2", &[8, 8, 3, 3]),
        constant("k3", &[16, 8, 1, 1]),
        constant("k4", &[16, 1, 3, 3]),
        constant("k5", &[16, 4, 2, 2]),
        constant("k6", &[16, 8, 1, 1]),
        constant("k7", &[32, 16, 3, 3]),
        window(1, 1),
        window(2, 1),
        window(1, 0),
        window(1, 0),
        window(1, 1),
    );
    let points: &[&[(&str, u64)]] = &[
        &[("b", 1), ("h", 5), ("w", 5)],
        &[("b", 2), ("h", 8), ("w", 13)],
        &[("b", 1), ("h", 17), ("w", 9)],
        &[("b", 2), ("h", 32), ("w", 32)],
        &[("b", 1), ("h", 40), ("w", 40)],
    ];
    for target in [Target::Ref, Target::Cpu] {
        runs_at_every_size(&src, target, points, 1e-4);
    }
    // on cpu the convolutions are implicit GEMMs over packed weights, or Winograd's transforms
    // around a product, that take their sizes
    let cpu = compile_and_load(&src, Target::Cpu);
    let kernels = &cpu.program().kernels;
    for kind in ["conv_nhwc_packed", "winograd_input", "winograd_output"] {
        assert!(
            kernels.iter().any(|k| k.symbol.contains(kind) && k.takes_sizes()),
            "{kind}: {kernels:?}"
        );
    }
}

#[test]
fn winograd_over_a_run_time_height_and_a_fixed_width_stores_inside_the_image() {
    // the width (30) leaves the last tile of each row half outside; the height only the run knows
    let src = format!(
        r#"graph "g" symbols<h[3..64]> (%x: tensor<1x16x(h)x30xf32> "x") {{
{}  %0 = mx.conv %x, %k {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : tensor<1x32x(h)x30xf32>
  return "y" = %0
}}
"#,
        constant("k", &[32, 16, 3, 3]),
    );
    let points: &[&[(&str, u64)]] = &[&[("h", 3)], &[("h", 9)], &[("h", 24)], &[("h", 61)]];
    runs_at_every_size(&src, Target::Cpu, points, 1e-4);
    let cpu = compile_and_load(&src, Target::Cpu);
    let kernels = &cpu.program().kernels;
    assert!(
        kernels
            .iter()
            .any(|k| k.symbol.contains("winograd_output") && k.takes_sizes()),
        "{kernels:?}"
    );
}
