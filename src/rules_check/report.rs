//! The printed result of checking one rule: one line when it is sound or never fired; for an
//! unsound rule, the counterexample (instance, rewritten graph, inputs, both outputs).

use super::check::{Checked, Counterexample, Verdict, INPUT_DRAWS};
use super::show;
use mxc_dialects::Graph;
use mxc_rewrite::rules::Rule;
use std::fmt::Write;

/// The report of `rule`, ending with a newline.
pub fn render(rule: &Rule, checked: &Checked) -> String {
    let mut out = format!("  {} (line {}): ", rule.name(), rule.pos.line);
    let skipped = match checked.uncompilable {
        0 => String::new(),
        n => format!("; {n} instances skipped, the ref target cannot compile them"),
    };
    match &checked.verdict {
        Verdict::Sound { fired, symbolic } => {
            let over = match symbolic {
                0 => "; at fixed sizes only".to_string(),
                n => format!("; {n} also over a symbolic size"),
            };
            let _ = writeln!(
                out,
                "ok ({fired} instances fired, {INPUT_DRAWS} inputs each{over}{skipped})"
            );
        }
        Verdict::NeverFired { tried } => {
            let _ = writeln!(
                out,
                "warning: never fired (tried {tried} instances{skipped}); its soundness is not tested"
            );
        }
        Verdict::Unsound(cex) => {
            out += "UNSOUND\n";
            counterexample(&mut out, cex);
        }
    }
    out
}

fn counterexample(out: &mut String, cex: &Counterexample) {
    let _ = writeln!(out, "    counterexample: {}", cex.instance.describe());
    graph(out, "left side", &cex.instance.graph);
    if let Some(rewritten) = &cex.rewritten {
        graph(out, "rewritten", rewritten);
    }
    for (name, value) in &cex.inputs {
        let _ = writeln!(out, "    input ?{name} = {}", show::tensor(value));
    }
    if let Some((left, right)) = &cex.outputs {
        let _ = writeln!(out, "    left side gives  {}", show::tensor(left));
        let _ = writeln!(out, "    rewritten gives  {}", show::tensor(right));
    }
    let _ = writeln!(out, "    {}", cex.why);
}

/// A graph in the textual IR, indented under a heading.
fn graph(out: &mut String, heading: &str, g: &Graph) {
    let _ = writeln!(out, "    {heading}:");
    for line in mxc_dialects::text::print(g).lines() {
        let _ = writeln!(out, "      {line}");
    }
}
