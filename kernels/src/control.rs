//! Running a plan's items: kernel calls in order, the control steps that run regions on the
//! host (`mxc_dialects::program::Item`): an `if` reads its condition and runs one branch, a
//! loop runs its body while its trip count and condition allow, moving the carried values and
//! scan outputs by whole-buffer copies (what each copy is, is in `program/control.rs`), and
//! host steps (`host_step.rs`).

use crate::executable::Executable;
use crate::strings::StringTable;
use crate::RunError;
use mxc_dialects::program::{IfStep, Item, LoopStep};
use std::time::{Duration, Instant};

/// One run's view of the program: where each buffer is, the strings its string buffers
/// name, and the time spent in each step when it is timed.
pub(crate) struct Run<'a> {
    pub exe: &'a Executable,
    pub pointer: &'a dyn Fn(usize) -> *mut u8,
    pub strings: StringTable<'a>,
    pub times: Option<&'a mut Vec<Duration>>,
}

impl Run<'_> {
    pub fn block(&mut self, items: &[Item]) -> Result<(), RunError> {
        for item in items {
            match item {
                Item::Call(n) => self.call(*n),
                Item::If(s) => self.run_if(s)?,
                Item::Loop(s) => self.run_loop(s)?,
                Item::Host(s) => self.run_host(s)?,
            }
        }
        Ok(())
    }

    fn call(&mut self, n: usize) {
        let step = &self.exe.program.steps[n];
        let start = self.times.is_some().then(Instant::now);
        let args: Vec<*mut u8> = step.args.iter().map(|&i| (self.pointer)(i)).collect();
        // SAFETY: each pointer addresses a live buffer of the size the kernel was compiled
        // for, its results temporaries owned by this call, and the range its loop's
        // (`Program::validate` checked all of it at load).
        unsafe { self.exe.workers.call(self.exe.kernels[n], step, args.as_ptr()) };
        if let (Some(times), Some(start)) = (self.times.as_deref_mut(), start) {
            times[n] += start.elapsed();
        }
    }

    fn bytes(&self, b: usize) -> usize {
        self.exe.program.buffers[b].ty.num_bytes()
    }

    /// Copies buffer `from` into buffer `to` at byte `offset` (the plan was checked: the two
    /// types are equal, or `to` stacks copies of `from`, and live buffers never overlap).
    fn copy(&self, from: usize, to: usize, offset: usize) {
        let (src, dst) = ((self.pointer)(from), (self.pointer)(to));
        if src != dst {
            // SAFETY: both buffers are live; `to` holds `offset + bytes(from)` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src, dst.add(offset), self.bytes(from)) };
        }
    }

    fn read_bool(&self, b: usize) -> bool {
        // SAFETY: the plan was checked: a one-element bool buffer.
        unsafe { *(self.pointer)(b) != 0 }
    }

    fn read_i64(&self, b: usize) -> i64 {
        // SAFETY: the plan was checked: a one-element i64 buffer (aligned: in the arena, a
        // weight aligned for its type, or an input's aligned copy).
        unsafe { (self.pointer)(b).cast::<i64>().read() }
    }

    fn run_if(&mut self, s: &IfStep) -> Result<(), RunError> {
        let branch = if self.read_bool(s.cond) { &s.then } else { &s.otherwise };
        self.block(&branch.items)?;
        for (&out, &result) in branch.outputs.iter().zip(&s.results) {
            self.copy(out, result, 0);
        }
        Ok(())
    }

    fn run_loop(&mut self, s: &LoopStep) -> Result<(), RunError> {
        let carried = s.carried_in.len();
        for (&initial, &result) in s.initial.iter().zip(&s.results) {
            self.copy(initial, result, 0);
        }
        let max_trips = self.read_i64(s.max_trips);
        let mut cond = self.read_bool(s.cond);
        let scans = s.scans().next().is_some();
        let mut i: i64 = 0;
        while i < max_trips && cond {
            if scans && s.iterations.is_some_and(|n| i as u64 >= n) {
                return Err(RunError::Run(format!(
                    "{} was compiled for {} iterations, which its scan outputs hold, but runs more",
                    s.label,
                    s.iterations.unwrap_or(0)
                )));
            }
            // SAFETY: one-element i64 and bool temporaries of the body (checked at load).
            unsafe {
                (self.pointer)(s.iteration).cast::<i64>().write(i);
                *(self.pointer)(s.cond_in) = cond as u8;
            }
            for (&result, &input) in s.results.iter().zip(&s.carried_in) {
                self.copy(result, input, 0);
            }
            self.block(&s.body.items)?;
            cond = self.read_bool(s.body.outputs[0]);
            for (&out, &result) in s.body.outputs[1..=carried].iter().zip(&s.results) {
                self.copy(out, result, 0);
            }
            for (out, result) in s.scans() {
                self.copy(out, result, i as usize * self.bytes(out));
            }
            i += 1;
        }
        match s.iterations {
            Some(n) if scans && i as u64 != n => Err(RunError::Run(format!(
                "{} ran {i} iterations, but its scan outputs were compiled for {n} (a length known only at run time needs dynamic shapes)",
                s.label
            ))),
            _ => Ok(()),
        }
    }
}
