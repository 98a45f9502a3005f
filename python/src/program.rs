//! `program` and the functions that make one: `parse_onnx` (a model imported, or kept with its
//! symbolic input dimensions to be compiled by size), `load` (an `.mxr` file), and
//! `program()` itself (an empty one, built with `module`); `compile` for a `target`, `run` on
//! named arguments or numpy arrays, `save`. A program not compiled yet carries the precision
//! `quantize_fp16`, `quantize_bf16` and `autocast_fp8` ask for (`quantize.rs`), applied when it
//! compiles and shown by `print()` before.

use crate::argument::Argument;
use crate::errors::{raise, refuse};
use crate::module::Module;
use crate::shape::{dim_of, Shape};
use mxc_codegen::Target as CodeTarget;
use mxc_dialects::dim::{self, Dim, InputDims};
use mxc_dialects::{DType, Graph};
use mxc_driver::shapes::{fixed_by, Shapes};
use mxc_driver::{compile_graph, ports, Observer, Request, Runner};
use mxc_kernels::mxr::Contents;
use mxc_onnx::{import_file, model_input_dims, model_input_types, ImportError, ImportOptions};
use mxc_rewrite::precision::Precision;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What a program is: a graph not compiled yet, an ONNX model with symbolic input dimensions
/// (compiled one program per optimal size, as `mxc compile` does), or compiled programs.
#[derive(Clone)]
enum State {
    Graph(Graph),
    Symbolic {
        model: PathBuf,
        shapes: Shapes,
        dims: InputDims,
        /// Each input's element type, as the model declares it.
        types: HashMap<String, DType>,
    },
    Compiled(Arc<Runner>),
}

/// The target a program is compiled for: `ref`, `cpu` or `gpu`.
#[pyclass(name = "target", module = "mxc", frozen, eq)]
#[derive(Clone, Copy, PartialEq)]
pub struct Target(pub CodeTarget);

#[pymethods]
impl Target {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn __repr__(&self) -> String {
        format!("mxc.get_target(\"{}\")", self.0.name())
    }
}

/// The target called `name`: `ref`, `cpu` or `gpu`.
#[pyfunction]
pub fn get_target(name: &str) -> PyResult<Target> {
    name.parse()
        .map(Target)
        .map_err(|e: String| refuse(format!("target `{name}`: {e}")))
}

/// A program to compile and run.
#[pyclass(name = "program", module = "mxc")]
pub struct Program {
    state: State,
    /// How the precision changes when the program compiles (the default once compiled: the
    /// file records it). The graph keeps the ops as they were built or imported, so that
    /// quantising again replaces the earlier choice and a module's instructions stay its
    /// values; `print()` and the shapes show it changed.
    precision: Precision,
}

impl Program {
    /// The graph, when the program is one not compiled yet; else an error saying `what` needs it.
    pub fn graph_mut(&mut self, what: &str) -> PyResult<&mut Graph> {
        match &mut self.state {
            State::Graph(g) => Ok(g),
            _ => Err(refuse(format!(
                "{what}: only a program not compiled yet, built or imported with fixed shapes, can be changed"
            ))),
        }
    }

    /// The graph of a program not compiled yet, imported or built.
    pub fn graph(&self) -> Option<&Graph> {
        match &self.state {
            State::Graph(g) => Some(g),
            _ => None,
        }
    }

    /// The graph as it compiles: `graph()` in the precision asked for.
    pub fn graph_to_compile(&self) -> PyResult<Option<Cow<'_, Graph>>> {
        self.graph().map(|g| self.in_precision(g)).transpose()
    }

    /// `g`, this program's graph, in the precision asked for.
    fn in_precision<'g>(&self, g: &'g Graph) -> PyResult<Cow<'g, Graph>> {
        let changed = mxc_codegen::with_precision(g, &self.precision).map_err(raise)?;
        Ok(changed.map_or(Cow::Borrowed(g), Cow::Owned))
    }

    /// The precision asked for (`set_precision`).
    pub fn precision(&self) -> &Precision {
        &self.precision
    }

    /// Asks for `precision` when the program compiles (`what`, the function asking, names it
    /// in an error). A graph is changed once here, so that one the change refuses fails now.
    pub fn set_precision(&mut self, what: &str, precision: Precision) -> PyResult<()> {
        self.not_compiled_yet(what)?;
        if let Some(g) = self.graph() {
            mxc_codegen::with_precision(g, &precision).map_err(|e| refuse(format!("{what}: {e}")))?;
        }
        self.precision = precision;
        Ok(())
    }

    /// Refuses `what` (a change of precision) on a program compiled already.
    pub fn not_compiled_yet(&self, what: &str) -> PyResult<()> {
        match self.state {
            State::Compiled(_) => Err(refuse(format!(
                "{what}: the program is compiled already; compile the program after quantising"
            ))),
            _ => Ok(()),
        }
    }

    fn compiled(&self, what: &str) -> PyResult<&Arc<Runner>> {
        match &self.state {
            State::Compiled(c) => Ok(c),
            _ => Err(refuse(format!(
                "{what}: compile the program first (program.compile(mxc.get_target(\"cpu\")))"
            ))),
        }
    }
}

#[pymethods]
impl Program {
    /// An empty program, to build with `get_main_module()`.
    #[new]
    fn new() -> Program {
        Program::of(State::Graph(Graph::new("main")))
    }

    /// Compiles the program for `t`. `offload_copy` (copies between host and GPU memory around
    /// a run) is how mxc always runs; `fast_math=False` and `exhaustive_tune=True` are not
    /// supported and refused. `advance_backend_options` takes mxc's own: `rules` (rule files),
    /// `fusion`, `library_calls`, `opt_level` (0-2), `gpu_arch` (a list), `kernel_cache` (bool),
    /// `half_as_f32` (bool).
    /// `progress=True` prints each stage on stderr.
    #[pyo3(signature = (t, offload_copy = true, fast_math = true, exhaustive_tune = false, advance_backend_options = None, progress = false))]
    #[allow(clippy::too_many_arguments)] // MIGraphX's signature, and `progress`
    fn compile(
        &mut self,
        py: Python<'_>,
        t: &Target,
        offload_copy: bool,
        fast_math: bool,
        exhaustive_tune: bool,
        advance_backend_options: Option<&Bound<'_, PyDict>>,
        progress: bool,
    ) -> PyResult<()> {
        if !offload_copy {
            return Err(refuse(
                "compile(offload_copy=False): mxc programs take and give host memory; device buffers are not supported",
            ));
        }
        if !fast_math {
            return Err(refuse(
                "compile(fast_math=False): mxc has one set of math functions; it is not supported",
            ));
        }
        if exhaustive_tune {
            return Err(refuse(
                "compile(exhaustive_tune=True): mxc's cost model chooses kernels; tuning is not supported",
            ));
        }
        let options = compile_options(advance_backend_options, self.precision.clone())?;
        let target = t.0;
        let observer: Box<dyn Observer + Sync> = match progress {
            true => Box::new(Progress(Instant::now())),
            false => Box::new(mxc_driver::Silent),
        };
        let contents = match &self.state {
            State::Graph(g) => {
                mxc_dialects::verify(g).map_err(raise)?;
                let stages = observer.stages();
                let options = mxc_codegen::CompileOptions {
                    stage: stages,
                    ..options
                };
                let mxr = py.detach(|| compile_graph(g, target, &options)).map_err(raise)?;
                Contents::One(Box::new(mxr))
            }
            State::Symbolic { model, shapes, .. } => py
                .detach(|| {
                    mxc_driver::compile::compile(Request {
                        model,
                        label: model.display().to_string(),
                        target,
                        shapes: shapes.clone(),
                        structures: HashMap::new(),
                        options,
                        observer: observer.as_ref(),
                    })
                })
                .map_err(raise)?,
            State::Compiled(_) => return Err(refuse("compile: the program is compiled already")),
        };
        self.state = State::Compiled(Arc::new(Runner::new(contents)));
        self.precision = Precision::default();
        Ok(())
    }

    /// Runs the compiled program on `params` (a dict of name to argument or numpy array) and
    /// returns its outputs in order. The GIL is released while it runs.
    fn run(&self, py: Python<'_>, params: &Bound<'_, PyDict>) -> PyResult<Vec<Argument>> {
        let compiled = self.compiled("run")?;
        let mut inputs = HashMap::with_capacity(params.len());
        for (name, value) in params.iter() {
            let name: String = name.extract()?;
            let tensor = Argument::tensor_of(&value).map_err(|e| refuse(format!("input `{name}`: {e}")))?;
            inputs.insert(name, tensor);
        }
        let runnable = compiled.runnable(&inputs).map_err(raise)?;
        let outputs = py.detach(|| runnable.run(&inputs)).map_err(raise)?;
        Ok(outputs.into_iter().map(|(_, t)| Argument::new(t)).collect())
    }

    /// The threads that run the kernels (default: every core); results do not depend on it.
    fn set_threads(&mut self, threads: usize) -> PyResult<()> {
        if threads == 0 {
            return Err(refuse("set_threads(0): at least one thread runs the kernels"));
        }
        let c = self.compiled("set_threads")?;
        self.state = State::Compiled(Arc::new(Runner::with_threads(c.contents().clone(), threads)));
        Ok(())
    }

    fn get_parameter_names(&self) -> PyResult<Vec<String>> {
        Ok(self.parameters()?.into_iter().map(|(n, _)| n).collect())
    }

    /// Each input's shape, by name (symbolic where the program takes many sizes).
    fn get_parameter_shapes(&self) -> PyResult<HashMap<String, Shape>> {
        Ok(self.parameters()?.into_iter().collect())
    }

    /// The outputs' shapes, in order.
    fn get_output_shapes(&self) -> PyResult<Vec<Shape>> {
        match &self.state {
            State::Graph(g) => {
                let g = self.in_precision(g)?;
                Ok(g.outputs.iter().map(|p| Shape::of(g.ty(p.value))).collect())
            }
            State::Symbolic { .. } => Err(refuse(
                "get_output_shapes: a program with symbolic inputs has its output shapes once compiled",
            )),
            State::Compiled(c) => match c.contents() {
                Contents::One(m) => Ok(binding_shapes(&m.program, &m.program.outputs)
                    .into_iter()
                    .map(|(_, s)| s)
                    .collect()),
                Contents::BySize(sized) => {
                    let outputs = ports::symbolic_outputs(sized).ok_or_else(|| {
                        refuse("get_output_shapes: the outputs' sizes differ between the compiled sizes in ways no symbol says (mxc params shows each program's)")
                    })?;
                    Ok(outputs
                        .into_iter()
                        .map(|(_, dtype, dims)| Shape {
                            dtype,
                            dims,
                            strides: None,
                        })
                        .collect())
                }
            },
        }
    }

    /// Prints the program (what `str(program)` gives).
    fn print(&self) -> PyResult<()> {
        println!("{}", self.__str__()?);
        Ok(())
    }

    /// Not compiled: the graph in mx text (what `mxc read` prints), in the precision asked for.
    /// Compiled: the target, the inputs and outputs and each kernel call in order.
    pub fn __str__(&self) -> PyResult<String> {
        Ok(match &self.state {
            State::Graph(g) => mxc_dialects::text::print(self.in_precision(g)?.as_ref()),
            State::Symbolic { model, dims, .. } => {
                let mut out = format!(
                    "program from {} with symbolic inputs (compiled by size):\n",
                    model.display()
                );
                for (name, d) in dims.inputs() {
                    out.push_str(&format!("  {name}: {}\n", dim::show(d)));
                }
                out
            }
            State::Compiled(c) => describe(c),
        })
    }

    /// A copy that compiles and runs on its own.
    fn clone(&self) -> Program {
        let state = match &self.state {
            State::Compiled(c) => State::Compiled(Arc::new(Runner::new(c.contents().clone()))),
            other => other.clone(),
        };
        Program {
            state,
            precision: self.precision.clone(),
        }
    }

    /// Checks the instructions are in an order that runs (mxc keeps every graph so: an
    /// operand is always added before its user); raises if not.
    fn sort(&self) -> PyResult<()> {
        match &self.state {
            State::Graph(g) => mxc_dialects::verify(g).map_err(raise),
            _ => Ok(()),
        }
    }

    /// The program's main module, to add parameters, literals and instructions to.
    fn get_main_module(slf: Bound<'_, Self>) -> PyResult<Module> {
        slf.borrow_mut().graph_mut("get_main_module")?;
        Ok(Module::of(slf.unbind()))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        let Ok(other) = other.cast::<Program>() else {
            return false;
        };
        let other = other.borrow();
        if self.precision != other.precision {
            return false;
        }
        match (&self.state, &other.state) {
            (State::Graph(a), State::Graph(b)) => a == b,
            (
                State::Symbolic {
                    model: a, shapes: x, ..
                },
                State::Symbolic {
                    model: b, shapes: y, ..
                },
            ) => a == b && x == y,
            (State::Compiled(a), State::Compiled(b)) => a.contents() == b.contents(),
            _ => false,
        }
    }

    fn __repr__(&self) -> String {
        let mut what = match &self.state {
            State::Graph(g) => format!("{} ops, not compiled", g.ops.len()),
            State::Symbolic { .. } => "symbolic inputs, not compiled".into(),
            State::Compiled(c) => format!("compiled for {}", c.first().target),
        };
        if !self.precision.is_default() {
            what.push_str(&format!(", to compile in {}", self.precision.describe()));
        }
        format!("<mxc.program: {what}>")
    }
}

impl Program {
    fn of(state: State) -> Program {
        Program {
            state,
            precision: Precision::default(),
        }
    }

    /// The inputs with their shapes, in order.
    fn parameters(&self) -> PyResult<Vec<(String, Shape)>> {
        Ok(match &self.state {
            State::Graph(g) => {
                let g = self.in_precision(g)?;
                (g.inputs.iter())
                    .map(|p| (p.name.clone(), Shape::of(g.ty(p.value))))
                    .collect()
            }
            State::Symbolic { dims, types, .. } => {
                let types = taken_types(types, &self.precision)?;
                (dims.inputs().iter())
                    .map(|(name, d)| {
                        let dtype = types[name];
                        (
                            name.clone(),
                            Shape {
                                dtype,
                                dims: d.clone(),
                                strides: None,
                            },
                        )
                    })
                    .collect()
            }
            State::Compiled(c) => match c.contents() {
                Contents::One(m) => binding_shapes(&m.program, &m.program.inputs),
                Contents::BySize(sized) => (ports::symbolic_inputs(sized).into_iter())
                    .map(|(name, dtype, dims)| {
                        (
                            name,
                            Shape {
                                dtype,
                                dims,
                                strides: None,
                            },
                        )
                    })
                    .collect(),
            },
        })
    }
}

/// The element type each input of a model is taken as in `precision` (`autocast_fp8` takes
/// f32 for fp8): what the precision makes of a graph of the inputs alone.
fn taken_types(types: &HashMap<String, DType>, precision: &Precision) -> PyResult<HashMap<String, DType>> {
    let mut g = Graph::new("inputs");
    for (name, dtype) in types {
        let v = g.add_input(name, mxc_dialects::TensorType::new(*dtype, vec![]));
        g.add_output(name, v);
    }
    let g = mxc_codegen::with_precision(&g, precision).map_err(raise)?.unwrap_or(g);
    Ok((g.inputs.iter())
        .map(|p| (p.name.clone(), g.ty(p.value).dtype))
        .collect())
}

/// The shapes of a compiled program's `bindings`.
fn binding_shapes(
    p: &mxc_dialects::program::Program,
    bindings: &[mxc_dialects::program::Binding],
) -> Vec<(String, Shape)> {
    (bindings.iter())
        .map(|b| (b.name.clone(), Shape::of(&p.buffers[b.buffer].ty)))
        .collect()
}

/// A compiled program in words: its target, inputs, outputs and kernel calls.
fn describe(c: &Runner) -> String {
    let m = c.first();
    let mut out = format!("program compiled for {} ({})\n", m.target, m.cpu);
    if let Contents::BySize(sized) = c.contents() {
        let sizes: Vec<String> = sized.variants.iter().map(|v| dim::show_sizes(&v.sizes)).collect();
        out.push_str(&format!("programs for {}; the first:\n", sizes.join(", ")));
    }
    for (name, s) in binding_shapes(&m.program, &m.program.inputs) {
        out.push_str(&format!("input {name}: {}\n", s.__str__()));
    }
    for step in &m.program.steps {
        out.push_str(&format!("call {} (range {})\n", step.symbol, step.range));
    }
    for (name, s) in binding_shapes(&m.program, &m.program.outputs) {
        out.push_str(&format!("output {name}: {}\n", s.__str__()));
    }
    out
}

/// Compile options: mxc's defaults in `precision`, with what `advance_backend_options` says.
fn compile_options(given: Option<&Bound<'_, PyDict>>, precision: Precision) -> PyResult<mxc_codegen::CompileOptions> {
    let mut options = mxc_codegen::CompileOptions {
        precision,
        ..mxc_driver::default_options()
    };
    let Some(given) = given else {
        return Ok(options);
    };
    for (key, value) in given.iter() {
        let key: String = key.extract()?;
        match key.as_str() {
            "rules" => {
                for file in value.extract::<Vec<PathBuf>>()? {
                    options.rules.extend(mxc_rewrite::rules::load_rules(&file).map_err(raise)?);
                }
            }
            "fusion" => options.fusion = value.extract()?,
            "library_calls" => options.library_calls = value.extract()?,
            "kernel_cache" => {
                if !value.extract::<bool>()? {
                    options.cache = None;
                }
            }
            "opt_level" => {
                options.opt = match value.extract::<u8>()? {
                    0 => mxc_codegen::OptLevel::O0,
                    1 => mxc_codegen::OptLevel::O1,
                    2 => mxc_codegen::OptLevel::O2,
                    n => return Err(refuse(format!("advance_backend_options: opt_level {n}: it is 0, 1 or 2"))),
                }
            }
            "gpu_arch" => {
                let archs: Vec<String> = value.extract()?;
                options.gpu_archs = (archs.iter())
                    .map(|a| a.parse().map_err(|e| refuse(format!("advance_backend_options: gpu_arch `{a}`: {e}"))))
                    .collect::<PyResult<_>>()?;
            }
            "half_as_f32" => options.precision.half_as_f32 = value.extract()?,
            other => {
                return Err(refuse(format!(
                    "advance_backend_options: `{other}` is not an option of mxc (rules, fusion, library_calls, kernel_cache, opt_level, gpu_arch, half_as_f32)"
                )))
            }
        }
    }
    Ok(options)
}

/// Each stage of a compile on stderr, with the time so far.
struct Progress(Instant);

impl Observer for Progress {
    fn stages(&self) -> Option<mxc_rewrite::StageHook> {
        let start = self.0;
        Some(mxc_rewrite::StageHook(Arc::new(move |stage| {
            eprintln!("mxc: {stage} ({:.1} s)", start.elapsed().as_secs_f64());
        })))
    }

    fn compiled(&self, label: &str, _imported: &Graph, compiled: &mxc_codegen::Compiled) {
        eprintln!(
            "mxc: {label}: {} kernels for {}",
            compiled.program.steps.len(),
            compiled.target
        );
    }

    fn note(&self, text: &str) {
        eprintln!("mxc: {text}");
    }
}

/// Imports the ONNX model `filename`. Its inputs' dimensions come from the model, then
/// `map_input_dims` (sizes) and `map_dyn_input_dims` (`dynamic_dimension`s or expressions),
/// and a dimension left open from `default_dyn_dim_value` when given, else
/// `default_dim_value` (MIGraphX's default, 1; `None` keeps mxc's symbols in `[1..4096]`).
/// Inputs with symbolic dimensions are compiled one program per optimal size.
#[pyfunction]
#[pyo3(signature = (filename, default_dim_value = Some(1), map_input_dims = None, default_dyn_dim_value = None, map_dyn_input_dims = None, skip_unknown_operators = false, print_program_on_error = false, max_loop_iterations = 10, limit_max_iterations = 65535))]
#[allow(clippy::too_many_arguments)] // MIGraphX's signature
pub fn parse_onnx(
    py: Python<'_>,
    filename: PathBuf,
    default_dim_value: Option<u64>,
    map_input_dims: Option<HashMap<String, Vec<u64>>>,
    default_dyn_dim_value: Option<Bound<'_, PyAny>>,
    map_dyn_input_dims: Option<HashMap<String, Vec<Bound<'_, PyAny>>>>,
    skip_unknown_operators: bool,
    print_program_on_error: bool,
    max_loop_iterations: i64,
    limit_max_iterations: i64,
) -> PyResult<Program> {
    if skip_unknown_operators {
        return Err(refuse(
            "parse_onnx(skip_unknown_operators=True): mxc imports every node or refuses the model, naming the node",
        ));
    }
    if print_program_on_error {
        return Err(refuse(
            "parse_onnx(print_program_on_error=True): not supported; the error names the node it stopped at",
        ));
    }
    if (max_loop_iterations, limit_max_iterations) != (10, 65535) {
        return Err(refuse(
            "parse_onnx(max_loop_iterations=..., limit_max_iterations=...): not supported; mxc runs a Loop as many times as its trip count and condition say",
        ));
    }
    // the dimensions the model declares, then what the caller gives for each input
    let declared = model_input_dims(&filename, &HashMap::new()).map_err(raise)?;
    let mut given: Shapes = HashMap::new();
    for (name, dims) in map_input_dims.unwrap_or_default() {
        given.insert(name, dims.into_iter().map(Dim::constant).collect());
    }
    for (name, dims) in map_dyn_input_dims.unwrap_or_default() {
        let model_dims = declared
            .inputs()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d.clone());
        let named = |axis: usize| {
            let symbol = model_dims
                .as_ref()
                .and_then(|d| d.get(axis))
                .and_then(|d| d.as_symbol());
            symbol.map_or_else(|| dim::unnamed_axis(&name, axis), |s| s.name.clone())
        };
        let dims = (dims.iter().enumerate())
            .map(|(axis, d)| dim_of(d, || named(axis)))
            .collect::<PyResult<Vec<_>>>()
            .map_err(|e| refuse(format!("map_dyn_input_dims[`{name}`]: {e}")))?;
        if given.insert(name.clone(), dims).is_some() {
            return Err(refuse(format!(
                "input `{name}` is in both map_input_dims and map_dyn_input_dims"
            )));
        }
    }
    // a dim_param given in one input holds in every input; the symbols nobody gave (a
    // dim_param or an unnamed axis) take the defaults
    let named: std::collections::HashSet<String> = (given.values().flatten())
        .flat_map(|d| d.symbols().map(|s| s.name.clone()))
        .collect();
    let resolved = model_input_dims(&filename, &given).map_err(raise)?;
    let mut filled_inputs = Vec::with_capacity(resolved.inputs().len());
    for (name, dims) in resolved.inputs() {
        let mut filled = Vec::with_capacity(dims.len());
        for d in dims {
            let open = d.as_symbol().filter(|s| !named.contains(&s.name));
            filled.push(match (open, &default_dyn_dim_value, default_dim_value) {
                (None, _, _) | (Some(_), None, None) => d.clone(),
                (Some(s), Some(dyn_default), _) => dim_of(dyn_default, || s.name.clone())?,
                (Some(_), None, Some(n)) => Dim::constant(n),
            });
        }
        filled_inputs.push((name.clone(), filled));
    }
    // every tensor input is given now (their dimensions need no second look at the model);
    // shapes given for other inputs (a sequence's elements) stay for the importer
    given.extend(filled_inputs.iter().cloned());
    let dims =
        InputDims::new(filled_inputs).map_err(|e| raise(ImportError::Model(format!("the inputs' dimensions: {e}"))))?;
    if !dims.is_fixed() {
        let types = model_input_types(&filename).map_err(raise)?;
        if let Some((name, _)) = dims.inputs().iter().find(|(name, _)| !types.contains_key(name)) {
            return Err(refuse(format!(
                "{}: input `{name}` declares no element type mxc knows",
                filename.display()
            )));
        }
        return Ok(Program::of(State::Symbolic {
            model: filename,
            shapes: given,
            dims,
            types,
        }));
    }
    let opts = fixed_by(&dims, ImportOptions::default()).map_err(raise)?;
    let graph = py.detach(|| import_file(&filename, &opts)).map_err(raise)?;
    Ok(Program::of(State::Graph(graph)))
}

/// Writes the compiled `p` to `filename` as an `.mxr` file (what `mxc compile` writes;
/// `format` "msgpack", MIGraphX's default, names it too).
#[pyfunction]
#[pyo3(signature = (p, filename, format = "mxr"))]
pub fn save(p: &Program, filename: PathBuf, format: &str) -> PyResult<()> {
    check_format(format)?;
    let c = p.compiled("save")?;
    mxc_driver::write_mxr(&filename, c.contents(), None).map_err(raise)
}

/// The compiled program in the `.mxr` file `filename`; with `trust` (public key files, else
/// `$MXC_TRUSTED_KEYS`), only a file signed by one of them.
#[pyfunction]
#[pyo3(signature = (filename, format = "mxr", trust = None))]
pub fn load(filename: PathBuf, format: &str, trust: Option<Vec<PathBuf>>) -> PyResult<Program> {
    check_format(format)?;
    let policy = mxc_driver::trust_policy(&trust.unwrap_or_default()).map_err(raise)?;
    let contents = mxc_driver::read_mxr(&filename, None, &policy).map_err(raise)?;
    Ok(Program::of(State::Compiled(Arc::new(Runner::new(contents)))))
}

fn check_format(format: &str) -> PyResult<()> {
    match format {
        "mxr" | "msgpack" => Ok(()),
        other => Err(refuse(format!(
            "format `{other}`: mxc reads and writes .mxr files (format \"mxr\")"
        ))),
    }
}
