//! Running one kernel call on several threads: a step whose parallel loop is splittable is
//! called on consecutive parts of its range, one part per thread, when its work is large
//! enough for the parts to outweigh handing them out. Each part computes its own elements with
//! the same code as a whole call, so results do not depend on the number of threads.

use crate::library::KernelFn;
use crate::RunError;
use mxc_dialects::program::Step;

/// The least estimated work (`Step::work`, operations) a part should have; below it a call
/// is not worth splitting. Handing a part to a pool thread costs a few microseconds; a part of
/// this size runs for tens of them.
pub const DEFAULT_MIN_WORK: u64 = 100_000;

/// How a program's runs use threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallelism {
    /// Threads that run kernels, the caller's own included.
    pub threads: usize,
    /// The least work per part (0 splits every splittable call as far as it goes: for tests).
    pub min_work: u64,
}

impl Parallelism {
    /// One thread: every kernel is called once, on the caller's thread.
    pub fn serial() -> Parallelism {
        Parallelism {
            threads: 1,
            min_work: DEFAULT_MIN_WORK,
        }
    }

    /// As many threads as the machine runs at once.
    pub fn all_cores() -> Parallelism {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Parallelism {
            threads,
            ..Parallelism::serial()
        }
    }

    /// Into how many parts a call of `step` goes.
    pub fn parts(&self, step: &Step) -> u64 {
        if !step.splittable || self.threads <= 1 {
            return 1;
        }
        let by_work = step.work.checked_div(self.min_work).unwrap_or(u64::MAX);
        (self.threads as u64).min(step.range).min(by_work).max(1)
    }
}

/// The threads besides the caller's that run parts of kernel calls.
pub struct Workers {
    parallelism: Parallelism,
    pool: Option<rayon::ThreadPool>,
}

/// A kernel's argument array, shared by the threads running its parts.
#[derive(Clone, Copy)]
struct Args(*const *mut u8);
// SAFETY: the array and the buffers it points to outlive the scope all parts run in, and
// parts write disjoint elements of the results.
unsafe impl Send for Args {}
unsafe impl Sync for Args {}

impl Workers {
    pub fn new(parallelism: Parallelism) -> Result<Workers, RunError> {
        if parallelism.threads == 0 {
            return Err(RunError::Load("the number of threads must be at least 1".into()));
        }
        let pool = (parallelism.threads > 1)
            .then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(parallelism.threads - 1)
                    .thread_name(|i| format!("mxc-worker-{i}"))
                    .build()
                    .map_err(|e| RunError::Load(format!("starting {} threads: {e}", parallelism.threads)))
            })
            .transpose()?;
        Ok(Workers { parallelism, pool })
    }

    pub fn parallelism(&self) -> Parallelism {
        self.parallelism
    }

    /// Calls `kernel` for `step` with the argument array `args`, split as `Parallelism::parts`
    /// says; returns once every part is done.
    ///
    /// # Safety
    /// `args` must hold the step's buffers as the kernel was compiled for, live until return.
    pub unsafe fn call(&self, kernel: KernelFn, step: &Step, args: *const *mut u8) {
        let parts = self.parallelism.parts(step);
        let bounds = |p: u64| {
            let at = |p: u64| (u128::from(step.range) * u128::from(p) / u128::from(parts)) as i64;
            (at(p), at(p + 1))
        };
        let pool = match &self.pool {
            Some(pool) if parts > 1 => pool,
            // SAFETY: as the caller promises; the whole range in one call
            _ => return unsafe { kernel(args, 0, step.range as i64) },
        };
        let args = Args(args);
        pool.in_place_scope(|scope| {
            for p in 1..parts {
                scope.spawn(move |_| {
                    let (lo, hi) = bounds(p);
                    let args = args;
                    // SAFETY: as the caller promises; the parts' ranges do not overlap
                    unsafe { kernel(args.0, lo, hi) };
                });
            }
            let (lo, hi) = bounds(0);
            // SAFETY: as above
            unsafe { kernel(args.0, lo, hi) };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(range: u64, splittable: bool, work: u64) -> Step {
        Step {
            symbol: "k".into(),
            args: Vec::new(),
            range,
            splittable,
            work,
        }
    }

    #[test]
    fn calls_split_only_when_allowed_and_worth_it() {
        let four = Parallelism {
            threads: 4,
            min_work: 1000,
        };
        assert_eq!(four.parts(&step(64, true, 1_000_000)), 4);
        assert_eq!(four.parts(&step(64, false, 1_000_000)), 1, "not splittable");
        assert_eq!(four.parts(&step(64, true, 2500)), 2, "work for two parts");
        assert_eq!(four.parts(&step(64, true, 999)), 1, "too little work");
        assert_eq!(
            four.parts(&step(3, true, 1_000_000)),
            3,
            "no more parts than iterations"
        );
        let every = Parallelism { min_work: 0, ..four };
        assert_eq!(every.parts(&step(64, true, 1)), 4);
        assert_eq!(Parallelism::serial().parts(&step(64, true, u64::MAX)), 1);
    }

    #[test]
    fn parts_cover_the_range_once() {
        static SEEN: std::sync::Mutex<Vec<(i64, i64)>> = std::sync::Mutex::new(Vec::new());
        unsafe extern "C" fn record(_: *const *mut u8, lo: i64, hi: i64) {
            SEEN.lock().unwrap().push((lo, hi));
        }
        let workers = Workers::new(Parallelism {
            threads: 3,
            min_work: 0,
        })
        .unwrap();
        unsafe { workers.call(record, &step(10, true, 10), std::ptr::null()) };
        let mut seen = SEEN.lock().unwrap().clone();
        seen.sort();
        assert_eq!(seen, vec![(0, 3), (3, 6), (6, 10)]);
    }
}
