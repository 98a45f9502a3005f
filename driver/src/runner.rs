//! Running what an `.mxr` file holds on inputs of any shape it takes: the program for their
//! sizes (or parts of compiled ones, `mxc_kernels::chunked`), loaded once for each choice and
//! kept, so that a front end (Python, C) can call `run` again and again.

use crate::error::Result;
use mxc_dialects::Tensor;
use mxc_kernels::chunked::Runnable;
use mxc_kernels::mxr::{Contents, Mxr};
use mxc_kernels::{Outputs, Parallelism, DEFAULT_MIN_WORK};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Programs loaded to run, by the input shapes (name, shape) that chose them.
type Loaded = HashMap<Vec<(String, Vec<usize>)>, Arc<Runnable>>;

/// Compiled programs and those loaded to run.
pub struct Runner {
    contents: Contents,
    loaded: Mutex<Loaded>,
    threads: usize,
}

impl Runner {
    /// Runs `contents` on every core.
    pub fn new(contents: Contents) -> Runner {
        Runner::with_threads(contents, Parallelism::all_cores().threads)
    }

    /// Runs `contents` on `threads` threads (the caller's own included).
    pub fn with_threads(contents: Contents, threads: usize) -> Runner {
        Runner {
            contents,
            loaded: Mutex::new(HashMap::new()),
            threads: threads.max(1),
        }
    }

    pub fn contents(&self) -> &Contents {
        &self.contents
    }

    /// The first (or only) program.
    pub fn first(&self) -> &Mxr {
        match &self.contents {
            Contents::One(m) => m,
            Contents::BySize(s) => &s.variants[0].mxr,
        }
    }

    /// Runs the program `inputs`' shapes choose on them; the outputs in the program's order.
    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<Outputs> {
        Ok(self.runnable(inputs)?.run(inputs)?)
    }

    /// The program that runs `inputs` (for programs by size, chosen by their shapes), loaded
    /// once for each choice.
    pub fn runnable(&self, inputs: &HashMap<String, Tensor>) -> Result<Arc<Runnable>> {
        let shape_of = |name: &str| inputs.get(name).map(|t| t.shape().to_vec());
        // one program for every size (alone, or for the sizes no variant is compiled for) is
        // loaded once: it takes the sizes itself
        let key: Vec<(String, Vec<usize>)> = match &self.contents {
            Contents::One(_) => Vec::new(),
            Contents::BySize(sized) if sized.generic.is_some() && !sized.compiled_for(&shape_of) => Vec::new(),
            Contents::BySize(sized) => (sized.dims.inputs().iter())
                .filter_map(|(name, _)| inputs.get(name).map(|t| (name.clone(), t.shape().to_vec())))
                .collect(),
        };
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = loaded.get(&key) {
            return Ok(r.clone());
        }
        let (mut runnable, _) = Runnable::load(self.contents.clone(), &shape_of)?;
        runnable.set_parallelism(Parallelism {
            threads: self.threads,
            min_work: DEFAULT_MIN_WORK,
        })?;
        let runnable = Arc::new(runnable);
        loaded.insert(key, runnable.clone());
        Ok(runnable)
    }
}
