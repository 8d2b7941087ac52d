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
    /// Cores nothing else uses, for live client tokenizer threads; empty when affinity is off
    /// or every core is taken.
    pub tokenizer_cores: Vec<usize>,
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

/// Cores the coordinator's threads get on a machine of `cores` cores, where there is room: one,
/// plus one per 16 cores, at most 4. Its scheduler, aggregator and events formatters cost about
/// 1 us a sample together (docs/PERF.md, the null endpoint), so a 16-core client needs two
/// cores for them to keep up with 2 M samples/s.
pub fn coordinator_core_count(cores: usize) -> usize {
    (1 + cores / 16).min(4)
}

/// The default worker count: one per core, leaving the coordinator's cores (and a stub's).
pub fn default_worker_count(cores: usize, embedded_stub: bool) -> usize {
    let stub = if embedded_stub && cores >= 4 { cores / 4 } else { 0 };
    cores.saturating_sub(coordinator_core_count(cores) + stub).max(1)
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
                tokenizer_cores: Vec::new(),
                oversubscribed: workers + 1 > n,
            };
        }
        let stub_count = if embedded_stub { (n / 4).max(1) } else { 0 };
        // More than one coordinator core only where the workers and the stub still get theirs.
        let wanted = coordinator_core_count(n);
        let coordinator_count = if n >= wanted + stub_count + workers { wanted } else { 1 };
        let coordinator_cores = cores[..coordinator_count].to_vec();
        let (worker_pool, stub_cores): (Vec<usize>, Vec<usize>) = if n >= 1 + stub_count + workers {
            let stub = cores[n - stub_count..].to_vec();
            (cores[coordinator_count..n - stub_count].to_vec(), stub)
        } else if n >= 2 {
            // Small machine: the stub shares the coordinator's core, the workers get the rest.
            let stub = if embedded_stub { vec![cores[0]] } else { Vec::new() };
            (cores[1..].to_vec(), stub)
        } else {
            (cores.to_vec(), if embedded_stub { vec![cores[0]] } else { Vec::new() })
        };
        let worker_cores: Vec<Option<usize>> =
            (0..workers).map(|i| Some(worker_pool[i % worker_pool.len()])).collect();
        let taken = |c: &usize| {
            coordinator_cores.contains(c)
                || stub_cores.contains(c)
                || worker_cores.contains(&Some(*c))
        };
        let tokenizer_cores = cores.iter().copied().filter(|c| !taken(c)).collect();
        CpuPlan {
            cores_available: cores.to_vec(),
            worker_cores,
            coordinator_cores,
            stub_cores,
            tokenizer_cores,
            oversubscribed: workers > worker_pool.len()
                || (embedded_stub && n < 1 + stub_count + workers),
        }
    }
}

/// The reference's default for `metrics_tokenizer_workers`: live tokenizer threads.
pub const TOKENIZER_WORKERS_DEFAULT: usize = 4;

/// How the client tokenizer pool runs, decided from the setting and the CPU plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerThreads {
    /// Threads counting while the run goes on; 0 = all counting after the last sample.
    pub live: usize,
    /// Cores the live threads are pinned to, in turn; empty = unpinned.
    pub live_cores: Vec<usize>,
    /// The live threads may run on cores the load uses (an explicit count, no spare cores):
    /// worth a note, since they compete with the workers for the CPU.
    pub compete_with_load: bool,
    /// Threads for the end-of-run drain, when the workers are gone: one per available core
    /// (the live ones included).
    pub drain: usize,
    /// Cores of the drain threads, in turn: every available core where the plan pins, none
    /// (unpinned) where affinity is off.
    pub drain_cores: Vec<usize>,
}

/// Live and drain tokenizer threads from `metrics_tokenizer_workers` (`None` = not given).
/// By default up to `TOKENIZER_WORKERS_DEFAULT` threads count live on the plan's spare cores,
/// and none where there is no spare core (counting waits for the end of the run, so it never
/// takes CPU from the load); an explicit count is honoured, on the spare cores when there are
/// some, else sharing the load's cores; 0 always defers.
pub fn tokenizer_threads(requested: Option<usize>, plan: &CpuPlan) -> TokenizerThreads {
    let spare = &plan.tokenizer_cores;
    let live = requested.unwrap_or(TOKENIZER_WORKERS_DEFAULT.min(spare.len()));
    // The plan pins where it gave the coordinator cores; with affinity off nothing is pinned.
    let pinned = !plan.coordinator_cores.is_empty();
    TokenizerThreads {
        live,
        live_cores: if live > 0 { spare.clone() } else { Vec::new() },
        compete_with_load: live > 0 && spare.is_empty(),
        drain: plan.cores_available.len().max(1),
        drain_cores: if pinned { plan.cores_available.clone() } else { Vec::new() },
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
        if !self.tokenizer_cores.is_empty() {
            writeln!(
                f,
                "  spare for live client tokenizer threads: cores {:?}",
                self.tokenizer_cores
            )?;
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
    fn a_big_host_gives_the_coordinator_a_second_core_when_the_workers_leave_it() {
        let cores: Vec<usize> = (0..16).collect();
        let plan = CpuPlan::new(&cores, default_worker_count(16, false), true, false);
        assert_eq!(plan.coordinator_cores, vec![0, 1]);
        let workers: Vec<usize> = plan.worker_cores.iter().map(|c| c.unwrap()).collect();
        assert_eq!(workers, (2..16).collect::<Vec<_>>());
        assert!(!plan.oversubscribed && plan.tokenizer_cores.is_empty());
        // Fifteen workers asked for: the coordinator keeps one core, as before.
        let plan = CpuPlan::new(&cores, 15, true, false);
        assert_eq!(plan.coordinator_cores, vec![0]);
        assert_eq!(coordinator_core_count(2), 1);
        assert_eq!(coordinator_core_count(64), 4);
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
    fn spare_cores_are_those_no_process_uses() {
        let cores: Vec<usize> = (0..16).collect();
        // The coordinator takes cores 0 and 1 (a 16-core host), the stub 12-15.
        assert_eq!(CpuPlan::new(&cores, 8, true, true).tokenizer_cores, vec![10, 11]);
        assert_eq!(CpuPlan::new(&cores, 15, true, false).tokenizer_cores, Vec::<usize>::new());
        assert_eq!(CpuPlan::new(&[0, 1], 1, true, true).tokenizer_cores, Vec::<usize>::new());
        assert_eq!(CpuPlan::new(&[0, 1, 2, 3], 1, true, false).tokenizer_cores, vec![2, 3]);
        assert!(CpuPlan::new(&cores, 2, false, false).tokenizer_cores.is_empty());
    }

    #[test]
    fn tokenizer_threads_stay_off_the_load_unless_asked() {
        let two = CpuPlan::new(&[0, 1], 1, true, true);
        let sixteen = CpuPlan::new(&(0..16).collect::<Vec<_>>(), 8, true, true);
        let one_spare = CpuPlan::new(&[0, 1, 2], 1, true, false);
        // (plan, requested) -> (live, live cores, competes with the load)
        type Case<'a> = (&'a CpuPlan, Option<usize>, usize, Vec<usize>, bool);
        let cases: [Case<'_>; 8] = [
            (&two, None, 0, vec![], false),
            (&two, Some(0), 0, vec![], false),
            (&two, Some(4), 4, vec![], true),
            (&sixteen, None, 2, vec![10, 11], false),
            (&sixteen, Some(8), 8, vec![10, 11], false),
            (&sixteen, Some(0), 0, vec![], false),
            (&one_spare, None, 1, vec![2], false),
            (&one_spare, Some(2), 2, vec![2], false),
        ];
        for (plan, requested, live, cores, compete) in cases {
            let t = tokenizer_threads(requested, plan);
            let got = (t.live, t.live_cores.clone(), t.compete_with_load);
            assert_eq!(got, (live, cores, compete), "{requested:?} on {:?}", plan.cores_available);
            assert_eq!(t.drain, plan.cores_available.len(), "the drain uses the whole machine");
            assert_eq!(t.drain_cores, plan.cores_available, "pinned, as the plan pins");
        }
        let unpinned = CpuPlan::new(&[0, 1, 2, 3], 2, false, true);
        let t = tokenizer_threads(None, &unpinned);
        assert_eq!(
            (t.drain, t.drain_cores),
            (4, vec![]),
            "affinity off: a thread a core, unpinned"
        );
    }

    #[test]
    fn default_workers_leave_room_for_the_coordinator() {
        assert_eq!(default_worker_count(2, true), 1);
        assert_eq!(default_worker_count(1, false), 1);
        assert_eq!(default_worker_count(16, true), 10);
        assert_eq!(default_worker_count(16, false), 14);
        assert_eq!(default_worker_count(8, false), 7);
    }
}
