//! Type rules of the ops on strings (`Trait::Host`: the plan runs them on the host): joining
//! two string tensors element by element (broadcast), changing their case, and matching each
//! against a regular expression as a whole. Other ops apply to strings only where they move
//! elements (`applies_to_strings`).

use super::elementwise::broadcast_shapes;
use crate::{Attrs, DType, OpKind, TensorType};

/// Whether `kind` may take string operands: the string ops, the ops that only move or compare
/// elements (`Trait::OnStrings`), and the control ops (which pass values through).
pub fn applies_to_strings(kind: OpKind) -> bool {
    use crate::Trait;
    kind.has(Trait::Host) || kind.is_control() || kind.has(Trait::OnStrings)
}

fn strings(t: &TensorType, what: &str) -> Result<(), String> {
    match t.dtype {
        DType::Str => Ok(()),
        d => Err(format!("{what} must be strings, got {d}")),
    }
}

pub fn concat(ops: &[TensorType]) -> Result<TensorType, String> {
    strings(&ops[0], "operands")?;
    strings(&ops[1], "operands")?;
    Ok(TensorType::new(
        DType::Str,
        broadcast_shapes(&ops[0].shape, &ops[1].shape)?,
    ))
}

pub fn case(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    strings(x, "the operand")?;
    match attrs.str("to")? {
        "lower" | "upper" => Ok(x.clone()),
        other => Err(format!("`to` must be \"lower\" or \"upper\", got {other:?}")),
    }
}

pub fn regex_full_match(x: &TensorType, attrs: &Attrs) -> Result<TensorType, String> {
    strings(x, "the operand")?;
    pattern(attrs.str("pattern")?)?;
    Ok(x.with_dtype(DType::Bool))
}

/// `pattern` compiled to match whole strings.
pub fn pattern(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("pattern {pattern:?}: {e}"))
}
