//! `loadgen-perf roofline`: the real `llm-loadgen` binary against `llm-loadgen stub
//! max-throughput`, the reference's rows streaming and not, each beside the raw ceiling of the
//! same cores.

mod loadgen;
pub mod plan;
mod report;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _};
use clap::Args;

use crate::ceiling::{self, CeilingSpec};
use crate::procs::{self, Stub};
use loadgen::{LoadgenRun, RunContext};
use plan::{Layout, RowKind, Scale};
use report::{Ceilings, HostInfo, Report, RowResult};

/// `roofline` flags.
#[derive(Debug, Clone, Args)]
pub struct RooflineArgs {
    /// The llm-loadgen binary [default: next to this executable].
    #[arg(long = "bin")]
    pub bin: Option<PathBuf>,
    /// Stub worker threads [default: 1 on two cores, else a quarter of the cores].
    #[arg(long = "roofline-server-workers")]
    pub server_workers: Option<usize>,
    /// llm-loadgen workers [default: the client's cores less one for its coordinator]; a
    /// comma-separated list (1,2,4,8,12) runs the whole suite once per count.
    #[arg(long = "roofline-client-workers", value_delimiter = ',')]
    pub client_workers: Vec<usize>,
    /// Characters per SSE event (160-character outputs: 16 events).
    #[arg(long = "roofline-stream-interval", default_value_t = 10)]
    pub stream_interval: usize,
    /// The client sends no `stream_options`, so the stub sends no usage frame.
    #[arg(long = "roofline-no-stream-include-usage")]
    pub no_stream_include_usage: bool,
    /// Rows to run: burst, c1000, c4000, c16000, poisson (comma-separated) or all.
    #[arg(long, default_value = "all")]
    pub rows: String,
    /// Multiplies sample counts and durations (0.05: about a minute on two cores).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Highest Poisson target searched (steps of --poisson-step-qps).
    #[arg(long, default_value_t = 250_000)]
    pub poisson_max_qps: u64,
    #[arg(long, default_value_t = 10_000)]
    pub poisson_step_qps: u64,
    /// Skip the ceiling clients (minimal client and wrk).
    #[arg(long)]
    pub no_ceiling: bool,
    /// After each burst and concurrency row, the same row against a second stub serving TLS
    /// (`stub --tls`, the client verifying with `--ca-bundle`): a `<row> tls` row with its
    /// QPS as a ratio of the plain row's, measured side by side (no ceiling: the ceiling
    /// clients speak plain HTTP).
    #[arg(long = "roofline-tls")]
    pub tls: bool,
    /// Output folder: table.txt, roofline.json, per-run logs and summaries
    /// [default: $TMPDIR/loadgen-roofline].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Keep each run's report folder (large at full size).
    #[arg(long)]
    pub keep_reports: bool,
    /// Seconds one llm-loadgen run may take before it is killed and its row fails.
    #[arg(long, default_value_t = 600)]
    pub run_timeout_s: u64,
}

/// Runs the suite, prints the table and writes the files; fails when a row failed.
pub fn run(args: &RooflineArgs) -> anyhow::Result<()> {
    if !(args.scale > 0.0 && args.scale.is_finite()) {
        bail!("--scale must be a positive number, not {}", args.scale);
    }
    let suite_start = Instant::now();
    let rows = plan::parse_rows(&args.rows)?;
    let out = out_dir(args);
    let bin = resolve_bin(args.bin.as_deref())?;
    procs::raise_fd_limit();
    let cores: Vec<usize> =
        core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect();
    let counts: Vec<Option<usize>> = if args.client_workers.is_empty() {
        vec![None]
    } else {
        args.client_workers.iter().map(|&n| Some(n)).collect()
    };
    // The stub's cores do not depend on the client's worker count.
    let layout = Layout::new(&cores, args.server_workers, counts[0]);
    let reports_dir = out.join("runs");
    std::fs::create_dir_all(&reports_dir)
        .with_context(|| format!("creating {}", reports_dir.display()))?;
    // One stub worker per entry, its cores cycled when it has more workers than cores.
    let stub_cores: Vec<usize> =
        layout.stub_cores.iter().copied().cycle().take(layout.stub_workers).collect();
    let notes: Vec<String> = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| plan::port_range_note(&range, plan::CONNECTIONS_MAX))
        .into_iter()
        .collect();
    for note in &notes {
        eprintln!("note: {note}");
    }
    let stub = Stub::start(&bin, &stub_cores, args.stream_interval)?;
    let tls_ca = out.join("tls-stub-ca.pem");
    let tls_stub = match args.tls {
        true => Some(Stub::start_with(&bin, &stub_cores, args.stream_interval, Some(&tls_ca))?),
        false => None,
    };
    let tls = tls_stub.as_ref().map(|s| TlsPass { stub: s, ca: tls_ca.clone() });
    let mut results = Vec::new();
    for &count in &counts {
        let layout = Layout::new(&cores, args.server_workers, count);
        let sweep = (counts.len() > 1).then_some(layout.client_workers);
        let stubs = Stubs { plain: &stub, tls: tls.as_ref() };
        results.extend(run_layout(args, &bin, stubs, &layout, &reports_dir, &rows, sweep)?);
    }
    stub.stop()?;
    if let Some(s) = tls_stub {
        s.stop()?;
    }
    let report = Report {
        host: HostInfo::probe(cores.len()),
        command: std::env::args().collect(),
        scale: args.scale,
        stub_cores: layout.stub_cores.clone(),
        stub_workers: layout.stub_workers,
        client_cores: layout.client_cores.clone(),
        client_workers: counts
            .iter()
            .map(|c| Layout::new(&cores, args.server_workers, *c).client_workers)
            .collect(),
        stream_interval: args.stream_interval,
        stream_include_usage: !args.no_stream_include_usage,
        rows: results,
        notes,
        wall_s: suite_start.elapsed().as_secs_f64(),
    };
    let text = report::render(&report);
    print!("{text}");
    std::fs::write(out.join("table.txt"), &text)?;
    std::fs::write(out.join("roofline.json"), serde_json::to_vec_pretty(&report)?)?;
    let failed = report.rows.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        bail!("{failed} roofline rows failed (see {})", out.join("runs").display());
    }
    Ok(())
}

/// The TLS pass's stub and the CA file its client verifies with.
struct TlsPass<'a> {
    stub: &'a Stub,
    ca: PathBuf,
}

#[derive(Clone, Copy)]
struct Stubs<'a> {
    plain: &'a Stub,
    tls: Option<&'a TlsPass<'a>>,
}

/// Every row, non-streaming then streaming, with one client layout; `sweep` labels the rows
/// with their worker count when the suite runs several. With a TLS pass, each burst and
/// concurrency row is followed by the same row over TLS.
fn run_layout(
    args: &RooflineArgs,
    bin: &Path,
    stubs: Stubs<'_>,
    layout: &Layout,
    reports_dir: &Path,
    rows: &[RowKind],
    sweep: Option<usize>,
) -> anyhow::Result<Vec<RowResult>> {
    let stub = stubs.plain;
    eprintln!(
        "stub: {} on cores {:?}; client: cores {:?}, {} workers",
        stub.url, layout.stub_cores, layout.client_cores, layout.client_workers
    );
    let reports_dir = match sweep {
        Some(n) => reports_dir.join(format!("w{n}")),
        None => reports_dir.to_path_buf(),
    };
    std::fs::create_dir_all(&reports_dir)?;
    let ctx = RunContext {
        bin: bin.to_path_buf(),
        url: stub.url.clone(),
        client_cores: layout.client_cores.clone(),
        client_workers: layout.client_workers,
        no_stream_include_usage: args.no_stream_include_usage,
        reports_dir,
        keep_reports: args.keep_reports,
        run_timeout: std::time::Duration::from_secs(args.run_timeout_s),
        extra_args: Vec::new(),
    };
    let mut suite = Suite::new(args, &ctx, layout, stub);
    let tls_args = RooflineArgs { no_ceiling: true, ..args.clone() };
    let tls_ctx = stubs.tls.map(|t| RunContext {
        url: t.stub.url.clone(),
        extra_args: vec!["--ca-bundle".into(), t.ca.display().to_string()],
        reports_dir: ctx.reports_dir.join("tls"),
        ..ctx.clone()
    });
    if let Some(c) = &tls_ctx {
        std::fs::create_dir_all(&c.reports_dir)?;
    }
    let mut tls_suite =
        tls_ctx.as_ref().zip(stubs.tls).map(|(c, t)| Suite::new(&tls_args, c, layout, t.stub));
    let mut results = Vec::new();
    for stream in [false, true] {
        for &row in rows {
            let plain = timed_row(&mut suite, row, stream, layout, sweep)?;
            print_row(&plain);
            let plain_qps = plain.qps;
            results.push(plain);
            let tls_row = matches!(row, RowKind::Burst | RowKind::Concurrency(_));
            if let (Some(tls), true) = (tls_suite.as_mut(), tls_row) {
                let mut over_tls = timed_row(tls, row, stream, layout, sweep)?;
                let ratio = (plain_qps > 0.0).then(|| over_tls.qps / plain_qps);
                over_tls.row = format!("{}-tls", over_tls.row);
                over_tls.label = format!(
                    "{} tls ({}× plain)",
                    over_tls.label,
                    ratio.map_or("-".into(), |r| format!("{r:.2}"))
                );
                over_tls.tls_vs_plain = ratio;
                print_row(&over_tls);
                results.push(over_tls);
            }
        }
    }
    Ok(results)
}

/// One row, timed and labelled with the layout's worker count.
fn timed_row(
    suite: &mut Suite<'_>,
    row: RowKind,
    stream: bool,
    layout: &Layout,
    sweep: Option<usize>,
) -> anyhow::Result<RowResult> {
    let start = Instant::now();
    let mut result = suite.row(row, stream)?;
    result.wall_s = start.elapsed().as_secs_f64();
    result.client_workers = layout.client_workers;
    if let Some(n) = sweep {
        result.label = format!("{} w={n}", result.label);
    }
    Ok(result)
}

fn print_row(result: &RowResult) {
    let line = report::render_table(std::slice::from_ref(result));
    eprintln!("{}", line.lines().nth(2).unwrap_or(""));
}

/// The `llm-loadgen` binary: `--bin`, else the one beside this executable.
pub(crate) fn resolve_bin(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match flag {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("llm-loadgen"),
    };
    if !path.is_file() {
        bail!(
            "llm-loadgen not found at {} (build it first: `cargo build --release`, or pass --bin PATH)",
            path.display()
        );
    }
    Ok(path)
}

struct Suite<'a> {
    args: &'a RooflineArgs,
    ctx: &'a RunContext,
    layout: &'a Layout,
    stub: &'a Stub,
    /// Ceilings by (connections, stream): burst and Poisson rows share theirs.
    ceilings: HashMap<(usize, bool), Ceilings>,
    /// The best QPS of this pass's clean burst and concurrency rows, by stream mode: the
    /// scaled-down Poisson search starts from it.
    client_qps: HashMap<bool, f64>,
}

impl<'a> Suite<'a> {
    fn new(
        args: &'a RooflineArgs,
        ctx: &'a RunContext,
        layout: &'a Layout,
        stub: &'a Stub,
    ) -> Self {
        Suite { args, ctx, layout, stub, ceilings: HashMap::new(), client_qps: HashMap::new() }
    }

    fn scale(&self) -> Scale {
        Scale(self.args.scale)
    }

    fn row(&mut self, kind: RowKind, stream: bool) -> anyhow::Result<RowResult> {
        let scale = self.scale();
        let name = format!("{}-{}", kind.name(), if stream { "stream" } else { "nostream" });
        let (run, poisson) = match kind {
            RowKind::Burst => {
                let n = scale.burst_samples().to_string();
                (
                    loadgen::run(
                        self.ctx,
                        &name,
                        stream,
                        &strings(&["offline", "--num-samples", &n]),
                    ),
                    None,
                )
            }
            RowKind::Concurrency(c) => {
                (loadgen::run(self.ctx, &name, stream, &concurrency_args(&scale, c)), None)
            }
            RowKind::Poisson => {
                let (run, detail) = self.poisson(&name, stream)?;
                (run, Some(detail))
            }
            RowKind::Null { events } => return Ok(self.null_row(kind, &name, stream, events)),
        };
        let mut result = match run {
            Ok(run) => row_from_run(kind, stream, &scale, &run),
            Err(e) => error_row(kind, stream, &scale, e.to_string()),
        };
        if kind != RowKind::Poisson && result.error.is_none() {
            let best = self.client_qps.entry(stream).or_insert(0.0);
            *best = best.max(result.qps);
        }
        if let Some(target) = poisson.as_ref().and_then(|p| p["max_sustained_target_qps"].as_u64())
        {
            result.label = format!("{} (target {})", result.label, plan::thousands(target as f64));
        }
        if let Some(w) = poisson.as_ref().and_then(|p| p["wall_s"].as_f64()) {
            result.run_wall_s = w;
        }
        result.poisson = poisson;
        let conns = match kind {
            RowKind::Concurrency(c) => c,
            _ => 32 * self.layout.client_workers,
        };
        let measured = !self.args.no_ceiling && !self.ceilings.contains_key(&(conns, stream));
        let ceiling = self.ceiling(conns, stream);
        if measured {
            result.ceiling_wall_s = ceiling.wall_s;
        }
        Ok(result.with_ceiling(ceiling))
    }

    /// A burst against `null://` with `-v`: no stub, no ceiling; the row carries each
    /// coordinator thread's CPU per sample.
    fn null_row(&self, kind: RowKind, name: &str, stream: bool, events: bool) -> RowResult {
        let scale = self.scale();
        let ctx = RunContext { url: "null://".into(), ..self.ctx.clone() };
        let n = scale.burst_samples().to_string();
        let mut args = strings(&["offline", "--num-samples", &n, "-v"]);
        if !events {
            args.push("--no-events".into());
        }
        match loadgen::run(&ctx, name, stream, &args) {
            Ok(run) => {
                let mut result = row_from_run(kind, stream, &scale, &run);
                let log = std::fs::read_to_string(ctx.reports_dir.join(format!("{name}.log")));
                result.coordinator_us_per_sample = thread_costs(&log.unwrap_or_default());
                result
            }
            Err(e) => error_row(kind, stream, &scale, e.to_string()),
        }
    }

    /// Binary search over the Poisson grid; the row shows the highest sustained target's run.
    fn poisson(
        &mut self,
        name: &str,
        stream: bool,
    ) -> anyhow::Result<(anyhow::Result<LoadgenRun>, serde_json::Value)> {
        let scale = self.scale();
        let ceiling = self.ceiling(32 * self.layout.client_workers, stream).best().map(|b| b.1);
        let plan = plan::poisson_plan(
            &scale,
            self.args.poisson_step_qps,
            self.args.poisson_max_qps,
            ceiling,
            self.client_qps.get(&stream).copied(),
        );
        eprintln!("  poisson: {} (at most {} probes)", plan.how, plan.probes_max);
        let grid = &plan.targets;
        let mut probes = Vec::new();
        let mut runs: HashMap<u64, LoadgenRun> = HashMap::new();
        let best = plan::search_max(grid, |target| {
            let run = loadgen::run(
                self.ctx,
                &format!("{name}-{target}"),
                stream,
                &poisson_args(&scale, target),
            )?;
            let sustained = sustained(&run, target);
            eprintln!("  poisson target {target}: qps {:.0}, sustained {sustained}", run.qps());
            probes.push(serde_json::json!({
                "target_qps": target, "qps": run.qps(), "sustained": sustained,
                "exit_code": run.exit_code, "failed": run.summary.n_samples_failed,
                "issue_lag": run.summary.issue_lag, "wall_s": run.wall_s,
            }));
            runs.insert(target, run);
            anyhow::Ok(sustained)
        })?;
        let best_target = best.map(|i| grid[i]);
        let wall_s: f64 = probes.iter().filter_map(|p| p["wall_s"].as_f64()).sum();
        let detail = serde_json::json!({
            "max_sustained_target_qps": best_target, "search": plan.how, "targets": grid,
            "probes": probes, "wall_s": wall_s,
        });
        let run = match best_target.and_then(|t| runs.remove(&t)) {
            Some(run) => Ok(run),
            None => Err(anyhow::anyhow!("{name}: no Poisson target was sustained")),
        };
        Ok((run, detail))
    }

    fn ceiling(&mut self, connections: usize, stream: bool) -> Ceilings {
        if self.args.no_ceiling {
            return Ceilings { connections, ..Ceilings::default() };
        }
        if let Some(c) = self.ceilings.get(&(connections, stream)) {
            return c.clone();
        }
        let start = Instant::now();
        let both = measure_ceilings(self.args, self.layout, self.stub, connections);
        let wall_s = start.elapsed().as_secs_f64();
        for (mode, mut c) in [false, true].into_iter().zip(both) {
            c.wall_s = wall_s;
            self.ceilings.insert((connections, mode), c);
        }
        self.ceilings[&(connections, stream)].clone()
    }
}

/// Both stream modes' ceilings with `connections`: one minimal-client session (connected once,
/// a timed phase per mode: at 16,000 connections the connects cost more than the phases), and
/// wrk per mode where [`plan::wrk_runs`] allows.
fn measure_ceilings(
    args: &RooflineArgs,
    layout: &Layout,
    stub: &Stub,
    connections: usize,
) -> [Ceilings; 2] {
    let bodies = [false, true].map(|stream| request_body(stream, !args.no_stream_include_usage));
    let scale = Scale(args.scale);
    let spec = CeilingSpec {
        addr: stub.addr,
        cores: layout.ceiling_cores(),
        threads: layout.client_workers,
        connections,
        requests: bodies.iter().map(|b| request_bytes(b)).collect(),
        duration: scale.ceiling_duration(),
    };
    let mut out = [false, true].map(|_| Ceilings { connections, ..Ceilings::default() });
    match ceiling::run_minimal(&spec) {
        Ok(phases) => {
            for (c, r) in out.iter_mut().zip(phases) {
                c.minimal = Some(r);
            }
        }
        Err(e) => out.iter_mut().for_each(|c| c.notes.push(format!("minimal client: {e}"))),
    }
    for (stream, (c, body)) in out.iter_mut().zip(&bodies).enumerate() {
        let stream = stream == 1;
        if !plan::wrk_runs(&scale, connections) {
            c.notes.push(format!(
                "wrk: skipped at --scale {} with {connections} connections (its connects fall \
                 inside its {} s, so it reads 0)",
                args.scale,
                spec.duration.as_secs()
            ));
            continue;
        }
        let script =
            out_dir(args).join(format!("wrk-{}.lua", if stream { "stream" } else { "nostream" }));
        let wrk = std::fs::write(&script, ceiling::wrk_script(CHAT_PATH, body))
            .map_err(anyhow::Error::from)
            .and_then(|()| ceiling::run_wrk(&spec, &format!("{}{CHAT_PATH}", stub.url), &script));
        match wrk {
            Ok(r) => c.wrk = r,
            Err(e) => c.notes.push(format!("wrk: {e}")),
        }
    }
    for (c, stream) in out.iter().zip([false, true]) {
        for note in &c.notes {
            eprintln!("ceiling c={connections} stream={stream}: {note}");
        }
    }
    out
}

/// Where the wrk scripts go: beside the run's reports.
fn out_dir(args: &RooflineArgs) -> PathBuf {
    args.out.clone().unwrap_or_else(|| std::env::temp_dir().join("loadgen-roofline"))
}

const CHAT_PATH: &str = "/v1/chat/completions";

/// The body the ceiling clients send: what llm-loadgen sends for one short prompt.
fn request_body(stream: bool, include_usage: bool) -> String {
    let options =
        if stream && include_usage { ",\"stream_options\":{\"include_usage\":true}" } else { "" };
    format!(
        "{{\"model\":\"max-tp\",\"messages\":[{{\"role\":\"user\",\"content\":\"Hello there\"}}],\
         \"stream\":{stream}{options}}}"
    )
}

fn request_bytes(body: &str) -> Vec<u8> {
    format!(
        "POST {CHAT_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn concurrency_args(scale: &Scale, concurrency: usize) -> Vec<String> {
    let c = concurrency.to_string();
    let (d, m, n) = (
        format!("{}ms", scale.duration_ms()),
        scale.max_duration_ms().to_string(),
        scale.concurrency_samples().to_string(),
    );
    strings(&[
        "online",
        "--load-pattern",
        "concurrency",
        "--concurrency",
        &c,
        "--duration",
        &d,
        "--runtime.max-duration-ms",
        &m,
        "--num-samples",
        &n,
    ])
}

fn poisson_args(scale: &Scale, target_qps: u64) -> Vec<String> {
    let (t, d, m, n) = (
        target_qps.to_string(),
        format!("{}ms", scale.poisson_duration_ms()),
        scale.poisson_max_duration_ms().to_string(),
        scale.poisson_samples(target_qps).to_string(),
    );
    strings(&[
        "online",
        "--load-pattern",
        "poisson",
        "--target-qps",
        &t,
        "--duration",
        &d,
        "--runtime.max-duration-ms",
        &m,
        "--num-samples",
        &n,
    ])
}

/// A Poisson target is sustained when the run was clean and both the reported QPS and the
/// issuing rate reached 95% of it.
fn sustained(run: &LoadgenRun, target_qps: u64) -> bool {
    let floor = plan::SUSTAINED_FRACTION * target_qps as f64;
    let issued_ok = run.summary.issue_lag.is_none_or(|l| l.achieved_qps >= floor);
    run.check().is_ok() && run.qps() >= floor && issued_ok
}

/// The `-v` lines `  <thread>  <s> s CPU, <us> us per sample` of a run's log.
fn thread_costs(log: &str) -> Vec<(String, f64)> {
    log.lines()
        .filter_map(|line| {
            let (head, per) = line.split_once(" s CPU, ")?;
            let us: f64 = per.strip_suffix(" us per sample")?.trim().parse().ok()?;
            let name = head.split_whitespace().next()?;
            Some((name.to_string(), us))
        })
        .collect()
}

fn row_from_run(kind: RowKind, stream: bool, scale: &Scale, run: &LoadgenRun) -> RowResult {
    let mut r = error_row(kind, stream, scale, String::new());
    r.qps = run.qps();
    r.total = run.summary.n_samples_completed;
    r.elapsed_s = run.summary.duration_ns as f64 / 1e9;
    r.failed = run.summary.n_samples_failed;
    r.run_wall_s = run.wall_s;
    r.error = run.check().err().map(|e| e.to_string());
    r
}

fn error_row(kind: RowKind, stream: bool, scale: &Scale, error: String) -> RowResult {
    RowResult {
        row: kind.name(),
        label: kind.label(scale),
        stream,
        qps: 0.0,
        total: 0,
        elapsed_s: 0.0,
        failed: 0,
        ceiling: Ceilings::default(),
        ceiling_qps: None,
        ceiling_source: None,
        ratio: None,
        poisson: None,
        client_workers: 0,
        wall_s: 0.0,
        run_wall_s: 0.0,
        ceiling_wall_s: 0.0,
        error: (!error.is_empty()).then_some(error),
        coordinator_us_per_sample: Vec::new(),
        tls_vs_plain: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_rows_read_each_threads_cost_from_the_verbose_lines() {
        let log = "Run complete.\ncoordinator threads, CPU over the run (10 samples):\n  \
                   events-0           1.197 s CPU, 0.599 us per sample\n  \
                   aggregator         0.494 s CPU, 0.247 us per sample\nQPS: 1\n";
        assert_eq!(
            thread_costs(log),
            [("events-0".to_string(), 0.599), ("aggregator".to_string(), 0.247)]
        );
    }

    #[test]
    fn rows_pass_the_reference_flags() {
        let args = concurrency_args(&Scale(0.05), 1000);
        assert_eq!(
            args.join(" "),
            "online --load-pattern concurrency --concurrency 1000 \
            --duration 500ms --runtime.max-duration-ms 600 --num-samples 500000"
        );
        let args = poisson_args(&Scale(1.0), 20_000);
        assert!(args.join(" ").ends_with(
            "--duration 10000ms --runtime.max-duration-ms 12000 \
            --num-samples 300000"
        ));
    }

    #[test]
    fn ceiling_request_matches_the_client_options() {
        let with = request_body(true, true);
        assert!(with.contains("\"stream\":true,\"stream_options\":{\"include_usage\":true}"));
        assert!(!request_body(true, false).contains("stream_options"));
        assert!(!request_body(false, true).contains("stream_options"));
        let bytes = request_bytes(&with);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains(&format!("Content-Length: {}\r\n\r\n{with}", with.len())));
        serde_json::from_str::<serde_json::Value>(&with).unwrap();
    }

    #[test]
    fn missing_binary_says_how_to_build_it() {
        let err = resolve_bin(Some(Path::new("/nonexistent/llm-loadgen"))).unwrap_err();
        assert!(err.to_string().contains("cargo build --release"), "{err}");
    }
}
