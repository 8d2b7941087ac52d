//! `llm-loadgen info`: version, CPUs and affinity, io_uring availability, resource limits.

use std::fmt::Write as _;

use loadgen_coordinator::cpu::{cores_available, default_worker_count};
use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

use crate::commands::sys::io_uring_available;
use crate::error::AppError;

/// Prints the report of `info_text` on stdout.
pub fn run() -> Result<i32, AppError> {
    super::print_stdout(&info_text())?;
    Ok(0)
}

/// One `key: value` line per fact, in a fixed order.
pub fn info_text() -> String {
    let mut out = String::new();
    let line = |out: &mut String, key: &str, value: String| {
        let _ = writeln!(out, "{key:<22}{value}");
    };
    line(&mut out, "llm-loadgen:", env!("LLM_LOADGEN_VERSION").to_string());
    line(&mut out, "kernel:", read_trimmed("/proc/sys/kernel/osrelease"));
    line(&mut out, "cpu model:", cpu_model());
    line(&mut out, "cpus online:", online_cpus());
    line(&mut out, "affinity mask:", affinity_list());
    let uring = match io_uring_available() {
        Ok(()) => "available".to_string(),
        Err(e) => format!("refused ({e}); workers will use the epoll driver"),
    };
    line(&mut out, "io_uring:", uring);
    line(&mut out, "rlimit memlock:", limit_text(Resource::RLIMIT_MEMLOCK, true));
    line(&mut out, "rlimit nofile:", limit_text(Resource::RLIMIT_NOFILE, false));
    out
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn online_cpus() -> String {
    let list = read_trimmed("/sys/devices/system/cpu/online");
    match parse_cpu_list(&list) {
        Some(cpus) => format!("{} ({list})", cpus.len()),
        None => list,
    }
}

/// The CPUs this process may run on (the ones workers are pinned to), as a kernel-style
/// list (`0-3,6`), and the default worker count they give.
fn affinity_list() -> String {
    let cpus = cores_available();
    let workers = default_worker_count(cpus.len(), false);
    format!("{} ({}); default workers {workers}", cpus.len(), format_cpu_list(&cpus))
}

/// Parses a kernel CPU list such as `0-3,6,8-9`.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// Formats sorted CPU ids as a kernel CPU list, joining runs with `-`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

fn limit_text(resource: Resource, bytes: bool) -> String {
    let show = |v: u64| {
        if v == RLIM_INFINITY {
            "unlimited".to_string()
        } else if bytes {
            format!("{v} bytes")
        } else {
            v.to_string()
        }
    };
    match getrlimit(resource) {
        Ok((soft, hard)) => format!("soft {}, hard {}", show(soft), show(hard)),
        Err(e) => format!("unknown ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        for (text, cpus) in
            [("0", vec![0]), ("0-3", vec![0, 1, 2, 3]), ("0-1,4,6-7", vec![0, 1, 4, 6, 7])]
        {
            assert_eq!(parse_cpu_list(text), Some(cpus.clone()));
            assert_eq!(format_cpu_list(&cpus), text);
        }
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn info_names_every_fact() {
        let text = info_text();
        for key in [
            "llm-loadgen:",
            "cpus online:",
            "affinity mask:",
            "io_uring:",
            "rlimit memlock:",
            "rlimit nofile:",
        ] {
            assert!(text.contains(key), "{key} missing in:\n{text}");
        }
    }
}
