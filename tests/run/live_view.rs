//! The live view end to end: drawn in a real terminal (a tmux pane: its screen read with
//! capture-pane, resized, interrupted with Ctrl-C), as plain progress lines without a terminal,
//! and off with --quiet.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::support::{bin, char_tokenizer, dataset, report_dir, show, stub, summary};
use loadgen_stubs::StubKind;

/// Secrets the view must never show: an API key and a URL password.
const API_KEY: &str = "sk-live-view-never-shown";
const URL_PASSWORD: &str = "urlpass-never-shown";

/// A tmux server on a socket of its own; killed when dropped, whatever the test did.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached 120x40 session running `script` (a `sh` script).
    fn start(script: &Path) -> Tmux {
        static N: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "llm-loadgen-live-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let tmux = Tmux { socket };
        let sh = format!("sh {}", script.display());
        let out = tmux.cmd(&["-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", &sh]);
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        tmux
    }

    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs (install it: apt-get install tmux)")
    }

    /// The pane's screen as text, one string per row (trailing blanks trimmed by tmux).
    fn screen(&self) -> Vec<String> {
        let out = self.cmd(&["capture-pane", "-p"]);
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    }

    /// The screen with its escape sequences (colours).
    fn screen_escaped(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-e"]).stdout).into_owned()
    }

    /// Polls the screen until `cond` holds; the condition is the synchronisation, bounded.
    fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        cond: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{}",
                screen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// A script that runs a 400 QPS Poisson benchmark of `samples` against `url` with an API key,
/// says its exit status, then waits on the terminal (`cat`) so the pane stays. The shell
/// traps Ctrl-C (its children do not inherit a trap) so that it outlives the interrupt.
fn run_script(name: &str, url: &str, samples: u64, env: &str) -> (PathBuf, PathBuf) {
    let dir = report_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.with_extension("sh");
    let bin_path = crate::support::bin_path();
    let text = format!(
        "trap true INT\n{env} '{bin_path}' benchmark online --endpoints '{url}' --model live-model \
         --dataset '{}' --api-key {API_KEY} --load-pattern poisson --target-qps 400 \
         --num-samples {samples} --workers 1 --report-dir '{}'\necho \"loadgen exit $?\"\nexec cat\n",
        dataset(),
        dir.display()
    );
    std::fs::write(&script, text).unwrap();
    (dir, script)
}

/// The number after `label` in `line` (commas removed), if any.
fn number_after(line: &str, label: &str) -> Option<f64> {
    let rest = &line[line.find(label)? + label.len()..];
    let num: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect();
    num.replace(',', "").parse().ok()
}

fn row<'a>(screen: &'a [String], prefix: &str) -> Option<&'a String> {
    screen.iter().find(|l| l.starts_with(prefix))
}

/// The view's rows are all there with plausible figures for a 400 QPS run of 20,000 samples.
fn view_is_complete(screen: &[String]) -> bool {
    let qps = row(screen, "QPS now").and_then(|l| number_after(l, "QPS now"));
    let tps = row(screen, "TPS").and_then(|l| number_after(l, "server"));
    let bar =
        screen.iter().any(|l| l.starts_with('=') && l.contains("/20,000") && l.contains("ETA"));
    let header =
        row(screen, "llm-loadgen  performance  model live-model  endpoint http://127.0.0.1:");
    let quantiles = ["TTFT     p50 ", "TPOT     p50 ", "latency  p50 "]
        .iter()
        .all(|p| row(screen, p).is_some_and(|l| l.contains(" p99 ") && l.contains('s')));
    let lag = row(screen, "TPS").is_some_and(|l| l.contains("issue lag p50 "));
    let in_flight =
        row(screen, "QPS now").is_some_and(|l| l.contains("in flight") && l.contains("failed 0"));
    header.is_some()
        && bar
        && quantiles
        && lag
        && in_flight
        && qps.is_some_and(|q| q > 50.0 && q < 4_000.0)
        && tps.is_some_and(|t| t > 0.0)
}

/// Rows of the view on the screen (one frame has exactly one of each).
fn view_rows(screen: &[String]) -> usize {
    screen.iter().filter(|l| l.starts_with("QPS now") || l.starts_with("llm-loadgen  ")).count()
}

fn bar_row(screen: &[String]) -> &String {
    screen.iter().find(|l| l.starts_with('=') && l.contains("ETA")).expect("the bar row")
}

#[test]
fn the_terminal_view_shows_the_run_redraws_on_resize_and_leaves_a_clean_screen_at_ctrl_c() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let url = format!("http://127.0.0.1:{}", server.addr().port());
    let (dir, script) = run_script("live-tmux", &url, 20_000, "env -u NO_COLOR");
    let tmux = Tmux::start(&script);
    let screen =
        tmux.wait_for("the view at 120 columns", Duration::from_secs(60), view_is_complete);
    assert_eq!(bar_row(&screen).chars().count(), 119, "the bar spans the width: {screen:#?}");
    assert_eq!(view_rows(&screen), 2, "one frame: {screen:#?}");
    let text = screen.join("\n") + &tmux.screen_escaped();
    assert!(!text.contains(API_KEY), "the API key shown:\n{text}");
    assert!(tmux.screen_escaped().contains("\x1b[36m"), "the bar is coloured");

    tmux.cmd(&["resize-window", "-x", "80", "-y", "40"]);
    let screen = tmux.wait_for("the view redrawn at 80 columns", Duration::from_secs(20), |s| {
        view_is_complete(s)
            && s.iter().any(|l| l.starts_with('=') && l.contains("ETA") && l.chars().count() == 79)
    });
    assert_eq!(view_rows(&screen), 2, "no stale frame left above the redraw: {screen:#?}");
    assert!(screen.iter().all(|l| l.chars().count() <= 80), "{screen:#?}");

    tmux.cmd(&["send-keys", "C-c"]);
    let screen = tmux.wait_for("the interrupted run's exit", Duration::from_secs(60), |s| {
        s.iter().any(|l| l.starts_with("loadgen exit "))
    });
    assert!(
        screen.iter().any(|l| l == "loadgen exit 130"),
        "exit status of an interrupt: {screen:#?}"
    );
    assert!(screen.iter().any(|l| l == "Run interrupted."), "the console summary: {screen:#?}");
    assert_eq!(view_rows(&screen), 0, "the view is cleared: {screen:#?}");
    assert!(
        !screen.iter().any(|l| l.starts_with("=") || l.starts_with("TTFT     ")),
        "{screen:#?}"
    );
    assert_eq!(summary(&dir)["state"], "interrupted");
    assert!(dir.join("report.txt").is_file() && dir.join("events.jsonl").is_file());
}

#[test]
fn no_color_draws_the_view_without_colour() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let url = format!("http://127.0.0.1:{}", server.addr().port());
    let (_dir, script) = run_script("live-no-color", &url, 20_000, "env NO_COLOR=1");
    let tmux = Tmux::start(&script);
    tmux.wait_for("the view", Duration::from_secs(60), view_is_complete);
    let escaped = tmux.screen_escaped();
    assert!(!escaped.contains("\x1b[3"), "a colour under NO_COLOR:\n{escaped:?}");
    tmux.cmd(&["send-keys", "C-c"]);
    tmux.wait_for("the exit", Duration::from_secs(60), |s| {
        s.iter().any(|l| l.starts_with("loadgen exit "))
    });
}

/// A 3 s Poisson run with stderr on a pipe, progress lines every 200 ms, against an endpoint
/// URL with a password.
fn piped_run(name: &str, extra: &[&str]) -> (Output, PathBuf) {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let url = format!("http://live:{URL_PASSWORD}@127.0.0.1:{}", server.addr().port());
    let dir = report_dir(name);
    let out = bin()
        .env("LLM_LOADGEN_PROGRESS_INTERVAL_MS", "200")
        .args(["benchmark", "online", "--endpoints", &url, "--model", "live-model"])
        .args(["--dataset", &dataset(), "--load-pattern", "poisson", "--target-qps", "500"])
        .args(["--num-samples", "1500", "--workers", "1", "--report-dir"])
        .arg(&dir)
        .args(extra)
        .output()
        .expect("the binary runs");
    show(&out);
    assert!(out.status.success());
    (out, dir)
}

fn progress_lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .map(str::to_string)
        .collect()
}

#[test]
fn without_a_terminal_plain_progress_lines_go_to_stderr() {
    let (out, _dir) = piped_run("live-plain", &[]);
    let lines = progress_lines(&out.stderr);
    assert!(lines.len() >= 3, "a line every 200 ms over ~3 s: {lines:#?}");
    let mut last = 0.0;
    for line in &lines {
        assert!(!line.contains('\x1b'), "no escape codes without a terminal: {line:?}");
        assert!(!line.contains(URL_PASSWORD), "the URL password shown: {line:?}");
        let parts = ["/1500 (", "failed 0", "QPS now", "in flight", "TTFT ", "latency "];
        for part in parts.iter().chain(&["issue lag ", "TPS server", "ETA "]) {
            assert!(line.contains(part), "{part:?} not in {line:?}");
        }
        // The phase is `performance` while issuing and `draining` once the drain begins.
        let done = number_after(line, "performance")
            .or_else(|| number_after(line, "draining"))
            .unwrap_or(0.0);
        assert!(done >= last, "completed counts only go up: {lines:#?}");
        last = done;
    }
    assert!(last > 0.0, "{lines:#?}");
    // Mid-run lines carry figures: quantiles, an ETA, tokens a second.
    let measured: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("TTFT p50") && l.contains("latency p50") && !l.contains("ETA -"))
        .collect();
    assert!(!measured.is_empty(), "{lines:#?}");
    let tps = |l: &&String| number_after(l, "TPS server").is_some_and(|t| t > 0.0);
    assert!(measured.iter().all(tps), "{measured:#?}");
    assert!(progress_lines(&out.stdout).is_empty(), "the view writes to stderr only");
}

#[test]
fn quiet_prints_no_progress_lines() {
    let (out, dir) = piped_run("live-quiet", &["--quiet"]);
    assert!(progress_lines(&out.stderr).is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary(&dir)["n_samples_issued"], 1500);
}

#[test]
fn json_stdout_holds_only_the_summary_while_progress_lines_go_to_stderr() {
    let (out, _dir) = piped_run("live-json", &["--json"]);
    let object: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert_eq!(object["n_samples_issued"], 1500);
    assert!(!progress_lines(&out.stderr).is_empty());
}

#[test]
fn client_tokens_counted_after_the_run_show_as_deferred_in_progress_lines_not_as_zero() {
    let tokenizer = char_tokenizer();
    let deferred = ["--tokenizer", &tokenizer, "--metrics-tokenizer-workers", "0"];
    let (out, dir) = piped_run("live-deferred", &deferred);
    let lines = progress_lines(&out.stderr);
    assert!(!lines.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    for line in &lines {
        assert!(line.contains("TPS server ") && line.contains(" client deferred,"), "{line:?}");
    }
    // After the run the tokenizer has counted: the summary has the client figures.
    assert!(summary(&dir)["tps"].as_f64().is_some_and(|t| t > 0.0));
}

/// Issue 25, item 17: a closed loop hands its samples to the worker ahead of its connections;
/// the view counts only what is on the wire as in flight, shows the rest as queued, and says
/// `performance` (not a drain) while samples still wait to be sent.
#[test]
fn a_closed_loop_shows_its_concurrency_in_flight_and_its_phase_until_the_queue_empties() {
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.05;
        c.variable.first_chunk_spread = 0.0;
        c.variable.output_len_mean = 8.0;
        // The first-chunk delay applies to a paced stream only.
        c.variable.inter_token_latency_ms = 1.0;
    });
    let dir = report_dir("live-closed-loop");
    let out = bin()
        .env("LLM_LOADGEN_PROGRESS_INTERVAL_MS", "100")
        .args(["benchmark", "online", "--endpoints", &server.url(), "--model", "live-model"])
        .args(["--dataset", &dataset(), "--load-pattern", "concurrency", "--concurrency", "2"])
        .args(["--num-samples", "60", "--workers", "1", "--streaming", "on", "--report-dir"])
        .arg(&dir)
        .output()
        .expect("the binary runs");
    show(&out);
    assert!(out.status.success());
    let lines = progress_lines(&out.stderr);
    assert!(lines.len() >= 2, "30 rounds of 50 ms give several lines: {lines:#?}");
    for line in &lines {
        let in_flight = number_after(line, "in flight").expect("in flight");
        assert!(in_flight <= 2.0, "more in flight than the concurrency: {line:?}");
        assert!(!line.contains("stopping"), "a run that completes never stops: {line:?}");
        let phases = ["starting", "performance", "draining"];
        let done = phases.iter().find_map(|p| number_after(line, &format!("progress: {p}")));
        let done = done.unwrap_or_else(|| panic!("a phase and a count: {line:?}"));
        let queued = number_after(line, "queued").unwrap_or(0.0);
        // Samples still queued in the worker: the performance phase goes on, no drain yet.
        assert!(queued == 0.0 || line.contains("performance"), "{line:?}");
        assert!(done + in_flight + queued <= 60.0, "{line:?}");
    }
    assert!(lines.iter().any(|l| l.contains("queued")), "{lines:#?}");
}
