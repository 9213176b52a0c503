//! How much memory this process can still take, to refuse a KV cache that cannot fit before it
//! is allocated (an allocation beyond it aborts the process, or lets the kernel kill it).
//!
//! On Linux: the kernel's estimate of the memory available without swapping (`MemAvailable`
//! in `/proc/meminfo`), and, under a cgroup memory limit (a container's), the room left below
//! it: the limit less the working set (usage less the inactive file cache, which the kernel
//! reclaims first), as the kubelet counts it. The smaller of the two. Unknown elsewhere.

use std::path::{Path, PathBuf};

/// The bytes this process can still allocate without swapping or passing its cgroup's limit;
/// `None` where the system does not say.
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let system = meminfo
        .as_deref()
        .and_then(|m| field_kib(m, "MemAvailable:"));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_room(&c, Path::new("/sys/fs/cgroup")));
    match (system, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A `KEY: N kB` line of `/proc/meminfo`, in bytes.
fn field_kib(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A `key value` line of a cgroup's `memory.stat`.
fn stat_field(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The room under the memory limit of this process's cgroup (`proc_cgroup` is
/// `/proc/self/cgroup`, `root` where cgroups are mounted): v2's `memory.max` or v1's
/// `memory.limit_in_bytes`, less the working set. `None` without a limit.
fn cgroup_room(proc_cgroup: &str, root: &Path) -> Option<u64> {
    // The cgroup's own directory, or the mount's root inside a container's namespace.
    let dir = |base: PathBuf, path: &str| {
        let own = base.join(path.trim_start_matches('/'));
        if own.is_dir() {
            own
        } else {
            base
        }
    };
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            // cgroup v2
            let dir = dir(root.to_path_buf(), path);
            let Ok(max) = std::fs::read_to_string(dir.join("memory.max")) else {
                continue;
            };
            let Ok(limit) = max.trim().parse::<u64>() else {
                continue; // "max": no limit
            };
            let usage = read_u64(&dir.join("memory.current")).unwrap_or(0);
            let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
            let reclaimable = stat_field(&stat, "inactive_file").unwrap_or(0);
            return Some(limit.saturating_sub(usage.saturating_sub(reclaimable)));
        }
        if controllers.split(',').any(|c| c == "memory") {
            let dir = dir(root.join("memory"), path);
            let limit = read_u64(&dir.join("memory.limit_in_bytes"))?;
            // v1 writes "no limit" as a number near 2^63.
            if limit >= 1 << 62 {
                return None;
            }
            let usage = read_u64(&dir.join("memory.usage_in_bytes")).unwrap_or(0);
            let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
            let reclaimable = stat_field(&stat, "total_inactive_file").unwrap_or(0);
            return Some(limit.saturating_sub(usage.saturating_sub(reclaimable)));
        }
    }
    None
}

/// `bytes` as GiB or MiB with one decimal, for messages.
pub(crate) fn human(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let b = bytes as f64;
    if b >= 1024.0 * MIB {
        format!("{:.1} GiB", b / (1024.0 * MIB))
    } else {
        format!("{:.1} MiB", b / MIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_cgroup_limits_are_read() {
        let meminfo = "MemTotal:       24000000 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(field_kib(meminfo, "MemAvailable:"), Some(1_024_000));
        assert_eq!(field_kib(meminfo, "MemFree:"), None);

        let root = tempfile::tempdir().unwrap();
        // v2, limited: 1000 less (600 used less 100 reclaimable).
        let v2 = root.path().join("v2/app");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "1000\n").unwrap();
        std::fs::write(v2.join("memory.current"), "600\n").unwrap();
        std::fs::write(v2.join("memory.stat"), "anon 500\ninactive_file 100\n").unwrap();
        assert_eq!(cgroup_room("0::/app\n", &root.path().join("v2")), Some(500));
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_room("0::/app\n", &root.path().join("v2")), None);

        // v1, at the mount's root (a container's namespace hides the path).
        let v1 = root.path().join("v1/memory");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "4096\n").unwrap();
        std::fs::write(v1.join("memory.usage_in_bytes"), "3000\n").unwrap();
        std::fs::write(
            v1.join("memory.stat"),
            "cache 5\ntotal_inactive_file 1000\n",
        )
        .unwrap();
        let cgroup = "5:devices:/\n4:memory:/hidden/path\n0::/\n";
        assert_eq!(cgroup_room(cgroup, &root.path().join("v1")), Some(2096));
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_room(cgroup, &root.path().join("v1")), None);
    }

    #[test]
    fn this_machine_says_how_much_is_available() {
        if cfg!(target_os = "linux") {
            let available = available_bytes().expect("Linux has /proc/meminfo");
            assert!(available > 0);
        }
    }
}
