//! What the right side needs to build folded weights: `scalar(v, dtype)` as an operand makes a
//! new constant leaf, `channel_shape(?t, axis)` a per-channel `shape`; where they may be used,
//! and the errors when they are misused.

use super::harness::{check_rewrite, input, splat};
use crate::rules::funcs::lookup;
use crate::rules::parse_rules;
use crate::rules::value::{TensorFacts, Value};
use mxc_dialects::DType::{F16, F32, I64};
use mxc_dialects::TensorType;

fn call(name: &str, args: &[Value]) -> Option<Value> {
    (lookup(name).unwrap().eval)(args)
}

fn tensor(shape: &[usize]) -> Value {
    Value::Tensor(TensorFacts {
        ty: Some(TensorType::new(F32, shape.to_vec())),
        constant: None,
    })
}

#[test]
fn channel_shape_keeps_one_axis() {
    let w = tensor(&[8, 3, 5, 5]);
    let shape = |axis: i64| match call("channel_shape", &[w.clone(), Value::Int(axis)]) {
        Some(Value::Ints(v)) => Some(v),
        _ => None,
    };
    assert_eq!(shape(0), Some(vec![8, 1, 1, 1]));
    assert_eq!(shape(1), Some(vec![1, 3, 1, 1]));
    assert_eq!(shape(4), None, "an axis out of range does not fire the rule");
    assert_eq!(shape(-1), None);
}

#[test]
fn scalar_is_a_rank_0_constant_of_the_element_type() {
    for (dtype, v, want) in [(F32, 1e-5, 1e-5f32 as f64), (F16, 0.5, 0.5), (I64, 3.0, 3.0)] {
        let Some(Value::Tensor(facts)) = call("scalar", &[Value::Float(v), Value::DType(dtype)]) else {
            panic!("scalar gives a tensor");
        };
        let t = facts.constant.expect("a constant").tensor;
        assert_eq!(facts.ty, Some(TensorType::new(dtype, vec![])));
        assert_eq!(t.ty, TensorType::new(dtype, vec![]));
        assert_eq!(t.get_f64(0), want);
    }
}

#[test]
fn a_computed_constant_becomes_an_operand() {
    // The test analysis does not fold: the new leaf is the constant 4 of x's element type.
    let rules = "rule quadruple: (add (add ?x ?x) (add ?x ?x)) => (mul ?x scalar(4, dtype(?x)))";
    let leaves = [("x", input(F32, &[3])), ("four", splat(F32, &[], 4.0))];
    check_rewrite(rules, "(add (add ?x ?x) (add ?x ?x))", &leaves, "(mul ?x ?four)");
}

#[test]
fn a_computed_shape_reshapes_per_channel() {
    // `probe` only fires on the shape `channel_shape` computes ([4, 1, 1] for w of rank 3).
    let rules = "rule r: (mul ?w (reshape ?k shape=?s)) => (mul ?w (reshape ?k shape=channel_shape(?w, 0)))
                 rule probe: (mul ?w (reshape ?k shape=[4, 1, 1])) => (neg ?w)";
    let leaves = [("w", input(F32, &[4, 2, 4])), ("k", input(F32, &[4]))];
    check_rewrite(rules, "(mul ?w (reshape ?k shape=[1, 1, 4]))", &leaves, "(neg ?w)");
}

/// Asserts that `text` is refused with a message containing `needle`.
fn refused(text: &str, needle: &str) {
    match parse_rules(text, "bad.rules") {
        Err(e) => assert!(e.to_string().contains(needle), "{e} should mention {needle:?}"),
        Ok(_) => panic!("{text:?} should be refused"),
    }
}

#[test]
fn computed_constants_are_checked() {
    refused(
        "rule a: (mul ?x scalar(1, f32)) => ?x",
        "1:17: a computed constant can only be built on the right side",
    );
    refused(
        "rule a: (neg ?x) => (mul ?x shape(?x))",
        "1:29: an operand must be a tensor",
    );
    refused(
        "rule a: (neg ?x) => (mul ?x scalar(?x, f32))",
        "expected a float, this is a tensor",
    );
    refused(
        "rule a: (neg ?x) => (mul ?x scalar(1))",
        "`scalar` takes 2 arguments, got 1",
    );
    refused("rule a: (neg ?x) => (mul ?x nothing(1))", "unknown function `nothing`");
    assert!(parse_rules("rule a: (neg ?x) => (mul ?x scalar(-1, dtype(?x)))", "ok.rules").is_ok());
}

#[test]
fn values_in_asks_whether_integer_weights_are_all_values_of_a_narrower_type() {
    let weights = |dtype: mxc_dialects::DType, values: &[i64]| {
        let t = mxc_dialects::Tensor::from_i64s(dtype, vec![values.len()], values);
        Value::Tensor(TensorFacts {
            ty: Some(t.ty.clone()),
            constant: Some(crate::lang::ConstValue::new(t)),
        })
    };
    let values_in = |w: Value, d| match call("values_in", &[w, Value::DType(d)]) {
        Some(Value::Bool(b)) => Some(b),
        _ => None,
    };
    let (i8, u8, i32) = (
        mxc_dialects::DType::I8,
        mxc_dialects::DType::U8,
        mxc_dialects::DType::I32,
    );
    assert_eq!(values_in(weights(i32, &[-128, 5, 127]), i8), Some(true));
    assert_eq!(values_in(weights(i32, &[-129, 5]), i8), Some(false));
    assert_eq!(values_in(weights(i32, &[0, 255]), u8), Some(true));
    assert_eq!(values_in(weights(i32, &[-1, 255]), u8), Some(false));
    // not integers, or not a constant: the rule does not fire
    assert_eq!(values_in(weights(F32, &[1, 2]), i8), None);
    assert_eq!(values_in(tensor(&[3]), i8), None);
}
