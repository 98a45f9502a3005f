//! Compiling a model to what an `.mxr` file holds. With every input dimension fixed (by the
//! model or `--shape`), one program; with symbolic dimensions (`dim_param`s, unnamed dynamic axes, or
//! `--shape input_ids=1xs[1..512]{128}`), one program for each combination of the symbols'
//! optimal sizes, in one file that a run picks from by its inputs' shapes (docs/shapes.md).

use crate::error::{invalid, Context, Error, Result};
use crate::shapes::{self, Shapes, Structures};
use mxc_codegen::{CompileOptions, Compiled, Target};
use mxc_dialects::dim::{self, InputDims};
use mxc_dialects::items::output_item_axes;
use mxc_dialects::Graph;
use mxc_kernels::mxr::{Contents, Items, Mxr, SizedMxr, Variant};
use mxc_lowering::loops::{size_generic_kind, LoopError};
use mxc_onnx::{import_file, model_input_dims, ImportOptions, SizeLimit};
use mxc_rewrite::StageHook;
use std::collections::HashMap;
use std::path::Path;

/// What to compile and how.
pub struct Request<'a> {
    pub model: &'a Path,
    /// What the observer's lines call the result (the file written, say).
    pub label: String,
    pub target: Target,
    pub shapes: Shapes,
    pub structures: Structures,
    pub options: CompileOptions,
    pub observer: &'a dyn Observer,
}

/// What a compile tells its caller as it goes; every method does nothing unless overridden.
pub trait Observer {
    /// The hook told each stage of compiling one program as it starts (`import`, then the
    /// compiler's own: `mxc_codegen::CompileOptions::stage`).
    fn stages(&self) -> Option<StageHook> {
        None
    }
    /// Compiling one program has ended, well or not (a progress display clears itself).
    fn ended(&self) {}
    /// One program compiled, `label` naming it: the graph imported and what it became.
    fn compiled(&self, _label: &str, _imported: &Graph, _compiled: &Compiled) {}
    /// A remark on the whole file (which symbols run in parts of the compiled sizes).
    fn note(&self, _text: &str) {}
}

/// An observer that is told nothing.
pub struct Silent;

impl Observer for Silent {}

/// Compiles `request` into the contents of its `.mxr` file, printing a summary line for each
/// program.
pub fn compile(request: Request) -> Result<Contents> {
    let dims = model_input_dims(request.model, &request.shapes)?;
    if dims.is_fixed() {
        // every size is known (a dim_param given in one input fixes it in the others): the
        // one-program path, whose importer reports what does not fit
        let opts = ImportOptions {
            input_shapes: shapes::fixed_shapes(&request.shapes, "compile")?,
            structures: request.structures.clone(),
            ..ImportOptions::default()
        };
        let opts = shapes::fixed_by(&dims, opts)?;
        let (mxr, _) = compile_one(&request, &opts, &request.label)?;
        return Ok(Contents::One(Box::new(mxr)));
    }
    let mut no_generic = None;
    if dims.symbols().iter().any(|s| s.optimals.is_empty()) {
        match compile_generic(&request, &dims)? {
            Ok(mxr) => return Ok(Contents::One(Box::new(mxr))),
            Err(why) => no_generic = Some(why),
        }
    }
    compile_by_size(&request, dims, no_generic.as_deref()).map(Contents::BySize)
}

/// One program for every size in the symbols' ranges (its kernels take the sizes at run time),
/// where the model imports over symbols and each of its ops has a size-generic kernel; else
/// why not (also told the observer), for the programs by optimal size to be compiled instead.
fn compile_generic(request: &Request, dims: &InputDims) -> Result<std::result::Result<Mxr, String>> {
    let refuse = |why: String| {
        request
            .observer
            .note(&format!("{}: no program for every size: {why}", request.label));
        Ok(Err(why))
    };
    let narrowed = |limits: &[SizeLimit]| {
        let said: Vec<String> = limits.iter().map(|l| l.to_string()).collect();
        request.observer.note(&format!(
            "{}: the symbols' ranges narrowed to what the model reads: {}",
            request.label,
            said.join(", ")
        ));
    };
    let import = |dims: &InputDims| {
        let opts = shapes::symbolic_import(dims, request.structures.clone());
        shapes::import_within_limits(request.model, opts, &narrowed)
    };
    let graph = match import(dims) {
        Ok(graph) => graph,
        // the sizes in steps, where the model is consistent only at multiples of one
        Err(e) => match (shapes::SIZE_STEPS.iter())
            .filter_map(|&k| shapes::in_steps_of(dims, k).map(|stepped| (k, stepped)))
            .find_map(|(k, stepped)| import(&stepped).ok().map(|graph| (k, stepped, graph)))
        {
            Some((k, stepped, graph)) => {
                let shown: Vec<String> = (stepped.inputs().iter())
                    .map(|(name, dims)| format!("{name}: {}", dim::show(dims)))
                    .collect();
                request.observer.note(&format!(
                    "{}: the model is consistent only at sizes in steps of {k} ({e}); its program takes {}",
                    request.label,
                    shown.join(", ")
                ));
                graph
            }
            None => return refuse(format!("the model does not import over symbols ({e})")),
        },
    };
    // ops of kinds no kernel over symbolic sizes exists for: no need to rewrite the graph to know
    if let Some(op) = graph.ops.iter().find(|op| !size_generic_kind(op.kind)) {
        return refuse(format!("{} has no kernel that takes sizes at run time yet", op.kind));
    }
    let label = format!("{} (every size in range)", request.label);
    let stages = request.observer.stages();
    let options = CompileOptions {
        stage: stages,
        ..request.options.clone()
    };
    let compiled = mxc_codegen::compile(&graph, request.target, &options);
    request.observer.ended();
    let compiled = match compiled {
        Err(mxc_codegen::CodegenError::Loops(LoopError::NotSizeGeneric { op, message, .. })) => {
            return refuse(format!("after rewriting, {op}: {message}"));
        }
        other => other.context(|| format!("compiling {} over symbolic sizes", request.model.display()))?,
    };
    request.observer.compiled(&label, &graph, &compiled);
    Ok(Ok(stored(request.target, compiled)))
}

/// One program for each point of the symbols' optimal sizes, and the symbols that count
/// independent items.
/// A symbol without optimal sizes is compiled at its least size, and must count independent
/// items (then every size in range runs in parts); else the compile is refused, saying what to
/// give.
/// `no_generic` says why no program for every size was made, where one was tried.
fn compile_by_size(request: &Request, dims: InputDims, no_generic: Option<&str>) -> Result<SizedMxr> {
    let defaulted: Vec<(String, String)> = (dims.symbols().iter())
        .filter(|s| s.optimals.is_empty())
        .map(|s| (s.name.clone(), no_optimals(&dims, &s.name, no_generic)))
        .collect();
    let dims = dims.with_least_optimals();
    let points = dims.optimal_points().context(|| request.model.display().to_string())?;
    let mut variants: Vec<Variant> = Vec::with_capacity(points.len());
    // each program's graph is looked at for each symbol's items, then dropped
    let mut proofs: Vec<(String, Result<ItemProof, String>)> = dims
        .symbols()
        .iter()
        .map(|s| (s.name.clone(), ItemProof::start(&dims, &s.name)))
        .collect();
    for sizes in points {
        let label = format!("{} ({})", request.label, dim::show_sizes(&sizes));
        let (mxr, graph) = compile_one(request, &import_options(request, &dims, &sizes)?, &label)
            .context(|| format!("at {}", dim::show_sizes(&sizes)))?;
        for (_, proof) in &mut proofs {
            if let Ok(p) = proof {
                if let Err(why) = p.check(&sizes, &graph) {
                    *proof = Err(why);
                }
            }
        }
        variants.push(Variant { sizes, mxr });
    }
    let mut items = Vec::new();
    for (symbol, proof) in proofs {
        match proof.and_then(|p| p.finish(request, &dims, &variants[0].sizes)) {
            Ok(found) => {
                request.observer.note(&format!(
                    "{}: {symbol} counts independent items: other sizes in range run in parts of the compiled ones",
                    request.label,
                ));
                items.push(found);
            }
            Err(why) => request.observer.note(&format!(
                "{}: {symbol} runs only at the compiled sizes: {why}",
                request.label
            )),
        }
    }
    for (symbol, ask) in defaulted {
        match items.iter().any(|i| i.symbol == symbol) {
            true => request.observer.note(&format!(
                "{}: {symbol} had no optimal size: compiled for {symbol}={}, other sizes run in parts of it",
                request.label, variants[0].sizes[&symbol]
            )),
            false => return Err(invalid(format!("{}: {ask}", request.model.display()))),
        }
    }
    // sizes between the optimal ones of a symbol whose items mix: the generic program, where
    // the model has one (not tried again where it was tried for want of optimal sizes)
    let mixing = (dims.symbols().iter()).any(|s| !items.iter().any(|i| i.symbol == s.name));
    let generic = match (mixing, no_generic) {
        (true, None) => compile_generic(request, &dims)?.ok().map(Box::new),
        _ => None,
    };
    if generic.is_some() {
        request.observer.note(&format!(
            "{}: sizes between the compiled ones run in the program for every size",
            request.label
        ));
    }
    Ok(SizedMxr {
        dims,
        variants,
        items,
        generic,
    })
}

/// Import options for the inputs' shapes at `sizes`.
fn import_options(request: &Request, dims: &InputDims, sizes: &dim::Sizes) -> Result<ImportOptions> {
    Ok(ImportOptions {
        input_shapes: dims.shapes_at(sizes)?.into_iter().collect(),
        structures: request.structures.clone(),
        ..ImportOptions::default()
    })
}

/// Whether a symbol counts items the model treats independently: it is a whole dimension of
/// each input that has it, at one axis (`start`); every program compiled for two items or more
/// keeps them apart (`mxc_dialects::items`), with the same output axes (`check`; where none
/// does, the graph imported for two items, in `finish`); and the model imports at the
/// symbol's largest size (`finish`: a model that fixes its batch somewhere does not).
struct ItemProof {
    symbol: String,
    inputs: HashMap<String, usize>,
    outputs: Option<Vec<(String, usize)>>,
}

impl ItemProof {
    fn start(dims: &InputDims, symbol: &str) -> Result<ItemProof, String> {
        let mut inputs = HashMap::new();
        for (name, input) in dims.inputs() {
            let uses: Vec<usize> = (0..input.len())
                .filter(|&a| input[a].symbols().any(|s| s.name == symbol))
                .collect();
            match uses.as_slice() {
                [] => {}
                [a] if input[*a].as_symbol().is_some() => {
                    inputs.insert(name.clone(), *a);
                }
                _ => {
                    return Err(format!(
                        "input `{name}` has it in {} or within an expression",
                        dim::show(input)
                    ))
                }
            }
        }
        Ok(ItemProof {
            symbol: symbol.to_string(),
            inputs,
            outputs: None,
        })
    }

    /// The graph imported at `sizes` keeps the items apart, if it has two or more.
    fn check(&mut self, sizes: &dim::Sizes, graph: &Graph) -> Result<(), String> {
        if sizes[&self.symbol] < 2 {
            return Ok(());
        }
        let axes = output_item_axes(graph, &self.inputs).map_err(|e| format!("at {}, {e}", dim::show_sizes(sizes)))?;
        let named: Vec<(String, usize)> = graph.outputs.iter().map(|p| p.name.clone()).zip(axes).collect();
        if self.outputs.as_ref().is_some_and(|o| *o != named) {
            return Err("its outputs have their items on other axes at other sizes".into());
        }
        self.outputs = Some(named);
        Ok(())
    }

    /// The items, once the model imports at the symbol's largest size (the other symbols at
    /// `first`, the first program's sizes).
    fn finish(mut self, request: &Request, dims: &InputDims, first: &dim::Sizes) -> Result<Items, String> {
        let symbol = self.symbol.clone();
        let (least, largest) = dims
            .symbols()
            .iter()
            .find(|s| s.name == symbol)
            .map_or((0, 0), |s| s.bounds());
        if self.outputs.is_none() && largest >= 2 {
            // no program has two items or more: the graph imported for two shows how it keeps them
            let mut sizes = first.clone();
            sizes.insert(symbol.clone(), least.max(2));
            let opts = import_options(request, dims, &sizes).map_err(|e| e.to_string())?;
            let graph = import_file(request.model, &opts)
                .map_err(|e| format!("the model does not import at {}: {e}", dim::show_sizes(&sizes)))?;
            self.check(&sizes, &graph)?;
        }
        let outputs = self
            .outputs
            .ok_or("it has no size of two or more to show how it keeps items apart")?;
        let mut sizes = first.clone();
        sizes.insert(symbol.clone(), largest);
        let opts = import_options(request, dims, &sizes).map_err(|e| e.to_string())?;
        import_file(request.model, &opts)
            .map_err(|e| format!("the model does not import at {symbol}={largest}: {e}"))?;
        // in name order, so that a compile writes the same bytes every time
        let mut inputs: Vec<(String, usize)> = self.inputs.into_iter().collect();
        inputs.sort();
        Ok(Items {
            symbol,
            inputs,
            outputs,
        })
    }
}

/// For `symbol`, without optimal sizes and not counting independent items: where it is, what
/// to give, and why no program for every size was made.
fn no_optimals(dims: &InputDims, symbol: &str, no_generic: Option<&str>) -> String {
    let (lo, hi) = dims
        .symbols()
        .iter()
        .find(|s| s.name == symbol)
        .map_or((1, 1), |s| s.bounds());
    let alone = |d: &dim::Dim| d.as_symbol().is_some_and(|a| a.name == symbol);
    let Some((input, shape)) = dims.inputs().iter().find(|(_, d)| d.iter().any(alone)) else {
        return format!("{symbol} has no optimal size to compile for");
    };
    let axis = shape.iter().position(alone).unwrap_or(0);
    let example: Vec<String> = shape
        .iter()
        .map(|d| match alone(d) {
            true => format!("{symbol}[{lo}..{hi}]{{{lo}}}"),
            false => d.to_string(),
        })
        .collect();
    format!(
        "input `{input}` dimension {axis} is {symbol} in [{lo}..{hi}], with no optimal size to compile for, \
         and its items are not independent (other sizes cannot run in parts of one): give some, as in \
         --shape {input}={} (no program for every size: {})",
        example.join("x"),
        no_generic.unwrap_or("not tried")
    )
}

/// The model compiled with the inputs' shapes `opts` gives, and the graph imported; the
/// observer's line names `label`.
fn compile_one(request: &Request, opts: &ImportOptions, label: &str) -> Result<(Mxr, Graph)> {
    let stages = request.observer.stages();
    StageHook::start(stages.as_ref(), "import");
    let options = CompileOptions {
        stage: stages,
        ..request.options.clone()
    };
    let compiled = import_file(request.model, opts).map_err(Error::from).and_then(|graph| {
        let compiled = mxc_codegen::compile(&graph, request.target, &options)
            .context(|| format!("compiling {}", request.model.display()))?;
        Ok((graph, compiled))
    });
    request.observer.ended();
    let (graph, compiled) = compiled?;
    request.observer.compiled(label, &graph, &compiled);
    Ok((stored(request.target, compiled), graph))
}

/// A graph compiled for `target`, as an `.mxr` file holds it (code for this machine's cpu).
pub fn compile_graph(graph: &Graph, target: Target, options: &CompileOptions) -> Result<Mxr> {
    Ok(stored(target, mxc_codegen::compile(graph, target, options)?))
}

/// What `compiled` is stored as.
fn stored(target: Target, compiled: Compiled) -> Mxr {
    let cpu = mxc_codegen::code_cpu(target);
    Mxr::new(
        target.name(),
        &cpu.name,
        &cpu.features,
        compiled.program,
        compiled.library,
    )
    .with_code_objects(compiled.code_objects)
    .with_precision(compiled.precision)
}
