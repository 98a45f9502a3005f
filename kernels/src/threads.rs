//! Running one kernel call on several threads: a step whose parallel loop is splittable is
//! called on consecutive parts of its range, one part per thread, when its work is large
//! enough for the parts to outweigh handing them out. Each part computes its own elements with
//! the same code as a whole call, so results do not depend on the number of threads.

use crate::library::KernelFn;
use crate::RunError;
use mxc_dialects::program::Step;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The least estimated work (`Step::work`, operations) a part should have; below it a call
/// is not worth splitting. Handing a part to an awake worker costs about a microsecond; a part
/// of this size runs for several (an operation of a vector kernel is a whole vector). Measured
/// at 2 threads on the AVX-512 machine against 100,000, which left the element-wise kernels,
/// pools and concatenations of 0.1-0.4 M elements on one thread: SqueezeNet 13-15% faster,
/// BERT-mini 5%, EfficientNet-B0 3%, the others the same; 10,000 gave the same as this.
pub const DEFAULT_MIN_WORK: u64 = 20_000;

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
        // (a job counts its parts in 32 bits)
        (self.threads as u64)
            .min(step.range)
            .min(by_work)
            .clamp(1, u64::from(u32::MAX))
    }
}

/// The threads besides the caller's that run parts of kernel calls. A call is published as a
/// `Job`; every thread, the caller's included, claims parts of it one at a time until none is
/// left, so a worker that is late to start (asleep, descheduled) costs nothing: the caller
/// runs the parts it did not claim. Workers spin for a while after their last part, so that the next
/// kernel of a run finds them awake (a sleeping thread takes tens of microseconds to wake).
pub struct Workers {
    parallelism: Parallelism,
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

/// One kernel call to share out.
#[derive(Clone, Copy)]
struct Job {
    generation: u32,
    kernel: KernelFn,
    args: *const *mut u8,
    range: u64,
    parts: u64,
}

// SAFETY: a job's argument array and buffers stay live until every claimed part is done (the
// caller waits for that), and parts write disjoint elements of the results.
unsafe impl Send for Job {}

impl Job {
    /// Runs part `p` of the call.
    ///
    /// # Safety
    /// The job's arguments must be live: `p` was claimed for this job's generation and the job
    /// is not done.
    unsafe fn run(&self, p: u64) {
        let at = |p: u64| (u128::from(self.range) * u128::from(p) / u128::from(self.parts)) as i64;
        // SAFETY: as the caller promises; parts' ranges do not overlap
        unsafe { (self.kernel)(self.args, at(p), at(p + 1)) };
    }
}

struct Shared {
    /// The latest job; its generation is in `claims` and in `generation` once published.
    job: Mutex<Option<Job>>,
    /// The latest job's generation (high 32 bits) and the next part to claim (low 32 bits).
    claims: AtomicU64,
    /// Parts of the latest job not finished yet.
    pending: AtomicU64,
    /// Bumped when a job is published (and on shutdown): what idle workers watch.
    generation: AtomicU32,
    shutdown: AtomicBool,
    /// Workers asleep, and the condition they sleep on.
    sleepers: Mutex<usize>,
    wake: Condvar,
}

impl Shared {
    /// Claims and runs parts of `job` until none is left.
    fn work_on(&self, job: &Job) {
        let mut claims = self.claims.load(Ordering::Acquire);
        loop {
            let (generation, next) = ((claims >> 32) as u32, claims & 0xffff_ffff);
            if generation != job.generation || next >= job.parts {
                return;
            }
            match self
                .claims
                .compare_exchange_weak(claims, claims + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // SAFETY: part `next` of this generation is ours; the publisher waits for
                    // it before the job's buffers go away
                    unsafe { job.run(next) };
                    self.pending.fetch_sub(1, Ordering::Release);
                    claims = self.claims.load(Ordering::Acquire);
                }
                Err(now) => claims = now,
            }
        }
    }

    /// A worker's life: wait for a job newer than the last seen, work on it, again.
    fn serve(&self) {
        let mut seen = self.generation.load(Ordering::Acquire);
        loop {
            seen = match self.next_generation(seen) {
                Some(generation) => generation,
                None => return,
            };
            let job = *self.job.lock().expect("job lock");
            if let Some(job) = job {
                self.work_on(&job);
            }
        }
    }

    /// Spins, then sleeps, until the generation moves past `seen`; `None` on shutdown.
    fn next_generation(&self, seen: u32) -> Option<u32> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                return None;
            }
            let now = self.generation.load(Ordering::Acquire);
            if now != seen {
                return Some(now);
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(1024) || start.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            let mut sleepers = self.sleepers.lock().expect("sleep lock");
            *sleepers += 1;
            while self.generation.load(Ordering::Acquire) == seen && !self.shutdown.load(Ordering::Acquire) {
                sleepers = self.wake.wait(sleepers).expect("sleep lock");
            }
            *sleepers -= 1;
        }
    }

    /// Makes the generation `generation` visible to idle workers and wakes sleeping ones.
    fn announce(&self, generation: u32) {
        self.generation.store(generation, Ordering::Release);
        let sleepers = self.sleepers.lock().expect("sleep lock");
        if *sleepers > 0 {
            self.wake.notify_all();
        }
    }
}

impl Workers {
    pub fn new(parallelism: Parallelism) -> Result<Workers, RunError> {
        if parallelism.threads == 0 {
            return Err(RunError::Load("the number of threads must be at least 1".into()));
        }
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            claims: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            generation: AtomicU32::new(0),
            shutdown: AtomicBool::new(false),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
        });
        let mut workers = Workers {
            parallelism,
            shared,
            threads: Vec::new(),
        };
        for i in 1..parallelism.threads {
            let shared = workers.shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("mxc-worker-{i}"))
                .spawn(move || shared.serve())
                .map_err(|e| RunError::Load(format!("starting {} threads: {e}", parallelism.threads)))?;
            workers.threads.push(thread);
        }
        Ok(workers)
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
        if parts <= 1 || self.threads.is_empty() {
            // SAFETY: as the caller promises; the whole range in one call
            return unsafe { kernel(args, 0, step.range as i64) };
        }
        let shared = &self.shared;
        let job = {
            let mut latest = shared.job.lock().expect("job lock");
            let generation = latest.map_or(1, |j| j.generation.wrapping_add(1));
            let job = Job {
                generation,
                kernel,
                args,
                range: step.range,
                parts,
            };
            *latest = Some(job);
            shared.pending.store(parts, Ordering::Relaxed);
            shared.claims.store(u64::from(generation) << 32, Ordering::Release);
            job
        };
        shared.announce(job.generation);
        shared.work_on(&job);
        let mut spins = 0u32;
        while shared.pending.load(Ordering::Acquire) != 0 {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 16) {
                // a worker holding a part was descheduled: let it run
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        let next = self.shared.generation.load(Ordering::Acquire).wrapping_add(1);
        self.shared.announce(next);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
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
            per_block: false,
            work,
            flops: 0,
            call: None,
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
    fn every_element_is_computed_once_in_each_of_many_calls() {
        // the "kernel" counts, at each index of its part, the calls that reached it
        unsafe extern "C" fn count(args: *const *mut u8, lo: i64, hi: i64) {
            let counters = unsafe { *args } as *const AtomicU32;
            for i in lo..hi {
                unsafe { (*counters.add(i as usize)).fetch_add(1, Ordering::Relaxed) };
            }
        }
        let counters: Vec<AtomicU32> = (0..97).map(|_| AtomicU32::new(0)).collect();
        let args = [counters.as_ptr() as *mut u8];
        let workers = Workers::new(Parallelism {
            threads: 3,
            min_work: 0,
        })
        .unwrap();
        let calls = 20_000;
        for _ in 0..calls {
            unsafe { workers.call(count, &step(97, true, 97), args.as_ptr()) };
        }
        assert!(counters.iter().all(|c| c.load(Ordering::Relaxed) == calls));
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
