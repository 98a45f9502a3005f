//! The import-time constant evaluator (`mxc_dialects::eval`) against the `ref` target: the
//! same op on the same operands must give the same values, so folding never changes what a
//! program computes (DESIGN: one definition of an op's meaning).

use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{eval::eval, Attr, Attrs, DType, Graph, OpKind, Tensor, TensorType};
use mxc_kernels::Executable;
use std::collections::HashMap;

/// Seeded operand data: floats in [-4, 4) on a 1/8 grid (plus zeros), small signed integers.
fn data(ty: &TensorType, seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n = ty.num_elements();
    match ty.dtype {
        DType::Bool => Tensor::from_i64s(
            DType::Bool,
            ty.shape.clone(),
            &(0..n).map(|_| (next() & 1) as i64).collect::<Vec<_>>(),
        ),
        d if d.is_float() => {
            let v: Vec<f64> = (0..n).map(|_| (next() % 64) as f64 / 8.0 - 4.0).collect();
            Tensor::from_f64s(d, ty.shape.clone(), &v)
        }
        d => Tensor::from_i64s(
            d,
            ty.shape.clone(),
            &(0..n).map(|_| (next() % 13) as i64 - 6).collect::<Vec<_>>(),
        ),
    }
}

fn check(kind: OpKind, operands: Vec<Tensor>, attrs: Attrs) {
    let refs: Vec<&Tensor> = operands.iter().collect();
    let folded = eval(kind, &refs, &attrs)
        .expect("evaluable")
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    let mut g = Graph::new("case");
    let inputs: Vec<_> = operands
        .iter()
        .enumerate()
        .map(|(i, t)| g.add_input(&format!("x{i}"), t.ty.clone()))
        .collect();
    let result = g.build1(kind, inputs, attrs).unwrap();
    g.add_output("y", result);
    let compiled = compile(&g, Target::Ref, &CompileOptions::default()).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let exe = Executable::load(compiled.program, &compiled.library).unwrap();
    let values: HashMap<String, Tensor> = operands
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("x{i}"), t.clone()))
        .collect();
    let ran = exe.run(&values).unwrap().remove(0).1;
    assert_eq!(ran.ty, folded[0].ty, "{kind}");
    for i in 0..ran.len() {
        let (r, f) = (ran.get_f64(i), folded[0].get_f64(i));
        let close = r == f || (r.is_nan() && f.is_nan()) || (r - f).abs() <= 1e-6 * f.abs();
        assert!(
            close,
            "{kind} on {:?}: element {i} is {r} on ref, {f} folded",
            operands.iter().map(|t| t.ty.to_string()).collect::<Vec<_>>()
        );
    }
}

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[test]
fn elementwise_ops_fold_as_ref_computes_them() {
    use OpKind::*;
    for dtype in [DType::F32, DType::I64, DType::I32] {
        for kind in [Add, Sub, Mul, Div, Max, Min] {
            check(
                kind,
                vec![data(&ty(dtype, &[2, 3]), 1), data(&ty(dtype, &[3]), 2)],
                Attrs::new(),
            );
        }
        for kind in [Equal, Less, Greater] {
            check(
                kind,
                vec![data(&ty(dtype, &[4, 1]), 3), data(&ty(dtype, &[3]), 4)],
                Attrs::new(),
            );
        }
        for kind in [Neg, Abs] {
            check(kind, vec![data(&ty(dtype, &[5]), 5)], Attrs::new());
        }
    }
    for kind in [Sqrt, Reciprocal, Floor, Ceil] {
        check(kind, vec![data(&ty(DType::F32, &[7]), 6)], Attrs::new());
    }
    check(Not, vec![data(&ty(DType::Bool, &[6]), 7)], Attrs::new());
    check(
        Where,
        vec![
            data(&ty(DType::Bool, &[2, 1]), 8),
            data(&ty(DType::F32, &[3]), 9),
            data(&ty(DType::F32, &[2, 3]), 10),
        ],
        Attrs::new(),
    );
    for (from, to) in [
        (DType::F32, DType::I64),
        (DType::I64, DType::F32),
        (DType::F32, DType::Bool),
        (DType::Bool, DType::F32),
        (DType::I32, DType::I8),
    ] {
        check(
            Cast,
            vec![data(&ty(from, &[9]), 11)],
            Attrs::new().with("to", Attr::DType(to)),
        );
    }
}

#[test]
fn data_movement_ops_fold_as_ref_computes_them() {
    use OpKind::*;
    let x = data(&ty(DType::F32, &[2, 3, 4]), 12);
    check(Reshape, vec![x.clone()], Attrs::new().with("shape", ints(&[6, 4])));
    check(Transpose, vec![x.clone()], Attrs::new().with("perm", ints(&[2, 0, 1])));
    check(
        Concat,
        vec![x.clone(), data(&ty(DType::F32, &[2, 1, 4]), 13)],
        Attrs::new().with("axis", Attr::Int(1)),
    );
    check(
        Slice,
        vec![x.clone()],
        Attrs::new()
            .with("starts", ints(&[1, 0, 3]))
            .with("ends", ints(&[2, 3, -1]))
            .with("steps", ints(&[1, 2, -2])),
    );
    let indices = Tensor::from_i64s(DType::I64, vec![2, 2], &[0, -1, 2, -3]);
    check(
        Gather,
        vec![x.clone(), indices],
        Attrs::new().with("axis", Attr::Int(1)),
    );
    check(
        Expand,
        vec![data(&ty(DType::I64, &[3, 1]), 14)],
        Attrs::new().with("shape", ints(&[2, 3, 4])),
    );
    check(Identity, vec![x], Attrs::new());
}

#[test]
fn reductions_fold_as_ref_computes_them() {
    use OpKind::*;
    for dtype in [DType::F32, DType::I64] {
        for kind in [ReduceSum, ReduceMean, ReduceMax] {
            for keep in [0, 1] {
                let attrs = Attrs::new()
                    .with("axes", ints(&[0, 2]))
                    .with("keepdims", Attr::Int(keep));
                check(kind, vec![data(&ty(dtype, &[3, 2, 5]), 15)], attrs);
            }
        }
    }
}
