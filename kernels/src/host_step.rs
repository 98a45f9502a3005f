//! Running a host step (`mxc_dialects::program::HostStep`): its operands read out of their
//! buffers (strings resolved through the run's table), the op evaluated, its results written
//! back (strings interned).

use crate::control::Run;
use crate::RunError;
use mxc_dialects::program::HostStep;
use mxc_dialects::{DType, Tensor};

impl Run<'_> {
    pub fn run_host(&mut self, s: &HostStep) -> Result<(), RunError> {
        let operands = s
            .operands
            .iter()
            .map(|&b| self.read(b))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Tensor> = operands.iter().collect();
        let failed = |e: String| RunError::Run(format!("host step `{}`: {e}", s.kind));
        let results = mxc_dialects::eval::eval(s.kind, &refs, &s.attrs)
            .unwrap_or_else(|| Err("the evaluator does not compute it".into()))
            .map_err(failed)?;
        for (t, &b) in results.iter().zip(&s.results) {
            self.write(b, t)?;
        }
        Ok(())
    }

    /// The value in buffer `b`.
    pub fn read(&mut self, b: usize) -> Result<Tensor, RunError> {
        let ty = self.program.buffers[b].ty.clone();
        let bytes = self.place.load(b)?;
        Ok(match ty.dtype {
            DType::Str => Tensor::from_strings(ty.shape, self.strings.decode(&bytes, || format!("buffer {b}"))?),
            _ => Tensor::from_bytes(ty, bytes).expect("a buffer holds its type's bytes"),
        })
    }

    /// Writes `t` into buffer `b`, a temporary of its type (the plan was checked at load).
    fn write(&mut self, b: usize, t: &Tensor) -> Result<(), RunError> {
        let bytes = match t.strings() {
            Some(strings) => self.strings.encode(&strings),
            None => t.bytes().to_vec(),
        };
        assert_eq!(
            bytes.len(),
            self.program.buffers[b].ty.num_bytes(),
            "a host step's result is its buffer's type"
        );
        self.place.store(b, &bytes)
    }
}
