//! The CPU plan: which cores the workers, the coordinator's threads and an embedded stub get.

use std::fmt;

/// Where every process of a run is pinned. `None` means "not pinned".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlan {
    /// The cores this process may use (its affinity mask at start), ascending.
    pub cores_available: Vec<usize>,
    /// Core of worker `i`, or `None` when affinity is off.
    pub worker_cores: Vec<Option<usize>>,
    /// Cores for the coordinator's threads (scheduler, aggregator, tokenizer pool); empty = unpinned.
    pub coordinator_cores: Vec<usize>,
    /// Cores for the embedded stub server; empty when there is none.
    pub stub_cores: Vec<usize>,
    /// Whether the workers share cores with something else (fewer cores than processes).
    pub oversubscribed: bool,
}

/// The cores this process is allowed to run on, ascending.
pub fn cores_available() -> Vec<usize> {
    let mut cores: Vec<usize> = match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => {
            (0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect()
        }
        Err(_) => Vec::new(),
    };
    if cores.is_empty() {
        let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        cores = (0..n).collect();
    }
    cores
}

/// The default worker count: one per core, leaving one core for the coordinator (and a stub).
pub fn default_worker_count(cores: usize, embedded_stub: bool) -> usize {
    let reserved = if embedded_stub && cores >= 4 { 1 + cores / 4 } else { 1 };
    cores.saturating_sub(reserved).max(1)
}

impl CpuPlan {
    /// Lays `workers` workers out over `cores`. The coordinator takes the first core, an embedded
    /// stub the last ones (a quarter of the machine, at least one core, shared with the
    /// coordinator on small machines), the workers the rest; with too few cores they wrap around.
    pub fn new(cores: &[usize], workers: usize, affinity: bool, embedded_stub: bool) -> CpuPlan {
        let n = cores.len();
        if !affinity || n == 0 {
            return CpuPlan {
                cores_available: cores.to_vec(),
                worker_cores: vec![None; workers],
                coordinator_cores: Vec::new(),
                stub_cores: Vec::new(),
                oversubscribed: workers + 1 > n,
            };
        }
        let coordinator_cores = vec![cores[0]];
        let stub_count = if embedded_stub { (n / 4).max(1) } else { 0 };
        let (worker_pool, stub_cores): (Vec<usize>, Vec<usize>) = if n >= 1 + stub_count + workers {
            let stub = cores[n - stub_count..].to_vec();
            (cores[1..n - stub_count].to_vec(), stub)
        } else if n >= 2 {
            // Small machine: the stub shares the coordinator's core, the workers get the rest.
            let stub = if embedded_stub { vec![cores[0]] } else { Vec::new() };
            (cores[1..].to_vec(), stub)
        } else {
            (cores.to_vec(), if embedded_stub { vec![cores[0]] } else { Vec::new() })
        };
        let worker_cores = (0..workers).map(|i| Some(worker_pool[i % worker_pool.len()])).collect();
        CpuPlan {
            cores_available: cores.to_vec(),
            worker_cores,
            coordinator_cores,
            stub_cores,
            oversubscribed: workers > worker_pool.len()
                || (embedded_stub && n < 1 + stub_count + workers),
        }
    }
}

impl fmt::Display for CpuPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cpu plan ({} cores available: {:?})",
            self.cores_available.len(),
            self.cores_available
        )?;
        if self.coordinator_cores.is_empty() {
            writeln!(f, "  coordinator: unpinned")?;
        } else {
            writeln!(f, "  coordinator: cores {:?}", self.coordinator_cores)?;
        }
        if !self.stub_cores.is_empty() {
            writeln!(f, "  embedded stub: cores {:?}", self.stub_cores)?;
        }
        for (i, core) in self.worker_cores.iter().enumerate() {
            match core {
                Some(c) => writeln!(f, "  worker {i}: core {c}")?,
                None => writeln!(f, "  worker {i}: unpinned")?,
            }
        }
        if self.oversubscribed {
            write!(f, "  note: more processes than cores; some share a core")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cores_one_worker_with_stub_shares_core_zero() {
        let plan = CpuPlan::new(&[0, 1], 1, true, true);
        assert_eq!(plan.worker_cores, vec![Some(1)]);
        assert_eq!(plan.coordinator_cores, vec![0]);
        assert_eq!(plan.stub_cores, vec![0]);
    }

    #[test]
    fn sixteen_cores_separate_coordinator_workers_and_stub() {
        let cores: Vec<usize> = (0..16).collect();
        let plan = CpuPlan::new(&cores, 11, true, true);
        assert_eq!(plan.coordinator_cores, vec![0]);
        assert_eq!(plan.stub_cores, vec![12, 13, 14, 15]);
        let workers: Vec<usize> = plan.worker_cores.iter().map(|c| c.unwrap()).collect();
        assert_eq!(workers, (1..12).collect::<Vec<_>>());
        assert!(!plan.oversubscribed);
    }

    #[test]
    fn too_many_workers_wrap_and_say_so() {
        let plan = CpuPlan::new(&[0, 1, 2], 4, true, false);
        let workers: Vec<usize> = plan.worker_cores.iter().map(|c| c.unwrap()).collect();
        assert_eq!(workers, vec![1, 2, 1, 2]);
        assert!(plan.oversubscribed);
    }

    #[test]
    fn affinity_off_pins_nothing() {
        let plan = CpuPlan::new(&[0, 1], 2, false, true);
        assert_eq!(plan.worker_cores, vec![None, None]);
        assert!(plan.coordinator_cores.is_empty());
    }

    #[test]
    fn default_workers_leave_room_for_the_coordinator() {
        assert_eq!(default_worker_count(2, true), 1);
        assert_eq!(default_worker_count(1, false), 1);
        assert_eq!(default_worker_count(16, true), 11);
        assert_eq!(default_worker_count(16, false), 15);
    }
}
