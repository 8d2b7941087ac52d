//! `llm-loadgen probe` against in-process stubs: the reference's lines and exit codes, and the
//! verdicts beyond it (usage on streams honoured, absent or refused; a bursting stream told
//! from a paced one; the token basis), `--json`, `https://` with a CA bundle, and secrets.

use std::process::Output;

use crate::support::{alone, bin, char_tokenizer, show, stderr, stub, tls_stub};
use loadgen_stubs::{StubConfig, StubKind, StubServer};

/// Runs `probe` with `args` (no key from the environment) and echoes its output.
fn probe(args: &[&str]) -> Output {
    let out = bin().arg("probe").args(args).env_remove("OPENAI_API_KEY").output().unwrap();
    show(&out);
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `--json` object of a probe of `server` with `extra` flags, after checking it exited 0.
fn probe_json(server: &StubServer, extra: &[&str]) -> serde_json::Value {
    let url = server.url();
    let mut args = vec!["--endpoints", &url, "--model", "m", "--requests", "3", "--json"];
    args.extend(extra);
    let out = probe(&args);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is json");
    json["endpoints"][0].clone()
}

fn echo(configure: impl FnOnce(&mut StubConfig)) -> StubServer {
    stub(StubKind::Echo, configure)
}

#[test]
fn probe_against_the_echo_stub_prints_the_reference_lines_and_trusts_server_usage() {
    let server = echo(|_| {});
    let url = server.url();
    let tok = char_tokenizer();
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "4", "--tokenizer", &tok]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for line in [
        format!("Probing: {url}"),
        "Sending 4 requests...".into(),
        "  Issued 4/4 requests".into(),
        "  Processed 4/4 responses : probe-3 : Please write me a joke in 30 words.".into(),
        "Completed: 4/4 successful".into(),
        "Sample responses (4 collected):".into(),
        "  [probe-0] Please write me a joke in 30 words.".into(),
        "Probe successful".into(),
        "  usage in plain answers: yes (prompt_tokens 35, completion_tokens 35)".into(),
        "  usage on streams: yes (stream_options.include_usage honoured)".into(),
        "  reasoning: none (no reasoning_content or reasoning in any answer)".into(),
        "basis: server — the server reports usage on streams and it matches the tokenizer \
         within 1 token"
            .into(),
    ] {
        assert!(text.lines().any(|l| l == line), "missing line {line:?}");
    }
    assert!(text.contains("Avg latency: ") && text.contains("Range: "), "{text}");
    // The echo's usage counts characters, as the char tokenizer does: 7 answers, no difference.
    assert!(text.contains("OSL: client and server agree over 7 answers"), "{text}");
    assert!(text.contains("ISL: server 35 tokens; client 35 raw"), "{text}");
}

#[test]
fn a_server_without_usage_on_streams_is_named_and_the_basis_is_client() {
    let server = echo(|c| c.faults.no_stream_usage = true);
    let url = server.url();
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("usage in plain answers: yes"), "{text}");
    assert!(text.contains("usage on streams: no — asked with stream_options.include_usage"));
    assert!(text.contains(
        "basis: client — the server sends no usage on streams (--token-count-source server \
         would fail)"
    ));
}

#[test]
fn a_server_that_rejects_stream_options_is_told_from_one_without_usage() {
    let server = echo(|c| c.faults.reject_stream_options = true);
    let json = probe_json(&server, &[]);
    assert_eq!(json["stream_usage"], "rejected");
    assert_eq!(json["stream_options_status"], 400);
    assert_eq!(json["basis"]["source"], "client");
    assert!(json["basis"]["why"].as_str().unwrap().contains("--no-stream-include-usage"));
    // The plain requests and the streams without the field still succeed.
    assert_eq!(json["successful"], 3);
    assert_eq!(json["chunking"]["streams"], 3);
    let url = server.url();
    let text = stdout(&probe(&["--endpoints", &url, "--model", "m", "--requests", "1"]));
    assert!(text.contains("stream_options: rejected (HTTP 400); the same stream without it"));
}

#[test]
fn a_bursting_stream_is_told_from_a_paced_one() {
    // A paced stream is told by its gaps, which a client starved by other runs would merge.
    let _alone = alone();
    // The echo stub writes each stream in one write, as vLLM sends them under load.
    let burst = probe_json(&echo(|_| {}), &[]);
    assert_eq!(burst["chunking"]["bursting"], true, "{burst}");
    // 8 content events 20 ms apart (2 ms a character, 10 characters an event).
    let paced_stub = stub(StubKind::Variable, |c| {
        c.variable.output_len_mean = 80.0;
        c.variable.output_len_spread = 0.0;
        c.variable.inter_token_latency_ms = 2.0;
    });
    let paced = probe_json(&paced_stub, &[]);
    assert_eq!(paced["chunking"]["bursting"], false, "{paced}");
    assert!(paced["chunking"]["gap_ms_median"].as_f64().unwrap() >= 15.0, "{paced}");
    let url = paced_stub.url();
    let text = stdout(&probe(&["--endpoints", &url, "--model", "m", "--requests", "1"]));
    assert!(text.contains("streamed: events arrive spread out"), "{text}");
    let burst_stub = echo(|_| {});
    let url = burst_stub.url();
    let text = stdout(&probe(&["--endpoints", &url, "--model", "m", "--requests", "1"]));
    assert!(
        text.contains("arrived mostly at once (most text events < 0.1 ms apart), so TTFT is about")
    );
}

#[test]
fn json_has_every_finding_and_the_console_lines_go_to_stderr() {
    let server = echo(|_| {});
    let url = server.url();
    let tok = char_tokenizer();
    let out = probe(&[
        "--endpoints",
        &url,
        "--model",
        "m",
        "--requests",
        "2",
        "--json",
        "--tokenizer",
        &tok,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is json");
    let ep = &json["endpoints"][0];
    for key in [
        "url",
        "api_type",
        "requests",
        "successful",
        "latency_ms",
        "samples",
        "errors",
        "ok",
        "plain_usage",
        "stream_usage",
        "stream_options_status",
        "stream_errors",
        "reasoning",
        "chunking",
        "osl",
        "isl",
        "basis",
    ] {
        assert!(ep.get(key).is_some(), "{key} missing in {ep}");
    }
    assert_eq!((ep["requests"].as_u64(), ep["successful"].as_u64()), (Some(2), Some(2)));
    assert_eq!(ep["stream_usage"], "honoured");
    assert_eq!(ep["osl"]["max_abs_diff"], 0);
    assert_eq!(ep["isl"]["server"], 35);
    assert_eq!(ep["basis"]["source"], "server");
    assert!(stderr(&out).contains("Probe successful"), "the console lines are on stderr");
}

#[test]
fn completions_and_sglang_endpoints_are_probed_with_their_own_usage() {
    let server = echo(|_| {});
    let json = probe_json(&server, &["--api-type", "openai_completions"]);
    assert_eq!(
        (json["successful"].as_u64(), json["stream_usage"].as_str()),
        (Some(3), Some("honoured"))
    );
    let json = probe_json(&server, &["--api-type", "sglang"]);
    assert_eq!(json["successful"], 3, "{json}");
    assert_eq!(json["basis"]["source"], "server", "SGLang's meta_info counts: {json}");
}

#[test]
fn a_dead_endpoint_exits_4_and_a_setup_failure_exits_3() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dead = format!("http://127.0.0.1:{port}");
    let out = probe(&["--endpoints", &dead, "--model", "m", "--requests", "2"]);
    assert_eq!(out.status.code(), Some(4), "fewer than half the requests succeeded");
    assert!(stdout(&out).contains("Completed: 0/2 successful"));
    assert!(stdout(&out).contains("Probe failed: Too many errors"));
    assert!(stderr(&out).contains(&format!("probe failed: only 0/2 requests to {dead}")));
    // A second, live endpoint does not hide the dead one.
    let live_stub = echo(|_| {});
    let live = live_stub.url();
    let both = format!("{live},{dead}");
    let out = probe(&["--endpoints", &both, "--model", "m", "--requests", "1"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stdout(&out).matches("Probing: ").count(), 2);
    let out = probe(&[
        "--endpoints",
        "https://127.0.0.1:1",
        "--model",
        "m",
        "--ca-bundle",
        "/nonexistent/ca.pem",
    ]);
    assert_eq!(out.status.code(), Some(3), "an unreadable CA bundle is a setup error");
    assert!(stderr(&out).contains("/nonexistent/ca.pem"));
}

#[test]
fn videogen_is_refused_with_exit_2() {
    let out =
        probe(&["--endpoints", "http://127.0.0.1:1", "--model", "m", "--api-type", "videogen"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("probe does not support --api-type videogen"));
}

#[test]
fn an_https_endpoint_probes_with_its_ca_bundle_and_fails_without() {
    let (server, ca) = tls_stub();
    let url = server.url();
    assert!(url.starts_with("https://"), "{url}");
    let ca = ca.display().to_string();
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "2", "--ca-bundle", &ca]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("usage on streams: yes"));
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "1", "--insecure"]);
    assert_eq!(out.status.code(), Some(0));
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "1"]);
    // A certificate that does not verify is a setup error, exit 3, as in a benchmark (also on
    // a machine without system roots, where the setup stops before any request).
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let all = format!("{}{}", stdout(&out), stderr(&out)).to_lowercase();
    assert!(all.contains("certificate"), "the error names the cause");
    assert!(all.contains("--ca-bundle"), "and says what to do");
}

/// The CA is trusted but the URL names the server by a name its certificate lacks (the stub's
/// holds localhost, 127.0.0.1 and ::1; `::ffff:127.0.0.1` reaches it as an IPv6 address):
/// exit 3, and the advice is the host name, since another CA bundle cannot help.
#[test]
fn a_certificate_for_another_name_is_a_setup_error_that_advises_the_host_name() {
    let (server, ca) = tls_stub();
    let port = server.url().rsplit(':').next().unwrap().to_string();
    let url = format!("https://[::ffff:127.0.0.1]:{port}");
    let ca = ca.display().to_string();
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "1", "--ca-bundle", &ca]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the certificate of ::ffff:127.0.0.1 did not verify"), "{err}");
    assert!(err.contains("put a host name the certificate carries in the URL"), "{err}");
    assert!(!err.contains("pass a CA bundle"), "a bundle is no remedy for a name: {err}");
}

#[test]
fn the_api_key_is_sent_and_never_printed_and_v_shows_the_bodies() {
    let heads = loadgen_stubs::BodyLog::default();
    let log = heads.clone();
    let server = echo(move |c| c.head_log = Some(log));
    let url = server.url();
    let out = probe(&[
        "--endpoints",
        &url,
        "--model",
        "m",
        "--requests",
        "1",
        "--api-key",
        "sk-probe-7f3a",
        "-H",
        "X-Api-Key: t-secret-9",
        "-v",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    // -v shows the bodies sent (no header is in them), with the 50-token limit.
    let shown = r#"plain request: {"model":"m","messages":[{"role":"user","content":"Please"#;
    assert!(stderr(&out).contains(shown), "-v prints the request body");
    assert!(stderr(&out).contains(r#""max_completion_tokens":50"#));
    assert!(stderr(&out).contains(r#""stream_options":{"include_usage":true}"#));
    assert!(!all.contains("sk-probe-7f3a") && !all.contains("t-secret-9"), "{all}");
    let sent = heads
        .lock()
        .unwrap()
        .iter()
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .collect::<Vec<_>>();
    assert_eq!(sent.len(), 4, "1 plain request and 3 streams");
    assert!(sent.iter().all(|h| h.contains("Authorization: Bearer sk-probe-7f3a")), "{sent:?}");
    assert!(sent.iter().all(|h| h.contains("X-Api-Key: t-secret-9")), "{sent:?}");
}

#[test]
fn a_base_url_with_v1_and_userinfo_is_probed_as_the_benchmark_sends_it() {
    let heads = loadgen_stubs::BodyLog::default();
    let log = heads.clone();
    let server = echo(move |c| c.head_log = Some(log));
    let url = server.url().replace("http://", "http://user:pw-4d2c@") + "/v1/";
    let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains("pw-4d2c"), "the URL's password is never printed: {all}");
    assert!(stdout(&out).contains(&format!("Probing: {}", server.url())));
    let sent = heads.lock().unwrap().clone();
    assert_eq!(sent.len(), 4, "1 plain request and 3 streams");
    for head in sent.iter().map(|h| String::from_utf8_lossy(h).into_owned()) {
        assert!(head.starts_with("POST /v1/chat/completions HTTP/1.1"), "no /v1/v1: {head}");
        // base64("user:pw-4d2c")
        assert!(head.contains("Authorization: Basic dXNlcjpwdy00ZDJj"), "{head}");
    }
}

#[test]
fn a_plain_header_value_is_no_secret_and_the_json_stays_valid() {
    let server = echo(|_| {});
    // probe_json parses stdout: `true` hidden as a secret would make `"ok":<redacted>`.
    let endpoint = probe_json(&server, &["-H", "X-Flag: true"]);
    assert_eq!(endpoint["ok"], true);
}

#[test]
fn a_url_user_without_a_password_sends_user_colon_and_an_empty_userinfo_sends_none() {
    // base64("user:"): the user with an empty password, as curl and browsers send it.
    for (userinfo, want) in [("user@", Some("Authorization: Basic dXNlcjo=\r\n")), ("@", None)] {
        let heads = loadgen_stubs::BodyLog::default();
        let log = heads.clone();
        let server = echo(move |c| c.head_log = Some(log));
        let url = server.url().replace("http://", &format!("http://{userinfo}"));
        let out = probe(&["--endpoints", &url, "--model", "m", "--requests", "1"]);
        assert_eq!(out.status.code(), Some(0), "{url}");
        let sent = heads.lock().unwrap().clone();
        assert_eq!(sent.len(), 4, "1 plain request and 3 streams");
        for head in sent.iter().map(|h| String::from_utf8_lossy(h).into_owned()) {
            match want {
                Some(line) => assert!(head.contains(line), "{userinfo}: {head}"),
                None => assert!(!head.to_ascii_lowercase().contains("authorization"), "{head}"),
            }
        }
    }
}
