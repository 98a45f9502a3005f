//! A program's kernels on a GPU (the `gpu` target): the code object the device runs, loaded
//! as a module, one function per step, and device memory for every buffer (each weight
//! uploaded once at load, each input's slot, and the arena of temporaries), all freed when the
//! program is dropped. A kernel call is a launch (`launch_shape`: `ceil(range / 256)` blocks of
//! 256 threads, or one thread for a kernel that cannot be split), its arguments the buffers'
//! device addresses, then `lo = 0` and `hi = range`, as the kernel's code declares them. A step
//! with a library call whose library is present calls it instead (`gpu_calls.rs`). Runs are
//! serialised: they share the device memory. A run's `Place` here is the device's memory.

use crate::control::Place;
use crate::device::{DevicePtr, Gpu, Handle};
use crate::gpu_calls::LibraryCalls;
use crate::RunError;
use mxc_dialects::program::{launch_shape, BufferKind, CodeObject, GpuArch, MemoryPlan, Program};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Mutex, MutexGuard};

pub(crate) struct GpuCode {
    pub gpu: Gpu,
    /// The architecture of the code object loaded.
    pub arch: GpuArch,
    module: Handle,
    /// The function each step launches.
    functions: Vec<Handle>,
    /// Each buffer's device address (a temporary's inside `arena`).
    addresses: Vec<DevicePtr>,
    /// Every allocation made, freed on drop.
    allocations: Vec<DevicePtr>,
    /// The steps that call a library.
    pub calls: LibraryCalls,
    /// Held by a run: runs share the input slots and the arena.
    running: Mutex<()>,
    pub weights_uploaded: usize,
}

impl GpuCode {
    /// `program`'s kernels from the first of `objects` that `gpu` runs, its weights uploaded
    /// (`string_handles` standing for the string constants).
    pub fn load(
        program: &Program,
        memory: &MemoryPlan,
        objects: &[CodeObject],
        gpu: Gpu,
        string_handles: &HashMap<usize, Vec<u8>>,
    ) -> Result<GpuCode, RunError> {
        let mut failures = Vec::new();
        let mut loaded = None;
        for object in gpu.choose(objects)? {
            match gpu.driver.load_module(&object.bytes) {
                Ok(module) => {
                    loaded = Some((module, object.arch.clone()));
                    break;
                }
                Err(e) => failures.push(format!("the code for {}: {e}", object.arch)),
            }
        }
        let (module, arch) = loaded.ok_or_else(|| RunError::Load(format!("{gpu:?}: {}", failures.join("; "))))?;
        let mut code = GpuCode {
            gpu,
            arch,
            module,
            functions: Vec::new(),
            addresses: vec![0; program.buffers.len()],
            allocations: Vec::new(),
            calls: LibraryCalls::default(),
            running: Mutex::new(()),
            weights_uploaded: 0,
        };
        // on an error, dropping `code` frees what was made so far
        code.prepare(program, memory, string_handles)?;
        Ok(code)
    }

    fn prepare(
        &mut self,
        program: &Program,
        memory: &MemoryPlan,
        string_handles: &HashMap<usize, Vec<u8>>,
    ) -> Result<(), RunError> {
        let failed = |what: String| move |e: String| RunError::Load(format!("{what}: {e}"));
        for step in &program.steps {
            let name = CString::new(step.symbol.as_str())
                .map_err(|_| RunError::Load(format!("kernel name `{}` holds a NUL", step.symbol)))?;
            let function = self
                .gpu
                .driver
                .function(self.module, &name)
                .map_err(failed(format!("kernel `{}`", step.symbol)))?;
            self.functions.push(function);
        }
        let arena = self.allocate(memory.size, "the arena of temporaries")?;
        for (i, b) in program.buffers.iter().enumerate() {
            self.addresses[i] = match (&b.kind, memory.offsets[i]) {
                (BufferKind::Constant(t), _) => {
                    let bytes = string_handles.get(&i).map_or(t.bytes(), Vec::as_slice);
                    let at = self.allocate(bytes.len(), &format!("weight {i}"))?;
                    self.gpu
                        .driver
                        .upload(at, bytes)
                        .map_err(failed(format!("uploading weight {i}")))?;
                    self.weights_uploaded += bytes.len();
                    at
                }
                (_, Some(offset)) => arena + offset as u64,
                (_, None) => self.allocate(b.ty.num_bytes(), &format!("buffer {i} (an input)"))?,
            };
        }
        let (gpu, allocations) = (&self.gpu, &mut self.allocations);
        let mut allocate = |bytes: usize, what: &str| allocate(gpu, allocations, bytes, what);
        self.calls = LibraryCalls::prepare(program, gpu, &self.addresses, &mut allocate)?;
        Ok(())
    }

    fn allocate(&mut self, bytes: usize, what: &str) -> Result<DevicePtr, RunError> {
        allocate(&self.gpu, &mut self.allocations, bytes, what)
    }

    /// A run's place: the device's memory, `inputs` uploaded to their slots.
    pub fn place<'a>(
        &'a self,
        program: &'a Program,
        inputs: &[(usize, Cow<'_, [u8]>)],
    ) -> Result<GpuPlace<'a>, RunError> {
        let running = self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (b, bytes) in inputs {
            self.gpu
                .driver
                .upload(self.addresses[*b], bytes)
                .map_err(|e| RunError::Run(format!("uploading buffer {b} (an input): {e}")))?;
        }
        Ok(GpuPlace {
            code: self,
            program,
            _running: running,
        })
    }
}

/// `bytes` of `gpu`'s memory for `what`, recorded in `allocations`.
fn allocate(gpu: &Gpu, allocations: &mut Vec<DevicePtr>, bytes: usize, what: &str) -> Result<DevicePtr, RunError> {
    let at = gpu.driver.alloc(bytes).map_err(|e| RunError::Memory {
        what: format!("{what} on {} ({e})", gpu.name),
        bytes,
    })?;
    allocations.push(at);
    Ok(at)
}

impl Drop for GpuCode {
    fn drop(&mut self) {
        // nothing is running: a run borrows the code
        let _ = self.gpu.driver.synchronize();
        // the libraries' descriptors and handles go before the memory their calls used
        self.calls = LibraryCalls::default();
        for &at in &self.allocations {
            self.gpu.driver.free(at);
        }
        self.gpu.driver.unload_module(self.module);
    }
}

pub(crate) struct GpuPlace<'a> {
    code: &'a GpuCode,
    program: &'a Program,
    _running: MutexGuard<'a, ()>,
}

impl GpuPlace<'_> {
    fn bytes(&self, b: usize) -> usize {
        self.program.buffers[b].ty.num_bytes()
    }

    fn failed(&self, what: String) -> impl Fn(String) -> RunError + '_ {
        move |e| RunError::Run(format!("{what} on {}: {e}", self.code.gpu.name))
    }
}

impl Place for GpuPlace<'_> {
    fn call(&mut self, n: usize, wait: bool) -> Result<(), RunError> {
        let step = &self.program.steps[n];
        let driver = &self.code.gpu.driver;
        let library_call = || format!("kernel `{}`'s library call", step.symbol);
        if self.code.calls.run(n).map_err(self.failed(library_call()))? {
            if wait {
                driver.synchronize().map_err(self.failed(library_call()))?;
            }
            return Ok(());
        }
        let (blocks, threads) = launch_shape(step.range, step.splittable, step.per_block);
        let blocks = u32::try_from(blocks).map_err(|_| {
            RunError::Run(format!(
                "kernel `{}`: a range of {} is too many blocks",
                step.symbol, step.range
            ))
        })?;
        if blocks == 0 {
            return Ok(());
        }
        let mut values: Vec<u64> = step.args.iter().map(|&b| self.code.addresses[b]).collect();
        values.extend([0, step.range]);
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        driver
            .launch(self.code.functions[n], blocks, threads as u32, &mut params)
            .map_err(self.failed(format!("kernel `{}`", step.symbol)))?;
        if wait {
            driver
                .synchronize()
                .map_err(self.failed(format!("kernel `{}`", step.symbol)))?;
        }
        Ok(())
    }

    fn copy(&mut self, from: usize, to: usize, offset: usize) -> Result<(), RunError> {
        let (src, dst) = (self.code.addresses[from], self.code.addresses[to] + offset as u64);
        if src == dst {
            return Ok(());
        }
        self.code
            .gpu
            .driver
            .copy(src, dst, self.bytes(from))
            .map_err(self.failed(format!("copying buffer {from} to buffer {to}")))
    }

    fn load(&mut self, b: usize) -> Result<Vec<u8>, RunError> {
        let mut bytes = vec![0; self.bytes(b)];
        self.code
            .gpu
            .driver
            .download(self.code.addresses[b], &mut bytes)
            .map_err(self.failed(format!("reading buffer {b}")))?;
        Ok(bytes)
    }

    fn store(&mut self, b: usize, bytes: &[u8]) -> Result<(), RunError> {
        self.code
            .gpu
            .driver
            .upload(self.code.addresses[b], bytes)
            .map_err(self.failed(format!("writing buffer {b}")))
    }
}
