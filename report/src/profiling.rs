//! Server profiling's record: `profiling.json`'s shape (the reference's `{engine, starts,
//! stops}` payload) and report.txt's `Profiling` section, written after the rest as the
//! reference appends it. The binary writes the file; the rebuild reads it back (`carry`).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The file beside report.txt that holds the record.
pub const PROFILING_FILE: &str = "profiling.json";

/// One start or stop POST, as the reference records it (`_post_profile`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileCall {
    pub url: String,
    /// CLOCK_MONOTONIC just before the request was sent (the reference's `time.monotonic_ns`).
    pub sent_at_ns: u64,
    /// Local wall time then, `YYYY-MM-DDTHH:MM:SS.mmm` (no zone, as the reference's
    /// `datetime.now().isoformat(timespec="milliseconds")`).
    pub sent_at_iso: String,
    /// The HTTP status; `None` when no response came (connect refused, timed out).
    pub status: Option<u16>,
    /// `"<status> <reason>"` for an HTTP error status, else what went wrong; `None` for a 2xx.
    pub error: Option<String>,
    /// Stops only: `phase_end`, or `abort` when the run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

/// A run's profiling record: one start per URL, one stop per start that got 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilingRecord {
    pub engine: String,
    pub starts: Vec<ProfileCall>,
    pub stops: Vec<ProfileCall>,
}

/// A call's outcome as report.txt shows it (the reference's `_render_profile_status`).
pub fn render_status(call: &ProfileCall) -> String {
    match (call.status, &call.error) {
        (Some(200), _) => "200 OK".to_string(),
        (Some(404), _) => "404 (profiling not enabled on server — pass \
                           --profiler-config.profiler=... to server)"
            .to_string(),
        (_, Some(error)) if !error.is_empty() => error.clone(),
        (Some(status), _) => status.to_string(),
        (None, _) => "ERROR".to_string(),
    }
}

/// Appends the `Profiling` section (the reference's `write_profiling_section`).
pub fn profiling_section(out: &mut String, p: &ProfilingRecord) {
    let _ = writeln!(out, "\n------------------- Profiling -------------------");
    let _ = writeln!(out, "Engine: {}", p.engine);
    let _ = writeln!(out, "Start:");
    for call in &p.starts {
        let _ =
            writeln!(out, "  POST {} @ {} → {}", call.url, call.sent_at_iso, render_status(call));
    }
    if !p.stops.is_empty() {
        let _ = writeln!(out, "Stop:");
    }
    for call in &p.stops {
        let abort = call.stop_reason.as_deref() == Some("abort");
        let suffix = if abort { " (from abort handler)" } else { "" };
        let status = render_status(call);
        let _ = writeln!(out, "  POST {} @ {} → {status}{suffix}", call.url, call.sent_at_iso);
    }
    let first_start = p.starts.iter().map(|c| c.sent_at_ns).min();
    let last_stop = p.stops.iter().map(|c| c.sent_at_ns).max();
    if let (Some(first), Some(last)) = (first_start, last_stop) {
        let span_s = (last as f64 - first as f64) / 1e9;
        let _ = writeln!(out, "Trigger span: {span_s:.2} s");
    }
    let _ = writeln!(
        out,
        "\nNote: actual trace window is bounded by server-side \
         --profiler-config.delay_iterations and --profiler-config.max_iterations.\n\
         Trace artifact path is in server stdout."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(url: &str, status: Option<u16>, error: Option<&str>, at_ns: u64) -> ProfileCall {
        ProfileCall {
            url: url.into(),
            sent_at_ns: at_ns,
            sent_at_iso: "2026-01-01T00:00:00.000".into(),
            status,
            error: error.map(str::to_string),
            stop_reason: None,
        }
    }

    #[test]
    fn statuses_read_as_the_reference_renders_them() {
        let cases = [
            (Some(200), None, "200 OK"),
            (Some(404), Some("404 Not Found"), "404 (profiling not enabled on server"),
            (Some(500), Some("500 Internal Server Error"), "500 Internal Server Error"),
            (Some(204), None, "204"),
            (None, Some("ConnectionRefused: refused"), "ConnectionRefused: refused"),
            (None, None, "ERROR"),
        ];
        for (status, error, want) in cases {
            let got = render_status(&call("u", status, error, 0));
            assert!(got.starts_with(want), "{status:?} {error:?}: {got}");
        }
    }

    #[test]
    fn the_section_lists_each_call_and_the_span_between_first_start_and_last_stop() {
        let mut stop = call("http://h/stop_profile", Some(200), None, 2_500_000_000);
        stop.stop_reason = Some("abort".into());
        let p = ProfilingRecord {
            engine: "vllm".into(),
            starts: vec![call("http://h/start_profile", Some(200), None, 1_000_000_000)],
            stops: vec![stop],
        };
        let mut out = String::new();
        profiling_section(&mut out, &p);
        assert!(out.starts_with("\n------------------- Profiling -------------------\n"));
        assert!(out.contains("Engine: vllm\nStart:\n  POST http://h/start_profile @ "), "{out}");
        assert!(out.contains("→ 200 OK (from abort handler)\n"), "{out}");
        assert!(out.contains("Trigger span: 1.50 s\n"), "{out}");
        let json = String::from_utf8(loadgen_py::json::to_python_json(&p).unwrap()).unwrap();
        assert!(json.contains("\"stop_reason\": \"abort\""), "{json}");
        assert!(json.contains("\"error\": null"), "{json}");
        assert_eq!(serde_json::from_str::<ProfilingRecord>(&json).unwrap(), p);
        let none = ProfilingRecord { engine: "vllm".into(), starts: vec![], stops: vec![] };
        let mut out = String::new();
        profiling_section(&mut out, &none);
        assert!(!out.contains("Stop:") && !out.contains("Trigger span"), "{out}");
    }
}
