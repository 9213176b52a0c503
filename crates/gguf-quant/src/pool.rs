//! A small fork-join thread pool for mat-vec products too short for rayon.
//!
//! A 576x576 Q8_0 mat-vec takes about 7 µs; handing work to rayon and joining costs a
//! noticeable part of that. Here the workers are persistent and, between jobs, spin on an
//! atomic counter for a short while before sleeping (as ggml's thread pool does), so a job
//! reaches them in well under a microsecond during a burst of calls (a forward pass), and an
//! idle pool costs nothing.
//!
//! ```
//! let pool = gguf_quant::ThreadPool::new(2)?;
//! let sums: Vec<std::sync::atomic::AtomicUsize> = (0..2).map(|_| Default::default()).collect();
//! pool.run(|thread, threads| {
//!     assert_eq!(threads, 2);
//!     sums[thread].fetch_add(thread + 1, std::sync::atomic::Ordering::Relaxed);
//! });
//! assert_eq!(sums.iter().map(|s| s.load(std::sync::atomic::Ordering::Relaxed)).sum::<usize>(), 3);
//! # Ok::<(), gguf_quant::QuantError>(())
//! ```

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{QuantError, Result};

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_micros(200);

/// Waits of up to 2^SPIN_STEPS pause instructions before a waiter starts yielding its CPU.
const SPIN_STEPS: u32 = 6;

/// Waiting for another thread of the pool: a few short bursts of pause instructions (the
/// answer usually comes within a microsecond), then a yield of the CPU at each check. With
/// more threads than free cores (a `-t` above the core count, or a busy machine) pure spinning
/// burns the time slices that the threads being waited for need, and a job that takes
/// microseconds takes milliseconds; yielding lets them run.
struct Backoff {
    step: u32,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { step: 0 }
    }

    fn snooze(&mut self) {
        if self.step < SPIN_STEPS {
            for _ in 0..1u32 << self.step {
                std::hint::spin_loop();
            }
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// The job of the current generation, type-erased: a pointer to the caller's closure.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn(usize, usize) + Sync));

// SAFETY: the pointee is `Sync`, and `ThreadPool::run` keeps it alive until every worker has
// finished with it (see there).
unsafe impl Send for Job {}

struct Shared {
    /// Bumped once per job; workers wait for it to change.
    generation: AtomicUsize,
    /// Workers still running the current job.
    remaining: AtomicUsize,
    job: Mutex<Option<Job>>,
    /// Where sleeping workers wait for a new generation.
    wake: Condvar,
    sleepers: Mutex<()>,
    panicked: AtomicBool,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    stop: AtomicBool,
    threads: usize,
}

/// A fixed set of threads (the caller counts as one) that run one job at a time.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises `run` calls from several threads.
    running: Mutex<()>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.shared.threads)
            .finish()
    }
}

impl ThreadPool {
    /// A pool of `threads` threads in all (at least 1): the caller of [`ThreadPool::run`] and
    /// `threads - 1` workers. Fails, with the workers already started stopped again, when the
    /// operating system refuses a thread.
    pub fn new(threads: usize) -> Result<ThreadPool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            remaining: AtomicUsize::new(0),
            job: Mutex::new(None),
            wake: Condvar::new(),
            sleepers: Mutex::new(()),
            panicked: AtomicBool::new(false),
            panic: Mutex::new(None),
            stop: AtomicBool::new(false),
            threads,
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(threads - 1),
            running: Mutex::new(()),
        };
        for index in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let spawned = std::thread::Builder::new()
                .name(format!("gguf-pool-{index}"))
                .spawn(move || worker(&shared, index));
            match spawned {
                Ok(handle) => pool.workers.push(handle),
                // Dropping `pool` stops and joins the workers started so far.
                Err(e) => {
                    return Err(QuantError::ThreadSpawn {
                        threads,
                        started: index,
                        message: e.to_string(),
                    })
                }
            }
        }
        Ok(pool)
    }

    /// Number of threads, the caller included.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Runs `job(thread, threads)` once on each of the pool's threads (`thread` = 0 on the
    /// caller) and returns when all are done. A panic in any of them is re-raised here.
    pub fn run<F: Fn(usize, usize) + Sync>(&self, job: F) {
        let threads = self.shared.threads;
        if threads == 1 {
            job(0, 1);
            return;
        }
        let _one_at_a_time = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let shared = &*self.shared;
        let erased: &(dyn Fn(usize, usize) + Sync) = &job;
        // SAFETY: only the lifetime is erased. `run` does not return (or unwind) before
        // `remaining` is back to 0, i.e. before every worker is done calling the job, and the
        // pointer is taken out of `shared.job` before `job` is dropped.
        let erased: &'static (dyn Fn(usize, usize) + Sync) = unsafe { std::mem::transmute(erased) };
        *shared.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(Job(erased));
        shared.remaining.store(threads - 1, Ordering::Release);
        shared.generation.fetch_add(1, Ordering::AcqRel);
        {
            let _guard = shared.sleepers.lock().unwrap_or_else(|e| e.into_inner());
            shared.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| job(0, threads)));
        let mut backoff = Backoff::new();
        while shared.remaining.load(Ordering::Acquire) != 0 {
            backoff.snooze();
        }
        *shared.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Err(payload) = mine {
            resume_unwind(payload);
        }
        if shared.panicked.swap(false, Ordering::AcqRel) {
            let payload = shared
                .panic
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            resume_unwind(payload.unwrap_or_else(|| Box::new("a pool thread panicked")));
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        {
            let _guard = self
                .shared
                .sleepers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn worker(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        // Spin for a while, then sleep until the generation changes.
        let start = Instant::now();
        let mut backoff = Backoff::new();
        loop {
            let g = shared.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if start.elapsed() < SPIN {
                backoff.snooze();
                continue;
            }
            let guard = shared.sleepers.lock().unwrap_or_else(|e| e.into_inner());
            let _guard = shared
                .wake
                .wait_while(guard, |_| shared.generation.load(Ordering::Acquire) == seen)
                .unwrap_or_else(|e| e.into_inner());
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let job = *shared.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Job(job)) = job {
            // SAFETY: the caller of `run` keeps the closure alive until `remaining` is 0,
            // which happens only after this call returns (see `ThreadPool::run`).
            let job = unsafe { &*job };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| job(index, shared.threads))) {
                *shared.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
                shared.panicked.store(true, Ordering::Release);
            }
        }
        shared.remaining.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_each_job_once() {
        for threads in 1..=4 {
            let pool = ThreadPool::new(threads).unwrap();
            for round in 0..200 {
                let hits: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
                pool.run(|t, n| {
                    assert_eq!(n, threads);
                    hits[t].fetch_add(round + 1, Ordering::Relaxed);
                });
                for h in &hits {
                    assert_eq!(h.load(Ordering::Relaxed), round + 1);
                }
                if round % 50 == 0 {
                    // Let the workers fall asleep, so waking them is tested too.
                    std::thread::sleep(SPIN * 3);
                }
            }
        }
    }

    /// Far more threads than cores (here 64 on a 2-core machine) once made every job wait
    /// for each worker's time slice: 300 empty jobs took 9 s. With yielding waits they take
    /// milliseconds; the bound only catches a collapse, it is no speed target.
    #[test]
    fn an_oversubscribed_pool_does_not_collapse() {
        let threads = 64;
        let pool = ThreadPool::new(threads).unwrap();
        let runs = AtomicUsize::new(0);
        let start = Instant::now();
        for _ in 0..300 {
            pool.run(|_, _| {
                runs.fetch_add(1, Ordering::Relaxed);
            });
        }
        assert_eq!(runs.load(Ordering::Relaxed), 300 * threads);
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "300 jobs on 64 threads took {took:?}"
        );
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_survives() {
        let pool = ThreadPool::new(2).unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.run(|t, _| {
                if t == 1 {
                    panic!("boom in worker");
                }
            })
        }));
        assert!(result.is_err());
        let count = AtomicUsize::new(0);
        pool.run(|_, _| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 2);
    }
}
