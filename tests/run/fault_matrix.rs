//! The fault matrix (issue 10, SPEC §10): the real binary against an in-process stub with one
//! fault mode, or under one client action, streaming or not, under each load pattern. Every case
//! asserts the exit code, the count per failure kind, issued = completed + abandoned, that every
//! report file parses, one terminal event per issued sample, no request re-sent silently, and
//! that no process is left behind. The expectations are the `matrix!` table at the end.

use std::time::Duration;

use crate::support::{
    reap_leftovers, report_dir, signal, state, tally_events, unparsable_json, Watched,
};
use loadgen_stubs::{
    DelayFault, FaultConfig, StubConfig, StubKind, StubServer, TruncateFault, TruncateFraming,
};
use serde_json::Value;

/// How a case issues its samples.
#[derive(Debug, Clone, Copy)]
enum LoadPattern {
    Offline,
    /// Target QPS.
    Poisson(u32),
    /// Samples in flight.
    Concurrency(u32),
}

/// What the test does to the run while it is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    None,
    /// SIGINT to the coordinator alone.
    SigintCoordinator,
    /// SIGINT to the whole process group, as a terminal's Ctrl-C sends it.
    SigintGroup,
    /// SIGTERM to the whole process group, as `timeout` and service managers send it.
    SigtermGroup,
    /// SIGKILL to the one worker.
    KillWorker,
    /// SIGSTOP to the one worker, then (once it is stopped) SIGINT to the coordinator.
    StopWorkerThenSigint,
}

/// An expected count.
#[derive(Debug, Clone, Copy)]
enum N {
    Is(u64),
    AtLeast(u64),
    Any,
    /// Exactly the requests the stub had framed when the action fired.
    AtAction,
}

/// What a case must end with.
#[derive(Debug, Clone, Copy)]
struct Expect {
    exit: i32,
    /// Count per failure kind; every kind not named must be absent (or 0).
    failures: &'static [(&'static str, N)],
    /// `n_samples_completed` (failures count as completed).
    completed: N,
    abandoned: N,
    /// The run ends within this many seconds of its start.
    within_s: u64,
    /// (kind, text): the kind's first message, and an error line of events.jsonl, hold the text.
    message: Option<(&'static str, &'static str)>,
    /// Every successful output has this many characters.
    output_chars: Option<usize>,
}

/// One row of the matrix.
#[derive(Clone, Copy)]
struct Case {
    faults: fn(&mut FaultConfig),
    stream: bool,
    pattern: LoadPattern,
    samples: u32,
    /// Flags after the common ones.
    extra: &'static [&'static str],
    action: Action,
    /// The action fires once the stub has framed this many requests.
    trigger_requests: u64,
    expect: Expect,
}

const OUTPUT_CHARS: usize = 160;
const SAMPLES: u64 = 40;
/// The bounded grace after a cap or a signal, and a margin for a loaded 2-core machine.
const CAP_GRACE_S: u64 = 2;
const MARGIN_S: u64 = 4;

const ALL_OK: Expect = Expect {
    exit: 0,
    failures: &[],
    completed: N::Is(SAMPLES),
    abandoned: N::Is(0),
    within_s: 30,
    message: None,
    output_chars: Some(OUTPUT_CHARS),
};

/// Every sample completes as a failure of the kinds given.
const fn all_fail(failures: &'static [(&'static str, N)]) -> Expect {
    Expect {
        exit: 4,
        failures,
        completed: N::Is(SAMPLES),
        abandoned: N::Is(0),
        within_s: 30,
        message: None,
        output_chars: None,
    }
}

const INTERRUPTED: Expect = Expect {
    exit: 130,
    failures: &[],
    completed: N::Any,
    abandoned: N::AtLeast(1),
    within_s: 30,
    message: None,
    output_chars: Some(OUTPUT_CHARS),
};

const BASE: Case = Case {
    faults: |_| {},
    stream: true,
    pattern: LoadPattern::Offline,
    samples: SAMPLES as u32,
    extra: &[],
    action: Action::None,
    trigger_requests: 0,
    expect: ALL_OK,
};

/// Every other request is read and never answered: half the samples stay in flight for good.
const HALF_HANG: fn(&mut FaultConfig) = |f| f.no_response_every = Some(2);
/// With 8 connections and every other request unanswered, all 8 hang after 16 requests.
const HALF_HANG_FLAGS: &[&str] = &["--max-connections", "8"];

fn mode_args(p: LoadPattern) -> Vec<String> {
    let v: Vec<&str> = match p {
        LoadPattern::Offline => vec!["offline"],
        LoadPattern::Poisson(_) => vec!["online", "--load-pattern", "poisson", "--target-qps"],
        LoadPattern::Concurrency(_) => {
            vec!["online", "--load-pattern", "concurrency", "--concurrency"]
        }
    };
    let mut v: Vec<String> = v.into_iter().map(String::from).collect();
    match p {
        LoadPattern::Poisson(n) | LoadPattern::Concurrency(n) => v.push(n.to_string()),
        LoadPattern::Offline => {}
    }
    v
}

fn args(case: &Case, url: &str, dir: &std::path::Path) -> Vec<String> {
    let mut v = vec!["benchmark".to_string()];
    v.extend(mode_args(case.pattern));
    let streaming = if case.stream { "on" } else { "off" };
    let samples = case.samples.to_string();
    let common = [
        "--endpoints",
        url,
        "--model",
        "test-model",
        "--dataset",
        &crate::support::dataset(),
        "--report-dir",
        dir.to_str().expect("a UTF-8 target dir"),
        "--workers",
        "1",
        "--num-samples",
        &samples,
        "--streaming",
        streaming,
    ]
    .map(String::from);
    v.extend(common);
    v.extend(case.extra.iter().map(|s| s.to_string()));
    v
}

fn start_stub(case: &Case) -> StubServer {
    let mut cfg = StubConfig::new(StubKind::MaxThroughput);
    cfg.output_length = OUTPUT_CHARS;
    (case.faults)(&mut cfg.faults);
    StubServer::start(cfg).expect("the stub starts")
}

/// Fires the case's action once the stub has framed enough requests and the worker exists;
/// true when nothing is left to do. `fired` keeps the requests seen when it fired.
fn step(case: &Case, stub: &StubServer, run: &Watched, fired: &mut Option<u64>) -> bool {
    let requests = stub.requests_total();
    let worker = run.children().first().copied();
    let ready = requests >= case.trigger_requests && worker.is_some();
    match (case.action, fired.is_some(), worker) {
        (Action::None, ..) => true,
        (_, false, _) if !ready => false,
        (Action::StopWorkerThenSigint, true, Some(w)) if state(w) != Some('T') => false,
        (Action::StopWorkerThenSigint, true, _) => {
            signal(run.pid as i32, libc::SIGINT);
            true
        }
        (action, false, Some(w)) => {
            *fired = Some(requests);
            // Best effort, as before: a process already gone is the case's outcome to check.
            let _sent = match action {
                Action::SigintCoordinator => signal(run.pid as i32, libc::SIGINT),
                Action::SigintGroup => signal(-(run.pid as i32), libc::SIGINT),
                Action::SigtermGroup => signal(-(run.pid as i32), libc::SIGTERM),
                Action::KillWorker => signal(w as i32, libc::SIGKILL),
                Action::StopWorkerThenSigint => signal(w as i32, libc::SIGSTOP),
                Action::None => true,
            };
            action != Action::StopWorkerThenSigint
        }
        _ => false,
    }
}

/// Runs one case and panics with every expectation it missed.
fn run_case(name: &str, case: &Case) {
    let stub = start_stub(case);
    let dir = report_dir(name);
    let own_group = matches!(case.action, Action::SigintGroup | Action::SigtermGroup);
    let run = Watched::spawn(&args(case, &stub.url(), &dir), own_group, &dir);
    let limit = Duration::from_secs(case.expect.within_s * 2 + 10);
    let mut fired = None;
    let done = run.watch(limit, |r| step(case, &stub, r, &mut fired));
    let mut problems = Vec::new();
    let left = reap_leftovers(&done.seen, Duration::from_secs(10));
    if !left.is_empty() {
        problems.push(format!("processes left behind: {left:?}"));
    }
    if done.hung {
        problems.push(format!("hung: killed after {limit:?}"));
    } else if done.elapsed > Duration::from_secs(case.expect.within_s) {
        let within = case.expect.within_s;
        problems.push(format!("took {:?}, more than {within} s", done.elapsed));
    }
    if done.code != Some(case.expect.exit) {
        problems.push(format!("exit {:?}, want {}", done.code, case.expect.exit));
    }
    if case.action != Action::None && fired.is_none() {
        problems.push("the action never fired".into());
    }
    check_reports(case, &dir, stub.requests_total(), fired, &mut problems);
    drop(stub);
    if !problems.is_empty() {
        eprintln!("--- stdout\n{}\n--- stderr\n{}", done.stdout, done.stderr);
        panic!("{name}:\n  {}", problems.join("\n  "));
    }
}

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn check_n(what: &str, got: u64, want: N, at_action: Option<u64>, problems: &mut Vec<String>) {
    let ok = match want {
        N::Is(n) => got == n,
        N::AtLeast(n) => got >= n,
        N::Any => true,
        N::AtAction => Some(got) == at_action,
    };
    if !ok {
        problems
            .push(format!("{what}: {got}, want {want:?} (requests at the action: {at_action:?})"));
    }
}

/// The summary's counts, kinds, files and events against the case's expectations.
fn check_reports(
    case: &Case,
    dir: &std::path::Path,
    requests: u64,
    fired: Option<u64>,
    problems: &mut Vec<String>,
) {
    let e = &case.expect;
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json"));
    let Some(s) = text.ok().and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
        problems.push("result_summary.json is missing or does not parse".into());
        return;
    };
    problems.extend(unparsable_json(dir).into_iter().map(|b| format!("does not parse: {b}")));
    let (issued, completed) = (count(&s, "n_samples_issued"), count(&s, "n_samples_completed"));
    let (abandoned, failed) = (count(&s, "n_samples_abandoned"), count(&s, "n_samples_failed"));
    if issued != completed + abandoned {
        problems.push(format!("issued {issued} != completed {completed} + abandoned {abandoned}"));
    }
    check_n("n_samples_completed", completed, e.completed, fired, problems);
    check_n("n_samples_abandoned", abandoned, e.abandoned, fired, problems);
    check_kinds(e, &s["failure_kinds"], failed, fired, problems);
    let resent = count(&s, "n_requests_resent");
    if requests > issued + resent {
        problems.push(format!(
            "the stub framed {requests} requests for {issued} issued samples \
             and {resent} counted re-sends"
        ));
    }
    if resent > issued {
        problems.push(format!("{resent} re-sends for {issued} samples: at most one each"));
    }
    check_events(e, dir, (issued, failed, abandoned), problems);
}

fn check_kinds(
    e: &Expect,
    kinds: &Value,
    failed: u64,
    fired: Option<u64>,
    problems: &mut Vec<String>,
) {
    let kind_count = |k: &str| kinds[k]["count"].as_u64().unwrap_or(0);
    for &(kind, want) in e.failures {
        check_n(&format!("failure_kinds.{kind}.count"), kind_count(kind), want, fired, problems);
    }
    let listed: u64 = kinds.as_object().map_or(0, |m| m.keys().map(|k| kind_count(k)).sum());
    if listed != failed {
        problems.push(format!("failure_kinds sum to {listed}, n_samples_failed is {failed}"));
    }
    for (kind, v) in kinds.as_object().into_iter().flatten() {
        let named = e.failures.iter().any(|(k, _)| k == kind);
        if !named && v["count"].as_u64().unwrap_or(0) > 0 {
            problems.push(format!("unexpected failure kind {kind}: {v}"));
        }
    }
    if e.failures.is_empty() && failed > 0 {
        problems.push(format!("{failed} failed, want none"));
    }
    if let Some((kind, text)) = e.message {
        let first = kinds[kind]["first_message"].as_str().unwrap_or("");
        if !first.contains(text) {
            problems.push(format!("failure_kinds.{kind}.first_message {first:?} lacks {text:?}"));
        }
    }
}

fn check_events(
    e: &Expect,
    dir: &std::path::Path,
    counts: (u64, u64, u64),
    problems: &mut Vec<String>,
) {
    let (issued, failed, abandoned) = counts;
    let Some(t) = tally_events(dir) else {
        problems.push("events.jsonl is missing".into());
        return;
    };
    let mut expect = |what: &str, got: usize, want: u64| {
        if got as u64 != want {
            problems.push(format!("events.jsonl: {what} {got}, want {want}"));
        }
    };
    expect("lines that do not parse", t.bad_lines, 0);
    expect("issued samples", t.issued, issued);
    expect("samples without a terminal event", t.without_terminal, 0);
    expect("samples with several terminal events", t.several_terminals, 0);
    expect("failed samples (complete, data null)", t.failed, failed);
    expect("failed samples without an error.generic line", t.failed_without_error, 0);
    expect("abandoned samples (error.loadgen)", t.abandoned, abandoned);
    if let Some((_, text)) = e.message {
        if !t.error_messages.iter().any(|m| m.contains(text)) {
            problems.push(format!("no error line of events.jsonl holds {text:?}"));
        }
    }
    if let Some(chars) = e.output_chars {
        let short = t.outputs.iter().filter(|o| o.chars().count() != chars).count();
        if short > 0 {
            problems.push(format!("{short} successful outputs are not {chars} characters"));
        }
    }
}

/// One `#[test]` per row, named after the row.
macro_rules! matrix {
    ($($name:ident => $case:expr,)*) => {
        $(
            #[test]
            fn $name() {
                run_case(stringify!($name), &$case);
            }
        )*
    };
}

const CAP_3S: &[&str] = &["--runtime.max-duration-ms", "3000", "--max-connections", "8"];
const CAPPED_WITHIN_S: u64 = 3 + CAP_GRACE_S + MARGIN_S;
const TIMEOUT: &[&str] = &["--timeout", "0.5"];
/// A capped run against a server that answers some requests: some completed, the rest
/// abandoned at the cap, within cap + grace.
const CAPPED: Expect = Expect {
    completed: N::AtLeast(1),
    abandoned: N::AtLeast(1),
    within_s: CAPPED_WITHIN_S,
    ..ALL_OK
};
/// Every sample fails with the stub's engine error, its message kept.
const ENGINE_ERROR: Expect = Expect {
    message: Some(("stream_error", loadgen_stubs::fault::ERROR_MESSAGE)),
    ..all_fail(&[("stream_error", N::Is(SAMPLES))])
};

/// Every sample fails with vLLM's unwrapped error object, its message kept.
const VLLM_ERROR: Expect = Expect {
    message: Some(("stream_error", loadgen_stubs::fault::VLLM_ERROR_MESSAGE)),
    ..all_fail(&[("stream_error", N::Is(SAMPLES))])
};
/// What a sample with the stub's malformed frames (every third content frame) fails with.
const MALFORMED_FRAME_MESSAGE: &str = "malformed SSE frame: 5 of 18 frames did not decode, \
     their content lost; the first: {\"choices\":[{";

/// Every stream cut after 3 of its 16 content frames.
const fn cut_after_3(framing: TruncateFraming) -> TruncateFault {
    TruncateFault { every: 1, after_frames: 3, framing }
}

matrix! {
    // A healthy server: the baseline every row differs from by one fault.
    healthy_stream_offline => BASE,
    healthy_plain_poisson => Case { stream: false, pattern: LoadPattern::Poisson(400), ..BASE },

    // Errors inside a 200 response fail with the server's message kept (defect 3).
    error_frame_mid_stream_offline => Case {
        faults: |f| f.error_frame_mid_stream_every = Some(1),
        expect: ENGINE_ERROR,
        ..BASE
    },
    error_body_plain_concurrency => Case {
        faults: |f| f.error_frame_mid_stream_every = Some(1),
        stream: false,
        pattern: LoadPattern::Concurrency(4),
        expect: ENGINE_ERROR,
        ..BASE
    },
    error_only_stream_poisson => Case {
        faults: |f| f.error_only_stream_every = Some(1),
        pattern: LoadPattern::Poisson(400),
        expect: all_fail(&[("stream_error", N::Is(SAMPLES))]),
        ..BASE
    },
    // vLLM's unwrapped error object (no `error` key) as a stream's only frame and as a 200
    // body (issue 24, item 6).
    vllm_error_only_stream_offline => Case {
        faults: |f| f.vllm_error_every = Some(1),
        expect: VLLM_ERROR,
        ..BASE
    },
    vllm_error_body_plain_concurrency => Case {
        faults: |f| f.vllm_error_every = Some(1),
        stream: false,
        pattern: LoadPattern::Concurrency(4),
        expect: VLLM_ERROR,
        ..BASE
    },
    every_other_vllm_error_stream_poisson_is_some_failures_exit_0 => Case {
        faults: |f| f.vllm_error_every = Some(2),
        pattern: LoadPattern::Poisson(400),
        expect: Expect {
            failures: &[("stream_error", N::Is(SAMPLES / 2))],
            message: Some(("stream_error", loadgen_stubs::fault::VLLM_ERROR_MESSAGE)),
            ..ALL_OK
        },
        ..BASE
    },
    every_other_error_frame_is_some_failures_exit_0 => Case {
        faults: |f| f.error_frame_mid_stream_every = Some(2),
        expect: Expect {
            failures: &[("stream_error", N::Is(SAMPLES / 2))],
            ..ALL_OK
        },
        ..BASE
    },

    // Truncated streams fail (defect 4); a finished stream without [DONE] is whole.
    truncated_chunked_offline => Case {
        faults: |f| f.truncate = Some(cut_after_3(TruncateFraming::Chunked)),
        expect: all_fail(&[("truncated", N::Is(SAMPLES))]),
        ..BASE
    },
    truncated_close_delimited_concurrency => Case {
        faults: |f| f.truncate = Some(cut_after_3(TruncateFraming::CloseDelimited)),
        pattern: LoadPattern::Concurrency(4),
        expect: all_fail(&[("truncated", N::Is(SAMPLES))]),
        ..BASE
    },
    finish_without_done_is_a_success => Case {
        faults: |f| f.finish_without_done_every = Some(1),
        pattern: LoadPattern::Concurrency(4),
        ..BASE
    },

    // Multi-line data events keep their content (defect 5).
    multi_line_data_keeps_the_content => Case {
        faults: |f| f.multi_line_data_every = Some(1),
        ..BASE
    },

    // A malformed SSE frame drops only itself (SPEC §9: the rest of the read is still parsed,
    // to the stream's finish_reason and [DONE]), but its content is lost, so the sample fails
    // as malformed_frame rather than succeed with output the server never sent (issue 24,
    // item 7): 5 of the 16 content frames, of 18 frames with the finish and usage frames.
    malformed_frames_fail_the_sample_offline => Case {
        faults: |f| f.malformed_every = Some(3),
        expect: Expect {
            message: Some(("malformed_frame", MALFORMED_FRAME_MESSAGE)),
            ..all_fail(&[("malformed_frame", N::Is(SAMPLES))])
        },
        ..BASE
    },
    malformed_frames_fail_the_sample_concurrency => Case {
        faults: |f| f.malformed_every = Some(16),
        pattern: LoadPattern::Concurrency(4),
        expect: all_fail(&[("malformed_frame", N::Is(SAMPLES))]),
        ..BASE
    },

    // A server that closes after reading: no silent re-send (defect 6).
    close_after_request_plain_offline => Case {
        faults: |f| f.close_after_request_every = Some(1),
        stream: false,
        expect: all_fail(&[("connection_closed", N::Is(SAMPLES))]),
        ..BASE
    },
    close_after_every_other_request_stream_concurrency => Case {
        faults: |f| f.close_after_request_every = Some(2),
        pattern: LoadPattern::Concurrency(4),
        expect: Expect {
            failures: &[("connection_closed", N::AtLeast(1))],
            completed: N::Is(SAMPLES),
            ..ALL_OK
        },
        ..BASE
    },

    // Response heads: 40 extra headers pass, 200 exceed the named limit (defect 15).
    forty_extra_headers_stream_offline => Case { faults: |f| f.extra_headers = 40, ..BASE },
    forty_extra_headers_plain_poisson => Case {
        faults: |f| f.extra_headers = 40,
        stream: false,
        pattern: LoadPattern::Poisson(400),
        ..BASE
    },
    // Interim answers (103 Early Hints, 100 Continue) before every response are passed over:
    // the request's answer is the final response after them.
    interim_responses_are_skipped_stream_offline => Case {
        faults: |f| f.interim_responses = true,
        ..BASE
    },
    interim_responses_are_skipped_plain_concurrency => Case {
        faults: |f| f.interim_responses = true,
        stream: false,
        pattern: LoadPattern::Concurrency(4),
        ..BASE
    },
    two_hundred_extra_headers_fail => Case {
        faults: |f| f.extra_headers = 200,
        stream: false,
        expect: all_fail(&[("response_head_limit", N::Is(SAMPLES))]),
        ..BASE
    },

    // HTTP status (already a kind): some failures, exit 0.
    every_other_500_plain_poisson => Case {
        faults: |f| f.status = Some(loadgen_stubs::StatusFault { status: 500, every: 2 }),
        stream: false,
        pattern: LoadPattern::Poisson(400),
        expect: Expect { failures: &[("http_status", N::Is(SAMPLES / 2))], ..ALL_OK },
        ..BASE
    },

    // The per-request timeout (defect 2).
    timeout_against_a_delay_plain_offline => Case {
        faults: |f| f.delay = Some(DelayFault { delay_ms: 3000, every: 1 }),
        stream: false,
        extra: TIMEOUT,
        expect: Expect { within_s: 15, ..all_fail(&[("timeout", N::Is(SAMPLES))]) },
        ..BASE
    },
    timeout_against_no_response_stream_concurrency => Case {
        faults: |f| f.no_response_every = Some(1),
        pattern: LoadPattern::Concurrency(8),
        extra: TIMEOUT,
        expect: Expect { within_s: 20, ..all_fail(&[("timeout", N::Is(SAMPLES))]) },
        ..BASE
    },
    timeout_against_a_head_without_body_plain_concurrency => Case {
        faults: |f| f.stall_after_head_every = Some(1),
        stream: false,
        pattern: LoadPattern::Concurrency(8),
        extra: TIMEOUT,
        expect: Expect { within_s: 20, ..all_fail(&[("timeout", N::Is(SAMPLES))]) },
        ..BASE
    },
    timeout_against_a_mid_stream_stall_offline => Case {
        faults: |f| f.stall_every = Some(1),
        extra: TIMEOUT,
        expect: Expect { within_s: 15, ..all_fail(&[("timeout", N::Is(SAMPLES))]) },
        ..BASE
    },

    // The cap ends a stalled run within cap + grace, even with samples waiting for ring space
    // (defect 1): 3,000 samples, every other answer stalls after its head or never comes.
    cap_ends_a_run_stalled_after_the_head_offline => Case {
        faults: |f| f.stall_after_head_every = Some(2),
        samples: 3000,
        extra: CAP_3S,
        expect: CAPPED,
        ..BASE
    },
    cap_ends_a_run_without_responses_plain_poisson => Case {
        faults: HALF_HANG,
        stream: false,
        pattern: LoadPattern::Poisson(2000),
        samples: 3000,
        extra: CAP_3S,
        expect: CAPPED,
        ..BASE
    },

    // Interrupts: exit 130, in-flight samples abandoned, none failed (defects 7–9).
    sigint_to_the_coordinator_offline => Case {
        faults: HALF_HANG,
        extra: HALF_HANG_FLAGS,
        action: Action::SigintCoordinator,
        trigger_requests: 16,
        expect: INTERRUPTED,
        ..BASE
    },
    sigint_to_the_process_group_offline => Case {
        faults: HALF_HANG,
        extra: HALF_HANG_FLAGS,
        action: Action::SigintGroup,
        trigger_requests: 16,
        expect: INTERRUPTED,
        ..BASE
    },
    sigint_to_the_process_group_plain_concurrency => Case {
        faults: HALF_HANG,
        stream: false,
        pattern: LoadPattern::Concurrency(8),
        action: Action::SigintGroup,
        trigger_requests: 16,
        expect: INTERRUPTED,
        ..BASE
    },
    sigterm_to_the_process_group_poisson => Case {
        faults: HALF_HANG,
        pattern: LoadPattern::Poisson(400),
        extra: HALF_HANG_FLAGS,
        action: Action::SigtermGroup,
        trigger_requests: 16,
        expect: INTERRUPTED,
        ..BASE
    },
    sigstop_of_the_worker_then_sigint_poisson => Case {
        faults: HALF_HANG,
        pattern: LoadPattern::Poisson(400),
        extra: HALF_HANG_FLAGS,
        action: Action::StopWorkerThenSigint,
        trigger_requests: 16,
        expect: Expect { within_s: 10, output_chars: None, ..INTERRUPTED },
        ..BASE
    },

    // A worker killed with requests on the wire: exactly those fail as worker_died; samples
    // it never sent are no failures.
    sigkill_of_the_worker_plain_offline => Case {
        faults: |f| f.no_response_every = Some(1),
        stream: false,
        extra: HALF_HANG_FLAGS,
        action: Action::KillWorker,
        trigger_requests: 8,
        expect: Expect {
            exit: 4,
            failures: &[("worker_died", N::AtAction)],
            completed: N::AtAction,
            abandoned: N::Any,
            ..ALL_OK
        },
        ..BASE
    },
}
