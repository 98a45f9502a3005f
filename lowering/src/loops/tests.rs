//! Tests across op families: every op kind but `mx.constant` lowers and translates to LLVM IR
//! over every element type its type rule accepts, each kernel with the bare-pointer signature
//! and no external calls but libm's.

use super::testing::{attrs, ints, lower_one, t};
use super::*;
use mxc_dialects::{Attr, DType, Tensor, TensorType, Trait};
use std::collections::BTreeMap;

/// A sample use of `kind` on elements of type `d`: operand types and attributes.
fn sample(kind: OpKind, d: DType) -> Vec<(Vec<TensorType>, Attrs)> {
    use OpKind::*;
    // packed weights hold this many depths side by side (bf16 pairs)
    let pairing = mxc_dialects::mx::depth_pairing(d);
    let f = |v: f64| Attr::Float(v);
    let i = Attr::Int;
    let window = |extra: &[(&str, Attr)]| {
        let mut a = attrs(&[
            ("strides", ints(&[2, 1])),
            ("pads", ints(&[1, 0, 1, 1])),
            ("dilations", ints(&[1, 2])),
        ]);
        for (k, v) in extra {
            a.set(k, v.clone());
        }
        a
    };
    let plain = |tys: Vec<TensorType>| vec![(tys, Attrs::new())];
    match kind {
        // fused kernels have their own tests (`fused.rs`); control ops and ops on strings have
        // no kernel
        Constant | Fused | Call | If | Loop | StringConcat | StringCase | RegexFullMatch => vec![],
        Identity | Not | Sqrt | Exp | Log | Neg | Abs | Reciprocal | Floor | Ceil | Round | Sin | Cos | Tan | Asin
        | Acos | Atan | Relu | Sigmoid | Tanh | Erf => plain(vec![t(d, &[2, 3])]),
        Gelu => ["none", "tanh"]
            .iter()
            .map(|a| (vec![t(d, &[2, 3])], attrs(&[("approximate", Attr::Str(a.to_string()))])))
            .collect(),
        LeakyRelu => vec![(vec![t(d, &[2, 3])], attrs(&[("alpha", f(0.01))]))],
        Cast => DType::ALL
            .iter()
            .map(|&to| (vec![t(d, &[2, 3])], attrs(&[("to", Attr::DType(to))])))
            .collect(),
        BitCast => DType::ALL
            .iter()
            .filter(|to| to.bits() == d.bits())
            .map(|&to| (vec![t(d, &[2, 3])], attrs(&[("to", Attr::DType(to))])))
            .collect(),
        Add | Sub | Mul | Div | Max | Min | Equal | Less | Greater | BitAnd | BitOr | BitXor | ShiftLeft
        | ShiftRight => plain(vec![t(d, &[2, 3]), t(d, &[3])]),
        Pow => vec![
            (vec![t(d, &[2, 3]), t(d, &[3])], Attrs::new()),
            (vec![t(d, &[2, 3]), t(DType::I32, &[])], Attrs::new()),
        ],
        Where => plain(vec![t(DType::Bool, &[2, 1]), t(d, &[2, 3]), t(d, &[3])]),
        Clip => plain(vec![t(d, &[2, 3]), t(d, &[]), t(d, &[1])]),
        DequantizeLinear => vec![
            (vec![t(d, &[2, 3]), t(DType::F32, &[3]), t(d, &[])], Attrs::new()),
            (vec![t(d, &[2, 3]), t(DType::F16, &[]), t(d, &[2, 1])], Attrs::new()),
            (
                vec![t(DType::I32, &[2, 3]), t(d, &[3]), t(DType::I32, &[])],
                Attrs::new(),
            ),
        ],
        Softmax => vec![(vec![t(d, &[2, 3, 4])], attrs(&[("axis", i(1))]))],
        Conv => vec![(
            vec![t(d, &[1, 2, 5, 5]), t(d, &[4, 1, 3, 3]), t(d, &[4])],
            window(&[("group", i(2))]),
        )],
        ConvNhwc => vec![(
            vec![t(d, &[1, 5, 5, 2]), t(d, &[4, 3, 3, 1]), t(d, &[4])],
            window(&[("group", i(2))]),
        )],
        ConvNhwcPacked => [(1, 4, 2), (2, 2, 1)]
            .iter()
            .map(|&(group, out, per_group)| {
                let a = window(&[("group", i(group)), ("kernel", ints(&[3, 3])), ("out_channels", i(out))]);
                (
                    vec![
                        t(d, &[1, 5, 5, 2]),
                        t(d, &[1, (9 * per_group as usize).div_ceil(pairing), 16 * pairing]),
                        t(d, &[out as usize]),
                    ],
                    a,
                )
            })
            .collect(),
        ConvTranspose => vec![(
            vec![t(d, &[1, 2, 3, 3]), t(d, &[2, 2, 2, 2]), t(d, &[4])],
            window(&[("group", i(2)), ("output_padding", ints(&[1, 0]))]),
        )],
        Gemm => vec![(
            vec![t(d, &[4, 3]), t(d, &[4, 5]), t(d, &[5])],
            attrs(&[
                ("alpha", f(0.5)),
                ("beta", f(2.0)),
                ("trans_a", i(1)),
                ("trans_b", i(0)),
            ]),
        )],
        WinogradInput => vec![(vec![t(d, &[2, 5, 6, 3])], attrs(&[("pads", ints(&[1, 0, 1, 2]))]))],
        WinogradWeights => plain(vec![t(d, &[4, 3, 3, 5])]),
        WinogradOutput => vec![(vec![t(d, &[36, 4, 5])], attrs(&[("shape", ints(&[1, 5, 6, 5]))]))],
        MatMulPacked => vec![(
            vec![t(d, &[2, 3, 5]), t(d, &[2, 5usize.div_ceil(pairing), 16 * pairing])],
            attrs(&[("n", i(20))]),
        )],
        ConvNhwcIntegerPacked => vec![(
            vec![
                t(d, &[1, 5, 5, 4]),
                t(DType::I8, &[1, 9, 64]),
                t(DType::I32, &[6]),
                t(DType::I32, &[]),
            ],
            window(&[("kernel", ints(&[3, 3])), ("out_channels", i(6))]),
        )],
        ConvNhwcIntegerDepthwise => vec![(
            vec![t(d, &[1, 5, 5, 20]), t(DType::I8, &[2, 9, 16]), t(d, &[])],
            window(&[("kernel", ints(&[3, 3]))]),
        )],
        MatMulIntegerPacked => vec![(
            vec![
                t(d, &[2, 3, 10]),
                t(DType::I8, &[2, 3, 64]),
                t(DType::I32, &[20]),
                t(DType::I32, &[]),
            ],
            attrs(&[("n", i(20))]),
        )],
        Attention => [("bhsd", 0, vec![t(d, &[1, 2, 3, 3])]), ("bshd", 1, vec![])]
            .into_iter()
            .map(|(layout, zero_nan_rows, mask)| {
                let shape = |rows: usize, depth: usize| match layout {
                    "bhsd" => vec![2, 2, rows, depth],
                    _ => vec![2, rows, 2, depth],
                };
                let qkv = vec![t(d, &shape(3, 4)), t(d, &shape(3, 4)), t(d, &shape(3, 5))];
                let a = attrs(&[
                    ("layout", Attr::Str(layout.into())),
                    ("scale", f(0.5)),
                    ("zero_nan_rows", i(zero_nan_rows)),
                ]);
                ([qkv, mask].concat(), a)
            })
            .collect(),
        Pack => vec![(vec![t(d, &[5, 20])], attrs(&[("panel", i(16))]))],
        MatMul => vec![
            (vec![t(d, &[2, 3, 4]), t(d, &[4])], Attrs::new()),
            (vec![t(d, &[4]), t(d, &[2, 4, 5])], Attrs::new()),
        ],
        MaxPool => vec![(
            vec![t(d, &[1, 2, 6, 7])],
            window(&[("kernel", ints(&[3, 2])), ("ceil_mode", i(1))]),
        )],
        AveragePool => vec![(
            vec![t(d, &[1, 2, 6, 7])],
            window(&[
                ("kernel", ints(&[3, 2])),
                ("ceil_mode", i(1)),
                ("count_include_pad", i(1)),
            ]),
        )],
        MaxPoolNhwc => vec![(
            vec![t(d, &[1, 6, 7, 10])],
            window(&[("kernel", ints(&[3, 2])), ("ceil_mode", i(1))]),
        )],
        AveragePoolNhwc => [0, 1]
            .iter()
            .map(|&include| {
                let a = window(&[
                    ("kernel", ints(&[3, 2])),
                    ("ceil_mode", i(1)),
                    ("count_include_pad", i(include)),
                ]);
                (vec![t(d, &[1, 6, 7, 10])], a)
            })
            .collect(),
        GlobalAveragePool => plain(vec![t(d, &[1, 2, 3, 3])]),
        BatchNorm => vec![(
            vec![t(d, &[2, 3, 4]), t(d, &[3]), t(d, &[3]), t(d, &[3]), t(d, &[3])],
            attrs(&[("epsilon", f(1e-5))]),
        )],
        LayerNorm => vec![
            (
                vec![t(d, &[2, 3, 4]), t(d, &[4]), t(d, &[3, 4])],
                attrs(&[("axis", i(1)), ("epsilon", f(1e-5))]),
            ),
            (
                vec![t(d, &[2, 3, 4]), t(d, &[1])],
                attrs(&[("axis", i(2)), ("epsilon", f(1e-5))]),
            ),
        ],
        Reshape => vec![(vec![t(d, &[2, 3])], attrs(&[("shape", ints(&[3, 1, 2]))]))],
        Transpose => vec![(vec![t(d, &[2, 3, 4])], attrs(&[("perm", ints(&[2, 0, 1]))]))],
        Concat => vec![(
            vec![t(d, &[2, 3]), t(d, &[2, 1]), t(d, &[2, 3])],
            attrs(&[("axis", i(1))]),
        )],
        Slice => vec![(
            vec![t(d, &[4, 5])],
            attrs(&[
                ("starts", ints(&[3, 0])),
                ("ends", ints(&[-1, 5])),
                ("steps", ints(&[-2, 2])),
            ]),
        )],
        Gather => vec![
            (vec![t(d, &[3, 4]), t(DType::I64, &[2])], attrs(&[("axis", i(1))])),
            (vec![t(d, &[3, 4]), t(DType::U8, &[2, 2])], attrs(&[("axis", i(0))])),
        ],
        Expand => vec![(vec![t(d, &[3, 1])], attrs(&[("shape", ints(&[2, 3, 4]))]))],
        Scatter => ["none", "add", "mul", "max", "min"]
            .iter()
            .map(|r| {
                let operands = vec![t(d, &[3, 4]), t(DType::I64, &[5]), t(d, &[5])];
                (operands, attrs(&[("reduction", Attr::Str(r.to_string()))]))
            })
            .collect(),
        ReduceMean | ReduceSum | ReduceMax => vec![
            (
                vec![t(d, &[2, 3, 4])],
                attrs(&[("axes", ints(&[0, 2])), ("keepdims", i(1))]),
            ),
            (
                vec![t(d, &[2, 3, 4])],
                attrs(&[("axes", ints(&[1])), ("keepdims", i(0))]),
            ),
            (vec![t(d, &[2, 3])], attrs(&[("axes", ints(&[])), ("keepdims", i(0))])),
        ],
    }
}

/// libm functions kernels may call (everything else must be inline or an LLVM intrinsic).
const LIBM: &[&str] = &[
    "expf", "exp", "logf", "log", "erff", "erf", "tanhf", "tanh", "powf", "pow", "floorf", "floor", "ceilf", "ceil",
    "sqrtf", "sqrt", "sinf", "sin", "cosf", "cos", "tanf", "tan", "asinf", "asin", "acosf", "acos", "atanf", "atan",
];

fn declared_functions(ir: &str) -> Vec<String> {
    ir.lines()
        .filter(|l| l.starts_with("declare "))
        .filter_map(|l| l.split('@').nth(1))
        .map(|rest| rest.split('(').next().unwrap_or_default().to_string())
        .collect()
}

/// Scalar code (`ref`), and vector code for AVX2 and AVX-512 (`cpu`).
const ISAS: [Option<VectorIsa>; 3] = [
    None,
    Some(VectorIsa {
        lanes: 8,
        registers: 16,
        fma: true,
        f16c: true,
        amx_bf16: false,
        amx_int8: false,
        vnni: false,
        vbmi: false,
    }),
    Some(VectorIsa {
        lanes: 16,
        registers: 32,
        fma: true,
        f16c: true,
        amx_bf16: false,
        amx_int8: false,
        vnni: true,
        vbmi: true,
    }),
];

#[test]
fn every_op_kind_translates_for_every_element_type_it_accepts() {
    let translator = MlirToLlvm::new();
    let mut covered: BTreeMap<OpKind, Vec<DType>> = BTreeMap::new();
    for (d, isa) in DType::ALL.iter().flat_map(|&d| ISAS.map(|isa| (d, isa))) {
        // one graph per element type holding every op that accepts it
        let mut g = Graph::new("sweep");
        for &kind in OpKind::ALL {
            for (tys, a) in sample(kind, d) {
                let operands = tys
                    .iter()
                    .map(|ty| g.add_input(&format!("x{}", g.inputs.len()), ty.clone()))
                    .collect();
                if g.build(kind, operands, a).is_ok() && isa.is_none() {
                    covered.entry(kind).or_default().push(d);
                }
            }
        }
        let lowered = lower_graph(&g, isa).unwrap_or_else(|e| panic!("{d} {isa:?}: {e}"));
        let ir = translator
            .translate(&lowered.mlir)
            .unwrap_or_else(|e| panic!("{d} {isa:?}: {e}"));
        for k in &lowered.kernels {
            let n = k.args.len();
            let ptrs: Vec<String> = (0..n).map(|i| format!("ptr %{i}")).collect();
            let signature = format!(
                "define void @{}({}, i64 %{n}, i64 %{})",
                k.symbol,
                ptrs.join(", "),
                n + 1
            );
            assert!(ir.contains(&signature), "{d}: no `{signature}`");
        }
        for f in declared_functions(&ir) {
            assert!(
                f.starts_with("llvm.") || LIBM.contains(&f.as_str()),
                "{d}: external call to `{f}`"
            );
        }
    }
    // fused kernels and calls are covered by `fused.rs`'s tests; ops on strings have no kernel
    for &kind in OpKind::ALL.iter().filter(|k| {
        !matches!(k, OpKind::Constant | OpKind::Fused | OpKind::Call) && !k.is_control() && !k.has(Trait::Host)
    }) {
        let dtypes = covered.get(&kind).cloned().unwrap_or_default();
        let wanted: &[DType] = match kind {
            OpKind::Not => &[DType::Bool],
            OpKind::BitAnd | OpKind::BitOr | OpKind::BitXor | OpKind::ShiftLeft | OpKind::ShiftRight => {
                &[DType::I8, DType::I64, DType::U8, DType::U64]
            }
            OpKind::MatMulIntegerPacked | OpKind::ConvNhwcIntegerPacked | OpKind::ConvNhwcIntegerDepthwise => {
                &[DType::U8]
            }
            OpKind::DequantizeLinear => &[DType::I8, DType::U8, DType::I32],
            _ => &[DType::F16, DType::BF16, DType::F32, DType::F64],
        };
        assert!(
            wanted.iter().all(|w| dtypes.contains(w)),
            "{kind} covered for {dtypes:?} only"
        );
    }
    // the integer-capable ops were covered on integers too
    for kind in [
        OpKind::Add,
        OpKind::Div,
        OpKind::Pow,
        OpKind::Gather,
        OpKind::Scatter,
        OpKind::MatMul,
        OpKind::ReduceMax,
        OpKind::Cast,
    ] {
        assert!(
            covered[&kind].contains(&DType::U8) && covered[&kind].contains(&DType::I64),
            "{kind}: {:?}",
            covered[&kind]
        );
    }
}

/// Every kind the op table marks `Evaluable` is evaluated (on zeros) wherever it type-checks,
/// so the trait and `eval`'s match cannot drift apart (the ops on strings in
/// `mxc_dialects::eval::strings`'s tests).
#[test]
fn every_evaluable_kind_evaluates() {
    for &kind in OpKind::ALL
        .iter()
        .filter(|k| k.has(Trait::Evaluable) && !k.has(Trait::Host))
    {
        let mut evaluated = 0;
        for d in [DType::F32, DType::I64, DType::Bool] {
            for (tys, a) in sample(kind, d) {
                if mxc_dialects::mx::infer(kind, &tys, &a).is_err() {
                    continue;
                }
                let operands: Vec<Tensor> = tys.into_iter().map(Tensor::zeros).collect();
                let refs: Vec<&Tensor> = operands.iter().collect();
                match mxc_dialects::eval::eval(kind, &refs, &a) {
                    Some(Ok(_)) => evaluated += 1,
                    other => panic!("{kind} on {d}: {other:?}"),
                }
            }
        }
        assert!(evaluated > 0, "{kind}: no sample type-checks");
    }
}

#[test]
fn an_add_kernel_takes_three_pointers_and_a_range() {
    let m = lower_one(
        OpKind::Add,
        &[t(DType::F32, &[2, 3]), t(DType::F32, &[3])],
        Attrs::new(),
    );
    let ir = to_llvm_ir(&m.mlir).unwrap();
    assert!(
        ir.contains("define void @k0_add(ptr %0, ptr %1, ptr %2, i64 %3, i64 %4)"),
        "{ir}"
    );
    assert_eq!(m.kernels.len(), 1);
    assert_eq!(m.kernels[0].symbol, "k0_add");
}

#[test]
fn kernels_follow_the_graph_and_skip_constants() {
    let mut g = Graph::new("g");
    let x = g.add_input("x", t(DType::F32, &[4]));
    let c = g.constant(mxc_dialects::Tensor::from_f32s(vec![4], &[1.0, 2.0, 3.0, 4.0]));
    let y = g.build1(OpKind::Mul, vec![x, x], Attrs::new()).unwrap();
    let z = g.build1(OpKind::Add, vec![y, c], Attrs::new()).unwrap();
    g.add_output("z", z);
    let m = lower_graph(&g, None).unwrap();
    let symbols: Vec<&str> = m.kernels.iter().map(|k| k.symbol.as_str()).collect();
    assert_eq!(symbols, ["k1_mul", "k2_add"]);
    // a value used twice is passed twice
    assert_eq!(m.kernels[0].args, vec![x, x, y]);
    assert_eq!(m.kernels[1].args, vec![y, c, z]);
    check_in_order_of_functions(&m.mlir);
}

fn check_in_order_of_functions(mlir: &str) {
    super::testing::check_in_order(
        mlir,
        &[
            "func.func @k1_mul(%in0: memref<4xf32>, %in1: memref<4xf32>, %out0: memref<4xf32>, %lo: index, %hi: index)",
            "arith.mulf",
            "func.func @k2_add(",
            "arith.addf",
        ],
    );
}

#[test]
fn an_invalid_graph_is_an_error_not_a_panic() {
    let mut g = Graph::new("g");
    let x = g.add_input("x", t(DType::F32, &[4]));
    // recorded with a wrong result type, bypassing inference
    let y = g.push_op(OpKind::Relu, vec![x], Attrs::new(), vec![t(DType::F32, &[5])])[0];
    g.add_output("y", y);
    let err = lower_graph(&g, None).unwrap_err().to_string();
    assert!(err.contains("mx.relu"), "{err}");
}

#[test]
fn empty_tensors_are_declared_flat_and_never_touched() {
    let a = attrs(&[("axes", ints(&[1])), ("keepdims", Attr::Int(1))]);
    let m = lower_one(OpKind::ReduceMax, &[t(DType::F32, &[2, 0, 4])], a);
    assert!(
        m.mlir.contains("%in0: memref<0xf32>") && !m.mlir.contains("memref.load %in0"),
        "{}",
        m.mlir
    );
    let ir = to_llvm_ir(&m.mlir).unwrap();
    assert!(
        ir.contains("define void @k0_reduce_max(ptr %0, ptr %1, i64 %2, i64 %3)"),
        "{ir}"
    );
}

#[test]
fn a_kernel_whose_parallel_loop_is_all_it_does_may_be_split() {
    let f32s = |s: &[usize]| t(DType::F32, s);
    let parallel = |kind, inputs: &[TensorType], a: Attrs| lower_one(kind, inputs, a).kernels[0].parallel;

    // leading dimensions are collapsed until there are enough iterations to share
    let relu = parallel(OpKind::Relu, &[f32s(&[1, 8, 16, 16])], Attrs::new());
    assert_eq!((relu.range, relu.splittable), (2048, true), "a flat loop");
    let add = parallel(OpKind::Add, &[f32s(&[1, 8, 16, 16]), f32s(&[8, 1, 1])], Attrs::new());
    assert_eq!((add.range, add.splittable), (128, true), "1x8x16 of 1x8x16x16");
    let softmax = parallel(OpKind::Softmax, &[f32s(&[4, 10])], attrs(&[("axis", Attr::Int(1))]));
    assert_eq!((softmax.range, softmax.splittable), (4, true), "one row per iteration");

    // concat along a later axis: one loop over the dimensions before it, each input's run
    // copied in turn; along the first axis, a loop per input: one call does all of them
    let concat = |axis: i64| {
        parallel(
            OpKind::Concat,
            &[f32s(&[2, 3]), f32s(&[2, 5])],
            attrs(&[("axis", Attr::Int(axis))]),
        )
    };
    let along_rows = concat(1);
    assert_eq!((along_rows.range, along_rows.splittable), (2, true), "{along_rows:?}");
    let along_first = parallel(
        OpKind::Concat,
        &[f32s(&[2, 3]), f32s(&[5, 3])],
        attrs(&[("axis", Attr::Int(0))]),
    );
    assert!(!along_first.splittable && along_first.range == 6, "{along_first:?}");
    // a reduction to one element has no loop without carried values
    let keep = attrs(&[("axes", ints(&[0, 1])), ("keepdims", Attr::Int(0))]);
    let total = parallel(OpKind::ReduceSum, &[f32s(&[4, 4])], keep);
    assert_eq!((total.range, total.splittable), (0, false));

    // the work estimate follows the size
    let big = parallel(OpKind::Relu, &[f32s(&[1, 8, 32, 32])], Attrs::new());
    let ratio = big.work as f64 / relu.work as f64;
    assert!((ratio - 4.0).abs() < 0.01, "{big:?} vs {relu:?}");
}
