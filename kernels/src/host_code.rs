//! A program's kernels on this machine's CPU (`ref` and `cpu`): its loaded shared object, the
//! weights it reads where they are (aligned copies of those that are not aligned for their
//! type), the arena of temporaries kept from run to run, and the threads calls are split on.
//! A run's `Place` here is host memory.

use crate::buffer::AlignedBuf;
use crate::control::Place;
use crate::library::{KernelFn, Library};
use crate::threads::{Parallelism, Workers};
use crate::RunError;
use mxc_dialects::program::{BufferKind, MemoryPlan, Program};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

pub(crate) struct HostCode {
    kernels: Vec<KernelFn>,
    /// Whether each step's kernel takes the symbols' values after its buffers.
    takes_sizes: Vec<bool>,
    /// Aligned copies of the weights that are misaligned where they are, and each string
    /// constant's handles.
    copies: HashMap<usize, AlignedBuf>,
    /// The arena of the last run, kept for the next: a new one costs a page fault per page
    /// on first touch (milliseconds for a large model). A run takes it (or makes one, when
    /// another run holds it) and puts it back when done; kernels write every temporary
    /// before reading it, so what a run leaves in it never reaches the next.
    arena: Mutex<Option<AlignedBuf>>,
    pub workers: Workers,
    // Keeps the kernels mapped while `kernels` points into them.
    _library: Library,
}

impl HostCode {
    /// The kernels of shared object `library` for `program`; `string_handles` are the buffers
    /// of its string constants.
    pub fn load(
        program: &Program,
        library: &[u8],
        string_handles: HashMap<usize, Vec<u8>>,
    ) -> Result<HostCode, RunError> {
        let lib = Library::from_bytes(library)?;
        let kernels = program
            .steps
            .iter()
            .map(|s| lib.kernel(&s.symbol))
            .collect::<Result<_, _>>()?;
        let takes_sizes = (program.steps.iter())
            .map(|s| program.kernels.iter().any(|k| k.symbol == s.symbol && k.takes_sizes()))
            .collect();
        // kernels read weights where they are (a mapped file, a compiled tensor) unless they
        // are not aligned for their element type
        let mut copies = HashMap::new();
        for (i, handles) in string_handles {
            copies.insert(i, AlignedBuf::from_bytes(&handles, || format!("string weight {i}"))?);
        }
        for (i, b) in program.buffers.iter().enumerate() {
            let BufferKind::Constant(t) = &b.kind else { continue };
            if !copies.contains_key(&i) && !(t.bytes().as_ptr() as usize).is_multiple_of(t.dtype().size()) {
                copies.insert(
                    i,
                    AlignedBuf::from_bytes(t.bytes(), || format!("an aligned copy of weight {i}"))?,
                );
            }
        }
        Ok(HostCode {
            kernels,
            takes_sizes,
            copies,
            arena: Mutex::new(None),
            workers: Workers::new(Parallelism::serial())?,
            _library: lib,
        })
    }

    /// Bytes of weights copied to align them.
    pub fn weights_copied(&self) -> usize {
        self.copies.values().map(AlignedBuf::len).sum()
    }

    /// A run's place: the kept arena (or a new one, where it is too small for `memory`) and
    /// `inputs`' bytes in aligned buffers; `sizes` are the symbols' values at this run (of a
    /// program over symbolic sizes, `program` is the plan at them).
    pub fn place<'a>(
        &'a self,
        program: &'a Program,
        memory: &'a MemoryPlan,
        inputs: &[(usize, Cow<'_, [u8]>)],
        sizes: Vec<i64>,
    ) -> Result<HostPlace<'a>, RunError> {
        let mut owned = HashMap::new();
        for (b, bytes) in inputs {
            let b = *b;
            let name = || {
                format!(
                    "input `{}`",
                    program.inputs.iter().find(|i| i.buffer == b).map_or("?", |i| &i.name)
                )
            };
            owned.insert(b, AlignedBuf::from_bytes(bytes, name)?);
        }
        let kept = (self.arena.lock().map(|mut a| a.take()).unwrap_or(None)).filter(|a| a.len() >= memory.size);
        let arena = match kept {
            Some(arena) => arena,
            None => AlignedBuf::zeroed(memory.size, || "the arena of temporaries".into())?,
        };
        Ok(HostPlace {
            code: self,
            program,
            memory,
            owned,
            arena: Some(arena),
            sizes,
        })
    }
}

pub(crate) struct HostPlace<'a> {
    code: &'a HostCode,
    program: &'a Program,
    memory: &'a MemoryPlan,
    /// The inputs' aligned copies.
    owned: HashMap<usize, AlignedBuf>,
    /// The arena, given back to `code` when the run is over.
    arena: Option<AlignedBuf>,
    /// The symbols' values, which size-generic kernels take after their buffers.
    sizes: Vec<i64>,
}

impl HostPlace<'_> {
    fn pointer(&self, i: usize) -> *mut u8 {
        match (
            &self.program.buffers[i].kind,
            self.code.copies.get(&i),
            self.memory.offsets[i],
        ) {
            (_, Some(c), _) => c.as_ptr(),
            // kernels never write weights (results are temporaries), so a read-only mapping
            // is safe to point them at
            (BufferKind::Constant(t), None, _) => t.bytes().as_ptr().cast_mut(),
            // SAFETY: the plan was checked at load: the buffer lies inside the arena
            (_, None, Some(at)) => unsafe { self.arena.as_ref().expect("the run's arena").as_ptr().add(at) },
            // the plan was checked at load: every input buffer is bound, so it is here
            (_, None, None) => self.owned.get(&i).map_or(std::ptr::null_mut(), AlignedBuf::as_ptr),
        }
    }

    fn bytes(&self, b: usize) -> usize {
        self.program.buffers[b].ty.num_bytes()
    }
}

impl Place for HostPlace<'_> {
    fn call(&mut self, n: usize, _wait: bool) -> Result<(), RunError> {
        let step = &self.program.steps[n];
        let mut args: Vec<*mut u8> = step.args.iter().map(|&i| self.pointer(i)).collect();
        if self.code.takes_sizes[n] {
            // kernels only read it
            args.push(self.sizes.as_ptr().cast_mut().cast());
        }
        // SAFETY: each pointer addresses a live buffer of the size the kernel was compiled
        // for, its results temporaries owned by this call, and the range its loop's
        // (`Program::validate` checked all of it at load).
        unsafe { self.code.workers.call(self.code.kernels[n], step, args.as_ptr()) };
        Ok(())
    }

    fn copy(&mut self, from: usize, to: usize, offset: usize) -> Result<(), RunError> {
        let (src, dst) = (self.pointer(from), self.pointer(to));
        if src != dst {
            // SAFETY: both buffers are live; `to` holds `offset + bytes(from)` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src, dst.add(offset), self.bytes(from)) };
        }
        Ok(())
    }

    fn load(&mut self, b: usize) -> Result<Vec<u8>, RunError> {
        // SAFETY: buffer `b` is live and holds the bytes of its type (checked at load).
        Ok(unsafe { std::slice::from_raw_parts(self.pointer(b), self.bytes(b)) }.to_vec())
    }

    fn store(&mut self, b: usize, bytes: &[u8]) -> Result<(), RunError> {
        debug_assert_eq!(bytes.len(), self.bytes(b));
        // SAFETY: buffer `b` is a live temporary of `bytes.len()` bytes that no operand shares.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.pointer(b), bytes.len()) };
        Ok(())
    }
}

impl Drop for HostPlace<'_> {
    fn drop(&mut self) {
        if let (Ok(mut slot), Some(arena)) = (self.code.arena.lock(), self.arena.take()) {
            *slot = Some(arena);
        }
    }
}
