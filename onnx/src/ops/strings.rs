//! ONNX's ops on strings. `StringConcat`, `RegexFullMatch` and `StringNormalizer`'s case change
//! are the mx string ops (run on the host); `Equal` on strings is `mx.equal` (`logic.rs`).
//! `StringNormalizer` with stopwords and `StringSplit` give shapes that depend on the strings,
//! so they are evaluated at import where the input is known (a constant, or the value given
//! to `mxc run`) and refused otherwise. `LabelEncoder` (`ai.onnx.ml`) compares the input with
//! every key at once and gathers the value of the key it equals, or the default.

use super::super::ctx::Ctx;
use super::super::registry::{Registry, LATEST};
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add("", "StringConcat", 20, LATEST, string_concat);
    r.add("", "RegexFullMatch", 20, LATEST, regex_full_match);
    r.add("", "StringNormalizer", 10, LATEST, string_normalizer);
    r.add("", "StringSplit", 20, LATEST, string_split);
    r.add("ai.onnx.ml", "LabelEncoder", 2, LATEST, label_encoder);
}

fn string_concat(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, y) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![ctx.build1(OpKind::StringConcat, vec![x, y], Attrs::new())?])
}

fn regex_full_match(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let pattern = ctx.node.opt_string("pattern")?.ok_or("missing attribute `pattern`")?;
    let attrs = Attrs::new().with("pattern", Attr::Str(pattern));
    Ok(vec![ctx.build1(OpKind::RegexFullMatch, vec![x], attrs)?])
}

/// The value of input `i`, which decides the output's shape: known at import, or refused.
fn known_strings(ctx: &Ctx, i: usize, op: &str) -> Result<Vec<String>, String> {
    let x = ctx.input(i)?;
    let known = ctx.known(x).ok_or_else(|| {
        format!(
            "{op}'s output shape depends on the strings of its input, known only at run time: not supported \
             without dynamic shapes"
        )
    })?;
    let strings = known
        .strings()
        .ok_or_else(|| format!("the input must be strings, got {}", known.ty))?;
    Ok(strings.into_iter().map(String::from).collect())
}

fn string_normalizer(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    if !(shape.len() == 1 || (shape.len() == 2 && shape[0] == 1)) {
        return Err(format!("the input must be of shape [C] or [1, C], got {shape:?}"));
    }
    let case = match ctx.node.string("case_change_action", "NONE")?.as_str() {
        "NONE" => None,
        "LOWER" => Some("lower"),
        "UPPER" => Some("upper"),
        other => return Err(format!("case_change_action {other:?} is not NONE, LOWER or UPPER")),
    };
    let case_sensitive = match ctx.node.int("is_case_sensitive", 0)? {
        0 => false,
        1 => true,
        other => return Err(format!("is_case_sensitive {other} is not 0 or 1")),
    };
    // case changes follow Unicode's rules, the same in every locale but Turkish and Lithuanian
    ctx.node.without_effect(&["locale"]);
    let stopwords = ctx.node.opt_strings("stopwords")?.unwrap_or_default();
    let x = match stopwords.is_empty() {
        true => x,
        false => {
            let fold = |s: &str| {
                if case_sensitive {
                    s.to_string()
                } else {
                    s.to_lowercase()
                }
            };
            let stop: Vec<String> = stopwords.iter().map(|s| fold(s)).collect();
            let kept: Vec<String> = known_strings(ctx, 0, "StringNormalizer with stopwords")?
                .into_iter()
                .filter(|s| !stop.contains(&fold(s)))
                .collect();
            // nothing kept: one empty string
            let (kept, n) = match kept.len() {
                0 => (vec![String::new()], 1),
                n => (kept, n),
            };
            let shape = if shape.len() == 1 { vec![n] } else { vec![1, n] };
            ctx.constant(Tensor::from_strings(shape, kept))
        }
    };
    match case {
        None => Ok(vec![x]),
        Some(to) => {
            let attrs = Attrs::new().with("to", Attr::Str(to.into()));
            Ok(vec![ctx.build1(OpKind::StringCase, vec![x], attrs)?])
        }
    }
}

/// `s` split as `StringSplit` says: at each `delimiter`, or at runs of whitespace (leading and
/// trailing whitespace dropped) when there is none; after `maxsplit` splits the rest is one
/// piece.
fn split(s: &str, delimiter: Option<&str>, maxsplit: Option<usize>) -> Vec<String> {
    let limit = maxsplit.map_or(usize::MAX, |m| m.saturating_add(1));
    match delimiter {
        Some(d) => s.splitn(limit, d).map(String::from).collect(),
        None => {
            let mut pieces = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if pieces.len() + 1 == limit {
                    pieces.push(rest.to_string());
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                pieces.push(rest[..end].to_string());
                rest = rest[end..].trim_start();
            }
            pieces
        }
    }
}

fn string_split(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let delimiter = ctx.node.opt_string("delimiter")?.filter(|d| !d.is_empty());
    let maxsplit = match ctx.node.opt_int("maxsplit")? {
        Some(m) => Some(usize::try_from(m).map_err(|_| format!("maxsplit {m} is negative"))?),
        None => None,
    };
    let pieces: Vec<Vec<String>> = known_strings(ctx, 0, "StringSplit")?
        .iter()
        .map(|s| split(s, delimiter.as_deref(), maxsplit))
        .collect();
    let width = pieces.iter().map(Vec::len).max().unwrap_or(0);
    let counts: Vec<i64> = pieces.iter().map(|p| p.len() as i64).collect();
    let padded: Vec<String> = pieces
        .into_iter()
        .flat_map(|mut p| {
            p.resize(width, String::new());
            p
        })
        .collect();
    let substrings = ctx.constant(Tensor::from_strings([shape.clone(), vec![width]].concat(), padded));
    let counts = ctx.constant(Tensor::from_i64s(DType::I64, shape, &counts));
    Ok(vec![substrings, counts])
}

/// One side of a `LabelEncoder` mapping: the attribute of `prefix` (`keys`, `values`) that the
/// node gives, as a 1-D tensor.
fn mapping(ctx: &Ctx, prefix: &str) -> Result<Tensor, String> {
    let mut given = Vec::new();
    if let Some(s) = ctx.node.opt_strings(&format!("{prefix}_strings"))? {
        let n = s.len();
        given.push(Tensor::from_strings(vec![n], s));
    }
    if let Some(v) = ctx.node.opt_ints(&format!("{prefix}_int64s"))? {
        given.push(Tensor::from_i64s(DType::I64, vec![v.len()], &v));
    }
    if let Some(v) = ctx.node.opt_floats(&format!("{prefix}_floats"))? {
        let v: Vec<f64> = v.iter().map(|&f| f as f64).collect();
        given.push(Tensor::from_f64s(DType::F32, vec![v.len()], &v));
    }
    if let Some(t) = ctx.tensor_attr(&format!("{prefix}_tensor"))? {
        let n = t.len();
        given.push(t.reshaped(vec![n]));
    }
    match given.len() {
        1 => Ok(given.remove(0)),
        0 => Err(format!("none of the attributes `{prefix}_*` is given")),
        _ => Err(format!("more than one of the attributes `{prefix}_*` is given")),
    }
}

/// The default value of a `LabelEncoder` whose values are of `dtype`.
fn default_value(ctx: &Ctx, dtype: DType) -> Result<Tensor, String> {
    let string = ctx.node.opt_string("default_string")?;
    let int = ctx.node.opt_int("default_int64")?;
    let float = ctx.node.opt_float("default_float")?;
    if let Some(t) = ctx.tensor_attr("default_tensor")? {
        if t.dtype() != dtype || t.len() != 1 {
            return Err(format!("default_tensor must be one {dtype}, got {}", t.ty));
        }
        return Ok(t.reshaped(vec![]));
    }
    Ok(match dtype {
        DType::Str => Tensor::from_strings(vec![], vec![string.unwrap_or_else(|| "_Unused".into())]),
        DType::F32 => Tensor::from_f64s(DType::F32, vec![], &[float.map_or(-0.0, f64::from)]),
        d => Tensor::from_i64s(d, vec![], &[int.unwrap_or(-1)]),
    })
}

fn label_encoder(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let (keys, values) = (mapping(ctx, "keys")?, mapping(ctx, "values")?);
    if keys.len() != values.len() {
        return Err(format!("{} keys and {} values", keys.len(), values.len()));
    }
    if keys.dtype() != ctx.ty(x).dtype {
        return Err(format!("keys of {} for an input of {}", keys.dtype(), ctx.ty(x).dtype));
    }
    let default = default_value(ctx, values.dtype())?;
    let rank = ctx.ty(x).rank();
    let n = keys.len();
    // eq[..., k]: x equals key k; the keys are distinct, so at most one is true
    let mut column = ctx.ty(x).shape.clone();
    column.push(1);
    let x_column = super::shape::reshape(ctx, x, &column)?;
    let keys = ctx.constant(keys);
    let eq = ctx.op(OpKind::Equal, &[x_column, keys])?;
    let hits = ctx.cast(eq, DType::I64)?;
    let ramp = ctx.ramp(n, rank, rank + 1, DType::I64)?;
    let weighted = ctx.op(OpKind::Mul, &[hits, ramp])?;
    let index = ctx.reduce(OpKind::ReduceSum, weighted, &[rank], false)?;
    let found = ctx.reduce(OpKind::ReduceMax, hits, &[rank], false)?;
    let found = ctx.cast(found, DType::Bool)?;
    let values = ctx.constant(values);
    let picked = ctx.build1(
        OpKind::Gather,
        vec![values, index],
        Attrs::new().with("axis", Attr::Int(0)),
    )?;
    let default = ctx.constant(default);
    Ok(vec![ctx.op(OpKind::Where, &[found, picked, default])?])
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splitting_follows_python() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(split("a,,b", Some(","), None), s(&["a", "", "b"]));
        assert_eq!(split("a,b,c", Some(","), Some(1)), s(&["a", "b,c"]));
        assert_eq!(split("  a  b c ", None, None), s(&["a", "b", "c"]));
        assert_eq!(split("  a  b c ", None, Some(1)), s(&["a", "b c "]));
        assert!(split("   ", None, None).is_empty());
        assert_eq!(split("", Some(","), None), s(&[""]));
    }
}
