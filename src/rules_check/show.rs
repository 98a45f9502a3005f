//! Short, readable renderings of the values in a `mxc rules check` report: tensors as their
//! type and first elements, attribute values as they are written in rule files.

use mxc_dialects::{Attr, DType, Tensor};

/// Elements shown of a tensor before `...`.
const SHOWN: usize = 12;

/// `f32[2,3] [0.5, -1, ...]`; a scalar or a splat shows its one value.
pub fn tensor(t: &Tensor) -> String {
    let elements: Vec<String> = (0..t.len()).map(|i| element(t, i)).collect();
    if elements.len() > 1 && elements.iter().all(|e| *e == elements[0]) {
        return format!("{} all {}", t.ty, elements[0]);
    }
    let more = if elements.len() > SHOWN { ", ..." } else { "" };
    let shown = elements.len().min(SHOWN);
    format!("{} [{}{more}]", t.ty, elements[..shown].join(", "))
}

fn element(t: &Tensor, i: usize) -> String {
    if t.dtype() == DType::F64 {
        t.get_f64(i).to_string()
    } else if t.dtype().is_float() {
        // The shortest text that reads back as the same f32.
        (t.get_f64(i) as f32).to_string()
    } else {
        t.get_i64(i).to_string()
    }
}

pub fn attr(a: &Attr) -> String {
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    match a {
        Attr::Int(v) => v.to_string(),
        Attr::Float(v) => format!("{v:?}"),
        Attr::Ints(v) => list(v.iter().map(i64::to_string).collect()),
        Attr::Sizes(v) => mxc_dialects::dim::show(v),
        Attr::Floats(v) => list(v.iter().map(|x| format!("{x:?}")).collect()),
        Attr::Str(s) => format!("{s:?}"),
        Attr::DType(d) => d.to_string(),
        Attr::Tensor(t) => tensor(t),
        Attr::Graph(g) => format!("graph {:?}", g.name),
    }
}
