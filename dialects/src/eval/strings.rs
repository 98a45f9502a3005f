//! Ops on strings. Data movement (identity, reshape, transpose, concat, slice, gather,
//! expand, where) runs on the strings' handles as `i64`, the string operands' tables joined
//! into one (each operand's handles offset by where its strings start), and the handles it
//! gives pick the result's strings; `equal` and the string ops (`string_concat`,
//! `string_case`, `regex_full_match`) work on the strings themselves, operands broadcast.

use super::{eval_typed, layout};
use crate::{Attrs, DType, OpKind, Tensor, TensorType};
use std::sync::Arc;

/// Whether `kind` only moves elements, so that it applies to strings as it does to handles.
fn moves_data(kind: OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind,
        Identity | Reshape | Transpose | Concat | Slice | Gather | Expand | Where
    )
}

pub(super) fn eval_on_strings(
    kind: OpKind,
    ops: &[&Tensor],
    attrs: &Attrs,
    out: &TensorType,
) -> Result<Tensor, String> {
    let mut table: Vec<String> = Vec::new();
    let mut operands: Vec<Tensor> = Vec::with_capacity(ops.len());
    for t in ops {
        match t.string_handles() {
            Some((handles, strings)) => {
                let base = table.len() as i64;
                table.extend(strings.iter().cloned());
                let shifted: Vec<i64> = handles.to_i64_vec().iter().map(|h| h + base).collect();
                operands.push(Tensor::from_i64s(DType::I64, handles.shape().to_vec(), &shifted));
            }
            None => operands.push((*t).clone()),
        }
    }
    let handles_ty = TensorType::new(DType::I64, out.shape.clone());
    // operand `i`'s strings at each position of the result
    let at = |i: usize| -> Vec<&str> {
        let handles = layout::expand(&operands[i], &handles_ty).to_i64_vec();
        handles.iter().map(|&h| table[h as usize].as_str()).collect()
    };
    let bools = |values: Vec<bool>| {
        let values: Vec<i64> = values.into_iter().map(i64::from).collect();
        Ok(Tensor::from_i64s(DType::Bool, out.shape.clone(), &values))
    };
    let texts = |values: Vec<String>| Ok(Tensor::from_strings(out.shape.clone(), values));
    match kind {
        OpKind::Equal => bools(at(0).into_iter().zip(at(1)).map(|(a, b)| a == b).collect()),
        OpKind::StringConcat => texts(at(0).into_iter().zip(at(1)).map(|(a, b)| format!("{a}{b}")).collect()),
        OpKind::StringCase => {
            let upper = attrs.str("to")? == "upper";
            texts(
                at(0)
                    .into_iter()
                    .map(|s| if upper { s.to_uppercase() } else { s.to_lowercase() })
                    .collect(),
            )
        }
        OpKind::RegexFullMatch => {
            let pattern = crate::mx::strings::pattern(attrs.str("pattern")?)?;
            bools(at(0).into_iter().map(|s| pattern.is_match(s)).collect())
        }
        kind if moves_data(kind) && out.dtype == DType::Str => {
            let refs: Vec<&Tensor> = operands.iter().collect();
            let moved = eval_typed(kind, &refs, attrs, &handles_ty)?;
            let handles: Vec<u64> = moved.to_i64_vec().iter().map(|&h| h as u64).collect();
            Tensor::from_string_handles(out.shape.clone(), &handles, Arc::new(table))
                .ok_or_else(|| format!("`{kind}` gave a handle outside the strings"))
        }
        kind => Err(format!("`{kind}` does not apply to strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attr;

    fn strings(shape: &[usize], values: &[&str]) -> Tensor {
        Tensor::from_strings(shape.to_vec(), values.iter().map(|s| s.to_string()).collect())
    }

    fn eval1(kind: OpKind, ops: &[&Tensor], attrs: Attrs) -> Tensor {
        crate::eval::eval(kind, ops, &attrs).unwrap().unwrap().remove(0)
    }

    #[test]
    fn data_movement_picks_the_strings() {
        let a = strings(&[2, 2], &["a", "b", "c", "d"]);
        let t = eval1(
            OpKind::Transpose,
            &[&a],
            Attrs::new().with("perm", Attr::Ints(vec![1, 0])),
        );
        assert_eq!(t.strings().unwrap(), ["a", "c", "b", "d"]);
        let b = strings(&[1, 2], &["e", "f"]);
        let c = eval1(OpKind::Concat, &[&a, &b], Attrs::new().with("axis", Attr::Int(0)));
        assert_eq!(c.shape(), [3, 2]);
        assert_eq!(c.strings().unwrap(), ["a", "b", "c", "d", "e", "f"]);
        let i = Tensor::from_i64s(DType::I64, vec![2], &[2, 0]);
        let g = eval1(OpKind::Gather, &[&c, &i], Attrs::new().with("axis", Attr::Int(0)));
        assert_eq!(g.strings().unwrap(), ["e", "f", "a", "b"]);
        assert_eq!(g, strings(&[2, 2], &["e", "f", "a", "b"]));
    }

    #[test]
    fn the_string_ops_work_on_the_strings() {
        let a = strings(&[2], &["Mon", "tue"]);
        let b = strings(&[], &["!"]);
        let c = eval1(OpKind::StringConcat, &[&a, &b], Attrs::new());
        assert_eq!(c.strings().unwrap(), ["Mon!", "tue!"]);
        let up = eval1(
            OpKind::StringCase,
            &[&a],
            Attrs::new().with("to", Attr::Str("upper".into())),
        );
        assert_eq!(up.strings().unwrap(), ["MON", "TUE"]);
        let pattern = Attrs::new().with("pattern", Attr::Str("[a-z]+".into()));
        let m = eval1(OpKind::RegexFullMatch, &[&a], pattern);
        assert_eq!(m.to_i64_vec(), [0, 1]);
        let bad = Attrs::new().with("pattern", Attr::Str("(".into()));
        let err = crate::eval::eval(OpKind::RegexFullMatch, &[&a], &bad)
            .unwrap()
            .unwrap_err();
        assert!(err.starts_with("pattern \"(\": "), "{err}");
        let err = crate::eval::eval(OpKind::Add, &[&a, &a], &Attrs::new())
            .unwrap()
            .unwrap_err();
        assert_eq!(err, "does not apply to strings");
    }

    #[test]
    fn equal_compares_the_strings_with_broadcasting() {
        let a = strings(&[3], &["x", "y", "x"]);
        let b = strings(&[1], &["x"]);
        let e = eval1(OpKind::Equal, &[&a, &b], Attrs::new());
        assert_eq!(e.dtype(), DType::Bool);
        assert_eq!(e.to_i64_vec(), [1, 0, 1]);
        let err = crate::eval::eval(OpKind::Add, &[&a, &a], &Attrs::new()).unwrap();
        assert!(err.is_err());
    }
}

#[cfg(test)]
mod text_tests {
    use crate::{text, DType, OpKind};

    #[test]
    fn string_constants_print_quoted_and_parse_back() {
        let src = r#"graph "s" (%arg0: tensor<2xstring> "x") {
  %0 = mx.constant {value = dense<["a \"b\"", "é"]> : tensor<2xstring>} : tensor<2xstring>
  %1 = mx.equal %arg0, %0 : tensor<2xbool>
  return "y" = %1
}
"#;
        let g = text::parse(src).unwrap();
        let c = g.ops.iter().find(|op| op.kind == OpKind::Constant).unwrap();
        let value = c.attrs.tensor("value").unwrap();
        assert_eq!(value.dtype(), DType::Str);
        assert_eq!(value.strings().unwrap(), ["a \"b\"", "é"]);
        assert_eq!(text::print(&g), src);
        let x = crate::Tensor::from_strings(vec![2], vec!["a \"b\"".into(), "e".into()]);
        let y = crate::eval::run(&g, &[x]).unwrap();
        assert_eq!(y[0].to_i64_vec(), [1, 0]);
    }
}
