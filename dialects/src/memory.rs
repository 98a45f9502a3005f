//! How much memory this process may have, from what the system says (Linux): the machine's
//! physical memory (`MemTotal` of `/proc/meminfo`), the process's own limits on its address
//! space and data segment (`RLIMIT_AS`, `RLIMIT_DATA`: `ulimit -v`, `ulimit -d`, as
//! `/proc/self/limits` shows them) and its cgroup's memory limit (a container's, a Ray Serve
//! replica's: v2 `memory.max`, v1 `memory.limit_in_bytes`, for the cgroup `/proc/self/cgroup`
//! names). The tensor-size limit (`ty.rs`) is the smallest of them.

use std::path::Path;

/// Where the cgroup file systems are mounted, unless `CGROUP_ROOT_VAR` says elsewhere.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The environment variable naming another mount point of the cgroup file systems (a
/// container that mounts them elsewhere; a test that fakes a limit).
const CGROUP_ROOT_VAR: &str = "MXC_CGROUP_ROOT";

/// What bounds the memory of this process, each bound that is known: `(what, bytes)`.
pub fn memory_bounds() -> Vec<(&'static str, usize)> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut bounds = Vec::new();
    if let Some(bytes) = read("/proc/meminfo").as_deref().and_then(physical_memory) {
        bounds.push(("the machine's memory", bytes));
    }
    if let Some(text) = read("/proc/self/limits") {
        bounds.extend(process_limits(&text));
    }
    if let Some(text) = read("/proc/self/cgroup") {
        let root = std::env::var_os(CGROUP_ROOT_VAR).unwrap_or_else(|| CGROUP_ROOT.into());
        if let Some(bytes) = cgroup_limit(Path::new(&root), &text) {
            bounds.push(("the cgroup's memory limit", bytes));
        }
    }
    bounds
}

/// `MemTotal` of `/proc/meminfo`'s text, in bytes.
pub(crate) fn physical_memory(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: usize = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limits on the address space and the data segment in `/proc/self/limits`' text
/// (`Max address space    3221225472    unlimited    bytes`), those that are set.
fn process_limits(limits: &str) -> Vec<(&'static str, usize)> {
    let mut found = Vec::new();
    for (name, what) in [
        ("Max address space", "the address-space limit (ulimit -v)"),
        ("Max data size", "the data-segment limit (ulimit -d)"),
    ] {
        let soft = limits
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|soft| soft.parse().ok());
        found.extend(soft.map(|bytes| (what, bytes)));
    }
    found
}

/// The memory limit of the cgroup that `/proc/self/cgroup`'s text names, under the cgroup file
/// systems mounted at `root`: v2's `memory.max` (line `0::/path`) or v1's
/// `memory.limit_in_bytes` (the line whose controllers include `memory`); `None` when there is
/// none, it says `max`, or it is v1's "no limit" (a number near `i64::MAX`).
pub(crate) fn cgroup_limit(root: &Path, cgroup: &str) -> Option<usize> {
    let number = |path: &Path| -> Option<usize> {
        let text = std::fs::read_to_string(path).ok()?;
        let bytes: usize = text.trim().parse().ok()?;
        // v1 says "unlimited" as the largest multiple of the page size below i64::MAX
        (bytes < (i64::MAX as usize) >> 1).then_some(bytes)
    };
    let relative = |path: &str| path.trim_start_matches('/').to_string();
    for line in cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if controllers.is_empty() {
            if let Some(bytes) = number(&root.join(relative(path)).join("memory.max")) {
                return Some(bytes);
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let dir = root.join("memory").join(relative(path));
            if let Some(bytes) = number(&dir.join("memory.limit_in_bytes")) {
                return Some(bytes);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_gives_the_machine_memory_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(physical_memory(text), Some(24576000 * 1024));
        assert_eq!(physical_memory("MemFree: 3 kB\n"), None);
    }

    #[test]
    fn set_soft_limits_are_read_and_unlimited_ones_are_not() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max data size             unlimited            unlimited            bytes\n\
                    Max address space         3221225472           unlimited            bytes\n";
        assert_eq!(
            process_limits(text),
            vec![("the address-space limit (ulimit -v)", 3221225472)]
        );
    }

    #[test]
    fn a_cgroup_v2_or_v1_limit_is_found_and_max_is_none() {
        let root = tempfile::tempdir().unwrap();
        let v2 = root.path().join("serve/replica");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "2147483648\n").unwrap();
        assert_eq!(cgroup_limit(root.path(), "0::/serve/replica\n"), Some(2147483648));
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit(root.path(), "0::/serve/replica\n"), None);
        let v1 = root.path().join("memory/docker/abc");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "1073741824\n").unwrap();
        let lines = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n";
        assert_eq!(cgroup_limit(root.path(), lines), Some(1073741824));
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_limit(root.path(), lines), None, "v1's no limit");
        assert_eq!(cgroup_limit(root.path(), "0::/elsewhere\n"), None);
    }
}
