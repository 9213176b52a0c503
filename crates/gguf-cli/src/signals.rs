//! Temporary files removed when the program is interrupted.

use std::sync::Mutex;

use gguf_format::fsutil;

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
/// The signals are caught by signal-hook and handled on a thread of their own, so nothing
/// runs in signal context, reads on stdin are restarted rather than interrupted (`gguf chat`),
/// and a signal the program was started with ignored (SIGHUP under `nohup`) stays ignored.
/// A command may take the next signal itself ([`hand_next_signal_to`]).
pub fn remove_temp_files_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !ignored_at_start(s))
        .collect();
    let Ok(mut signals) = signal_hook::iterator::Signals::new(&wanted) else {
        return;
    };
    std::thread::spawn(move || {
        for signal in signals.forever() {
            let handoff = HANDOFF.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(f) = handoff {
                f(signal);
                continue;
            }
            fsutil::remove_temp_files();
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        }
    });
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
