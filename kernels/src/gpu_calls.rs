//! The library calls of a program on a GPU (steps with a `LibraryCall`): at load, the library
//! each callee needs on this GPU's vendor is opened (BLASLt for `blaslt.matmul`; MIOpen for
//! `miopen.conv_forward` on AMD GPUs, none on NVIDIA's) and each of its steps prepared for its
//! buffers. A step whose library is absent, or refuses it, runs its generated kernel, which
//! computes the same; why is kept, by route (`CallRoute`), for the runner and `mxc run` to say.
//! A library works on the device current on the calling thread, on the default stream: the
//! runtime makes device 0 current before each of its own calls (its primary context on NVIDIA
//! GPUs, the one the CUDA runtime under cuBLASLt uses), and launches on that stream too, so
//! library calls and kernels run in plan order.

use crate::device::blaslt::{self, BlasLt, Matmul};
use crate::device::library::Workspace;
use crate::device::miopen::{Conv, Miopen};
use crate::device::{DevicePtr, Gpu, Vendor};
use crate::RunError;
use mxc_dialects::mx::call::{Callee, ConvCall, LibraryCall, MatmulCall};
use mxc_dialects::program::Program;
use std::fmt;

/// How the steps that call one library function run: through the library file opened, or
/// (`Err`, with why) as their generated kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRoute {
    pub callee: Callee,
    /// How many of the program's steps take this route.
    pub steps: usize,
    /// The library file opened, or why the steps run their kernels.
    pub library: Result<String, String>,
}

impl fmt::Display for CallRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps = match self.steps {
            1 => "1 step".to_string(),
            n => format!("{n} steps"),
        };
        match &self.library {
            Ok(path) => write!(f, "{}: {steps} through {path}", self.callee),
            Err(why) => write!(f, "{}: {steps} as generated kernels ({why})", self.callee),
        }
    }
}

/// A step's call, ready to run.
enum Prepared {
    Matmul(Matmul),
    Conv(Conv),
}

/// Allocates device memory for `what` (and frees it with the program's other allocations).
type Allocate<'a> = dyn FnMut(usize, &str) -> Result<DevicePtr, RunError> + 'a;

/// Each step's prepared call, if it has one that a library runs, and the routes.
#[derive(Default)]
pub(crate) struct LibraryCalls {
    steps: Vec<Option<Prepared>>,
    routes: Vec<CallRoute>,
}

impl LibraryCalls {
    /// The calls of `program`'s steps on `gpu`, each step's buffers at `addresses[buffer]`;
    /// workspaces from `allocate`. An error only where device memory runs out.
    pub fn prepare(
        program: &Program,
        gpu: &Gpu,
        addresses: &[DevicePtr],
        allocate: &mut Allocate,
    ) -> Result<LibraryCalls, RunError> {
        let mut calls = LibraryCalls {
            steps: program.steps.iter().map(|_| None).collect(),
            routes: Vec::new(),
        };
        let args = |n: usize| -> Vec<DevicePtr> { program.steps[n].args.iter().map(|&b| addresses[b]).collect() };
        let steps = || program.steps.iter().enumerate();
        let matmuls: Vec<(usize, &MatmulCall)> = steps()
            .filter_map(|(n, s)| match &s.call {
                Some(LibraryCall::Matmul(c)) => Some((n, c)),
                _ => None,
            })
            .collect();
        let convs: Vec<(usize, &ConvCall)> = steps()
            .filter_map(|(n, s)| match &s.call {
                Some(LibraryCall::Conv(c)) => Some((n, c)),
                _ => None,
            })
            .collect();
        if !matmuls.is_empty() {
            match BlasLt::open(gpu.vendor) {
                Err(why) => calls.kernels(Callee::BlasLtMatmul, matmuls.len(), why),
                Ok(library) => {
                    let at = allocate(blaslt::WORKSPACE_BYTES, "the BLASLt workspace")?;
                    let workspace = Workspace {
                        at,
                        bytes: blaslt::WORKSPACE_BYTES,
                    };
                    for (n, call) in matmuls {
                        let prepared = library.prepare(call, &args(n), workspace).map(Prepared::Matmul);
                        calls.record(n, Callee::BlasLtMatmul, &library.path, prepared);
                    }
                }
            }
        }
        if !convs.is_empty() {
            match gpu.vendor {
                Vendor::Nvidia => calls.kernels(
                    Callee::MiopenConvForward,
                    convs.len(),
                    "MIOpen runs on AMD GPUs only".into(),
                ),
                Vendor::Amd => match Miopen::open() {
                    Err(why) => calls.kernels(Callee::MiopenConvForward, convs.len(), why),
                    Ok(library) => calls.prepare_convs(&library, &convs, &args, allocate)?,
                },
            }
        }
        Ok(calls)
    }

    /// Prepares the convolutions `convs` (step, call) through `library`: descriptors first,
    /// then one workspace of the most any needs, then each algorithm found with it.
    fn prepare_convs(
        &mut self,
        library: &Miopen,
        convs: &[(usize, &ConvCall)],
        args: &dyn Fn(usize) -> Vec<DevicePtr>,
        allocate: &mut Allocate,
    ) -> Result<(), RunError> {
        let mut described = Vec::new();
        for &(n, call) in convs {
            match library.describe(call, &args(n)) {
                Ok(d) => described.push((n, d)),
                Err(e) => self.record(n, Callee::MiopenConvForward, &library.path, Err(e)),
            }
        }
        let bytes = described.iter().map(|(_, d)| d.needs).max().unwrap_or(0);
        let at = match bytes {
            0 => 0,
            _ => allocate(bytes, "the MIOpen workspace")?,
        };
        for (n, d) in described {
            let prepared = d.find(Workspace { at, bytes }).map(Prepared::Conv);
            self.record(n, Callee::MiopenConvForward, &library.path, prepared);
        }
        Ok(())
    }

    /// Step `n`'s outcome: its call through the library at `path`, or its kernel because the
    /// library refused it.
    fn record(&mut self, n: usize, callee: Callee, path: &str, prepared: Result<Prepared, String>) {
        let library = match prepared {
            Ok(p) => {
                self.steps[n] = Some(p);
                Ok(path.to_string())
            }
            Err(why) => Err(format!("{path} cannot compute it: {why}")),
        };
        self.route(callee, 1, library);
    }

    /// `steps` steps of `callee` run their kernels, for `why`.
    fn kernels(&mut self, callee: Callee, steps: usize, why: String) {
        self.route(callee, steps, Err(why));
    }

    fn route(&mut self, callee: Callee, steps: usize, library: Result<String, String>) {
        match self
            .routes
            .iter_mut()
            .find(|r| r.callee == callee && r.library == library)
        {
            Some(route) => route.steps += steps,
            None => self.routes.push(CallRoute { callee, steps, library }),
        }
    }

    /// Runs step `n`'s call through its library; `false` where the step has none (its kernel
    /// runs instead).
    pub fn run(&self, n: usize) -> Result<bool, String> {
        match self.steps.get(n) {
            Some(Some(Prepared::Matmul(m))) => m.run().map(|()| true),
            Some(Some(Prepared::Conv(c))) => c.run().map(|()| true),
            _ => Ok(false),
        }
    }

    pub fn routes(&self) -> &[CallRoute] {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_says_how_its_steps_run_and_why() {
        let route = |steps, library| CallRoute {
            callee: Callee::BlasLtMatmul,
            steps,
            library,
        };
        assert_eq!(
            route(3, Ok("/usr/lib/libcublasLt.so.12".into())).to_string(),
            "blaslt.matmul: 3 steps through /usr/lib/libcublasLt.so.12"
        );
        assert_eq!(
            route(1, Err("no cuBLASLt: looked for libcublasLt.so".into())).to_string(),
            "blaslt.matmul: 1 step as generated kernels (no cuBLASLt: looked for libcublasLt.so)"
        );
    }
}
