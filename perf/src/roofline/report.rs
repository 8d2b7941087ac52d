//! The roofline's output: the machine it ran on, the table and the JSON file.

use std::fmt::Write as _;
use std::process::Command;

use serde::Serialize;

use super::plan::thousands;
use crate::ceiling::CeilingResult;

/// The machine and revision a run belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct HostInfo {
    pub host: String,
    pub arch: String,
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    pub revision: Option<String>,
}

impl HostInfo {
    pub fn probe(cores: usize) -> HostInfo {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
            .map_or_else(|| "unknown".into(), |(_, m)| m.trim().to_string());
        let revision = Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        HostInfo {
            host: read("/proc/sys/kernel/hostname").unwrap_or_else(|_| "unknown".into()),
            arch: std::env::consts::ARCH.into(),
            cpu_model,
            cores,
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|_| "unknown".into()),
            revision,
        }
    }
}

/// The ceilings measured for a row.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ceilings {
    pub connections: usize,
    pub minimal: Option<CeilingResult>,
    pub wrk: Option<CeilingResult>,
    /// Why a ceiling client gave no figure.
    pub notes: Vec<String>,
    /// Seconds both ceiling clients took, connects and exits included.
    pub wall_s: f64,
}

impl Ceilings {
    /// The best ceiling and which client reached it.
    pub fn best(&self) -> Option<(&'static str, f64)> {
        let m = self.minimal.map(|c| ("minimal", c.qps));
        let w = self.wrk.map(|c| ("wrk", c.qps));
        [m, w].into_iter().flatten().max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// One table row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    /// `--rows` name.
    pub row: String,
    pub label: String,
    pub stream: bool,
    pub qps: f64,
    pub total: u64,
    pub elapsed_s: f64,
    pub failed: u64,
    pub ceiling: Ceilings,
    pub ceiling_qps: Option<f64>,
    pub ceiling_source: Option<&'static str>,
    pub ratio: Option<f64>,
    /// Poisson rows: the highest sustained target and every probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poisson: Option<serde_json::Value>,
    /// llm-loadgen's `--workers` for this row.
    pub client_workers: usize,
    /// Seconds the row took in the suite: its llm-loadgen runs plus the ceilings it measured.
    pub wall_s: f64,
    /// Seconds of its llm-loadgen runs (every probe of a Poisson row), start-up included.
    pub run_wall_s: f64,
    /// Seconds of ceiling runs this row measured (0 when it shares an earlier row's).
    pub ceiling_wall_s: f64,
    /// Why the row did not pass (a failed assertion), if it did not.
    pub error: Option<String>,
    /// Null-endpoint rows: each coordinator thread's CPU per sample in microseconds (from the
    /// run's `-v` lines), the stage that bounds the host first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coordinator_us_per_sample: Vec<(String, f64)>,
    /// `--roofline-tls` rows: this row's QPS over the same row's against the plain stub, run
    /// just before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_vs_plain: Option<f64>,
}

impl RowResult {
    /// Fills the ceiling columns from `ceiling`.
    pub fn with_ceiling(mut self, ceiling: Ceilings) -> RowResult {
        if let Some((source, qps)) = ceiling.best() {
            self.ceiling_qps = Some(qps);
            self.ceiling_source = Some(source);
            self.ratio = (qps > 0.0).then(|| self.qps / qps);
        }
        self.ceiling = ceiling;
        self
    }
}

/// The whole suite's output.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub host: HostInfo,
    pub command: Vec<String>,
    pub scale: f64,
    pub stub_cores: Vec<usize>,
    pub stub_workers: usize,
    pub client_cores: Vec<usize>,
    /// One entry per suite pass (several with a worker-count sweep).
    pub client_workers: Vec<usize>,
    pub stream_interval: usize,
    pub stream_include_usage: bool,
    pub rows: Vec<RowResult>,
    /// What the host does that bends the figures (printed under the table).
    pub notes: Vec<String>,
    /// Seconds the whole suite took.
    pub wall_s: f64,
}

/// The header and the table, as printed.
pub fn render(report: &Report) -> String {
    let h = &report.host;
    let mut out = String::new();
    let _ = writeln!(out, "E2E Performance Summary (llm-loadgen roofline)");
    let _ = writeln!(
        out,
        "Host: {}  Arch: {}  Cores: {}  Kernel: {}",
        h.host, h.arch, h.cores, h.kernel
    );
    let _ = writeln!(out, "CPU: {}", h.cpu_model);
    let _ = writeln!(
        out,
        "Revision: {}  Scale: {}  Stub: cores {:?} ({} workers)  Client: cores {:?} ({:?} workers)",
        h.revision.as_deref().unwrap_or("unknown"),
        report.scale,
        report.stub_cores,
        report.stub_workers,
        report.client_cores,
        report.client_workers
    );
    out.push_str(&render_table(&report.rows));
    for r in report.rows.iter().filter(|r| r.poisson.is_some()) {
        let _ = writeln!(out, "{}", poisson_line(r));
    }
    for r in report.rows.iter().filter(|r| !r.coordinator_us_per_sample.is_empty()) {
        let threads: Vec<String> = r
            .coordinator_us_per_sample
            .iter()
            .map(|(name, us)| format!("{name} {us:.3}"))
            .collect();
        let mode = if r.stream { "stream" } else { "off" };
        let _ = writeln!(out, "{} ({mode}): CPU us per sample: {}", r.row, threads.join(", "));
    }
    for note in &report.notes {
        let _ = writeln!(out, "Note: {note}");
    }
    let rows_s: f64 = report.rows.iter().map(|r| r.wall_s).sum();
    let ceilings_s: f64 = report.rows.iter().map(|r| r.ceiling_wall_s).sum();
    let _ = writeln!(
        out,
        "Wall: {:.1}s (rows {:.1}s, of which ceilings {:.1}s)",
        report.wall_s, rows_s, ceilings_s
    );
    out
}

/// How a Poisson row searched: `poisson (off): binary search over …; probes 24,000 no,
/// 12,000 yes, 18,000 yes`.
fn poisson_line(r: &RowResult) -> String {
    let p = r.poisson.as_ref().unwrap_or(&serde_json::Value::Null);
    let probes: Vec<String> = p["probes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|probe| {
            let target = probe["target_qps"].as_f64().unwrap_or(0.0);
            let ok = if probe["sustained"].as_bool() == Some(true) { "yes" } else { "no" };
            format!("{} {ok}", thousands(target))
        })
        .collect();
    format!(
        "poisson ({}): {}; probes {}",
        if r.stream { "on" } else { "off" },
        p["search"].as_str().unwrap_or("binary search"),
        probes.join(", ")
    )
}

/// `Test | Stream | QPS | Total | Elapsed | Failed | Ceiling | Ratio`, columns padded to fit.
pub fn render_table(rows: &[RowResult]) -> String {
    let header = ["Test", "Stream", "QPS", "Total", "Elapsed", "Failed", "Ceiling", "Ratio"];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.label.clone(),
                if r.stream { "on" } else { "off" }.into(),
                thousands(r.qps),
                thousands(r.total as f64),
                format!("{:.2}s", r.elapsed_s),
                r.failed.to_string(),
                match (r.ceiling_qps, r.ceiling_source) {
                    (Some(q), Some(s)) => format!("{} ({s})", thousands(q)),
                    _ => "-".into(),
                },
                r.ratio.map_or_else(|| "-".into(), |x| format!("{x:.2}")),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cols: &[String]| {
        let padded: Vec<String> = cols
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| if i < 2 { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect();
        padded.join(" | ").trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    out.push_str(&line(&widths.map(|w| "-".repeat(w))));
    for row in &cells {
        out.push_str(&line(row));
    }
    for r in rows.iter().filter(|r| r.error.is_some()) {
        let _ = writeln!(
            out,
            "FAILED {} ({}): {}",
            r.label,
            stream_word(r.stream),
            r.error.as_deref().unwrap_or("")
        );
    }
    out
}

fn stream_word(stream: bool) -> &'static str {
    if stream {
        "stream"
    } else {
        "non-stream"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, stream: bool, qps: f64, ceiling: Option<f64>) -> RowResult {
        let mut ceilings = Ceilings { connections: 1000, ..Ceilings::default() };
        ceilings.minimal =
            ceiling.map(|q| CeilingResult { responses: q as u64, elapsed_s: 1.0, qps: q });
        RowResult {
            row: "c1000".into(),
            label: label.into(),
            stream,
            qps,
            total: 617_330,
            elapsed_s: 11.99,
            failed: 0,
            ceiling: Ceilings::default(),
            ceiling_qps: None,
            ceiling_source: None,
            ratio: None,
            poisson: None,
            client_workers: 1,
            wall_s: 0.0,
            run_wall_s: 0.0,
            ceiling_wall_s: 0.0,
            error: None,
            coordinator_us_per_sample: Vec::new(),
            tls_vs_plain: None,
        }
        .with_ceiling(ceilings)
    }

    #[test]
    fn table_has_the_reference_columns_and_a_ratio() {
        let rows = [
            row("concurrency c=1,000", false, 51_433.0, Some(102_866.0)),
            row("max_throughput (2M burst)", true, 42_929.0, None),
        ];
        let t = render_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        let cols: Vec<&str> = lines[0].split(" | ").map(str::trim).collect();
        assert_eq!(
            cols,
            ["Test", "Stream", "QPS", "Total", "Elapsed", "Failed", "Ceiling", "Ratio"]
        );
        assert!(lines[2].starts_with("concurrency c=1,000       | off    |"), "{t}");
        assert!(lines[2].contains("| 51,433 |") && lines[2].contains("617,330"), "{t}");
        assert!(lines[2].ends_with("102,866 (minimal) |  0.50"), "{t}");
        assert!(lines[3].ends_with("|     -"), "{t}");
        // Every line has its separators at the same columns.
        let bars = |l: &str| l.match_indices(" | ").map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(bars(lines[0]), bars(lines[2]));
    }

    #[test]
    fn poisson_rows_say_how_they_searched() {
        let mut r = row("poisson max_sustained (target 18,000)", true, 17_990.0, Some(20.0));
        r.poisson = Some(serde_json::json!({
            "search": "binary search over scaled: 6 steps of 6,000",
            "probes": [
                {"target_qps": 24_000, "sustained": false},
                {"target_qps": 12_000, "sustained": true},
                {"target_qps": 18_000, "sustained": true},
            ],
        }));
        assert_eq!(
            poisson_line(&r),
            "poisson (on): binary search over scaled: 6 steps of 6,000; \
             probes 24,000 no, 12,000 yes, 18,000 yes"
        );
    }

    #[test]
    fn best_ceiling_is_the_faster_client() {
        let mut c = Ceilings::default();
        assert_eq!(c.best(), None);
        c.minimal = Some(CeilingResult { responses: 1, elapsed_s: 1.0, qps: 100.0 });
        c.wrk = Some(CeilingResult { responses: 1, elapsed_s: 1.0, qps: 150.0 });
        assert_eq!(c.best(), Some(("wrk", 150.0)));
    }

    #[test]
    fn a_failed_row_is_named_under_the_table() {
        let mut r = row("concurrency c=16,000", true, 10.0, Some(20.0));
        r.error = Some("c16000-stream: 3 samples failed".into());
        let t = render_table(&[r]);
        assert!(t.contains("FAILED concurrency c=16,000 (stream): c16000-stream: 3 samples failed"));
    }
}
