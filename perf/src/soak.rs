//! `loadgen-perf soak`: one long `llm-loadgen benchmark` at max throughput against
//! `llm-loadgen stub max-throughput`, the resident memory of the coordinator, each worker and
//! the stub sampled into a CSV, then the checks: flat memory and issued = completed + abandoned.

use std::fs::File;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Samples no soak reaches: the run ends at the cap.
const SAMPLES_UNBOUNDED: &str = "1000000000";
/// Past the duration, the run gets this long (its cap's grace and the report) before it is
/// killed.
const END_GRACE: Duration = Duration::from_secs(300);

/// `soak` flags.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long the run lasts: `90s`, `30m`, `1h` or seconds.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seconds between memory samples.
    #[arg(long, default_value_t = 5.0)]
    pub interval_s: f64,
    /// How samples are issued.
    #[arg(long, value_enum, default_value = "offline")]
    pub pattern: SoakPattern,
    /// Samples in flight under `--pattern concurrency`.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// Stream the responses (SSE).
    #[arg(long)]
    pub stream: bool,
    /// llm-loadgen workers.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Stub worker threads.
    #[arg(long, default_value_t = 1)]
    pub stub_workers: usize,
    /// The stub's output length in characters (small keeps events.jsonl small).
    #[arg(long, default_value_t = 16)]
    pub output_length: usize,
    /// The llm-loadgen binary [default: next to this executable].
    #[arg(long)]
    pub bin: Option<PathBuf>,
    /// Output folder: rss.csv, soak.json, the run's logs and report [default:
    /// $TMPDIR/loadgen-soak].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// events.jsonl past this many MiB is emptied in place (the writer's offset leaves a hole,
    /// which takes no disk), so a long soak cannot fill the disk.
    #[arg(long, default_value_t = 2048)]
    pub events_limit_mib: u64,
    /// A worker's or the stub's resident memory at the end may exceed its level after warm-up
    /// by this fraction.
    #[arg(long, default_value_t = 0.10)]
    pub flat_tolerance: f64,
    /// The coordinator keeps every sample's values (by design); its growth after warm-up may be
    /// at most this many bytes per request the stub answered.
    #[arg(long, default_value_t = 512)]
    pub coordinator_bytes_per_sample_max: u64,
}

/// `--pattern` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SoakPattern {
    /// Every sample at once (`benchmark offline`).
    Offline,
    /// A closed loop of `--concurrency` samples.
    Concurrency,
}

/// `90s`, `30m`, `2h`, or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit_s) = match text.as_bytes().last() {
        Some(b's') => (&text[..text.len() - 1], 1.0),
        Some(b'm') => (&text[..text.len() - 1], 60.0),
        Some(b'h') => (&text[..text.len() - 1], 3600.0),
        _ => (text, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() => Ok(Duration::from_secs_f64(n * unit_s)),
        _ => Err(format!("duration {text:?} is not a positive number of s, m or h (e.g. 90s)")),
    }
}

/// One row of rss.csv.
#[derive(Debug, Clone)]
struct Row {
    t_s: f64,
    requests: u64,
    coordinator_kib: u64,
    workers_kib: Vec<u64>,
    stub_kib: u64,
}

/// Runs the soak, prints its figures and fails when a check fails.
pub fn run(args: &SoakArgs) -> anyhow::Result<()> {
    let bin = crate::roofline::resolve_bin(args.bin.as_deref())?;
    let out = args.out.clone().unwrap_or_else(|| std::env::temp_dir().join("loadgen-soak"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let stub = SoakStub::start(&bin, args)?;
    let report = out.join("report");
    let mut cmd = Command::new(&bin);
    cmd.args(loadgen_args(args, &stub.url, &report))
        .stdin(Stdio::null())
        .stdout(File::create(out.join("loadgen.stdout"))?)
        .stderr(File::create(out.join("loadgen.stderr"))?);
    eprintln!("soak: {} for {:?} against {}", bin.display(), args.duration, stub.url);
    let child = cmd.spawn().context("starting llm-loadgen")?;
    let rows = sample_until_exit(child, args, &stub, &report, &out)?;
    drop(stub);
    let verdict = analyse(&rows, args, &report)?;
    std::fs::write(out.join("soak.json"), serde_json::to_string_pretty(&verdict.json)?)?;
    print!("{}", verdict.text);
    eprintln!("soak: rss.csv, soak.json and the report are in {}", out.display());
    if !verdict.failures.is_empty() {
        bail!("the soak failed: {}", verdict.failures.join("; "));
    }
    Ok(())
}

fn loadgen_args(args: &SoakArgs, url: &str, report: &Path) -> Vec<String> {
    let mode: Vec<String> = match args.pattern {
        SoakPattern::Offline => vec!["offline".into()],
        SoakPattern::Concurrency => ["online", "--load-pattern", "concurrency", "--concurrency"]
            .map(String::from)
            .into_iter()
            .chain([args.concurrency.to_string()])
            .collect(),
    };
    let cap_ms = args.duration.as_millis().to_string();
    let rest = [
        "--endpoints",
        url,
        "--model",
        "soak",
        "--report-dir",
        &report.display().to_string(),
        "--workers",
        &args.workers.to_string(),
        "--num-samples",
        SAMPLES_UNBOUNDED,
        "--runtime.max-duration-ms",
        &cap_ms,
        "--streaming",
        if args.stream { "on" } else { "off" },
    ]
    .map(String::from);
    std::iter::once("benchmark".to_string()).chain(mode).chain(rest).collect()
}

/// Samples memory every interval until the run exits (killed past its duration + grace).
fn sample_until_exit(
    mut child: Child,
    args: &SoakArgs,
    stub: &SoakStub,
    report: &Path,
    out: &Path,
) -> anyhow::Result<Vec<Row>> {
    let mut csv = File::create(out.join("rss.csv"))?;
    let workers = args.workers;
    let worker_cols: String = (0..workers).map(|i| format!(",worker_{i}_rss_kib")).collect();
    writeln!(csv, "t_s,requests,coordinator_rss_kib{worker_cols},stub_rss_kib,events_trimmed_mib")?;
    let (started, interval) = (Instant::now(), Duration::from_secs_f64(args.interval_s.max(0.2)));
    let mut rows = Vec::new();
    let mut trimmed_mib = 0u64;
    let pid = child.id();
    let mut next = started;
    loop {
        if let Some(status) = child.try_wait()? {
            eprintln!("soak: llm-loadgen exited with {status} after {:?}", started.elapsed());
            break;
        }
        if started.elapsed() > args.duration + END_GRACE {
            let _ = child.kill();
            let _ = child.wait();
            bail!("llm-loadgen still ran {END_GRACE:?} past its duration: killed");
        }
        if Instant::now() >= next {
            next += interval;
            trimmed_mib += trim_events(&report.join("events.jsonl"), args.events_limit_mib);
            let row = sample(pid, workers, stub, started);
            write_row(&mut csv, &row, trimmed_mib)?;
            rows.push(row);
        }
        // Polling the child's exit and the next sample time; a soak lasts minutes.
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(rows)
}

fn sample(pid: u32, workers: usize, stub: &SoakStub, started: Instant) -> Row {
    let mut workers_kib: Vec<u64> = children_of(pid).into_iter().map(rss_kib).collect();
    workers_kib.resize(workers, 0);
    Row {
        t_s: started.elapsed().as_secs_f64(),
        requests: stub.requests.load(Ordering::Relaxed),
        coordinator_kib: rss_kib(pid),
        workers_kib,
        stub_kib: rss_kib(stub.child.id()),
    }
}

fn write_row(csv: &mut File, row: &Row, trimmed_mib: u64) -> std::io::Result<()> {
    let workers: String = row.workers_kib.iter().map(|k| format!(",{k}")).collect();
    writeln!(
        csv,
        "{:.1},{},{}{workers},{},{trimmed_mib}",
        row.t_s, row.requests, row.coordinator_kib, row.stub_kib
    )
}

/// Empties events.jsonl when it is past `limit_mib`; returns the MiB dropped.
fn trim_events(path: &Path, limit_mib: u64) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = std::fs::metadata(path) else { return 0 };
    // The allocated size, not the length: an emptied file keeps its length as a hole.
    let used = meta.blocks() * 512;
    if used <= limit_mib << 20 {
        return 0;
    }
    match std::fs::OpenOptions::new().write(true).open(path).and_then(|f| f.set_len(0)) {
        Ok(()) => used >> 20,
        Err(_) => 0,
    }
}

/// VmRSS of `pid` in KiB (0 once it is gone).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:"));
    line.and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The stub as a child process, its request total read from its `--stats` lines.
struct SoakStub {
    child: Child,
    url: String,
    requests: Arc<AtomicU64>,
}

impl SoakStub {
    fn start(bin: &Path, args: &SoakArgs) -> anyhow::Result<SoakStub> {
        let mut cmd = Command::new(bin);
        cmd.args(["stub", "max-throughput", "--port", "0", "--stats"])
            .args(["--num-workers", &args.stub_workers.max(1).to_string()])
            .args(["--output-length", &args.output_length.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().context("starting the stub")?;
        let mut stdout = BufReader::new(child.stdout.take().context("the stub's stdout")?);
        let stderr = BufReader::new(child.stderr.take().context("the stub's stderr")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let Some(url) = line.trim().strip_prefix("listening on ").map(String::from) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the stub printed {line:?} instead of its address");
        };
        let requests = Arc::new(AtomicU64::new(0));
        let counter = requests.clone();
        // Reading both pipes to their ends so the stub never blocks on a full one.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if let Some(total) = stats_total(&line) {
                    counter.store(total, Ordering::Relaxed);
                }
            }
        });
        Ok(SoakStub { child, url, requests })
    }
}

impl Drop for SoakStub {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

/// `T` of a `stats: R req/s | M MB/s | T total` line.
fn stats_total(line: &str) -> Option<u64> {
    line.strip_prefix("stats: ")?.rsplit('|').next()?.trim().strip_suffix(" total")?.parse().ok()
}

/// What the soak found: the text it prints, soak.json, and the checks that failed.
struct Verdict {
    text: String,
    json: serde_json::Value,
    failures: Vec<String>,
}

/// RSS at start, after warm-up, middle, end and max of one process, in KiB.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Levels {
    start: u64,
    warm: u64,
    middle: u64,
    end: u64,
    max: u64,
}

/// `warm` and `end` index `rows`; `max` is over every row, the report phase included.
fn levels(rows: &[Row], (warm, end): (usize, usize), pick: impl Fn(&Row) -> u64) -> Levels {
    let at = |i: usize| rows.get(i).map_or(0, &pick);
    Levels {
        start: at(0),
        warm: at(warm),
        middle: at(end / 2),
        end: at(end),
        max: rows.iter().map(&pick).max().unwrap_or(0),
    }
}

/// The sample after warm-up (the first tenth of the run, at least the second sample) and the
/// last one taken while every worker still ran (after it the coordinator writes the report).
fn window(rows: &[Row], duration: Duration, workers: usize) -> anyhow::Result<(usize, usize)> {
    let running = |r: &Row| r.workers_kib.iter().take(workers).all(|&k| k > 0);
    let end = rows.iter().rposition(running).unwrap_or(0);
    let warm = rows.iter().position(|r| r.t_s >= duration.as_secs_f64() / 10.0).unwrap_or(1);
    let warm = warm.max(1);
    if end < warm + 2 {
        bail!("only {} memory samples while the run ran: run longer or sample more often", end);
    }
    Ok((warm, end))
}

fn analyse(rows: &[Row], args: &SoakArgs, report: &Path) -> anyhow::Result<Verdict> {
    let span = window(rows, args.duration, args.workers)?;
    let mut failures = Vec::new();
    let mut text = format!(
        "RSS in KiB: start, after warm-up (t={:.0} s), middle, end of the run (t={:.0} s), max \
         (report phase included)\n",
        rows[span.0].t_s, rows[span.1].t_s
    );
    text.push_str("process      |     start |      warm |    middle |       end |       max\n");
    let mut procs = serde_json::Map::new();
    let mut flat = |name: String, l: Levels, check: bool, failures: &mut Vec<String>| {
        text.push_str(&format!(
            "{name:<12} | {:>9} | {:>9} | {:>9} | {:>9} | {:>9}\n",
            l.start, l.warm, l.middle, l.end, l.max
        ));
        let limit = l.warm as f64 * (1.0 + args.flat_tolerance);
        if check && l.end as f64 > limit {
            failures
                .push(format!("{name} grew from {} KiB after warm-up to {} KiB", l.warm, l.end));
        }
        procs.insert(name, serde_json::to_value(l).unwrap_or_default());
    };
    let coord = levels(rows, span, |r| r.coordinator_kib);
    flat("coordinator".into(), coord, false, &mut failures);
    for w in 0..args.workers {
        flat(format!("worker_{w}"), levels(rows, span, |r| r.workers_kib[w]), true, &mut failures);
    }
    flat("stub".into(), levels(rows, span, |r| r.stub_kib), true, &mut failures);
    let requests = rows[span.1].requests.saturating_sub(rows[span.0].requests).max(1);
    let per_sample = coord.end.saturating_sub(coord.warm) * 1024 / requests;
    text.push_str(&format!(
        "coordinator growth while running: {per_sample} bytes per request ({requests} requests \
         after warm-up; it keeps every sample's values)\n"
    ));
    if per_sample > args.coordinator_bytes_per_sample_max {
        failures.push(format!(
            "the coordinator grew {per_sample} bytes per request, more than {}",
            args.coordinator_bytes_per_sample_max
        ));
    }
    let counts = check_counts(report, &mut text, &mut failures)?;
    let issued = counts["issued"].as_u64().unwrap_or(0).max(1);
    text.push_str(&format!(
        "coordinator peak: {} bytes per issued sample\n",
        coord.max * 1024 / issued
    ));
    let json = serde_json::json!({
        "duration_s": args.duration.as_secs_f64(),
        "samples": rows.len(),
        "rss_kib": procs,
        "coordinator_bytes_per_request_running": per_sample,
        "coordinator_peak_bytes_per_sample": coord.max * 1024 / issued,
        "counts": counts,
        "failures": failures,
    });
    Ok(Verdict { text, json, failures })
}

/// issued = completed + abandoned from result_summary.json.
fn check_counts(
    report: &Path,
    text: &mut String,
    failures: &mut Vec<String>,
) -> anyhow::Result<serde_json::Value> {
    let path = report.join("performance/result_summary.json");
    let raw = std::fs::read_to_string(&path)
        .with_context(|| format!("the run wrote no {}", path.display()))?;
    let s: serde_json::Value =
        serde_json::from_str(&raw).with_context(|| format!("{} does not parse", path.display()))?;
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let (issued, completed, abandoned) =
        (n("n_samples_issued"), n("n_samples_completed"), n("n_samples_abandoned"));
    let (failed, qps) = (n("n_samples_failed"), s["qps"].as_f64().unwrap_or(0.0));
    text.push_str(&format!(
        "samples: {issued} issued = {completed} completed + {abandoned} abandoned \
         ({failed} failed), QPS {qps:.0}\n"
    ));
    if issued != completed + abandoned {
        failures.push(format!("issued {issued} != completed {completed} + abandoned {abandoned}"));
    }
    if failed > 0 {
        failures.push(format!("{failed} samples failed against a healthy stub"));
    }
    Ok(serde_json::json!({
        "issued": issued, "completed": completed, "abandoned": abandoned,
        "failed": failed, "qps": qps,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn the_stub_stats_line_gives_its_total() {
        assert_eq!(stats_total("stats: 1234 req/s | 5.67 MB/s | 98765 total"), Some(98765));
        assert_eq!(stats_total("listening on http://127.0.0.1:1"), None);
    }

    fn row(t_s: f64, requests: u64, coordinator_kib: u64, worker_kib: u64) -> Row {
        Row { t_s, requests, coordinator_kib, workers_kib: vec![worker_kib], stub_kib: 1000 }
    }

    #[test]
    fn levels_pick_start_warm_middle_end_and_max() {
        let rows: Vec<Row> = (0..5).map(|i| row(i as f64, 0, 0, [5, 9, 7, 8, 6][i])).collect();
        let l = levels(&rows, (1, 4), |r| r.workers_kib[0]);
        assert_eq!((l.start, l.warm, l.middle, l.end, l.max), (5, 9, 7, 6, 9));
    }

    #[test]
    fn the_window_ends_at_the_last_sample_with_every_worker_alive() {
        let kib = [5, 9, 7, 8, 6, 0, 0];
        let rows: Vec<Row> = (0..7).map(|i| row(i as f64 * 10.0, 0, 0, kib[i])).collect();
        assert_eq!(window(&rows, Duration::from_secs(60), 1).unwrap(), (1, 4));
        assert!(window(&rows[..3], Duration::from_secs(60), 1).is_err());
    }
}
