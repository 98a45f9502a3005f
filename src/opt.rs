//! `mxc opt`: a program in the mx IR's textual form, rewritten as a target rewrites an imported
//! model (`mxc read --target`: the same rules, cost model and fusion), so a rule can be tried
//! without an ONNX model. The rule tests in `tests/rules/` are such files (docs/rules.md).

use crate::show::{self, Format};
use anyhow::{anyhow, Context, Result};
use mxc_codegen::{CompileOptions, Target};
use mxc_dialects::IrError;
use std::io::Read;
use std::path::Path;

/// The program in `file` (`-`: standard input), parsed, verified, in the precision `options`
/// asks for, rewritten for `target` and shown in `format`. A mistake in the text is an error naming the file and its line.
pub fn run(file: &Path, target: Target, options: &CompileOptions, format: Format) -> Result<String> {
    let (name, src) = read(file)?;
    let graph = mxc_dialects::text::parse(&src).map_err(|e| located(&name, e))?;
    let graph = mxc_codegen::with_precision(&graph, &options.precision)?.unwrap_or(graph);
    let (rewritten, _) =
        mxc_codegen::rewrite_for(&graph, target, options).with_context(|| format!("rewriting {name}"))?;
    show::render(&rewritten, format, target)
}

/// The file's name for messages, and its text.
fn read(file: &Path) -> Result<(String, String)> {
    let mut src = String::new();
    if file == Path::new("-") {
        std::io::stdin()
            .read_to_string(&mut src)
            .context("reading standard input")?;
        return Ok(("<stdin>".to_string(), src));
    }
    let name = file.display().to_string();
    std::fs::File::open(file)
        .and_then(|mut f| f.read_to_string(&mut src))
        .with_context(|| format!("reading {name}"))?;
    Ok((name, src))
}

/// A parse error as `FILE:LINE:COLUMN: message` (as rule files' errors are); an error of the
/// whole graph (two outputs of one name) as `FILE: message`.
fn located(name: &str, e: IrError) -> anyhow::Error {
    match e {
        IrError::Parse { line, column, message } => anyhow!("{name}:{line}:{column}: {message}"),
        IrError::TooDeep { line, column, limit } => {
            anyhow!("{name}:{line}:{column}: graphs nest deeper than {limit}")
        }
        other => anyhow!("{name}: {other}"),
    }
}
