//! `llm-loadgen plot DIR` end to end: a streamed Poisson run against the variable stub with a
//! known first-chunk delay, plotted; every picture is a valid SVG (parsed as XML) and PNG
//! (decoded) holding its series: the histogram's bars, the percentile curve's points, one point
//! per second of the run. Then the pictures a run cannot have are skipped with a note, and a
//! damaged run directory or an unwritable output fails with its exit code.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::{alone, bin, report_dir, show, stub, Run};
use loadgen_stubs::StubKind;

/// The stub's first-chunk delay in the shared run.
const TTFT_MS: f64 = 30.0;
/// Samples of the shared run, at 100 QPS: about two seconds.
const SAMPLES: u64 = 200;

const BARS: &str = "#1F77B4";
const CURVE: &str = "#D62728";
const RATE: &str = "#2CA02C";
const MEAN: &str = "#9467BD";
const PEAK: &str = "#FF7F0E";
const MEDIAN: &str = "#17BECF";
const POINTS: &str = "#8C564B";
const GUIDE: &str = "#7F7F7F";

/// `benchmark MODE…` of the 1,000-prompt dataset against `url` by one worker.
fn bench(mode: &[&str], url: &str, dir: &Path) -> Run {
    Run::benchmark(mode, url, dir).model("test-model").dataset().workers(1)
}

/// A streamed Poisson run against the variable stub (30 ms to the first chunk, 1 ms a
/// character after it, one character a chunk), made once for the tests that read it. It runs
/// alone (`support::gate`): its TTFTs are held to the stub's delay. So a test asks for it
/// before it starts anything else.
fn streamed_run() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    if let Some(dir) = DIR.get() {
        return dir;
    }
    let _alone = alone();
    DIR.get_or_init(|| {
        let server = stub(StubKind::Variable, |c| {
            c.stream_interval = 1;
            c.variable.first_chunk_latency_s = TTFT_MS / 1000.0;
            c.variable.first_chunk_spread = 0.1;
            c.variable.inter_token_latency_ms = 1.0;
            c.variable.inter_token_spread = 0.0;
            c.variable.output_len_mean = 20.0;
            c.variable.output_len_spread = 0.3;
        });
        let dir = report_dir("plot-streamed");
        let poisson = ["online", "--load-pattern", "poisson", "--target-qps", "100"];
        let run = bench(&poisson, &server.url(), &dir).samples(SAMPLES);
        let out = run.streaming(true).tokenizer().run();
        assert_eq!(out.status.code(), Some(0), "the benchmark runs");
        dir
    })
}

/// Runs `plot` with `args` after DIR and returns (exit code, stdout, stderr).
fn plot(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin().arg("plot").arg(dir).args(args).output().expect("the binary runs");
    show(&out);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// A plotted copy of the shared run in its own folder, so tests do not share output files.
fn plotted_copy(name: &str, args: &[&str]) -> (PathBuf, String, String) {
    let out = report_dir(name);
    let mut all = vec!["--out", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = plot(streamed_run(), &all);
    assert_eq!(code, Some(0), "plot succeeds");
    (out, stdout, stderr)
}

/// The elements named `tag` whose `attr` is `value`.
fn count(doc: &roxmltree::Document<'_>, tag: &str, attr: &str, value: &str) -> usize {
    doc.descendants().filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value)).count()
}

/// The text of every `<text>` element.
fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    let text = |n: roxmltree::Node<'_, '_>| n.text().unwrap_or_default().trim().to_string();
    doc.descendants().filter(|n| n.has_tag_name("text")).map(text).collect()
}

/// Points of the longest polyline stroked `color` (legend swatches have two).
fn curve_points(doc: &roxmltree::Document<'_>, color: &str) -> Vec<(f64, f64)> {
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(color));
    let parse = |n: roxmltree::Node<'_, '_>| -> Vec<(f64, f64)> {
        let points = n.attribute("points").unwrap_or_default().split_whitespace();
        let xy = |p: &str| p.split_once(',').map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()));
        points.filter_map(xy).collect()
    };
    lines.map(parse).max_by_key(Vec::len).unwrap_or_default()
}

fn svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{} is XML: {e}", path.display()));
    text
}

/// Seconds of the run as `plot` counts them: tracking start (or the first issue) to the last
/// completion, rounded.
fn run_seconds(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let (mut start, mut first_issue, mut end) = (0u64, u64::MAX, 0u64);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let ts = v["timestamp_ns"].as_u64().unwrap();
        match v["event_type"].as_str().unwrap() {
            "session.start_performance_tracking" if start == 0 => start = ts,
            "sample.issued" => first_issue = first_issue.min(ts),
            "sample.complete" => end = end.max(ts),
            _ => {}
        }
    }
    let t0 = if start > 0 && start <= first_issue { start } else { first_issue };
    (((end - t0) + 500_000_000) / 1_000_000_000).max(1) as usize
}

/// Decodes a PNG: (width, height, distinct colours).
fn png_facts(path: &Path) -> (u32, u32, usize) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let colours: HashSet<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    (info.width, info.height, colours.len())
}

const DISTRIBUTIONS: [(&str, &str); 4] = [
    ("ttft", "TTFT: time to first token"),
    ("tpot", "TPOT: time per output token (client basis)"),
    ("itl", "ITL: gap between streamed chunks"),
    ("latency", "Latency: issue to completion"),
];

#[test]
fn each_distribution_is_a_histogram_of_40_bars_and_a_200_point_percentile_curve() {
    let (out, stdout, _) = plotted_copy("plot-distributions", &[]);
    for (name, title) in DISTRIBUTIONS {
        let text = svg(&out.join(format!("{name}.svg")));
        let doc = roxmltree::Document::parse(&text).unwrap();
        let labels = texts(&doc);
        assert!(labels.iter().any(|t| t == title), "{name}: title {title:?} in {labels:?}");
        for label in ["histogram", "percentiles", "samples", "percentile", "p90", "p99"] {
            assert!(labels.iter().any(|t| t == label), "{name}: {label:?} in {labels:?}");
        }
        let unit = |t: &String| t.ends_with("(ms)") || t.ends_with("(µs)");
        assert!(labels.iter().any(unit), "{name}: a value axis in ms or µs");
        assert_eq!(count(&doc, "rect", "fill", BARS), 40, "{name}: the histogram's bars");
        assert_eq!(curve_points(&doc, CURVE).len(), 200, "{name}: the percentile curve");
        assert!(stdout.contains(&format!("{name}.svg")), "{name} listed on stdout");
        let (w, h, colours) = png_facts(&out.join(format!("{name}.png")));
        assert_eq!((w, h), (1200, 480), "{name}.png");
        assert!(colours > 20, "{name}.png is drawn, not blank: {colours} colours");
    }
}

/// Pixel facts of a distribution SVG: the x of the p50 mark, the middle of the tallest bar,
/// the x where the bars' cumulative count reaches half of their total, and one bar's width.
fn p50_mark_and_bars(doc: &roxmltree::Document<'_>) -> (f64, f64, f64, f64) {
    // The marks are drawn p50 first, then p99.
    let p50 = doc
        .descendants()
        .find(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(GUIDE));
    let points = p50.and_then(|n| n.attribute("points")).expect("the p50 mark");
    let mark_x: f64 = points.split(',').next().unwrap().trim().parse().unwrap();
    let num =
        |n: &roxmltree::Node<'_, '_>, a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
    let mut bars: Vec<(f64, f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(BARS))
        .map(|n| (num(&n, "x"), num(&n, "width"), num(&n, "height")))
        .collect();
    bars.sort_by(|a, b| a.0.total_cmp(&b.0));
    let tallest = bars.iter().max_by(|a, b| a.2.total_cmp(&b.2)).unwrap();
    let total: f64 = bars.iter().map(|b| b.2).sum();
    let mut below = 0.0;
    let mut half_x = f64::NAN;
    for &(x, width, height) in &bars {
        if below + height >= total / 2.0 {
            half_x = x + width * (total / 2.0 - below) / height;
            break;
        }
        below += height;
    }
    (mark_x, tallest.0 + tallest.1 / 2.0, half_x, tallest.1)
}

#[test]
fn the_ttft_histogram_peaks_at_the_stub_s_first_chunk_delay() {
    let (out, _, _) = plotted_copy("plot-ttft-peak", &["--format", "svg"]);
    let text = svg(&out.join("ttft.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let caption = texts(&doc).into_iter().find(|t| t.starts_with("n = ")).expect("a caption");
    let p50: f64 =
        caption.split("p50 ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    assert!((p50 - TTFT_MS).abs() < TTFT_MS * 0.1, "TTFT p50 {p50} ms, the stub's {TTFT_MS} ms");
    assert!(caption.starts_with(&format!("n = {SAMPLES} ")), "{caption}");
    // The bars are drawn where the values are: half of their count lies left of the p50 mark,
    // to within a bin. The tallest bar, one draw of 200 from a 0.65 ms-bin lognormal, wanders a
    // few bins either side of the mode, so it is held only to the body (about 1.7 sigma).
    let (mark_x, peak_x, half_x, bin_px) = p50_mark_and_bars(&doc);
    assert!(
        (mark_x - half_x).abs() <= 1.5 * bin_px,
        "half the bars end at {half_x}px, p50 at {mark_x}px"
    );
    assert!((mark_x - peak_x).abs() <= 8.0 * bin_px, "peak at {peak_x}px, p50 at {mark_x}px");
}

#[test]
fn the_time_series_have_one_point_per_second_of_the_run() {
    let (out, _, _) = plotted_copy("plot-timelines", &[]);
    let seconds = run_seconds(streamed_run());
    assert!(seconds >= 2, "200 samples at 100 QPS take about two seconds: {seconds}");
    let series =
        [("qps", &[RATE][..]), ("in_flight", &[MEAN, PEAK]), ("issue_lag", &[MEDIAN, CURVE])];
    for (name, colours) in series {
        let text = svg(&out.join(format!("{name}.svg")));
        let doc = roxmltree::Document::parse(&text).unwrap();
        assert!(texts(&doc).iter().any(|t| t == "seconds since the start"), "{name}: x axis");
        for colour in colours {
            assert_eq!(count(&doc, "circle", "fill", colour), seconds, "{name} {colour}");
            assert_eq!(curve_points(&doc, colour).len(), seconds, "{name} {colour} line");
        }
        let (w, h, colours) = png_facts(&out.join(format!("{name}.png")));
        assert_eq!((w, h), (900, 480), "{name}.png");
        assert!(colours > 20, "{name}.png is drawn: {colours} colours");
    }
    let qps = svg(&out.join("qps.svg"));
    assert!(qps.contains(&format!("{SAMPLES} samples over ")), "the caption counts the samples");
    let lag = svg(&out.join("issue_lag.svg"));
    assert!(lag.contains(&format!("{SAMPLES} samples at a target of 100 qps")), "{lag:.300}");
}

#[test]
fn the_osl_scatter_has_a_point_per_sample_with_both_bases() {
    let (out, _, stderr) = plotted_copy("plot-osl", &["--format", "svg"]);
    let text = svg(&out.join("osl_client_vs_server.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(count(&doc, "circle", "fill", POINTS), SAMPLES as usize, "one point a sample");
    let labels = texts(&doc);
    for label in ["client OSL (tokens)", "server OSL (tokens)"] {
        assert!(labels.iter().any(|t| t == label), "{label} in {labels:?}");
    }
    // The stub's usage counts characters, as the char tokenizer does: the bases agree.
    assert!(text.contains("mean client − server 0.00 tokens"), "{text:.400}");
    assert!(!out.join("ttft.png").exists(), "--format svg writes no PNG");
    assert!(stderr.contains("skipped accuracy: the run has no accuracy/accuracy_results.json"));
}

#[test]
fn a_run_that_does_not_stream_skips_ttft_tpot_and_itl_with_a_note() {
    let server = stub(StubKind::Variable, |c| {
        c.variable.output_len_mean = 20.0;
    });
    let dir = report_dir("plot-offline");
    let out =
        bench(&["offline"], &server.url(), &dir).samples(50).streaming(false).tokenizer().run();
    assert_eq!(out.status.code(), Some(0));
    let (code, _, stderr) = plot(&dir, &["--format", "svg"]);
    assert_eq!(code, Some(0));
    let plots = dir.join("plots");
    for name in ["latency", "qps", "in_flight", "osl_client_vs_server"] {
        svg(&plots.join(format!("{name}.svg")));
    }
    for name in ["ttft", "tpot", "itl"] {
        assert!(!plots.join(format!("{name}.svg")).exists(), "{name} is not drawn empty");
        let note = format!("note: skipped {name}: the run did not stream");
        assert!(stderr.contains(&note), "{note:?} in {stderr}");
    }
    assert!(stderr.contains("skipped issue_lag: the run's load pattern is max_throughput"));
}

#[test]
fn without_server_usage_there_is_no_osl_scatter() {
    let server = stub(StubKind::Variable, |c| {
        c.variable.output_len_mean = 20.0;
        c.stream_interval = 4;
    });
    let dir = report_dir("plot-no-usage");
    let closed = ["online", "--load-pattern", "concurrency", "--concurrency", "4"];
    let run = bench(&closed, &server.url(), &dir).samples(40).streaming(true);
    let out = run.arg("--no-stream-include-usage").tokenizer().run();
    assert_eq!(out.status.code(), Some(0));
    let (code, _, stderr) = plot(&dir, &["--format", "svg"]);
    assert_eq!(code, Some(0));
    assert!(dir.join("plots/ttft.svg").exists() && dir.join("plots/tpot.svg").exists());
    assert!(!dir.join("plots/osl_client_vs_server.svg").exists());
    assert!(stderr.contains("skipped osl_client_vs_server: no sample has both"), "{stderr}");
    assert!(stderr.contains("skipped issue_lag: the run's load pattern is concurrency"));
    // Under the server basis the run has no TPOT to draw either, and says so.
    let (code, _, stderr) = plot(&dir, &["--format", "svg", "--token-count-source", "server"]);
    assert_eq!(code, Some(0));
    assert!(stderr.contains("skipped tpot: no sample has usable server usage"), "{stderr}");
}

/// A copy of the shared run's config.yaml and events.jsonl in a folder of its own.
fn copy_of_run(name: &str) -> PathBuf {
    let dir = report_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.yaml", "events.jsonl"] {
        std::fs::copy(streamed_run().join(file), dir.join(file)).unwrap();
    }
    dir
}

#[test]
fn accuracy_scores_are_bars_when_the_run_scored_them() {
    let dir = copy_of_run("plot-accuracy");
    std::fs::create_dir_all(dir.join("accuracy")).unwrap();
    let results = serde_json::json!({"average_accuracy": 0.6, "accuracy_scores": [
        {"dataset_name": "math", "score": 0.75}, {"dataset_name": "code", "score": 0.45}]});
    std::fs::write(dir.join("accuracy/accuracy_results.json"), results.to_string()).unwrap();
    let (code, _, stderr) = plot(&dir, &["--format", "svg"]);
    assert_eq!(code, Some(0));
    assert!(stderr.contains("has no performance/result_summary.json"), "{stderr}");
    assert!(stderr.contains("skipped issue_lag: performance/result_summary.json has no issue_lag"));
    let text = svg(&dir.join("plots/accuracy.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(count(&doc, "rect", "fill", BARS), 2 + 1, "a bar a dataset and the legend's");
    let labels = texts(&doc);
    for label in ["Accuracy per dataset", "math", "code", "0.75", "0.45"] {
        assert!(labels.iter().any(|t| t == label), "{label} in {labels:?}");
    }
    // The axis spans a perfect score, not the top one, and no ROUGE is named without one.
    let ticks: Vec<f64> = labels.iter().filter_map(|t| t.parse::<f64>().ok()).collect();
    assert!(ticks.contains(&1.0), "a tick at 1: {labels:?}");
    assert!(!text.contains("ROUGE"), "{labels:?}");
}

#[test]
fn a_damaged_run_directory_exits_2_naming_the_file_and_line() {
    let dir = copy_of_run("plot-damaged");
    let mut events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let lines = events.lines().count();
    events.push_str("{\"event_type\":\"sample.complete\",\"timestamp_ns\":\n");
    std::fs::write(dir.join("events.jsonl"), events).unwrap();
    let (code, _, stderr) = plot(&dir, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("events.jsonl line {}", lines + 1)), "{stderr}");
    assert!(!dir.join("plots").exists(), "nothing is written for a damaged log");
    let (code, _, stderr) = plot(&dir.join("missing"), &[]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("has no events.jsonl"), "{stderr}");
}

#[test]
fn an_output_that_cannot_be_written_exits_4_and_leaves_no_picture() {
    let blocker = report_dir("plot-blocked");
    std::fs::create_dir_all(&blocker).unwrap();
    std::fs::write(blocker.join("file"), "not a folder").unwrap();
    let out = blocker.join("file/plots");
    let (code, _, stderr) = plot(streamed_run(), &["--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("cannot create") && stderr.contains("--out"), "{stderr}");
    // A picture whose file cannot be made (a folder holds its name) is not left half-written.
    let taken = report_dir("plot-taken");
    std::fs::create_dir_all(taken.join("ttft.svg")).unwrap();
    let (code, _, stderr) = plot(streamed_run(), &["--out", taken.to_str().unwrap()]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("cannot write") && stderr.contains("ttft.svg"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&taken).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["ttft.svg"], "no temporary file is left beside it");
}

/// (x, y) of each `<text>` whose content is `label`.
fn text_at(doc: &roxmltree::Document<'_>, label: &str) -> Vec<(f64, f64)> {
    let num = |n: roxmltree::Node<'_, '_>, a: &str| n.attribute(a).and_then(|v| v.parse().ok());
    doc.descendants()
        .filter(|n| n.has_tag_name("text") && n.text().is_some_and(|t| t.trim() == label))
        .filter_map(|n| Some((num(n, "x")?, num(n, "y")?)))
        .collect()
}

/// Every circle's centre y and radius stroked or filled `colour`.
fn circles_y(doc: &roxmltree::Document<'_>, colour: &str) -> Vec<(f64, f64)> {
    let num =
        |n: &roxmltree::Node<'_, '_>, a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some(colour))
        .map(|n| (num(&n, "cy"), num(&n, "r")))
        .collect()
}

#[test]
fn timeline_legends_sit_clear_of_the_data() {
    let (out, _, _) = plotted_copy("plot-legends", &["--format", "svg"]);
    let cases = [
        ("in_flight", [("mean over the second", MEAN), ("most at once", PEAK)]),
        ("issue_lag", [("median of the second", MEDIAN), ("largest of the second", CURVE)]),
    ];
    for (name, entries) in cases {
        let text = svg(&out.join(format!("{name}.svg")));
        let doc = roxmltree::Document::parse(&text).unwrap();
        // The highest point drawn (smallest y) of any series.
        let data_top = entries
            .iter()
            .flat_map(|(_, colour)| circles_y(&doc, colour))
            .map(|(cy, r)| cy - r)
            .fold(f64::INFINITY, f64::min);
        assert!(data_top.is_finite(), "{name} has points");
        for (label, _) in entries {
            let at = text_at(&doc, label);
            assert_eq!(at.len(), 1, "{name}: one legend entry {label:?}");
            // A 14 px label: its whole box is above the highest point.
            assert!(
                at[0].1 + 14.0 < data_top,
                "{name}: {label:?} at y {} covers data from y {data_top}",
                at[0].1
            );
        }
    }
}

#[test]
fn a_run_without_a_tokenizer_and_streams_in_one_read_says_both() {
    // The max-throughput stub writes each whole stream at once: the client reads it in one go.
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("plot-one-read");
    let out = bench(&["offline"], &server.url(), &dir).samples(60).streaming(true).run();
    assert_eq!(out.status.code(), Some(0));
    let summary = crate::support::summary(&dir);
    let (multi, one_read) =
        (summary["n_streams_multi_chunk"].as_u64(), summary["n_streams_in_one_read"].as_u64());
    assert!(one_read.unwrap() * 2 > multi.unwrap(), "the streams came in one read: {summary}");
    // The client basis has no TPOT because the run had no tokenizer, not because this machine
    // cannot load one.
    let (code, _, stderr) = plot(&dir, &["--format", "svg"]);
    assert_eq!(code, Some(0));
    assert!(stderr.contains("skipped tpot: the run had no client tokenizer"), "{stderr}");
    assert!(!stderr.contains("cannot be loaded here"), "{stderr}");
    // The server basis draws TPOT, and its picture and stderr say the streams came whole.
    let (code, _, stderr) = plot(&dir, &["--format", "svg", "--token-count-source", "server"]);
    assert_eq!(code, Some(0));
    let hint = format!("{} of {} streams came in one read", one_read.unwrap(), multi.unwrap());
    assert!(stderr.contains(&format!("note: tpot: {hint}")), "{stderr}");
    let text = svg(&dir.join("plots/tpot.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert!(texts(&doc).iter().any(|t| t.starts_with(&hint)), "on the picture: {:?}", texts(&doc));
}

/// The caption's `name VALUE` figure (`p50 30.123`).
fn caption_figure(caption: &str, name: &str) -> f64 {
    let rest = caption.split(&format!("{name} ")).nth(1).unwrap_or_else(|| panic!("{caption}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn the_percentile_curve_passes_through_the_percentiles_its_axis_names() {
    // 100 samples: the curve's axis ends at p99 (log10(100) = 2), where the maximum used to
    // be drawn.
    let server = stub(StubKind::Variable, |c| {
        c.stream_interval = 4;
        c.variable.first_chunk_latency_s = TTFT_MS / 1000.0;
        c.variable.first_chunk_spread = 0.3;
        c.variable.output_len_mean = 12.0;
    });
    let dir = report_dir("plot-curve");
    let out = bench(&["offline"], &server.url(), &dir).samples(100).streaming(true).run();
    assert_eq!(out.status.code(), Some(0));
    let (code, _, _) = plot(&dir, &["--format", "svg"]);
    assert_eq!(code, Some(0));
    let text = svg(&dir.join("plots/ttft.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let caption = texts(&doc).into_iter().find(|t| t.starts_with("n = 100 ")).expect("caption");
    // The curve panel is the right half (600 px of 1200): its value ticks map pixels to values.
    let ticks: Vec<(f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("text-anchor") == Some("end"))
        .filter_map(|n| {
            let value = n.text()?.trim().parse::<f64>().ok()?;
            let x: f64 = n.attribute("x")?.parse().ok()?;
            Some((value, n.attribute("y")?.parse::<f64>().ok()?)).filter(|_| x > 600.0)
        })
        .collect();
    assert!(ticks.len() >= 2, "value ticks of the curve panel: {ticks:?}");
    let ((v0, y0), (v1, y1)) = (ticks[0], ticks[ticks.len() - 1]);
    let value_at = |y: f64| v0 + (y - y0) * (v1 - v0) / (y1 - y0);
    let per_px = ((v1 - v0) / (y1 - y0)).abs();
    let curve = curve_points(&doc, CURVE);
    for name in ["p50", "p90", "p99"] {
        let at = text_at(&doc, name);
        let &(tick_x, _) = at.iter().find(|p| p.0 > 600.0).expect("the tick on the curve's axis");
        let point =
            curve.iter().min_by(|a, b| (a.0 - tick_x).abs().total_cmp(&(b.0 - tick_x).abs()));
        let &(x, y) = point.unwrap();
        assert!((x - tick_x).abs() <= 1.0, "{name}: a curve point on its tick ({x} vs {tick_x})");
        let want = caption_figure(&caption, name);
        let got = value_at(y);
        assert!(
            (got - want).abs() <= 2.0 * per_px,
            "{name}: the curve reads {got}, {name} is {want}"
        );
    }
    // The axis ends at p99: the curve's last point is p99's value (where the maximum was).
    let last = curve.iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
    let p99 = caption_figure(&caption, "p99");
    assert!((value_at(last.1) - p99).abs() <= 2.0 * per_px, "the curve ends at p99 {p99}");
    assert!(texts(&doc).iter().any(|t| t.starts_with("max ")), "the maximum is labelled");
}

/// The reference fixture (a 30-sample run whose stamps start at 5000 s) in a folder of its
/// own, its log's lines rewritten by `edit` (line number from 1, line).
fn reference_copy(name: &str, edit: impl Fn(usize, &str) -> String) -> PathBuf {
    let dir = report_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = crate::support::assets().join("reference_run");
    std::fs::copy(fixture.join("config.yaml"), dir.join("config.yaml")).unwrap();
    let text = std::fs::read_to_string(fixture.join("events.jsonl")).unwrap();
    let events: String = text.lines().enumerate().map(|(i, l)| edit(i + 1, l) + "\n").collect();
    std::fs::write(dir.join("events.jsonl"), events).unwrap();
    dir
}

/// `line` with its `timestamp_ns` moved `by_ns` later.
fn later(line: &str, by_ns: u64) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let ts = v["timestamp_ns"].as_u64().unwrap();
    line.replacen(
        &format!("\"timestamp_ns\":{ts},"),
        &format!("\"timestamp_ns\":{},", ts + by_ns),
        1,
    )
}

#[test]
fn stamps_no_run_can_write_are_refused_and_nothing_is_drawn() {
    // One completion ten years late asked for 5 GB; one at u64::MAX for 147 GB; every stamp
    // at u64::MAX spun in the chart code without end.
    let ten_years = 10 * 365 * 86_400_000_000_000u64;
    // (name, the line restamped or every line, its new stamp, the line named, what is said)
    let cases = [
        ("late", Some(92), 5_000_046_198_817 + ten_years, 92, "lies 3650.0 days from line 1's"),
        ("max", Some(92), u64::MAX, 92, "past any CLOCK_MONOTONIC time"),
        ("all-max", None, u64::MAX, 1, "timestamp_ns 18446744073709551615 is past any"),
    ];
    for (name, which, ns, line, what) in cases {
        let edit = |n: usize, l: &str| {
            let ts = serde_json::from_str::<serde_json::Value>(l).unwrap()["timestamp_ns"]
                .as_u64()
                .unwrap();
            if which.is_none_or(|w| w == n) {
                later(l, ns - ts)
            } else {
                l.to_string()
            }
        };
        let dir = reference_copy(&format!("plot-stamps-{name}"), edit);
        let (code, _, stderr) = plot(&dir, &["--format", "svg"]);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&format!("events.jsonl line {line}: ")), "{name}: {stderr}");
        assert!(stderr.contains(what), "{name}: {stderr}");
        assert!(!dir.join("plots").exists(), "{name}: nothing is drawn");
    }
}

#[test]
fn a_run_of_days_gets_a_bounded_number_of_points_not_one_a_second() {
    // The last completion, the end of tracking and the session's end six days on: a log a
    // run could write, whose one-second series would be 518,400 points.
    let six_days = 6 * 86_400_000_000_000u64;
    let dir =
        reference_copy("plot-six-days", |n, l| if n >= 92 { later(l, six_days) } else { l.into() });
    let (code, _, stderr) = plot(&dir, &["--format", "svg"]);
    assert_eq!(code, Some(0), "{stderr}");
    let text = svg(&dir.join("plots/qps.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let points = count(&doc, "circle", "fill", RATE);
    assert!((3_599..=3_600).contains(&points), "{points} points");
    assert!(texts(&doc).iter().any(|t| t.contains("one point per 144 s")), "{:?}", texts(&doc));
}

/// One line of a hand-written log: `event` at `ms` (from a base), sample `id`'s, with its
/// conversation and turn (`None`: a run without conversations), `data` and the rest.
fn agentic_line(event: &str, ms: f64, id: u64, label: Option<(&str, u32)>, rest: &str) -> String {
    let ts = 5_000_000_000_000u64 + (ms * 1e6) as u64;
    let label = match label {
        Some((c, t)) => format!(r#""conversation_id":"{c}","turn":{t}"#),
        None => r#""conversation_id":"","turn":null"#.to_string(),
    };
    let uuid = if id == u64::MAX { String::new() } else { format!("{id:032x}") };
    format!(
        r#"{{"event_type":"{event}","timestamp_ns":{ts},"sample_uuid":"{uuid}",{label}{rest}}}"#
    )
}

/// A hand-written agentic run (the reference fixture's config.yaml): conversations `a` and
/// `b` of turns 1, 3 and 5, one after another, each turn's TTFT half the one before (what a
/// prefix cache does: later turns pay only for their new tokens). `labelled: false` writes the
/// same samples without their conversations.
pub(super) fn agentic_run(name: &str, labelled: bool) -> PathBuf {
    let dir = report_dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = crate::support::assets().join("reference_run/config.yaml");
    std::fs::copy(config, dir.join("config.yaml")).unwrap();
    let session = |event, ms| agentic_line(event, ms, u64::MAX, None, r#","data":null"#);
    let mut lines = vec![session("session.started", 0.0)];
    lines.push(session("session.start_performance_tracking", 0.5));
    let mut at = 1.0;
    for (c, conversation) in ["a", "b"].into_iter().enumerate() {
        for (k, turn) in [1u32, 3, 5].into_iter().enumerate() {
            let id = (c * 3 + k) as u64;
            let label = labelled.then_some((conversation, turn));
            let ttft = 40.0 / f64::from(1 << k) + c as f64;
            let out = r#","data":["TextModelOutput",["ab","cde"],null,null],"finish_reason":"stop","worker_id":0,"prompt_tokens":10,"completion_tokens":4"#;
            lines.push(agentic_line("sample.issued", at, id, label, r#","data":null"#));
            lines.push(agentic_line("sample.recv_first", at + ttft, id, label, r#","data":null"#));
            lines.push(agentic_line("sample.complete", at + ttft + 10.0, id, label, out));
            at += ttft + 10.0;
        }
    }
    lines.push(session("session.ended", at + 1.0));
    std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    dir
}

/// `plot` or `report` of `dir` from the project's root (the config names its files from there).
pub(super) fn from_root(command: &str, dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = bin();
    cmd.current_dir(crate::support::root()).arg(command).arg(dir).args(args);
    let out = cmd.output().expect("the binary runs");
    show(&out);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn an_agentic_run_is_plotted_ttft_by_turn_and_a_run_without_conversations_skips_it() {
    let dir = agentic_run("plot-agentic", true);
    let (code, stderr) = from_root("plot", &dir, &["--format", "both"]);
    assert_eq!(code, Some(0), "{stderr}");
    let text = svg(&dir.join("plots/ttft_by_turn.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let labels = texts(&doc);
    for label in ["turn", "TTFT (ms)", "p50", "p90", "p99", "1", "3", "5"] {
        assert!(labels.iter().any(|t| t == label), "{label:?} in {labels:?}");
    }
    for colour in [MEDIAN, MEAN, CURVE] {
        assert_eq!(count(&doc, "circle", "fill", colour), 3, "a point a turn number");
        // Later turns are faster: each line falls (SVG y grows downwards).
        let ys: Vec<f64> = curve_points(&doc, colour).iter().map(|p| p.1).collect();
        assert!(ys.len() == 3 && ys[0] < ys[1] && ys[1] < ys[2], "{colour}: {ys:?}");
    }
    assert!(text.contains("6 turns with a first chunk over 3 turn numbers"), "{text:.300}");
    let (w, h, colours) = png_facts(&dir.join("plots/ttft_by_turn.png"));
    assert_eq!((w, h), (900, 480));
    assert!(colours > 20, "ttft_by_turn.png is drawn: {colours} colours");
    // The same samples without their conversations: no picture, and why.
    let plain = agentic_run("plot-agentic-plain", false);
    let (code, stderr) = from_root("plot", &plain, &["--format", "svg"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!plain.join("plots/ttft_by_turn.svg").exists());
    let note = "note: skipped ttft_by_turn: the run has no conversations";
    assert!(stderr.contains(note), "{note:?} in {stderr}");
}

#[test]
fn report_dir_of_an_agentic_run_writes_its_agentic_block() {
    let dir = agentic_run("report-agentic", true);
    let out = dir.with_extension("out");
    let _ = std::fs::remove_dir_all(&out);
    let (code, stderr) = from_root("report", &dir, &["--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let s = crate::support::summary(&out);
    let text = std::fs::read_to_string(out.join("performance/result_summary.json")).unwrap();
    let last_key = text.lines().rfind(|l| l.starts_with("  \"")).unwrap_or_default();
    assert_eq!(last_key, r#"  "agentic": {"#, "the last key");
    let a = &s["agentic"];
    assert_eq!(a["dropped_turns"], 0);
    assert_eq!(
        (a["conversations"]["started"].as_u64(), a["conversations"]["completed"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(a["turns"]["issued"], 6);
    let turns: Vec<u64> =
        a["by_turn"].as_array().unwrap().iter().map(|t| t["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, [1, 3, 5]);
    // Turn 3's TTFTs are 20 and 21 ms.
    assert_eq!(a["by_turn"][1]["ttft"]["min"], 20_000_000);
    assert_eq!(a["by_turn"][1]["ttft"]["max"], 21_000_000);
    let report = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(report.contains("----------------- Agentic -----------------\nConversations: 2 started, 2 completed, 0 failed, 0 abandoned\n"), "{report}");
    // Rebuilt again from the rebuild's own files: the same bytes.
    let again = dir.with_extension("again");
    let _ = std::fs::remove_dir_all(&again);
    std::fs::copy(dir.join("events.jsonl"), out.join("events.jsonl")).unwrap();
    std::fs::copy(dir.join("config.yaml"), out.join("config.yaml")).unwrap();
    let (code, stderr) = from_root("report", &out, &["--out", again.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let summary = |d: &Path| std::fs::read(d.join("performance/result_summary.json")).unwrap();
    assert_eq!(summary(&again), summary(&out), "a rebuilt summary rebuilds to its own bytes");
    let plain = agentic_run("report-plain", false);
    let (code, stderr) = from_root("report", &plain, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(crate::support::summary(&plain).get("agentic").is_none(), "no conversations");
}
