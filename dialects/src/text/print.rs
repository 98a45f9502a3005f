//! Printing a graph in the textual form.

use super::INLINE_LIMIT;
use crate::dim::Dim;
use crate::{Attr, DType, Def, Graph, Tensor, ValueId};
use std::fmt::Write;

/// The graph as text. Values are named `%argN` (inputs) and `%N` (op results, in order).
pub fn print(g: &Graph) -> String {
    let mut p = Printer {
        g,
        out: String::new(),
        resources: Vec::new(),
        indent: String::new(),
    };
    p.graph("");
    p.resources();
    p.out
}

struct Printer<'a> {
    g: &'a Graph,
    out: String,
    /// Tensors too large to print inline, in every graph printed (regions share the list).
    resources: Vec<&'a Tensor>,
    /// The indentation of the graph being printed.
    indent: String,
}

/// The name the text form gives value `v` of `g`: `%argN` for input N, `%N` for op results,
/// numbered densely in definition order.
pub fn value_name(g: &Graph, v: ValueId) -> String {
    match g.def(v) {
        Def::Input(i) => format!("%arg{i}"),
        Def::Op { op, result } => {
            let n: usize = g.ops[..op].iter().map(|o| o.results.len()).sum();
            format!("%{}", n + result)
        }
    }
}

impl<'a> Printer<'a> {
    fn name(&self, v: ValueId) -> String {
        value_name(self.g, v)
    }

    /// The graph, its lines indented by `indent`; an `mx.fused` op's body follows its types,
    /// indented one level deeper, and a region is printed where its attribute is.
    fn graph(&mut self, indent: &str) {
        let g = self.g;
        self.indent = indent.to_string();
        let inputs: Vec<String> = g
            .inputs
            .iter()
            .map(|p| format!("{}: {} {}", self.name(p.value), g.ty(p.value), quote(&p.name)))
            .collect();
        // the outermost graph declares the symbols of every type and size in it and its bodies
        let symbols = match indent.is_empty() {
            true => declared_symbols(g),
            false => String::new(),
        };
        writeln!(self.out, "graph {}{symbols} ({}) {{", quote(&g.name), inputs.join(", ")).unwrap();
        for op in &g.ops {
            let results: Vec<String> = op.results.iter().map(|r| self.name(*r)).collect();
            write!(self.out, "{indent}  {} = {}", results.join(", "), op.kind).unwrap();
            let operands: Vec<String> = op.operands.iter().map(|v| self.name(*v)).collect();
            if !operands.is_empty() {
                write!(self.out, " {}", operands.join(", ")).unwrap();
            }
            if !op.attrs.0.is_empty() {
                let attrs: Vec<String> = op
                    .attrs
                    .0
                    .iter()
                    .map(|(k, a)| format!("{k} = {}", self.attr(a)))
                    .collect();
                write!(self.out, " {{{}}}", attrs.join(", ")).unwrap();
            }
            let types: Vec<String> = op.results.iter().map(|r| g.ty(*r).to_string()).collect();
            write!(self.out, " : {}", types.join(", ")).unwrap();
            if let Some(body) = &op.body {
                let mut nested = Printer {
                    g: body,
                    out: String::from(" "),
                    resources: Vec::new(),
                    indent: String::new(),
                };
                nested.graph(&format!("{indent}  "));
                debug_assert!(nested.resources.is_empty(), "fused bodies hold only small constants");
                self.out.push_str(&nested.out);
            } else {
                self.out.push('\n');
            }
        }
        let outputs: Vec<String> = g
            .outputs
            .iter()
            .map(|p| format!("{} = {}", quote(&p.name), self.name(p.value)))
            .collect();
        writeln!(self.out, "{indent}  return {}", outputs.join(", ")).unwrap();
        writeln!(self.out, "{indent}}}").unwrap();
    }

    fn resources(&mut self) {
        if !self.resources.is_empty() {
            self.out.push_str("resources {\n");
            for (i, t) in self.resources.iter().enumerate() {
                let hex: String = t.bytes().iter().map(|b| format!("{b:02x}")).collect();
                writeln!(self.out, "  r{i} = \"0x{hex}\"").unwrap();
            }
            self.out.push_str("}\n");
        }
    }

    fn attr(&mut self, a: &'a Attr) -> String {
        match a {
            Attr::Int(v) => v.to_string(),
            Attr::Float(v) => float(*v),
            Attr::Ints(v) => format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
            Attr::Sizes(v) => sizes(v),
            Attr::Floats(v) => format!("[{}]", v.iter().map(|x| float(*x)).collect::<Vec<_>>().join(", ")),
            Attr::Str(s) => quote(s),
            Attr::DType(d) => d.name().to_string(),
            // strings are always inline, quoted
            Attr::Tensor(t) if t.strings().is_some() => {
                let values: Vec<String> = t.strings().unwrap_or_default().into_iter().map(quote).collect();
                format!("dense<[{}]> : {}", values.join(", "), t.ty)
            }
            Attr::Tensor(t) if t.len() > INLINE_LIMIT => {
                self.resources.push(t);
                format!("dense_resource<r{}> : {}", self.resources.len() - 1, t.ty)
            }
            Attr::Graph(region) => {
                let mut nested = Printer {
                    g: region,
                    out: String::new(),
                    resources: std::mem::take(&mut self.resources),
                    indent: String::new(),
                };
                nested.graph(&format!("{}  ", self.indent));
                self.resources = nested.resources;
                nested.out.trim_end().to_string()
            }
            Attr::Tensor(t) => {
                let values: Vec<String> = (0..t.len()).map(|i| element(t, i)).collect();
                format!("dense<[{}]> : {}", values.join(", "), t.ty)
            }
        }
    }
}

/// ` symbols<b[1..8], s[1..512]{128, 512}>` for a graph whose types or sizes (in it, its
/// regions and fused bodies) use symbols, else nothing. A name used with different
/// constraints (the verifier refuses that) is declared as first seen.
fn declared_symbols(g: &Graph) -> String {
    let symbols = g.symbols();
    match symbols.is_empty() {
        true => String::new(),
        false => {
            let declared: Vec<String> = symbols.into_values().map(|s| Dim::symbol(s).to_string()).collect();
            format!(" symbols<{}>", declared.join(", "))
        }
    }
}

/// `sizes<(b)x(s)x12x64>`: sizes as a symbolic shape prints them.
fn sizes(dims: &[Dim]) -> String {
    let dims: Vec<String> = dims.iter().map(crate::dim_text).collect();
    format!("sizes<{}>", dims.join("x"))
}

/// A float attribute always shows a `.`, an exponent, `inf` or `NaN`, so it never reads as an integer.
fn float(v: f64) -> String {
    format!("{v:?}")
}

fn element(t: &Tensor, i: usize) -> String {
    match t.dtype() {
        DType::F64 => format!("{:?}", t.get_f64(i)),
        d if d.is_float() => format!("{:?}", t.get_f64(i) as f32),
        DType::U64 => (t.get_i64(i) as u64).to_string(),
        _ => t.get_i64(i).to_string(),
    }
}

/// A string literal with `"` and `\` escaped and non-printable characters as `\u{..}`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => write!(out, "\\u{{{:x}}}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
