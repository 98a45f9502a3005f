//! `mxc read --format` and `mxc params`: a program shown as IR text, as the loop level's MLIR
//! (what `mlir-opt-22` reads), as JSON or as a drawing, or as its inputs and outputs with their
//! types.

use anyhow::Result;
use mxc_dialects::interface::{Interface, Structure};
use mxc_dialects::program::CodeFormat;
use mxc_dialects::{Graph, TensorType};
use mxc_driver::ports;
use mxc_kernels::mxr;
use std::path::Path;

/// What `mxc read` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The mx IR in its text form (parses back)
    Text,
    /// The loop level: one `func.func` per kernel (scf, memref, arith, math), as MLIR text
    Mlir,
    /// The graph as JSON: ops with operands, results, types, attributes and fused bodies
    Json,
    /// The graph as a Graphviz drawing: a box per op, fused kernels as clusters
    Dot,
}

/// `graph` in `format`; the dot drawing gives each kernel its cost under `target`'s model.
pub fn render(graph: &Graph, format: Format, target: mxc_codegen::Target) -> Result<String> {
    Ok(match format {
        Format::Text => mxc_dialects::text::print(graph),
        Format::Mlir => {
            let isa = mxc_codegen::vector_isa(target, mxc_codegen::OptLevel::default());
            mxc_lowering::loops::lower_graph(graph, isa)?.mlir
        }
        Format::Json => crate::json::graph(graph),
        Format::Dot => crate::explain::dot(graph, target),
    })
}

/// Named values with their types.
type Ports = Vec<(String, TensorType)>;

/// The inputs and outputs of a model (`.onnx`, imported with `import`) or of a compiled
/// `.mxr` file, one per line with its type; a sequence or optional on a line of its own, the
/// tensors that carry it indented under it.
pub fn params(model: &Path, import: &mxc_onnx::ImportOptions, trust: &mxc_kernels::TrustPolicy) -> Result<String> {
    let mut code = String::new();
    let mut calls = String::new();
    let mut precision = String::new();
    let mut symbols = String::new();
    let (inputs, outputs, interface): (Ports, Ports, Interface) = if crate::is_mxr(model) {
        let file = match mxr::read_contents(model, None, trust)? {
            mxr::Contents::One(file) => file,
            mxr::Contents::BySize(sized) => return Ok(params_by_size(&sized)),
        };
        precision = file.precision.clone();
        for o in &file.code_objects {
            let form = match o.format {
                CodeFormat::Hsaco => "AMDGPU code object",
                CodeFormat::Ptx => "PTX",
            };
            code.push_str(&format!("  {}: {form}, {} bytes\n", o.arch, o.bytes.len()));
        }
        let mut by_callee = std::collections::BTreeMap::new();
        for call in file.program.steps.iter().filter_map(|s| s.call.as_ref()) {
            *by_callee.entry(call.callee()).or_insert(0) += 1;
        }
        for (callee, n) in by_callee {
            let steps = if n == 1 { "step" } else { "steps" };
            calls.push_str(&format!("  {callee}: {n} {steps}, through {}\n", callee.libraries()));
        }
        let p = &file.program;
        symbols = sized_program(p, &file.memory);
        let list = |bs: &[mxc_dialects::program::Binding]| {
            bs.iter()
                .map(|b| (b.name.clone(), p.buffers[b.buffer].ty.clone()))
                .collect()
        };
        (list(&p.inputs), list(&p.outputs), p.interface.clone())
    } else {
        let g = mxc_onnx::import_file(model, &crate::inputs::with_model_dims(model, import.clone())?)?;
        let list =
            |ports: &[mxc_dialects::Port]| ports.iter().map(|p| (p.name.clone(), g.ty(p.value).clone())).collect();
        (list(&g.inputs), list(&g.outputs), g.interface.clone())
    };
    let mut out = String::new();
    for (label, ports, values) in [
        ("inputs", inputs, &interface.inputs),
        ("outputs", outputs, &interface.outputs),
    ] {
        out.push_str(&format!("{label}:\n"));
        let ty_of = |port: &str| ports.iter().find(|(n, _)| n == port).map(|(_, ty)| ty.to_string());
        if values.is_empty() {
            for (name, ty) in &ports {
                out.push_str(&format!("  {name}: {ty}\n"));
            }
        }
        for v in values {
            let carried = v.structure.ports(&v.name);
            if v.structure == Structure::Tensor {
                out.push_str(&format!("  {}: {}\n", v.name, ty_of(&v.name).unwrap_or_default()));
                continue;
            }
            out.push_str(&format!("  {}: {}\n", v.name, v.structure));
            for port in carried {
                out.push_str(&format!("    {port}: {}\n", ty_of(&port).unwrap_or_default()));
            }
        }
    }
    out.push_str(&symbols);
    if !precision.is_empty() {
        out.push_str(&format!("precision: {precision} (docs/quantisation.md)\n"));
    }
    if !code.is_empty() {
        out.push_str("code for GPUs:\n");
        out.push_str(&code);
    }
    if !calls.is_empty() {
        out.push_str("library calls (each step's generated kernel runs where its library is absent):\n");
        out.push_str(&calls);
    }
    Ok(out)
}

/// Of a program over symbolic sizes: its symbols, that it runs every size in their ranges, and
/// how its memory is placed (nothing for a program of fixed sizes).
fn sized_program(p: &mxc_dialects::program::Program, memory: &mxc_dialects::program::MemoryPlan) -> String {
    if !p.is_sized() {
        return String::new();
    }
    let mut out = String::from("symbols:\n");
    for s in &p.symbols {
        let (lo, hi) = s.bounds();
        out.push_str(&format!(
            "  {} in [{lo}..{hi}]: runs any size in range (kernels take the sizes at run time)\n",
            s.name
        ));
    }
    let generic = p.kernels.iter().filter(|k| k.takes_sizes()).count();
    out.push_str(&format!(
        "kernels: {generic} of {} take the sizes at run time\n\
         memory: placed for each run's sizes ({} bytes of temporaries at the largest sizes)\n",
        p.kernels.len(),
        memory.size
    ));
    out
}

/// `mxc params` of a file of programs by size: the inputs with their symbolic dimensions, the
/// symbols, and each program's sizes and outputs.
fn params_by_size(sized: &mxr::SizedMxr) -> String {
    let tensor = |dtype: String, dims: &[mxc_dialects::dim::Dim]| {
        let dims: String = dims.iter().map(|d| format!("{d}x")).collect();
        format!("tensor<{dims}{dtype}>")
    };
    let mut out = String::from("inputs:\n");
    for (name, dtype, dims) in ports::symbolic_inputs(sized) {
        out.push_str(&format!("  {name}: {}\n", tensor(dtype.to_string(), &dims)));
    }
    out.push_str("symbols:\n");
    for s in sized.dims.symbols() {
        let runs = match (sized.items.iter().any(|i| i.symbol == s.name), &sized.generic) {
            (_, Some(_)) => "any size in range (the compiled sizes specialised, others in the program for every size)",
            (true, None) => "any size in range (independent items: other sizes in parts)",
            (false, None) => "the compiled sizes",
        };
        out.push_str(&format!(
            "  {}: runs {runs}\n",
            mxc_dialects::dim::Dim::symbol(s.clone())
        ));
    }
    if let Some(outputs) = ports::symbolic_outputs(sized) {
        out.push_str("outputs:\n");
        for (name, dtype, dims) in outputs {
            out.push_str(&format!("  {name}: {}\n", tensor(dtype.to_string(), &dims)));
        }
    }
    if let Some(v) = sized.variants.first().filter(|v| !v.mxr.precision.is_empty()) {
        out.push_str(&format!("precision: {} (docs/quantisation.md)\n", v.mxr.precision));
    }
    out.push_str("programs (one for each point of optimal sizes):\n");
    for v in &sized.variants {
        let p = &v.mxr.program;
        out.push_str(&format!("  {}:\n", mxc_dialects::dim::show_sizes(&v.sizes)));
        for b in &p.outputs {
            out.push_str(&format!("    output {}: {}\n", b.name, p.buffers[b.buffer].ty));
        }
    }
    out
}
