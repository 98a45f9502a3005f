//! `mxc read --format json`: a graph as JSON, for tools. Values are named as in the text form
//! (`%argN`, `%N`); an op has its kind, operands, results with their types, attributes and,
//! for `mx.fused`, its body; a constant shows its values when it has at most 16 elements and
//! its size otherwise. Floats that JSON cannot write (NaN, infinities) are strings.

use mxc_dialects::text::value_name;
use mxc_dialects::{Attr, Graph, Op, Tensor};
use std::fmt::Write;

pub fn graph(g: &Graph) -> String {
    let mut out = String::new();
    write_graph(&mut out, g);
    out.push('\n');
    out
}

fn write_graph(out: &mut String, g: &Graph) {
    let ports = |ports: &[mxc_dialects::Port]| {
        let items: Vec<String> = ports
            .iter()
            .map(|p| {
                format!(
                    "{{\"name\": {}, \"value\": \"{}\", \"type\": \"{}\"}}",
                    string(&p.name),
                    value_name(g, p.value),
                    g.ty(p.value)
                )
            })
            .collect();
        format!("[{}]", items.join(", "))
    };
    write!(
        out,
        "{{\"name\": {}, \"inputs\": {}, \"ops\": [",
        string(&g.name),
        ports(&g.inputs)
    )
    .unwrap();
    for (i, op) in g.ops.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_op(out, g, op);
    }
    write!(out, "], \"outputs\": {}}}", ports(&g.outputs)).unwrap();
}

fn write_op(out: &mut String, g: &Graph, op: &Op) {
    let names = |vs: &[mxc_dialects::ValueId]| {
        let items: Vec<String> = vs.iter().map(|v| format!("\"{}\"", value_name(g, *v))).collect();
        format!("[{}]", items.join(", "))
    };
    let types: Vec<String> = op.results.iter().map(|v| format!("\"{}\"", g.ty(*v))).collect();
    let attrs: Vec<String> = op
        .attrs
        .0
        .iter()
        .map(|(k, a)| format!("{}: {}", string(k), attr(a)))
        .collect();
    write!(
        out,
        "{{\"op\": \"{}\", \"operands\": {}, \"results\": {}, \"types\": [{}], \"attrs\": {{{}}}",
        op.kind,
        names(&op.operands),
        names(&op.results),
        types.join(", "),
        attrs.join(", ")
    )
    .unwrap();
    if let Some(body) = &op.body {
        out.push_str(", \"body\": ");
        write_graph(out, body);
    }
    out.push('}');
}

fn attr(a: &Attr) -> String {
    let list = |items: Vec<String>| format!("[{}]", items.join(", "));
    match a {
        Attr::Int(v) => v.to_string(),
        Attr::Float(v) => number(*v),
        Attr::Ints(v) => list(v.iter().map(|x| x.to_string()).collect()),
        // a symbolic size as its expression with its symbols' constraints
        Attr::Sizes(v) => list(
            v.iter()
                .map(|d| match d.as_constant() {
                    Some(n) => n.to_string(),
                    None => string(&d.to_string()),
                })
                .collect(),
        ),
        Attr::Floats(v) => list(v.iter().map(|x| number(*x)).collect()),
        Attr::Str(s) => string(s),
        Attr::DType(d) => format!("\"{}\"", d.name()),
        Attr::Tensor(t) => tensor(t),
        Attr::Graph(g) => {
            let mut out = String::new();
            write_graph(&mut out, g);
            out
        }
    }
}

fn tensor(t: &Tensor) -> String {
    if t.len() > mxc_dialects::text::INLINE_LIMIT {
        return format!("{{\"type\": \"{}\", \"bytes\": {}}}", t.ty, t.bytes().len());
    }
    let values: Vec<String> = match t.dtype().is_float() {
        _ if t.strings().is_some() => t.strings().unwrap_or_default().into_iter().map(string).collect(),
        true => (0..t.len()).map(|i| number(t.get_f64(i))).collect(),
        false => (0..t.len()).map(|i| t.get_i64(i).to_string()).collect(),
    };
    format!("{{\"type\": \"{}\", \"values\": [{}]}}", t.ty, values.join(", "))
}

fn number(v: f64) -> String {
    match v.is_finite() {
        true => format!("{v:?}"),
        false => format!("\"{v}\""),
    }
}

/// A JSON string literal.
fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
