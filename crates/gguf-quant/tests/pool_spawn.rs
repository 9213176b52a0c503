//! A thread the operating system refuses is an error from `ThreadPool::new`, not a panic.
//!
//! The refusal is real: the test runs itself again in a child process whose address space is
//! capped (`ulimit -v`, which binds root too, unlike `ulimit -u`), so thread stacks run out.
//! The child's threads get 256 MiB stacks and glibc one malloc arena: the cap is then met by a
//! stack `mmap` in `pthread_create` (an error the pool sees), never by the few pages a thread
//! that did start maps for itself (its signal stack, a malloc arena), which std answers with an
//! abort. With 2 MiB stacks and per-thread arenas CI lost that race once (and a loop here, once
//! in fewer than 300 runs); 300 runs of this setup lost none.

use std::process::Command;

use gguf_quant::{QuantError, ThreadPool};

const CHILD: &str = "GGUF_POOL_SPAWN_CHILD";

#[cfg(target_os = "linux")]
#[test]
fn a_refused_thread_is_an_error() {
    if std::env::var_os(CHILD).is_some() {
        // 4,000 threads need about 1 TB of stack address space; the cap is 1.5 GB.
        match ThreadPool::new(4000) {
            Err(QuantError::ThreadSpawn {
                threads, started, ..
            }) => {
                assert_eq!(threads, 4000);
                assert!(started > 1 && started < 4000, "{started}");
                // The pool given up on stopped its workers: a smaller one still starts.
                let pool = ThreadPool::new(4).unwrap();
                pool.run(|_, _| {});
                println!("child: refused after {started} threads");
            }
            other => panic!("expected ThreadSpawn, got {other:?}"),
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 1500000 && exec "$0" --exact a_refused_thread_is_an_error --nocapture --test-threads=1"#)
        .arg(&exe)
        .env(CHILD, "1")
        .env("RUST_MIN_STACK", (256usize << 20).to_string())
        .env("MALLOC_ARENA_MAX", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("child: refused after"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
