//! Temporary files removed when the program is interrupted, and the interruption of `gguf
//! chat`'s replies.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

/// Who takes the next signal instead of ending the program (`gguf serve`'s graceful shutdown).
type Handoff = Box<dyn FnOnce(i32) + Send>;
static HANDOFF: Mutex<Option<Handoff>> = Mutex::new(None);

/// The next SIGINT, SIGTERM or SIGHUP goes to `f` rather than ending the program; a signal
/// after that ends it as before.
pub fn hand_next_signal_to(f: impl FnOnce(i32) + Send + 'static) {
    *HANDOFF.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
}

/// On SIGINT, SIGTERM and SIGHUP: remove the temporary files of the writes under way, then
/// end as the signal would have ended the program (so a shell sees 130, 143 or 129).
///
/// The signals are caught by signal-hook and handled on a thread of their own, so nothing but
/// the atomic bookkeeping of [`catch_interrupt`] runs in signal context, reads on stdin are
/// restarted rather than interrupted (`gguf chat`),
/// and a signal the program was started with ignored (SIGHUP under `nohup`) stays ignored.
/// A command may take the next signal itself ([`hand_next_signal_to`]), or catch SIGINT for a
/// while ([`catch_interrupt`]).
pub fn remove_temp_files_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !ignored_at_start(s))
        .collect();
    // Registered before the iterator's own handler, so that it has run when the signal
    // thread wakes for the same signal.
    if wanted.contains(&SIGINT) {
        // SAFETY: the action only does atomic operations (no allocation, no lock), which
        // are async-signal-safe. Should registering fail, no catch ever takes a SIGINT.
        let _ = unsafe { signal_hook::low_level::register(SIGINT, sigint_action) };
    }
    let Ok(mut signals) = signal_hook::iterator::Signals::new(&wanted) else {
        return;
    };
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if signal == SIGINT && swallowed() {
                continue;
            }
            let handoff = HANDOFF.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(f) = handoff {
                f(signal);
                continue;
            }
            end_as(signal);
        }
    });
}

/// Removes the temporary files of the writes under way and ends the program as `signal` would
/// (a shell sees 128 + its number).
pub fn end_as(signal: i32) -> ! {
    gguf_fsutil::remove_temp_files();
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    std::process::exit(128 + signal)
}

/// The state of the SIGINT catch ([`catch_interrupt`]): off, armed (no SIGINT yet), caught.
static CATCH: AtomicU8 = AtomicU8::new(CATCH_OFF);
const CATCH_OFF: u8 = 0;
const CATCH_ARMED: u8 = 1;
const CATCH_CAUGHT: u8 = 2;
/// SIGINTs taken by a catch that the signal thread has not yet seen.
static SWALLOWED: AtomicUsize = AtomicUsize::new(0);
/// A SIGINT came that no catch took: the signal thread ends the program (it may see two
/// signals as one, so a count of the swallowed ones alone would lose this one).
static UNCAUGHT: AtomicBool = AtomicBool::new(false);

/// Runs in the signal handler, on whichever thread the signal interrupted: synchronously, so
/// that a reply blocked in a write sees the interruption when the write returns.
fn sigint_action() {
    if CATCH
        .compare_exchange(CATCH_ARMED, CATCH_CAUGHT, SeqCst, SeqCst)
        .is_ok()
    {
        SWALLOWED.fetch_add(1, SeqCst);
    } else {
        UNCAUGHT.store(true, SeqCst);
    }
}

/// On the signal thread: whether this SIGINT was taken by a catch (and so must not end the
/// program).
fn swallowed() -> bool {
    !UNCAUGHT.load(SeqCst)
        && SWALLOWED
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
}

/// While the returned guard lives, the first SIGINT (Ctrl-C) interrupts instead of ending the
/// program: [`InterruptCatch::interrupted`] turns true; a second one ends the program as
/// usual. `gguf chat` holds one during each reply, as llama-cli stops a reply on Ctrl-C.
/// Without effect when SIGINT was ignored at start.
pub fn catch_interrupt() -> InterruptCatch {
    CATCH.store(CATCH_ARMED, SeqCst);
    InterruptCatch(())
}

/// The SIGINT catch of [`catch_interrupt`]; dropping it ends the catch.
pub struct InterruptCatch(());

impl InterruptCatch {
    /// Whether a SIGINT has come since the catch began.
    pub fn interrupted(&self) -> bool {
        CATCH.load(SeqCst) == CATCH_CAUGHT
    }
}

impl Drop for InterruptCatch {
    fn drop(&mut self) {
        CATCH.store(CATCH_OFF, SeqCst);
    }
}

/// Whether `signal` is ignored (as `nohup` leaves SIGHUP): Linux's /proc tells; elsewhere the
/// answer is no.
fn ignored_at_start(signal: i32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0)
}
