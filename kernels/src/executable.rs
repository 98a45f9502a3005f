//! A program ready to run: its plan, its loaded kernels and its constants in aligned memory.

use crate::buffer::AlignedBuf;
use crate::control::Run;
use crate::library::{KernelFn, Library};
use crate::strings::StringTable;
use crate::threads::{Parallelism, Workers};
use crate::RunError;
use mxc_dialects::program::{BufferKind, MemoryPlan, Program};
use mxc_dialects::Tensor;
use std::collections::HashMap;
use std::time::Duration;

/// A program's outputs, by name, in the graph's order.
pub type Outputs = Vec<(String, Tensor)>;

/// Bytes a loaded program holds: its weights (where they are: a mapped file, the compiled
/// program), the part of them copied to align them, and the arena of temporaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryUse {
    pub weights: usize,
    pub weights_copied: usize,
    pub arena: usize,
}

pub struct Executable {
    pub(crate) program: Program,
    memory: MemoryPlan,
    pub(crate) kernels: Vec<KernelFn>,
    /// Aligned copies of the weights that are misaligned where they are, and of each string
    /// constant's handles into `string_constants`.
    copies: HashMap<usize, AlignedBuf>,
    /// The strings of the string constants: the first strings of every run (`strings.rs`).
    string_constants: Vec<String>,
    /// The arena of the last run, kept for the next: a new one costs a page fault per page
    /// on first touch (milliseconds for a large model). A run takes it (or makes one, when
    /// another run holds it) and puts it back when done; kernels write every temporary
    /// before reading it, so what a run leaves in it never reaches the next.
    arena: std::sync::Mutex<Option<AlignedBuf>>,
    pub(crate) workers: Workers,
    // Keeps the kernels mapped while `kernels` points into them.
    _library: Library,
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
        let lib = Library::from_bytes(library)?;
        let kernels = program
            .steps
            .iter()
            .map(|s| lib.kernel(&s.symbol))
            .collect::<Result<_, _>>()?;
        // kernels read weights where they are (a mapped file, a compiled tensor) unless they
        // are not aligned for their element type
        let mut copies = HashMap::new();
        let mut string_constants = Vec::new();
        for (i, b) in program.buffers.iter().enumerate() {
            let BufferKind::Constant(t) = &b.kind else { continue };
            let what = || format!("an aligned copy of weight {i}");
            if let Some(strings) = t.strings() {
                let first = string_constants.len() as u64;
                let handles: Vec<u8> = (first..first + strings.len() as u64)
                    .flat_map(u64::to_le_bytes)
                    .collect();
                string_constants.extend(strings.into_iter().map(str::to_string));
                copies.insert(i, AlignedBuf::from_bytes(&handles, what)?);
            } else if !(t.bytes().as_ptr() as usize).is_multiple_of(t.dtype().size()) {
                copies.insert(i, AlignedBuf::from_bytes(t.bytes(), what)?);
            }
        }
        Ok(Executable {
            program,
            memory,
            kernels,
            copies,
            string_constants,
            arena: std::sync::Mutex::new(None),
            workers: Workers::new(Parallelism::serial())?,
            _library: lib,
        })
    }

    /// Runs later calls on `parallelism.threads` threads (one, the caller's, after loading).
    pub fn set_parallelism(&mut self, parallelism: Parallelism) -> Result<(), RunError> {
        self.workers = Workers::new(parallelism)?;
        Ok(())
    }

    pub fn parallelism(&self) -> Parallelism {
        self.workers.parallelism()
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The memory a run uses besides its inputs and outputs.
    pub fn memory_use(&self) -> MemoryUse {
        let weights = self.program.buffers.iter().filter_map(|b| match &b.kind {
            BufferKind::Constant(t) => Some(t.bytes().len()),
            _ => None,
        });
        MemoryUse {
            weights: weights.sum(),
            weights_copied: self.copies.values().map(AlignedBuf::len).sum(),
            arena: self.memory.size,
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
        let p = &self.program;
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
        let mut owned: HashMap<usize, AlignedBuf> = HashMap::new();
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
            let what = || format!("input `{}`", binding.name);
            let buffer = match value.strings() {
                Some(s) => AlignedBuf::from_bytes(&strings.encode(&s), what)?,
                None => AlignedBuf::from_bytes(value.bytes(), what)?,
            };
            owned.insert(binding.buffer, buffer);
        }
        let kept = self.arena.lock().map(|mut a| a.take()).unwrap_or(None);
        let arena = match kept {
            Some(arena) => arena,
            None => AlignedBuf::zeroed(self.memory.size, || "the arena of temporaries".into())?,
        };
        let pointer = |i: usize| -> *mut u8 {
            match (&p.buffers[i].kind, self.copies.get(&i), self.memory.offsets[i]) {
                (_, Some(c), _) => c.as_ptr(),
                // kernels never write weights (results are temporaries), so a read-only
                // mapping is safe to point them at
                (BufferKind::Constant(t), None, _) => t.bytes().as_ptr().cast_mut(),
                // SAFETY: the plan was checked at load: the buffer lies inside the arena
                (_, None, Some(at)) => unsafe { arena.as_ptr().add(at) },
                // the plan was checked at load: every input buffer is bound, so it is here
                (_, None, None) => owned.get(&i).map_or(std::ptr::null_mut(), AlignedBuf::as_ptr),
            }
        };
        let mut run = Run {
            exe: self,
            pointer: &pointer,
            strings,
            times,
        };
        run.block(&p.main)?;
        let outputs = p
            .outputs
            .iter()
            .map(|o| Ok((o.name.clone(), run.read(o.buffer)?)))
            .collect::<Result<_, RunError>>()?;
        if let Ok(mut slot) = self.arena.lock() {
            *slot = Some(arena);
        }
        Ok(outputs)
    }
}
