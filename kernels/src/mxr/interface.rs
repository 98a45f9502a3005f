//! The model's interface in an `.mxr` file (docs/mxr.md, *interface*): for the inputs, then
//! the outputs, a u64 count and each value's name and structure; a structure is a u32 tag,
//! `0` a tensor, `1` a sequence (u64 length), `2` an optional (u32 1 when of a sequence, u32 1
//! when it holds a value, then that value's structure).

use super::{Reader, Writer};
use mxc_dialects::interface::{Interface, Structure, Value};

/// How deep optionals may nest (ONNX's types allow an optional of a sequence, not deeper).
const MAX_NESTING: usize = 4;

pub(super) fn write_interface(w: &mut Writer, i: &Interface) {
    for values in [&i.inputs, &i.outputs] {
        w.u64(values.len() as u64);
        for v in values {
            w.str(&v.name);
            write_structure(w, &v.structure);
        }
    }
}

fn write_structure(w: &mut Writer, s: &Structure) {
    match s {
        Structure::Tensor => w.u32(0),
        Structure::Sequence(n) => {
            w.u32(1);
            w.u64(*n as u64);
        }
        Structure::Optional { of_sequence, value } => {
            w.u32(2);
            w.u32(*of_sequence as u32);
            w.u32(value.is_some() as u32);
            if let Some(v) = value {
                write_structure(w, v);
            }
        }
    }
}

/// Reads the interface of a program with `ports` bindings (no sequence is longer).
pub(super) fn read_interface(r: &mut Reader, ports: usize) -> Result<Interface, String> {
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        for _ in 0..r.count()? {
            let name = r.str()?;
            let structure = read_structure(r, 0, ports).map_err(|e| format!("interface value `{name}`: {e}"))?;
            list.push(Value { name, structure });
        }
    }
    let [inputs, outputs] = lists;
    Ok(Interface { inputs, outputs })
}

fn read_structure(r: &mut Reader, depth: usize, ports: usize) -> Result<Structure, String> {
    if depth > MAX_NESTING {
        return Err(format!("optionals nested deeper than {MAX_NESTING}"));
    }
    let flag = |r: &mut Reader, what: &str| match r.u32()? {
        0 => Ok(false),
        1 => Ok(true),
        k => Err(format!("{what} is {k}, not 0 or 1")),
    };
    Ok(match r.u32()? {
        0 => Structure::Tensor,
        1 => match r.u64()? {
            n if n <= ports as u64 => Structure::Sequence(n as usize),
            n => {
                return Err(format!(
                    "a sequence of {n} tensors in a program of {ports} inputs and outputs"
                ))
            }
        },
        2 => {
            let of_sequence = flag(r, "of a sequence")?;
            let value = match flag(r, "holds a value")? {
                true => Some(Box::new(read_structure(r, depth + 1, ports)?)),
                false => None,
            };
            Structure::Optional { of_sequence, value }
        }
        k => return Err(format!("unknown structure {k}")),
    })
}
