//! A program ready to run: its plan, its memory plan, its string constants, and its kernels
//! where they run: on this machine's CPU (`host_code.rs`) or on a GPU (`gpu_code.rs`). A run
//! checks its inputs, runs the plan's items in a `Place` of that code (`control.rs`) and reads
//! the outputs back.

use crate::control::{Place, Run};
use crate::device::Gpu;
use crate::gpu_calls::CallRoute;
use crate::gpu_code::GpuCode;
use crate::host_code::HostCode;
use crate::mxr::{Mxr, GPU_TARGET};
use crate::sized_runs::SizedRuns;
use crate::strings::StringTable;
use crate::threads::{Parallelism, Workers};
use crate::RunError;
use mxc_dialects::program::{BufferKind, CodeObject, GpuArch, MemoryPlan, Program};
use mxc_dialects::Tensor;
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

/// A program's outputs, by name, in the graph's order.
pub type Outputs = Vec<(String, Tensor)>;

/// Bytes a loaded program holds: its weights (where they are: a mapped file, the compiled
/// program), the part of them copied (to align them on the host, or to the GPU's memory), and
/// the arena of temporaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryUse {
    pub weights: usize,
    pub weights_copied: usize,
    pub arena: usize,
}

/// Where a program's kernels run.
enum Code {
    Host(HostCode),
    Gpu(GpuCode),
}

pub struct Executable {
    pub(crate) program: Program,
    memory: MemoryPlan,
    /// Of a program over symbolic sizes: the plans at the sizes runs had (`sized_runs.rs`).
    sized: Option<SizedRuns>,
    /// The strings of the string constants: the first strings of every run (`strings.rs`).
    string_constants: Vec<String>,
    code: Code,
}

impl Executable {
    /// Loads the kernels of `library` (a shared object's bytes) for `program`, its temporaries
    /// placed by `program.memory_plan()`.
    pub fn load(program: Program, library: &[u8]) -> Result<Executable, RunError> {
        let memory = program.memory_plan();
        Executable::load_planned(program, memory, library)
    }

    /// `load` with a memory plan given (an `.mxr` file's); an error if the plan disagrees with
    /// itself, the memory plan or its kernels (`Program::validate`).
    pub fn load_planned(program: Program, memory: MemoryPlan, library: &[u8]) -> Result<Executable, RunError> {
        program.validate(&memory).map_err(|e| RunError::Load(e.to_string()))?;
        let (string_constants, handles) = string_constants(&program);
        // kernels compiled for this machine may use its AMX tiles, which Linux must allow first
        crate::amx::tiles_usable();
        let code = Code::Host(HostCode::load(&program, library, handles)?);
        Ok(Executable {
            sized: SizedRuns::of(&program)?,
            program,
            memory,
            string_constants,
            code,
        })
    }

    /// Loads `program` on `gpu` from the one of `objects` (its code for each GPU architecture)
    /// the device runs, its weights uploaded; an error if the plan disagrees with itself, the
    /// memory plan or the code, or the device runs none of it.
    pub fn load_gpu(
        program: Program,
        memory: MemoryPlan,
        objects: &[CodeObject],
        gpu: Gpu,
    ) -> Result<Executable, RunError> {
        program.validate(&memory).map_err(|e| RunError::Load(e.to_string()))?;
        if program.is_sized() {
            return Err(RunError::Load(
                "a program over symbolic sizes runs on the host only: the gpu target's kernels do not take sizes"
                    .into(),
            ));
        }
        for object in objects {
            crate::gpu::check(object, &program).map_err(RunError::Load)?;
        }
        let (string_constants, handles) = string_constants(&program);
        let code = Code::Gpu(GpuCode::load(&program, &memory, objects, gpu, &handles)?);
        Ok(Executable {
            sized: None,
            program,
            memory,
            string_constants,
            code,
        })
    }

    /// The program of a `.mxr` file read, its kernels loaded where they run: a `gpu` file's on
    /// this machine's GPU (`Gpu::find`), another's on its CPU.
    pub fn load_mxr(file: Mxr) -> Result<Executable, RunError> {
        match file.target == GPU_TARGET {
            true => Executable::load_gpu(file.program, file.memory, &file.code_objects, Gpu::find()?),
            false => Executable::load_planned(file.program, file.memory, &file.library),
        }
    }

    /// Runs later calls on `parallelism.threads` threads (one, the caller's, after loading);
    /// on a GPU, where a call is a launch, it changes nothing.
    pub fn set_parallelism(&mut self, parallelism: Parallelism) -> Result<(), RunError> {
        if let Code::Host(host) = &mut self.code {
            host.workers = Workers::new(parallelism)?;
        }
        Ok(())
    }

    pub fn parallelism(&self) -> Parallelism {
        match &self.code {
            Code::Host(host) => host.workers.parallelism(),
            Code::Gpu(_) => Parallelism::serial(),
        }
    }

    /// The GPU the program runs on and the architecture of the code it loaded (`None` on the host).
    pub fn device(&self) -> Option<(&Gpu, &GpuArch)> {
        match &self.code {
            Code::Host(_) => None,
            Code::Gpu(gpu) => Some((&gpu.gpu, &gpu.arch)),
        }
    }

    /// How the program's library calls run, by callee and outcome (empty on the host, and for
    /// a program without library calls): through the library opened, or as generated kernels,
    /// with why.
    pub fn call_routes(&self) -> Vec<CallRoute> {
        match &self.code {
            Code::Host(_) => Vec::new(),
            Code::Gpu(gpu) => gpu.calls.routes().to_vec(),
        }
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The plan as the most recent run had it: of a program over symbolic sizes, at that run's
    /// sizes (ranges, estimates and types evaluated), else (or before any run) `program()`'s.
    pub fn program_as_run(&self) -> Cow<'_, Program> {
        match self.sized.as_ref().and_then(SizedRuns::last) {
            Some(plan) => Cow::Owned(plan.program.clone()),
            None => Cow::Borrowed(&self.program),
        }
    }

    /// The memory a run uses besides its inputs and outputs (of a program over symbolic sizes,
    /// the most recent run's temporaries; before any, those at the largest sizes).
    pub fn memory_use(&self) -> MemoryUse {
        let weights = self.program.buffers.iter().filter_map(|b| match &b.kind {
            BufferKind::Constant(t) => Some(t.bytes().len()),
            _ => None,
        });
        MemoryUse {
            weights: weights.sum(),
            weights_copied: match &self.code {
                Code::Host(host) => host.weights_copied(),
                Code::Gpu(gpu) => gpu.weights_uploaded,
            },
            arena: (self.sized.as_ref())
                .and_then(SizedRuns::last)
                .map_or(self.memory.size, |plan| plan.memory.size),
        }
    }

    /// Runs the program on named inputs (every graph input exactly once) and returns the
    /// outputs in the graph's order.
    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<Outputs, RunError> {
        self.execute(inputs, None)
    }

    /// `run`, also returning the time each step (kernel call) took, in plan order (a step in a
    /// loop's body: all its calls together).
    pub fn run_timed(&self, inputs: &HashMap<String, Tensor>) -> Result<(Outputs, Vec<Duration>), RunError> {
        let mut times = vec![Duration::ZERO; self.program.steps.len()];
        let outputs = self.execute(inputs, Some(&mut times))?;
        Ok((outputs, times))
    }

    fn execute(
        &self,
        inputs: &HashMap<String, Tensor>,
        times: Option<&mut Vec<Duration>>,
    ) -> Result<Outputs, RunError> {
        let at_sizes;
        let (p, memory, sizes) = match &self.sized {
            None => (&self.program, &self.memory, Vec::new()),
            Some(sized) => {
                at_sizes = sized.plan_for(&self.program, inputs)?;
                (&at_sizes.program, &at_sizes.memory, at_sizes.values.clone())
            }
        };
        for name in inputs.keys() {
            if !p.inputs.iter().any(|b| &b.name == name) {
                let known: Vec<&str> = p.inputs.iter().map(|b| b.name.as_str()).collect();
                return Err(RunError::Input {
                    name: name.clone(),
                    message: format!("the model has no such input (its inputs: {})", known.join(", ")),
                });
            }
        }
        let mut strings = StringTable::new(&self.string_constants);
        let mut given = Vec::with_capacity(p.inputs.len());
        for binding in &p.inputs {
            let expected = &p.buffers[binding.buffer].ty;
            let value = inputs.get(&binding.name).ok_or_else(|| RunError::Input {
                name: binding.name.clone(),
                message: format!("no value given (expected {expected})"),
            })?;
            if &value.ty != expected {
                return Err(RunError::Input {
                    name: binding.name.clone(),
                    message: format!("expected {expected}, got {}", value.ty),
                });
            }
            let bytes = match value.strings() {
                Some(s) => Cow::Owned(strings.encode(&s)),
                None => Cow::Borrowed(value.bytes()),
            };
            given.push((binding.buffer, bytes));
        }
        let mut host;
        let mut gpu;
        let place: &mut dyn Place = match &self.code {
            Code::Host(code) => {
                host = code.place(p, memory, &given, sizes)?;
                &mut host
            }
            Code::Gpu(code) => {
                gpu = code.place(p, &given)?;
                &mut gpu
            }
        };
        let mut run = Run {
            program: p,
            place,
            strings,
            times,
        };
        run.block(&p.main)?;
        p.outputs
            .iter()
            .map(|o| Ok((o.name.clone(), run.read(o.buffer)?)))
            .collect()
    }
}

/// The strings of `program`'s string constants, in buffer order, and each such constant's
/// buffer: the handles of its strings (`strings.rs`).
fn string_constants(program: &Program) -> (Vec<String>, HashMap<usize, Vec<u8>>) {
    let mut strings = Vec::new();
    let mut handles = HashMap::new();
    for (i, b) in program.buffers.iter().enumerate() {
        let BufferKind::Constant(t) = &b.kind else { continue };
        if let Some(values) = t.strings() {
            let first = strings.len() as u64;
            handles.insert(
                i,
                (first..first + values.len() as u64)
                    .flat_map(u64::to_le_bytes)
                    .collect(),
            );
            strings.extend(values.into_iter().map(str::to_string));
        }
    }
    (strings, handles)
}
