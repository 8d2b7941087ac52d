//! The roofline's pure plan: which rows run, their sample counts and durations under `--scale`,
//! how the machine's cores are split between stub and client, and the Poisson search.

use std::time::Duration;

use anyhow::bail;

/// One kind of row of the reference suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// `max_throughput`: every sample issued at t=0.
    Burst,
    /// Closed loop with this many requests in flight.
    Concurrency(usize),
    /// Binary search for the highest sustained Poisson target.
    Poisson,
    /// A burst against the null endpoint (`null://`): the client's own pipeline, no network;
    /// with or without events.jsonl.
    Null { events: bool },
}

impl RowKind {
    /// Every row, in the reference's order.
    pub const ALL: [RowKind; 7] = [
        RowKind::Null { events: true },
        RowKind::Null { events: false },
        RowKind::Burst,
        RowKind::Concurrency(1_000),
        RowKind::Concurrency(4_000),
        RowKind::Concurrency(16_000),
        RowKind::Poisson,
    ];

    /// The `--rows` name.
    pub fn name(self) -> String {
        match self {
            RowKind::Burst => "burst".into(),
            RowKind::Concurrency(c) => format!("c{c}"),
            RowKind::Poisson => "poisson".into(),
            RowKind::Null { events: true } => "null".into(),
            RowKind::Null { events: false } => "null-noevents".into(),
        }
    }

    /// The table's label, as the reference's.
    pub fn label(self, scale: &Scale) -> String {
        match self {
            RowKind::Burst => {
                format!("max_throughput ({} burst)", short_count(scale.burst_samples()))
            }
            RowKind::Concurrency(c) => format!("concurrency c={}", thousands(c as f64)),
            RowKind::Poisson => "poisson max_sustained".into(),
            RowKind::Null { events } => format!(
                "null endpoint ({} burst{})",
                short_count(scale.burst_samples()),
                if events { "" } else { ", no events" }
            ),
        }
    }
}

/// Parses `--rows` (comma-separated names; `all` or empty = every row).
pub fn parse_rows(spec: &str) -> anyhow::Result<Vec<RowKind>> {
    let names: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.is_empty() || names == ["all"] {
        return Ok(RowKind::ALL.to_vec());
    }
    let mut rows = Vec::new();
    for name in names {
        let row = RowKind::ALL.into_iter().find(|r| r.name() == name);
        match row {
            Some(r) if !rows.contains(&r) => rows.push(r),
            Some(_) => {}
            None => bail!(
                "unknown row {name:?} in --rows (use null, null-noevents, burst, c1000, c4000, \
                 c16000, poisson or all)"
            ),
        }
    }
    Ok(rows)
}

/// The reference's sizes times `--scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale(pub f64);

/// The reference's full-size figures.
pub const BURST_SAMPLES: u64 = 2_000_000;
pub const CONCURRENCY_SAMPLES: u64 = 10_000_000;
pub const DURATION_MS: u64 = 10_000;
pub const MAX_DURATION_MS: u64 = 12_000;
/// The minimal client and wrk run this long (wrk's own figure in the issue).
pub const CEILING_DURATION_MS: u64 = 5_000;
/// The shortest scaled duration: below it, start-up dominates.
pub const DURATION_MS_MIN: u64 = 200;

impl Scale {
    fn count(&self, n: u64) -> u64 {
        ((n as f64 * self.0).round() as u64).max(1)
    }

    fn ms(&self, ms: u64) -> u64 {
        ((ms as f64 * self.0).round() as u64).max(DURATION_MS_MIN)
    }

    pub fn burst_samples(&self) -> u64 {
        self.count(BURST_SAMPLES)
    }

    pub fn concurrency_samples(&self) -> u64 {
        self.count(CONCURRENCY_SAMPLES)
    }

    /// The reference's `max(100000, 15·T)` for its 10 s, scaled to the probe's duration (so
    /// the samples outlast it).
    pub fn poisson_samples(&self, target_qps: u64) -> u64 {
        let n = 100_000u64.max(15 * target_qps);
        (n * self.poisson_duration_ms() / DURATION_MS).max(1)
    }

    pub fn duration_ms(&self) -> u64 {
        self.ms(DURATION_MS)
    }

    /// The `--runtime.max-duration-ms` cap, kept above the duration.
    pub fn max_duration_ms(&self) -> u64 {
        self.ms(MAX_DURATION_MS).max(self.duration_ms() + 100)
    }

    /// At least a second: wrk counts whole seconds, and its connects fall inside them.
    /// A Poisson probe runs at least [`POISSON_DURATION_MS_MIN`], so the tail abandoned at
    /// the cap stays a small part of what it issued.
    pub fn poisson_duration_ms(&self) -> u64 {
        self.duration_ms().max(POISSON_DURATION_MS_MIN)
    }

    /// The Poisson cap: the reference's 12/10 of the duration.
    pub fn poisson_max_duration_ms(&self) -> u64 {
        self.max_duration_ms().max(self.poisson_duration_ms() * 6 / 5)
    }

    pub fn ceiling_duration(&self) -> Duration {
        Duration::from_millis(self.ms(CEILING_DURATION_MS).max(1_000))
    }
}

/// The reference's Poisson targets: 10k, 20k, … up to `max_qps`.
pub fn poisson_grid(step_qps: u64, max_qps: u64) -> Vec<u64> {
    let step = step_qps.max(1);
    (1..=max_qps / step).map(|i| i * step).collect()
}

/// The grid searched: no target above 1.1× the row's ceiling (the same cores cannot sustain
/// it), and steps fine enough for at least [`POISSON_TARGETS_MIN`] targets below it (whole
/// thousands).
pub fn poisson_targets(step_qps: u64, max_qps: u64, ceiling_qps: Option<f64>) -> Vec<u64> {
    let top = match ceiling_qps {
        Some(c) if c > 0.0 => max_qps.min((c * 1.1) as u64),
        _ => max_qps,
    };
    let step = step_qps.min(top / POISSON_TARGETS_MIN / 1_000 * 1_000).max(1_000);
    poisson_grid(step, top)
}

/// How the Poisson row searches: the targets and, for the table and the JSON, how they were
/// chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct PoissonPlan {
    pub targets: Vec<u64>,
    /// The binary search's worst case over `targets`.
    pub probes_max: usize,
    pub how: String,
}

/// The Poisson search of one stream mode. At full size (`scale >= 1`) it is the reference's
/// grid ([`poisson_targets`]). A scaled-down suite takes a shortcut: the sustained target cannot
/// exceed what the client carried in this pass's burst and concurrency rows of the same stream
/// mode (`client_qps`, their best QPS), so it searches [`POISSON_SCALED_TARGETS`] even steps up
/// to `client_qps / 0.95` (and the ceiling's cap): at most three probes, starting mid-way.
pub fn poisson_plan(
    scale: &Scale,
    step_qps: u64,
    max_qps: u64,
    ceiling_qps: Option<f64>,
    client_qps: Option<f64>,
) -> PoissonPlan {
    let full = poisson_targets(step_qps, max_qps, ceiling_qps);
    let client_top = client_qps.filter(|q| *q > 0.0).map(|q| (q / SUSTAINED_FRACTION) as u64);
    let (targets, how) = match client_top {
        Some(client_top) if scale.0 < 1.0 => {
            let top = full.last().copied().unwrap_or(0).min(client_top);
            let step = top.div_ceil(POISSON_SCALED_TARGETS).next_multiple_of(500).max(500);
            let targets = poisson_grid(step, top);
            let how = format!(
                "scaled: {} steps of {} up to the client's best burst/concurrency QPS / {}",
                targets.len(),
                thousands(step as f64),
                SUSTAINED_FRACTION
            );
            (targets, how)
        }
        _ => {
            let step = full.first().copied().unwrap_or(step_qps);
            let how = format!("{} steps of {}", full.len(), thousands(step as f64));
            (full, how)
        }
    };
    let probes_max = (usize::BITS - targets.len().leading_zeros()) as usize;
    PoissonPlan { how: format!("binary search over {how}"), targets, probes_max }
}

/// Whether wrk measures a ceiling of `connections`: always at full size; a scaled-down suite
/// (1 s ceilings) skips it above [`WRK_CONNECTIONS_SCALED_MAX`], where wrk's connects fill
/// its whole second (it read 0 at 16,000 in every run) and took 16 s on two cores.
pub fn wrk_runs(scale: &Scale, connections: usize) -> bool {
    scale.0 >= 1.0 || connections <= WRK_CONNECTIONS_SCALED_MAX
}

/// The most connections one run opens to the stub: the c=16,000 row, and llm-loadgen's Poisson
/// pool (`min(ceil(qps), 16384)`).
pub const CONNECTIONS_MAX: usize = 16_384;

/// A note when the ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`, "LO HI")
/// is too narrow for `connections` to one address: Linux gives connect() the even ports of the
/// range first, and once they are all in use to that address every further connect scans them
/// (16,000 sequential connects took 9–16 s with 32768–60999, 1.2 s with 1024–65535).
/// llm-loadgen and the minimal client bind their surplus first (`loadgen_worker::http::ports`);
/// wrk pays the scan.
pub fn port_range_note(range: &str, connections: usize) -> Option<String> {
    let mut it = range.split_whitespace().filter_map(|w| w.parse::<usize>().ok());
    let (lo, hi) = (it.next()?, it.next()?);
    let ports = hi.saturating_sub(lo) + 1;
    let even = ports / 2;
    (even < connections).then(|| {
        format!(
            "the ephemeral port range {lo}-{hi} has {even} even ports, fewer than the {connections} \
             connections of the largest rows; llm-loadgen and the minimal client bind the \
             connections past them to odd ports first, wrk does not and its connects slow down \
             by seconds (sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\" avoids it)"
        )
    })
}

/// The most connections wrk gets in a scaled-down suite.
pub const WRK_CONNECTIONS_SCALED_MAX: usize = 4_000;

/// A Poisson target is sustained when the client reached this fraction of it.
pub const SUSTAINED_FRACTION: f64 = 0.95;
/// Targets of a scaled-down Poisson search: 2³ − 1, so a binary search takes at most 3 probes.
pub const POISSON_SCALED_TARGETS: u64 = 7;
/// Fewest targets a capped grid keeps.
pub const POISSON_TARGETS_MIN: u64 = 8;
/// Shortest Poisson probe.
pub const POISSON_DURATION_MS_MIN: u64 = 2_000;

/// Binary search for the largest grid value `probe` accepts, assuming acceptance is monotonic
/// (every target below a sustained one is sustained). Returns its index; `probe` errors stop
/// the search.
pub fn search_max<E>(
    grid: &[u64],
    mut probe: impl FnMut(u64) -> Result<bool, E>,
) -> Result<Option<usize>, E> {
    let (mut lo, mut hi) = (0usize, grid.len());
    let mut best = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if probe(grid[mid])? {
            best = Some(mid);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(best)
}

/// How the machine's cores are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub stub_cores: Vec<usize>,
    pub stub_workers: usize,
    /// The affinity mask of the `llm-loadgen` process (its coordinator takes the first).
    pub client_cores: Vec<usize>,
    pub client_workers: usize,
}

impl Layout {
    /// Stub on the first cores (a quarter, at least one), client on the rest; on two cores one
    /// each, on one core both share it. Explicit worker counts override the defaults.
    pub fn new(
        cores: &[usize],
        server_workers: Option<usize>,
        client_workers: Option<usize>,
    ) -> Self {
        let n = cores.len();
        if n <= 2 {
            let stub_cores = cores[..n.min(1)].to_vec();
            let client_cores = cores[n.saturating_sub(1)..].to_vec();
            return Layout {
                stub_workers: server_workers.unwrap_or(1).max(1),
                stub_cores,
                client_cores,
                client_workers: client_workers.unwrap_or(1).max(1),
            };
        }
        let stub_n = server_workers.unwrap_or((n / 4).max(1)).clamp(1, n - 2);
        let rest = &cores[stub_n..];
        let workers = client_workers.unwrap_or(rest.len() - 1).max(1);
        Layout {
            stub_cores: cores[..stub_n].to_vec(),
            stub_workers: server_workers.unwrap_or(stub_n).max(1),
            client_cores: rest[..rest.len().min(workers + 1)].to_vec(),
            client_workers: workers,
        }
    }

    /// The cores the ceiling clients use: the client's, less the coordinator's when the
    /// workers have cores of their own.
    pub fn ceiling_cores(&self) -> Vec<usize> {
        if self.client_cores.len() > 1 {
            self.client_cores[1..].to_vec()
        } else {
            self.client_cores.clone()
        }
    }
}

/// `1234567.8` → `1,234,568`; values below 100 keep one decimal.
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v.abs() < 100.0 {
        return format!("{v:.1}");
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if v < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// `2000000` → `2M`, `100000` → `100k`.
pub fn short_count(n: u64) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n % 1_000 == 0 {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_divides_counts_and_durations() {
        let s = Scale(0.05);
        assert_eq!(s.burst_samples(), 100_000);
        assert_eq!(s.concurrency_samples(), 500_000);
        assert_eq!((s.duration_ms(), s.max_duration_ms()), (500, 600));
        assert_eq!(s.poisson_samples(10_000), 30_000);
        assert_eq!(s.ceiling_duration(), Duration::from_secs(1));
        let full = Scale(1.0);
        assert_eq!((full.burst_samples(), full.duration_ms()), (2_000_000, 10_000));
        assert_eq!(full.max_duration_ms(), 12_000);
        assert_eq!(full.poisson_samples(250_000), 3_750_000);
        assert_eq!(full.ceiling_duration(), Duration::from_secs(5));
    }

    #[test]
    fn tiny_scales_keep_a_floor() {
        let s = Scale(0.000_001);
        assert_eq!(s.burst_samples(), 2);
        assert_eq!(s.duration_ms(), DURATION_MS_MIN);
        assert!(s.max_duration_ms() > s.duration_ms());
    }

    #[test]
    fn rows_filter_by_name() {
        let rows = parse_rows("burst, c1000,poisson,burst").unwrap();
        assert_eq!(rows, vec![RowKind::Burst, RowKind::Concurrency(1000), RowKind::Poisson]);
        assert_eq!(parse_rows("").unwrap().len(), 7);
        let null = parse_rows("null-noevents,null").unwrap();
        assert_eq!(null, vec![RowKind::Null { events: false }, RowKind::Null { events: true }]);
        assert_eq!(parse_rows("all").unwrap(), RowKind::ALL.to_vec());
        let err = parse_rows("c2000").unwrap_err().to_string();
        assert!(err.contains("\"c2000\""), "{err}");
    }

    #[test]
    fn search_finds_the_largest_accepted_target() {
        let grid = poisson_grid(10_000, 250_000);
        assert_eq!((grid.len(), grid[0], grid[24]), (25, 10_000, 250_000));
        for limit in [0u64, 10_000, 87_000, 250_000, 1_000_000] {
            let mut probes = 0;
            let best = search_max(&grid, |t| {
                probes += 1;
                Ok::<_, ()>(t <= limit)
            })
            .unwrap();
            let expected = grid.iter().rposition(|&t| t <= limit);
            assert_eq!(best, expected, "limit {limit}");
            assert!(probes <= 5, "{probes} probes for 25 targets");
        }
        let failed = search_max(&grid, |_| Err::<bool, _>("stub died"));
        assert_eq!(failed, Err("stub died"));
    }

    #[test]
    fn poisson_grid_stops_near_the_ceiling() {
        assert_eq!(poisson_targets(10_000, 250_000, None).len(), 25);
        let t = poisson_targets(10_000, 250_000, Some(1_000_000.0));
        assert_eq!((t.len(), t[24]), (25, 250_000));
        let t = poisson_targets(10_000, 250_000, Some(100_000.0));
        assert_eq!((t[0], *t.last().unwrap()), (10_000, 110_000));
        // A slow machine: 16k at the ceiling gives 2k steps up to 17.6k.
        let t = poisson_targets(10_000, 250_000, Some(16_000.0));
        assert_eq!(t, vec![2_000, 4_000, 6_000, 8_000, 10_000, 12_000, 14_000, 16_000]);
        assert_eq!(poisson_targets(10_000, 250_000, Some(500.0)), Vec::<u64>::new());
    }

    #[test]
    fn full_size_poisson_keeps_the_reference_grid() {
        let plan = poisson_plan(&Scale(1.0), 10_000, 250_000, None, Some(40_000.0));
        assert_eq!(plan.targets, poisson_grid(10_000, 250_000));
        assert_eq!(plan.probes_max, 5);
        assert_eq!(plan.how, "binary search over 25 steps of 10,000");
        let capped = poisson_plan(&Scale(1.0), 10_000, 250_000, Some(100_000.0), None);
        assert_eq!(capped.targets, poisson_targets(10_000, 250_000, Some(100_000.0)));
    }

    #[test]
    fn scaled_poisson_starts_from_the_client_rows() {
        // 2 cores: burst 37.8k, ceiling 95k: 6k steps up to 39.8k, 24k probed first.
        let s = Scale(0.05);
        let plan = poisson_plan(&s, 10_000, 250_000, Some(95_000.0), Some(37_795.0));
        assert_eq!(plan.targets, vec![6_000, 12_000, 18_000, 24_000, 30_000, 36_000]);
        assert_eq!(plan.probes_max, 3);
        assert!(plan.how.contains("scaled: 6 steps of 6,000"), "{}", plan.how);
        let mut probed = Vec::new();
        search_max(&plan.targets, |t| {
            probed.push(t);
            Ok::<_, ()>(t <= 22_000)
        })
        .unwrap();
        assert_eq!(probed, vec![24_000, 12_000, 18_000]);
        // A ceiling below the client's figure still caps the grid (at 11k).
        let plan = poisson_plan(&s, 10_000, 250_000, Some(10_000.0), Some(37_795.0));
        assert_eq!(plan.targets, vec![2_000, 4_000, 6_000, 8_000, 10_000]);
        // A loaded 2-core machine: 14.1k at best, 2.5k steps.
        let plan = poisson_plan(&s, 10_000, 250_000, None, Some(14_131.0));
        assert_eq!(plan.targets, vec![2_500, 5_000, 7_500, 10_000, 12_500]);
        // A slow client: 1k steps, fewer targets.
        let plan = poisson_plan(&s, 10_000, 250_000, None, Some(4_000.0));
        assert_eq!(plan.targets, vec![1_000, 2_000, 3_000, 4_000]);
        assert_eq!(plan.probes_max, 3);
        // No burst or concurrency row ran (`--rows poisson`): the ceiling-capped grid.
        let plan = poisson_plan(&s, 10_000, 250_000, Some(95_000.0), None);
        assert_eq!(plan.targets, poisson_targets(10_000, 250_000, Some(95_000.0)));
    }

    #[test]
    fn narrow_port_ranges_are_named() {
        let note = port_range_note("32768\t60999\n", CONNECTIONS_MAX).unwrap();
        assert!(note.contains("32768-60999 has 14116 even ports"), "{note}");
        assert_eq!(port_range_note("1024 65535", CONNECTIONS_MAX), None);
        assert_eq!(port_range_note("garbage", CONNECTIONS_MAX), None);
    }

    #[test]
    fn scaled_suites_skip_wrk_at_16000_connections() {
        assert!(wrk_runs(&Scale(1.0), 16_000));
        assert!(wrk_runs(&Scale(0.05), 4_000));
        assert!(!wrk_runs(&Scale(0.05), 16_000));
    }

    #[test]
    fn poisson_probes_run_long_enough() {
        let s = Scale(0.05);
        assert_eq!((s.poisson_duration_ms(), s.poisson_max_duration_ms()), (2_000, 2_400));
        let full = Scale(1.0);
        assert_eq!((full.poisson_duration_ms(), full.poisson_max_duration_ms()), (10_000, 12_000));
    }

    #[test]
    fn layout_two_cores_one_each() {
        let l = Layout::new(&[0, 1], None, None);
        assert_eq!((l.stub_cores, l.client_cores.clone()), (vec![0], vec![1]));
        assert_eq!((l.stub_workers, l.client_workers), (1, 1));
        assert_eq!(Layout::new(&[0, 1], None, None).ceiling_cores(), vec![1]);
        let one = Layout::new(&[3], None, None);
        assert_eq!((one.stub_cores, one.client_cores), (vec![3], vec![3]));
    }

    #[test]
    fn layout_many_cores_separates_sets() {
        let cores: Vec<usize> = (0..16).collect();
        let l = Layout::new(&cores, None, None);
        assert_eq!(l.stub_cores, (0..4).collect::<Vec<_>>());
        assert_eq!((l.client_cores.clone(), l.client_workers), ((4..16).collect(), 11));
        assert_eq!(l.ceiling_cores(), (5..16).collect::<Vec<_>>());
        let l = Layout::new(&cores, Some(2), Some(4));
        assert_eq!((l.stub_cores, l.stub_workers), (vec![0, 1], 2));
        assert_eq!((l.client_cores, l.client_workers), (vec![2, 3, 4, 5, 6], 4));
    }

    #[test]
    fn numbers_format_as_the_reference() {
        assert_eq!(thousands(42_929.4), "42,929");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(999.5), "1,000");
        assert_eq!(thousands(12.34), "12.3");
        assert_eq!(short_count(2_000_000), "2M");
        assert_eq!(short_count(100_000), "100k");
        assert_eq!(short_count(1_234), "1234");
    }
}
