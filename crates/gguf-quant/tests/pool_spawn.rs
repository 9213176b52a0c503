//! A thread the operating system refuses is an error from `ThreadPool::new`, not a panic.
//!
//! The refusal is real: the test runs itself again in a child process whose address space is
//! capped (`ulimit -v`, which binds root too, unlike `ulimit -u`), so thread stacks run out.

use std::process::Command;

use gguf_quant::{QuantError, ThreadPool};

const CHILD: &str = "GGUF_POOL_SPAWN_CHILD";

#[cfg(target_os = "linux")]
#[test]
fn a_refused_thread_is_an_error() {
    if std::env::var_os(CHILD).is_some() {
        // 4,000 threads need about 8 GB of stack address space; the cap is 1 GB.
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
        .arg(r#"ulimit -v 1000000 && exec "$0" --exact a_refused_thread_is_an_error --nocapture --test-threads=1"#)
        .arg(&exe)
        .env(CHILD, "1")
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
