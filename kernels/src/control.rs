//! Running a plan's items: kernel calls in order, the control steps that run regions on the
//! host (`mxc_dialects::program::Item`): an `if` reads its condition and runs one branch, a
//! loop runs its body while its trip count and condition allow, moving the carried values and
//! scan outputs by whole-buffer copies (what each copy is, is in `program/control.rs`), and
//! host steps (`host_step.rs`). Where the buffers are and how a kernel is called is the
//! run's `Place`: host memory (`host_code.rs`) or a GPU's (`gpu_code.rs`).

use crate::strings::StringTable;
use crate::RunError;
use mxc_dialects::program::{IfStep, Item, LoopStep, Program};
use std::time::{Duration, Instant};

/// Where one run's buffers are, and how its kernels are called.
pub(crate) trait Place {
    /// Runs kernel call `Program::steps[n]`; when `wait`, returns once it is done (to time it).
    fn call(&mut self, n: usize, wait: bool) -> Result<(), RunError>;
    /// Copies buffer `from` into buffer `to` at byte `offset` (the plan was checked: the two
    /// types are equal, or `to` stacks copies of `from`, and live buffers never overlap).
    fn copy(&mut self, from: usize, to: usize, offset: usize) -> Result<(), RunError>;
    /// The bytes buffer `b` holds.
    fn load(&mut self, b: usize) -> Result<Vec<u8>, RunError>;
    /// Writes all of buffer `b`, a temporary no operand of the writer shares.
    fn store(&mut self, b: usize, bytes: &[u8]) -> Result<(), RunError>;
}

/// One run: its program, where its buffers are, the strings its string buffers name, and the
/// time spent in each step when it is timed.
pub(crate) struct Run<'a> {
    pub program: &'a Program,
    pub place: &'a mut dyn Place,
    pub strings: StringTable<'a>,
    pub times: Option<&'a mut Vec<Duration>>,
}

impl Run<'_> {
    pub fn block(&mut self, items: &[Item]) -> Result<(), RunError> {
        for item in items {
            match item {
                Item::Call(n) => self.call(*n)?,
                Item::If(s) => self.run_if(s)?,
                Item::Loop(s) => self.run_loop(s)?,
                Item::Host(s) => self.run_host(s)?,
            }
        }
        Ok(())
    }

    fn call(&mut self, n: usize) -> Result<(), RunError> {
        let start = self.times.is_some().then(Instant::now);
        self.place.call(n, start.is_some())?;
        if let (Some(times), Some(start)) = (self.times.as_deref_mut(), start) {
            times[n] += start.elapsed();
        }
        Ok(())
    }

    fn bytes(&self, b: usize) -> usize {
        self.program.buffers[b].ty.num_bytes()
    }

    fn copy(&mut self, from: usize, to: usize, offset: usize) -> Result<(), RunError> {
        self.place.copy(from, to, offset)
    }

    fn read_bool(&mut self, b: usize) -> Result<bool, RunError> {
        // the plan was checked: a one-element bool buffer
        Ok(self.place.load(b)?[0] != 0)
    }

    fn read_i64(&mut self, b: usize) -> Result<i64, RunError> {
        // the plan was checked: a one-element i64 buffer
        let bytes = self.place.load(b)?;
        Ok(i64::from_le_bytes(bytes[..8].try_into().expect("an i64 buffer")))
    }

    fn run_if(&mut self, s: &IfStep) -> Result<(), RunError> {
        let branch = if self.read_bool(s.cond)? { &s.then } else { &s.otherwise };
        self.block(&branch.items)?;
        for (&out, &result) in branch.outputs.iter().zip(&s.results) {
            self.copy(out, result, 0)?;
        }
        Ok(())
    }

    fn run_loop(&mut self, s: &LoopStep) -> Result<(), RunError> {
        let carried = s.carried_in.len();
        for (&initial, &result) in s.initial.iter().zip(&s.results) {
            self.copy(initial, result, 0)?;
        }
        let max_trips = self.read_i64(s.max_trips)?;
        let mut cond = self.read_bool(s.cond)?;
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
            // one-element i64 and bool temporaries of the body (checked at load)
            self.place.store(s.iteration, &i.to_le_bytes())?;
            self.place.store(s.cond_in, &[cond as u8])?;
            for (&result, &input) in s.results.iter().zip(&s.carried_in) {
                self.copy(result, input, 0)?;
            }
            self.block(&s.body.items)?;
            cond = self.read_bool(s.body.outputs[0])?;
            for (&out, &result) in s.body.outputs[1..=carried].iter().zip(&s.results) {
                self.copy(out, result, 0)?;
            }
            for (out, result) in s.scans() {
                self.copy(out, result, i as usize * self.bytes(out))?;
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
