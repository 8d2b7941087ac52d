//! A run with a client tokenizer past `--spill-budget-mib`: its rows and the outputs waiting to
//! be counted go to files, and every sample still gets its counts on its own row, as the
//! in-memory path gives them (its report rebuilds byte for byte from its events.jsonl).

use std::path::Path;

use crate::support::{assets, bin, report_dir, show, stub, summary, Run};
use loadgen_stubs::StubKind;

const SAMPLES: u64 = 30_000;
const REBUILT_FILES: [&str; 3] =
    ["report.txt", "performance/result_summary.json", "metrics/final_snapshot.json"];

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()))
}

/// The MiB the run's `-v` line says went to spill files.
fn spilled_mib(stderr: &str) -> f64 {
    let line = stderr.lines().find(|l| l.starts_with("per-sample rows written to"));
    line.and_then(|l| l.rsplit(": ").next())
        .and_then(|v| v.trim_end_matches(" MiB").parse().ok())
        .unwrap_or_else(|| panic!("no spill line in:\n{stderr}"))
}

/// Echoed prompts of the 1,000-prompt dataset, streamed: each sample's OSL and TPOT tokens
/// depend on its row, so a count patched onto another row changes the TPOT series. Counted
/// after the run (`0`) every output waits, so past a 1 MiB budget they park in a file; counted
/// live (`1`) the rows that went to files get their counts as patches.
#[test]
fn a_spilled_run_with_a_tokenizer_counts_every_sample_on_its_own_row() {
    let server = stub(StubKind::Echo, |_| {});
    let tok = assets().join("tokenizers/bpe2k").display().to_string();
    for (workers, mode) in [("0", "after_run"), ("1", "live")] {
        let dir = report_dir(&format!("tok-spill-{mode}"));
        let run = Run::offline(&server.url(), &dir).model("m").dataset().samples(SAMPLES);
        let run = run.workers(1).connections(16).streaming(true).tokenizer_from(&tok);
        let extra = ["--spill-budget-mib", "1", "--metrics-tokenizer-workers", workers, "-v"];
        let out = run.args(extra).run();
        assert_eq!(out.status.code(), Some(0), "{mode}");
        let mib = spilled_mib(&String::from_utf8_lossy(&out.stderr));
        assert!(mib > 2.0, "{mode}: {SAMPLES} rows past a 1 MiB budget went to files: {mib}");
        let s = summary(&dir);
        assert_eq!(s["n_samples_completed"], SAMPLES, "{mode}");
        assert_eq!(s["client_token_tasks_pending"], 0, "{mode}");
        assert_eq!(s["client_token_counting"], mode);
        assert_eq!(s["complete"], true, "{mode}");
        let osl_count = s["output_sequence_lengths"]["histogram"]["counts"]
            .as_array()
            .map(|c| c.iter().filter_map(|n| n.as_u64()).sum::<u64>());
        let osl = &s["output_sequence_lengths"];
        assert_eq!(osl_count, Some(SAMPLES), "{mode}: every sample has its OSL: {osl}");
        assert_rebuilds(&dir, mode);
    }
}

/// `report DIR --out OTHER` recounts every output from events.jsonl, in memory: the run's files
/// are the same bytes.
fn assert_rebuilds(dir: &Path, mode: &str) {
    let other = dir.with_extension("rebuilt");
    let _ = std::fs::remove_dir_all(&other);
    let args = [dir.display().to_string(), "--out".into(), other.display().to_string()];
    let out = bin().arg("report").args(&args).output().expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(0), "{mode}: report --out succeeds");
    for file in REBUILT_FILES {
        assert!(read(&other, file) == read(dir, file), "{mode}: {file} differs from the rebuild");
    }
    let _ = std::fs::remove_dir_all(&other);
}
