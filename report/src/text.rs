//! `report.txt` in the reference's layout, plus the token-basis additions, and the
//! short summary printed on stdout at the end of a run.

use std::fmt::Write as _;
use std::path::Path;

use loadgen_coordinator::metrics::stats::PERCENTILE_KEYS;
use loadgen_coordinator::metrics::{Num, TokenCountSource};
use loadgen_py::float_repr::repr as python_float_repr;

use super::summary::{BasisBlocks, ResultSummary, SeriesSummary};
use super::RunInfo;

const BAR_LENGTH_MAX: f64 = 30.0;
const NS_TO_MS: f64 = 1e-6;

fn py_opt_f64(v: Option<f64>) -> String {
    v.map_or_else(|| "None".into(), python_float_repr)
}

fn py_opt_u64(v: Option<u64>) -> String {
    v.map_or_else(|| "None".into(), |v| v.to_string())
}

fn py_bool(v: bool) -> &'static str {
    if v {
        "True"
    } else {
        "False"
    }
}

fn run_config_lines(out: &mut String, s: &ResultSummary) {
    let lp = &s.load_pattern;
    let mut pattern = format!(
        "type={}, target_qps={}, target_concurrency={}",
        lp.kind,
        py_opt_f64(lp.target_qps),
        py_opt_u64(lp.target_concurrency)
    );
    if let Some(legacy) = lp.use_legacy_loadgen_qps_metrics {
        let _ = write!(pattern, ", use_legacy_loadgen_qps_metrics={}", py_bool(legacy));
    }
    let w = &s.warmup;
    let _ = writeln!(out, "Run config:");
    let _ = writeln!(out, "  load_pattern: {pattern}");
    let _ = writeln!(
        out,
        "  warmup: enabled={}, n_requests={}, salt={}, drain={}, warmup_random_seed={}",
        py_bool(w.enabled),
        py_opt_u64(w.n_requests),
        py_bool(w.salt),
        py_bool(w.drain),
        w.warmup_random_seed
    );
    let _ = writeln!(out, "  scheduler_random_seed: {}", s.scheduler_random_seed);
    let _ = writeln!(out, "  dataloader_random_seed: {}", s.dataloader_random_seed);
}

fn summary_lines(out: &mut String, s: &ResultSummary, info: &RunInfo) {
    let _ = writeln!(out, "----------------- Summary -----------------");
    if s.state == "interrupted" {
        let _ = writeln!(
            out,
            "WARNING: run was interrupted (SIGTERM/SIGINT) — metrics below are best-effort \
             partial data."
        );
    } else if !s.complete {
        let why = match &s.incomplete_reason {
            Some(reason) => reason.as_str(),
            None => "drain timed out or no final snapshot received",
        };
        let _ = writeln!(
            out,
            "WARNING: report is incomplete ({why}) — some async metrics may be missing."
        );
    }
    let _ = writeln!(out, "Version: {}", s.version);
    if let Some(sha) = s.git_sha.as_deref().filter(|sha| !sha.is_empty()) {
        let _ = writeln!(out, "Git SHA: {sha}");
    }
    if info.embedded_stub {
        let _ =
            writeln!(out, "Endpoint: built-in max-throughput stub on loopback (no --endpoints)");
    }
    run_config_lines(out, s);
    let _ = writeln!(out, "Total samples issued: {}", s.n_samples_issued);
    let _ = writeln!(out, "Total samples completed: {}", s.n_samples_completed);
    let _ = writeln!(out, "Total samples failed: {}", s.n_samples_failed);
    if s.n_samples_abandoned > 0 {
        let _ = writeln!(
            out,
            "Total samples abandoned in flight: {} (the run hit --runtime.max-duration-ms or was \
             interrupted)",
            s.n_samples_abandoned
        );
    }
    if let Some(mixed) = &info.mixed_clocks {
        let _ = writeln!(out, "NOTE: {}.", mixed.sentence());
    }
    rate_lines(out, s);
    if let Some(lag) = &s.issue_lag {
        let _ = writeln!(
            out,
            "Issue lag (written - scheduled): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} \
             samples",
            lag.p50_ns as f64 / 1e6,
            lag.p99_ns as f64 / 1e6,
            lag.max_ns as f64 / 1e6,
            lag.n
        );
        let _ = writeln!(
            out,
            "Issue rate: {:.2} of {:.2} QPS targeted",
            lag.achieved_qps, lag.target_qps
        );
        // A material client wait is issue lag too; its warning below names the cause.
        let w = &s.client_wait;
        let wait_p99_ns = w.wait.as_ref().map(|wait| wait.percentiles[1]);
        let explained = w.warning.is_some() && super::lag_is_the_wait(lag.p99_ns, wait_p99_ns);
        let warning = lag.warning().filter(|_| !explained);
        if let Some(warning) = warning {
            let _ = writeln!(out, "WARNING: {warning}");
        }
    }
    client_wait_lines(out, s);
}

/// The client wait (issue stamp → request written) and its warning when material.
fn client_wait_lines(out: &mut String, s: &ResultSummary) {
    let w = &s.client_wait;
    let Some(wait) = &w.wait else { return };
    // Grid index 1 is p99.0, index 7 is p50.0.
    let _ = writeln!(
        out,
        "Client wait (written - issued): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} samples",
        wait.percentiles[7] / 1e6,
        wait.percentiles[1] / 1e6,
        wait.max.as_f64() / 1e6,
        wait.count
    );
    if let Some(warning) = &w.warning {
        let _ = writeln!(out, "WARNING: {warning}");
    }
}

/// When and how the client basis was counted, for report.txt.
fn counting_note(counting: super::ClientTokenCounting) -> String {
    match counting {
        super::ClientTokenCounting::Live { threads } => {
            format!(
                "counted live by {threads} tokenizer thread(s) (any backlog after the last sample)"
            )
        }
        super::ClientTokenCounting::AfterRun => "counted after the last sample (no cores to spare \
            for live counting; --metrics-tokenizer-workers N counts live beside the load)"
            .to_string(),
        super::ClientTokenCounting::Rebuilt => "counted by `llm-loadgen report` from events.jsonl \
            (the run's own files do not say how the run counted them)"
            .to_string(),
    }
}

fn fixed2(v: Option<f64>) -> String {
    v.map_or_else(|| "N/A".into(), |v| format!("{v:.2}"))
}

/// The headline basis (`Token count source`, with why it has no counts when it has none),
/// then the other basis's block: its TPS, the paired-OSL line and why a server block is
/// partial. Each row sits under the heading it describes (when the client basis was counted,
/// under the client basis's).
fn other_basis_lines(out: &mut String, s: &ResultSummary) {
    let other = s.other.basis;
    let _ = writeln!(out, "Token count source: {}", s.primary.basis);
    if let Some(gap) = headline_gap(s) {
        let _ = writeln!(
            out,
            "  The {} basis has no token counts ({}), so its TPS and token sections are N/A; \
             the {other} basis below has them.",
            s.primary.basis, gap.why
        );
    }
    // When the client basis was counted, under whichever heading is the client basis's.
    let counting = s.client_token_counting.map(counting_note);
    let counting = counting.map(|note| format!("  Client token counts: {note}"));
    if let (TokenCountSource::Client, Some(line)) = (s.primary.basis, &counting) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "Other token basis ({other}):");
    let _ = writeln!(out, "  TPS ({other}): {}", fixed2(s.other.tps));
    if let (TokenCountSource::Client, Some(line)) = (other, &counting) {
        let _ = writeln!(out, "{line}");
    }
    match s.osl_paired.as_ref().and_then(|p| Some((p.mean?, p.ratio, p.count))) {
        Some((mean, ratio, count)) => {
            let ratio = ratio.map_or_else(|| "N/A".into(), |r| format!("{r:.4}"));
            let _ = writeln!(
                out,
                "  OSL paired (client - server): mean {mean:.2} tokens/sample, ratio {ratio} \
                 over {count} samples"
            );
        }
        None => {
            let _ =
                writeln!(out, "  OSL paired (client - server): N/A (no sample has both counts)");
        }
    }
    if let Some(sentence) = usage_sentence(s) {
        let _ = writeln!(out, "  {sentence}");
    }
}

/// Why the server basis is partial or empty, in one sentence.
fn usage_sentence(s: &ResultSummary) -> Option<String> {
    let u = s.usage;
    let successful = u.usable + u.missing_total();
    if successful == 0 {
        return None;
    }
    if u.usable == 0 {
        return Some(format!(
            "Server counts are missing: none of the {successful} successful samples carried \
             usable usage, so the server blocks are null."
        ));
    }
    if u.missing > 0 {
        return Some(format!(
            "Server counts are partial: {} of {successful} successful samples carried no usable \
             usage ({} of them with empty output), so TPS (server) is N/A.",
            u.missing_total(),
            u.missing_empty_output
        ));
    }
    (u.missing_empty_output > 0).then(|| {
        format!(
            "{} samples with empty output carried no usage; they have no client OSL either.",
            u.missing_empty_output
        )
    })
}

fn scaled(v: f64, scale: f64) -> String {
    format!("{:.2}", v * scale)
}

fn num_scaled(v: Num, scale: f64) -> String {
    scaled(v.as_f64(), scale)
}

fn histogram_lines(out: &mut String, stat: &SeriesSummary, scale: f64) {
    let last = stat.histogram.len().saturating_sub(1);
    let labels: Vec<String> = stat
        .histogram
        .iter()
        .enumerate()
        .map(|(i, ([lo, hi], _))| {
            let close = if i == last { ']' } else { ')' };
            format!("  [{}, {}{close}", scaled(*lo, scale), scaled(*hi, scale))
        })
        .collect();
    let max_count = stat.histogram.iter().map(|(_, c)| *c).max().unwrap_or(0);
    let normalize = if max_count > 0 { BAR_LENGTH_MAX / max_count as f64 } else { 1.0 };
    let width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    for (label, (_, count)) in labels.iter().zip(&stat.histogram) {
        let bar = "#".repeat((*count as f64 * normalize) as usize);
        let _ = writeln!(out, "  {label:>width$} |{bar} {count}");
    }
}

/// One metric section, exactly as the reference's `_display_metric` plus its estimates.
fn metric_section(out: &mut String, title: &str, stat: &SeriesSummary, unit: &str, scale: f64) {
    let _ = writeln!(out, "{title}:");
    if stat.count == 0 {
        return empty_metric_section(out, stat, unit);
    }
    let _ = writeln!(out, "  Min: {} {unit}", num_scaled(stat.min, scale));
    let _ = writeln!(out, "  Max: {} {unit}", num_scaled(stat.max, scale));
    let _ = writeln!(out, "  Median: {} {unit}", scaled(stat.median, scale));
    let _ = writeln!(out, "  Avg.: {} {unit}", scaled(stat.avg, scale));
    let _ = writeln!(out, "  Std Dev.: {} {unit}", scaled(stat.std_dev, scale));
    let _ = writeln!(out, "\n  Histogram:");
    histogram_lines(out, stat, scale);
    let _ = writeln!(out, "\n  Percentiles:");
    for (key, value) in PERCENTILE_KEYS.iter().zip(stat.percentiles) {
        let _ = writeln!(out, "  {key:>6}: {} {unit}", scaled(value, scale));
    }
    if let Some(estimates) = &stat.early_stopping {
        let _ =
            writeln!(out, "\n  Early-stopping percentile estimates (N/A = insufficient samples):");
        for (key, value) in PERCENTILE_KEYS.iter().zip(estimates) {
            let value = value.map_or_else(|| "N/A".into(), |v| scaled(v, scale));
            let _ = writeln!(out, "  {key:>6}: {value} {unit}");
        }
    }
    let _ = writeln!(out);
}

/// The reference's section of an empty series that carries estimates: N/A rollups, no
/// histogram or percentile rows, every estimate N/A.
fn empty_metric_section(out: &mut String, stat: &SeriesSummary, unit: &str) {
    for name in ["Min", "Max", "Median", "Avg.", "Std Dev."] {
        let _ = writeln!(out, "  {name}: N/A {unit}");
    }
    let _ = writeln!(out, "\n  Histogram:");
    let _ = writeln!(out, "\n  Percentiles:");
    if stat.early_stopping.is_some() {
        let _ =
            writeln!(out, "\n  Early-stopping percentile estimates (N/A = insufficient samples):");
        for key in PERCENTILE_KEYS {
            let _ = writeln!(out, "  {key:>6}: N/A {unit}");
        }
    }
    let _ = writeln!(out);
}

/// The token sections of one basis, titled with `suffix` (`""`, `" (server)"`, ...).
fn basis_sections(out: &mut String, blocks: &BasisBlocks, suffix: &str) {
    let partial = if blocks.partial { " (partial)" } else { "" };
    let sections = [
        ("TPOT", blocks.tpot.as_ref(), "ms", NS_TO_MS),
        ("Input sequence lengths", blocks.isl.as_ref(), "tokens", 1.0),
        ("Output sequence lengths", blocks.osl.as_ref(), "tokens", 1.0),
    ];
    for (name, stat, unit, scale) in sections {
        if let Some(stat) = stat {
            metric_section(out, &format!("{name}{suffix}{partial}"), stat, unit, scale);
        }
    }
}

/// A streaming run's chunk timing (an addition after the reference's sections): the gaps
/// between chunks (ITL), chunks per sample, tokens per chunk on both bases, and how many
/// streams came in one read.
fn chunk_sections(out: &mut String, s: &ResultSummary) {
    let Some(c) = &s.chunks else { return };
    if let Some(itl) = &c.itl {
        metric_section(out, "ITL (gap between chunks)", itl, "ms", NS_TO_MS);
    }
    if let Some(per_sample) = &c.chunks_per_sample {
        metric_section(out, "Chunks per sample", per_sample, "chunks", 1.0);
    }
    for (blocks, suffix) in
        [(&s.primary, String::new()), (&s.other, format!(" ({})", s.other.basis))]
    {
        let partial = if blocks.partial { " (partial)" } else { "" };
        if let Some(stat) = &blocks.tokens_per_chunk {
            metric_section(out, &format!("Tokens per chunk{suffix}{partial}"), stat, "tokens", 1.0);
        }
    }
    let _ = writeln!(
        out,
        "Streams in one read: {} of {} streamed samples with two or more chunks\n",
        c.n_streams_in_one_read, c.n_streams_multi_chunk
    );
}

/// The console's warning when most streams came in one read.
fn one_read_line(s: &ResultSummary) -> Option<String> {
    let c = s.chunks.as_ref().filter(|c| c.mostly_one_read())?;
    Some(format!(
        "NOTE: {} of {} streamed responses arrived in one read: the endpoint (or a proxy before \
         it) sent each whole stream at once, so TTFT is close to the latency and TPOT and ITL do \
         not show its token pacing",
        c.n_streams_in_one_read, c.n_streams_multi_chunk
    ))
}

/// The failure kinds and re-sent requests (an addition after the reference's sections).
fn failure_section(out: &mut String, s: &ResultSummary) {
    let _ = writeln!(out, "----------------- Failures -----------------");
    let _ = writeln!(out, "Requests resent: {}", s.n_requests_resent);
    if s.failure_kinds.is_empty() {
        let _ = writeln!(out, "Failure kinds: none");
    } else {
        let _ = writeln!(out, "Failure kinds (count, first message):");
        for f in &s.failure_kinds {
            let _ =
                writeln!(out, "  {}: {}, first: {}", f.kind, f.count, one_line(&f.first_message));
        }
    }
    let _ = writeln!(out);
}

/// Each endpoint's counts (an addition after the reference's sections), for a run with two or
/// more endpoints: with one, they would repeat the totals above.
fn endpoint_section(out: &mut String, s: &ResultSummary) {
    if s.endpoints.len() < 2 {
        return;
    }
    let _ = writeln!(out, "----------------- Endpoints -----------------");
    for line in endpoint_lines(s) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

/// One line per endpoint: `URL: N samples, F failed (kind n, ...); latency p50/p99/mean: a /
/// b / c ms`.
fn endpoint_lines(s: &ResultSummary) -> Vec<String> {
    s.endpoints
        .iter()
        .map(|e| {
            let kinds: Vec<String> = e.failures.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let kinds =
                if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) };
            let lat = e.latency.as_ref();
            let mean = lat
                .filter(|l| l.count > 0)
                .map_or_else(|| "N/A".into(), |l| format!("{:.2}", l.avg * NS_TO_MS));
            // Grid index 7 is p50.0, index 1 is p99.0.
            format!(
                "{}: {} samples, {} failed{kinds}; latency p50/p99/mean: {} / {} / {mean} ms",
                e.url,
                e.n_samples,
                e.n_samples_failed,
                ms(lat, 7),
                ms(lat, 1)
            )
        })
        .collect()
}

/// A message on one line: a server's multi-line body must not break the report's layout, and
/// its control characters are escaped (report.txt and the console are read on terminals).
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    loadgen_plan::redact::escape_controls(&line).into_owned()
}

/// The whole `report.txt`.
pub fn report_txt(s: &ResultSummary, info: &RunInfo) -> String {
    let mut out = String::with_capacity(16 * 1024);
    summary_lines(&mut out, s, info);
    other_basis_lines(&mut out, s);
    let _ = writeln!(out, "\n------------------- Latency Breakdowns -------------------");
    let p = &s.primary;
    let partial = if p.partial { " (partial)" } else { "" };
    if let Some(ttft) = &s.ttft {
        metric_section(&mut out, "TTFT", ttft, "ms", NS_TO_MS);
    }
    if let Some(tpot) = &p.tpot {
        metric_section(&mut out, &format!("TPOT{partial}"), tpot, "ms", NS_TO_MS);
    }
    if let Some(latency) = &s.latency {
        metric_section(&mut out, "Latency", latency, "ms", NS_TO_MS);
    }
    if let Some(isl) = &p.isl {
        metric_section(&mut out, &format!("Input sequence lengths{partial}"), isl, "tokens", 1.0);
    }
    if let Some(osl) = &p.osl {
        metric_section(&mut out, &format!("Output sequence lengths{partial}"), osl, "tokens", 1.0);
    }
    let suffix = format!(" ({})", s.other.basis);
    basis_sections(&mut out, &s.other, &suffix);
    chunk_sections(&mut out, s);
    failure_section(&mut out, s);
    endpoint_section(&mut out, s);
    if let Some(agentic) = &s.agentic {
        crate::agentic::text::agentic_section(&mut out, agentic, s.primary.basis);
    }
    if let Some((primary, other)) = &s.goodput {
        let blocks: Vec<_> = [primary, other].into_iter().flatten().collect();
        crate::goodput::goodput_section(&mut out, &blocks);
    }
    let _ = writeln!(out, "----------------- End of Report -----------------");
    // After the report, as the reference appends it to report.txt.
    if let Some(p) = &info.profiling {
        crate::profiling::profiling_section(&mut out, p);
    }
    out
}

/// The headline basis has no token counts while the other basis has some: why, for the
/// reader, and the flag that fills it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HeadlineGap {
    why: &'static str,
    flag: &'static str,
}

/// Whether `b` counted any sample's output tokens.
fn has_counts(b: &BasisBlocks) -> bool {
    b.osl.as_ref().is_some_and(|osl| osl.count > 0)
}

/// `Some` when the headline (primary) basis counted nothing and the other basis did.
fn headline_gap(s: &ResultSummary) -> Option<HeadlineGap> {
    if has_counts(&s.primary) || !has_counts(&s.other) {
        return None;
    }
    Some(match (s.primary.basis, s.client_token_counting) {
        (TokenCountSource::Client, None) => HeadlineGap {
            why: "the run had no client tokenizer",
            flag: "--tokenizer PATH counts the client basis",
        },
        (TokenCountSource::Client, Some(_)) => HeadlineGap {
            why: "the tokenizer counted no sample's output",
            flag: "check the run's --tokenizer",
        },
        (TokenCountSource::Server, _) => HeadlineGap {
            why: "no sample carried usable usage from the endpoint",
            flag: "check that the server sends usage (--stream-include-usage)",
        },
    })
}

/// The console's TPS when the headline has none: N/A, why, and where the other basis's
/// figure is.
fn tps_absent(s: &ResultSummary) -> String {
    match headline_gap(s) {
        Some(gap) => format!(
            "N/A ({} basis: {}; TPS ({}) {} is on the Token basis line below)",
            s.primary.basis,
            gap.why,
            s.other.basis,
            fixed2(s.other.tps)
        ),
        None => "N/A".to_string(),
    }
}

/// TTFT p50 / p99 for the console, or N/A with why it is absent.
fn ttft_figures(s: &ResultSummary, info: &RunInfo) -> String {
    match s.ttft.as_ref() {
        None if info.load_pattern.kind == "max_throughput" => "N/A (the run did not stream: \
            offline runs stream only with --streaming on, and TTFT needs a stream)"
            .to_string(),
        None => "N/A (the run did not stream; TTFT needs --streaming on)".to_string(),
        Some(t) if t.count == 0 => "N/A (no sample got a first content chunk)".to_string(),
        Some(t) => format!("{} / {} ms", ms(Some(t), 7), ms(Some(t), 1)),
    }
}

fn ms(stat: Option<&SeriesSummary>, index: usize) -> String {
    match stat.filter(|s| s.count > 0) {
        Some(s) => format!("{:.2}", s.percentiles[index] * NS_TO_MS),
        None => "N/A".into(),
    }
}

/// The short summary printed on stdout at the end of a run.
pub fn console_summary(s: &ResultSummary, info: &RunInfo, report_dir: &Path) -> String {
    let mut out = String::with_capacity(1024);
    let status = if s.state == "interrupted" {
        "interrupted".to_string()
    } else if let Some(reason) = &s.incomplete_reason {
        format!("incomplete ({reason})")
    } else {
        "complete".to_string()
    };
    let _ = writeln!(out, "Run {status}.");
    if info.embedded_stub {
        let _ = writeln!(out, "Endpoint: built-in max-throughput stub (no --endpoints given)");
    }
    let _ = writeln!(
        out,
        "Samples: {} issued, {} completed, {} failed",
        s.n_samples_issued, s.n_samples_completed, s.n_samples_failed
    );
    failure_lines(&mut out, s, info);
    if s.endpoints.len() >= 2 {
        for line in endpoint_lines(s) {
            let _ = writeln!(out, "  {line}");
        }
    }
    abandoned_agentic_one_read_lines(&mut out, s, info);
    if let Some(lag) = &s.issue_lag {
        let _ = writeln!(
            out,
            "Issue lag p50/p99/max: {:.3} / {:.3} / {:.3} ms; issued {:.2} of {:.2} QPS targeted",
            lag.p50_ns as f64 / 1e6,
            lag.p99_ns as f64 / 1e6,
            lag.max_ns as f64 / 1e6,
            lag.achieved_qps,
            lag.target_qps
        );
    }
    // Material only (the warning on stderr says why): the wait, and the latency without it.
    let w = &s.client_wait;
    if let (Some(wait), Some(_), Some(sent)) = (&w.wait, &w.warning, &w.latency_from_write) {
        let _ = writeln!(
            out,
            "Client wait p50/p99: {:.3} / {:.3} ms, inside TTFT and latency; latency from the \
             write p50/p99: {:.3} / {:.3} ms",
            wait.percentiles[7] / 1e6,
            wait.percentiles[1] / 1e6,
            sent.percentiles[7] / 1e6,
            sent.percentiles[1] / 1e6,
        );
    }
    // The reference's lines, as its own log scrapers read them (`Duration: X seconds`); an
    // absent TPS says why and where the figure is.
    let mut rates = String::new();
    rate_lines(&mut rates, s);
    out.push_str(&rates.replace("\nTPS: N/A\n", &format!("\nTPS: {}\n", tps_absent(s))));
    // Grid index 1 is p99.0, index 7 is p50.0.
    let _ = writeln!(
        out,
        "TTFT p50/p99: {}, latency p50/p99: {} / {} ms",
        ttft_figures(s, info),
        ms(s.latency.as_ref(), 7),
        ms(s.latency.as_ref(), 1)
    );
    let _ = writeln!(out, "{}", basis_line(s));
    if let Some((Some(goodput), _)) = &s.goodput {
        let _ = writeln!(out, "{}", goodput.line());
    }
    let _ = writeln!(out, "Report: {}", report_dir.display());
    out
}

/// The console's lines on abandoned samples, an agentic run's conversations and streams that
/// came in one read.
fn abandoned_agentic_one_read_lines(out: &mut String, s: &ResultSummary, info: &RunInfo) {
    if info.abandoned > 0 {
        let _ = writeln!(out, "WARNING: {} samples were abandoned in flight", info.abandoned);
    }
    if let Some(agentic) = &s.agentic {
        let _ = writeln!(out, "{}", crate::agentic::text::agentic_line(agentic));
    }
    if let Some(line) = one_read_line(s) {
        let _ = writeln!(out, "{line}");
    }
}

/// `Duration: X seconds`, `QPS: X`, `TPS: X` (`N/A` where there is none), as the reference's
/// summary writes them: report.txt and the console print the same three lines.
fn rate_lines(out: &mut String, s: &ResultSummary) {
    match s.duration_ns {
        Some(ns) => writeln!(out, "Duration: {:.2} seconds", ns as f64 / 1e9),
        None => writeln!(out, "Duration: N/A"),
    }
    .ok();
    let _ = writeln!(out, "QPS: {}", fixed2(s.qps));
    let _ = writeln!(out, "TPS: {}", fixed2(s.primary.tps));
}

/// Every failure kind with its count and first message, and where to read more.
fn failure_lines(out: &mut String, s: &ResultSummary, info: &RunInfo) {
    if s.n_samples_failed == 0 && s.failure_kinds.is_empty() {
        return;
    }
    let kinds: Vec<String> =
        s.failure_kinds.iter().map(|f| format!("{} {}", f.kind, f.count)).collect();
    let kinds = if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) };
    let see = if info.events_has_errors { "; see events.jsonl for the errors" } else { "" };
    let _ = writeln!(
        out,
        "WARNING: {} of {} samples failed{kinds}{see}",
        s.n_samples_failed, s.n_samples_completed
    );
    for f in &s.failure_kinds {
        let _ = writeln!(
            out,
            "  {} failed ({}), first: {}",
            f.count,
            f.kind,
            one_line(&f.first_message)
        );
    }
}

fn basis_line(s: &ResultSummary) -> String {
    let primary = s.primary.basis;
    let other = s.other.basis;
    if let Some(gap) = headline_gap(s) {
        return gap_line(s, &gap);
    }
    let mut line = format!("Token basis: {primary} (TPS ({other}): {}", fixed2(s.other.tps));
    if let Some((Some(mean), Some(ratio))) = s.osl_paired.map(|p| (p.mean, p.ratio)) {
        let _ = write!(line, "; OSL paired mean {mean:.2}, ratio {ratio:.4}");
    }
    if primary == TokenCountSource::Server || s.other.partial {
        let missing = s.usage.missing_total();
        if missing > 0 {
            let _ = write!(line, "; {missing} samples without server usage");
        }
    }
    line.push(')');
    line
}

/// The console's basis line when the headline basis has no counts: why, the other basis's
/// figures, and the flags that fill the headline or make the other basis the headline.
fn gap_line(s: &ResultSummary, gap: &HeadlineGap) -> String {
    let (primary, other) = (s.primary.basis, s.other.basis);
    let mut figures = format!("TPS ({other}): {}", fixed2(s.other.tps));
    if let Some(tpot) = s.other.tpot.as_ref().filter(|t| t.count > 0) {
        let _ = write!(
            figures,
            ", TPOT p50/p99 ({other}): {} / {} ms",
            ms(Some(tpot), 7),
            ms(Some(tpot), 1)
        );
    }
    format!(
        "Token basis: {primary} has no token counts ({}), so TPS above is N/A; the {other} basis \
         has them: {figures}. {}; --token-count-source {other} makes {other} the headline",
        gap.why, gap.flag
    )
}

/// `text` (report.txt or the console summary) with the accuracy block after the Summary's
/// `TPS:` line, where the reference prints its "Accuracy:" block.
pub fn with_accuracy_block(text: &str, block: &str) -> String {
    let mut out = String::with_capacity(text.len() + block.len());
    let mut placed = false;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        if !placed && line.starts_with("TPS: ") {
            out.push_str(block);
            placed = true;
        }
    }
    if !placed {
        out.push_str(block);
    }
    out
}
