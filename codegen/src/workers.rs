//! A small pool of scoped worker threads fed from the calling thread: the caller produces jobs
//! (LLVM IR, made one by one on the thread that owns the MLIR context) while the workers
//! consume them (compiling objects), so both kinds of work overlap.

use std::sync::{mpsc, Mutex};

/// Runs `work` on `count` threads, each with its own state from `setup`, over the jobs that
/// `feed` sends (its argument returns `false` once no worker is left to take one). Returns the
/// results in the order they finished. Workers take the next job as soon as they are free: the
/// queue's lock is held only while receiving, never while working.
pub fn run<J, R, S>(
    count: usize,
    setup: impl Fn() -> S + Sync,
    work: impl Fn(&S, J) -> R + Sync,
    feed: impl FnOnce(&dyn Fn(J) -> bool),
) -> Vec<R>
where
    J: Send,
    R: Send,
{
    let count = count.max(1);
    let (send, receive) = mpsc::sync_channel::<J>(count);
    let receive = Mutex::new(receive);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..count {
            scope.spawn(|| {
                let state = setup();
                while let Some(job) = next_job(&receive) {
                    let result = work(&state, job);
                    lock(&done).push(result);
                }
            });
        }
        feed(&|job| send.send(job).is_ok());
        drop(send);
    });
    done.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// The next job, or `None` once the queue is closed and empty. The guard is a temporary of
/// this function, so it is dropped before the job runs (in a `while let` scrutinee it would
/// live through the loop body and let one worker run at a time).
fn next_job<J>(queue: &Mutex<mpsc::Receiver<J>>) -> Option<J> {
    lock(queue).recv().ok()
}

/// Locks `m`, also after a thread panicked holding it (the data is a queue or a list of results).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::run;
    use std::sync::mpsc;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Two jobs that can only finish together: each tells the other it started and waits to
    /// hear back. Run one at a time, the first would wait in vain.
    #[test]
    fn two_workers_run_two_jobs_at_the_same_time() {
        let (to_second, at_second) = mpsc::channel();
        let (to_first, at_first) = mpsc::channel();
        let ends = Mutex::new([Some((to_second, at_first)), Some((to_first, at_second))]);
        let met = run(
            2,
            || (),
            |_, job: usize| {
                let (tell, hear) = ends.lock().unwrap()[job].take().unwrap();
                tell.send(()).unwrap();
                hear.recv_timeout(Duration::from_secs(20)).is_ok()
            },
            |send| {
                assert!(send(0) && send(1));
            },
        );
        assert_eq!(met, vec![true, true]);
    }

    #[test]
    fn every_job_is_done_once_with_its_worker_state() {
        let mut squares = run(
            2,
            || 10,
            |offset, job: u64| job * job + offset,
            |send| {
                for job in 0..50 {
                    assert!(send(job));
                }
            },
        );
        squares.sort_unstable();
        assert_eq!(squares, (0..50).map(|j| j * j + 10).collect::<Vec<_>>());
    }
}
