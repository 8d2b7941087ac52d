//! End-to-end tests of `run_worker` against a tiny in-test HTTP server (std threads, port 0):
//! records come back exact, failures are data, connections are reopened, abort cancels.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use loadgen_wire::{
    monotonic_ns, Doorbell, FailureKind, FinishReason, IssueCmd, RecordConsumer, RingSizes,
    WorkerEvent, WorkerRings,
};
use loadgen_worker::request::{ApiType, Endpoint, Prompt, RequestOptions, RequestTable};
use loadgen_worker::{run_worker, WorkerEndpoint, WorkerSpec};

/// A canned-response server: echoes the prompt as SSE (split across HTTP chunks) or JSON;
/// "missing" gives 404, "stall" never answers, every `close_every`-th response closes; the
/// fault prompts (`FAULTS`) send what their names say.
struct Server {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    accepted: Arc<AtomicUsize>,
    /// Requests read whole, on every connection.
    requests: Arc<AtomicUsize>,
}

/// How the server treats its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Keep-alive; every `close_every`-th response (0: none) says `Connection: close`.
    KeepAlive { close_every: usize },
    /// One response per connection, without saying so: the socket closes right after it, as a
    /// keep-alive connection a server drops while it sits idle.
    OneResponseThenClose,
    /// Reads each request, then closes without a byte of response.
    CloseAfterRead,
}

impl Server {
    fn start(close_every: usize) -> Server {
        Server::start_mode(Mode::KeepAlive { close_every })
    }

    fn start_mode(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (stop2, accepted2, requests2) = (stop.clone(), accepted.clone(), requests.clone());
        let accept = std::thread::spawn(move || {
            let mut handlers = Vec::new();
            let served = Arc::new(AtomicUsize::new(0));
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                accepted2.fetch_add(1, Ordering::SeqCst);
                let (served, requests) = (served.clone(), requests2.clone());
                handlers.push(std::thread::spawn(move || {
                    serve(stream.unwrap(), mode, &served, &requests)
                }));
            }
            for h in handlers {
                h.join().unwrap();
            }
        });
        Server { addr, stop, accept: Some(accept), accepted, requests }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            accept.join().unwrap();
        }
    }
}

fn serve(stream: TcpStream, mode: Mode, served: &AtomicUsize, requests: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut content_length = 0;
        let mut streaming = false;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            let lower = header.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                content_length = v.trim().parse().unwrap();
            }
            streaming |= lower.starts_with("accept: text/event-stream");
        }
        let mut body = vec![0; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::SeqCst);
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let prompt = json["messages"][0]["content"].as_str().unwrap_or("").to_string();
        if prompt == "stall" {
            // Wait for the client to go away.
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
            return;
        }
        if mode == Mode::CloseAfterRead {
            return;
        }
        if let Some(fault) = fault_response(&prompt) {
            // Each fault response ends its connection (the close-delimited ones must).
            let _ = out.write_all(&fault);
            return;
        }
        let n = served.fetch_add(1, Ordering::SeqCst) + 1;
        let close = matches!(mode, Mode::KeepAlive { close_every } if close_every > 0 && n % close_every == 0);
        let conn_header = if close { "Connection: close\r\n" } else { "" };
        let response = if prompt == "missing" {
            format!("HTTP/1.1 404 Not Found\r\n{conn_header}Content-Length: 4\r\n\r\nnope")
        } else if streaming {
            sse_response(&prompt, conn_header)
        } else {
            let body = serde_json::json!({
                "id": "x",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": prompt}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt.len(), "completion_tokens": prompt.len(), "total_tokens": 0}
            })
            .to_string();
            format!("HTTP/1.1 200 OK\r\n{conn_header}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
        };
        if out.write_all(response.as_bytes()).is_err() || close {
            return;
        }
        if mode == Mode::OneResponseThenClose {
            return;
        }
    }
}

/// The fault prompts, each answered by `fault_response`.
const FAULTS: &[&str] = &[
    "error-mid-stream",
    "error-only",
    "error-body",
    "truncate-close",
    "truncate-chunked",
    "multi-line",
    "headers-40",
    "headers-200",
];

fn chat_frame(content: &str) -> String {
    let frame = serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    format!("data: {frame}\n\n")
}

/// `events` as a chunked SSE response (7-byte chunks), with its last chunk when `whole`.
fn chunked_sse(events: &str, whole: bool) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for chunk in events.as_bytes().chunks(7) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    if whole {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// A JSON chat body with `extra` response headers (200, Content-Length).
fn json_with_headers(extra: usize) -> Vec<u8> {
    let body =
        r#"{"choices":[{"index":0,"message":{"content":"many headers"},"finish_reason":"stop"}]}"#;
    let mut out =
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\n".to_vec();
    for i in 0..extra {
        out.extend_from_slice(format!("X-Gateway-Trace-{i}: hop-{i}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    out
}

fn fault_response(prompt: &str) -> Option<Vec<u8>> {
    let eight: Vec<String> = (0..8).map(|i| chat_frame(&format!("p{i}"))).collect();
    let error = r#"data: {"error":{"object":"error","message":"engine error: out of KV cache","type":"InternalServerError","param":null,"code":500}}"#;
    Some(match prompt {
        "error-mid-stream" => {
            chunked_sse(&format!("{}{}{error}\n\ndata: [DONE]\n\n", eight[0], eight[1]), true)
        }
        "error-only" => chunked_sse(&format!("{error}\n\n"), true),
        "error-body" => {
            let body =
                r#"{"error":{"message":"the model is not loaded","type":"BadRequestError"}}"#;
            format!("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
        }
        // Three of eight pieces, then the close: no finish_reason, no [DONE].
        "truncate-close" => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{}",
            eight[..3].concat()
        )
        .into_bytes(),
        "truncate-chunked" => chunked_sse(&eight[..3].concat(), false),
        "multi-line" => {
            let events = "data: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"two\"}}]}\r\n\r\n\
                 : keep-alive\n\nevent: message\nid: 2\ndata: {\"choices\":[{\"delta\":{\"content\":\" lines\"},\n\
                 data: \"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
            chunked_sse(events, true)
        }
        "headers-40" => json_with_headers(40),
        "headers-200" => json_with_headers(200),
        _ => return None,
    })
}

/// The prompt as SSE, two characters per event, the whole stream cut into 7-byte HTTP chunks.
fn sse_response(prompt: &str, conn_header: &str) -> String {
    let mut events = String::new();
    let chars: Vec<char> = prompt.chars().collect();
    for piece in chars.chunks(2) {
        let text: String = piece.iter().collect();
        let frame = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        events.push_str(&format!("data: {frame}\n\n"));
    }
    events.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    let usage = prompt.chars().count();
    events.push_str(&format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{usage},\"completion_tokens\":{usage},\"total_tokens\":0}}}}\n\ndata: [DONE]\n\n"
    ));
    let mut out = format!("HTTP/1.1 200 OK\r\n{conn_header}Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    for chunk in events.as_bytes().chunks(7) {
        out.push_str(&format!("{:x}\r\n{}\r\n", chunk.len(), std::str::from_utf8(chunk).unwrap()));
    }
    out.push_str("0\r\n\r\n");
    out
}

fn spec(
    endpoint: Endpoint,
    prompts: &[&str],
    streaming: bool,
    connections: u32,
    epoll: bool,
) -> WorkerSpec {
    let opts = RequestOptions {
        stream_include_usage: true,
        ..RequestOptions::basic(ApiType::OpenAiChat, "m", streaming, 16)
    };
    let table = RequestTable::build(
        &endpoint,
        &opts,
        None,
        prompts.iter().map(|p| Prompt::Text { system: None, user: p }),
    )
    .unwrap();
    WorkerSpec {
        worker_id: 2,
        core: None,
        endpoints: vec![WorkerEndpoint::new(endpoint, Arc::new(table))],
        first_endpoint: 0,
        connections,
        warm_connections: connections,
        api: ApiType::OpenAiChat,
        streaming,
        force_epoll: epoll,
        max_output_bytes: 1 << 16,
        request_timeout_ns: 0,
        turn_delays_ns: None,
        in_flight: None,
        synthetic: None,
        video_fallback_dir: None,
    }
}

/// A popped record, owned.
#[derive(Debug)]
struct Got {
    sample_id: u64,
    row: u32,
    failure: FailureKind,
    finish: FinishReason,
    status: u16,
    output: String,
    error: String,
    first_chunk_ns: u64,
    first_chunk_len: u32,
    tokens: (Option<u32>, Option<u32>),
    resent: u8,
    endpoint: u8,
    issued_ns: u64,
    complete_ns: u64,
}

enum Popped {
    Ready(u32),
    Failed(String),
    Record(Got),
    Warning(String),
    /// An `Issued` or `FirstChunk` notice (the event log's, ahead of a record).
    Notice,
    Done,
}

/// Longest wait for a worker event: a test that waits longer has hung.
const EVENT_DEADLINE: Duration = Duration::from_secs(30);

fn pop_wait(records: &mut RecordConsumer, bell: &Doorbell) -> Popped {
    let deadline = std::time::Instant::now() + EVENT_DEADLINE;
    loop {
        assert!(std::time::Instant::now() < deadline, "no worker event within {EVENT_DEADLINE:?}");
        let seen = bell.epoch();
        let popped = records.pop(|event| match event {
            WorkerEvent::Ready { connections_open } => Popped::Ready(connections_open),
            WorkerEvent::SetupFailed { message } => Popped::Failed(message.to_string()),
            WorkerEvent::Warning { message } => Popped::Warning(message.to_string()),
            WorkerEvent::Done => Popped::Done,
            WorkerEvent::Issued { .. } | WorkerEvent::FirstChunk { .. } => Popped::Notice,
            WorkerEvent::Record(view) => {
                assert!(view.header.timestamps_ordered(), "{:?}", view.header);
                Popped::Record(Got {
                    sample_id: view.header.sample_id,
                    row: view.header.row,
                    failure: view.header.failure_kind(),
                    finish: view.header.finish_reason(),
                    status: view.header.http_status,
                    output: String::from_utf8(view.output.to_vec()).unwrap(),
                    error: String::from_utf8(view.error.to_vec()).unwrap(),
                    first_chunk_ns: view.header.first_chunk_ns,
                    first_chunk_len: view.header.first_chunk_len,
                    tokens: (view.header.prompt_tokens, view.header.completion_tokens),
                    resent: view.header.resent,
                    endpoint: view.header.endpoint,
                    issued_ns: view.header.issued_ns,
                    complete_ns: view.header.complete_ns,
                })
            }
        });
        match popped {
            Some(p) => return p,
            None => bell.wait(seen, Duration::from_secs(5)),
        }
    }
}

/// Runs a worker on a thread; returns records, warnings and the exit code after `Stop`.
fn run(spec: WorkerSpec, issues: &[(u64, u32)], end: IssueCmd) -> (Vec<Got>, Vec<String>, i32) {
    let bell = Doorbell::create().unwrap();
    let rings =
        WorkerRings::create(2, RingSizes { issue_slots: 8, record_bytes: 1 << 16 }, &bell).unwrap();
    let (issue_rx, records_tx) = rings.worker_ends();
    let (mut issue_tx, mut records) = rings.coordinator_ends();
    let worker = std::thread::spawn(move || run_worker(spec, issue_rx, records_tx));
    let mut got = Vec::new();
    let mut warnings = Vec::new();
    match pop_wait(&mut records, &bell) {
        Popped::Ready(n) => assert!(n >= 1),
        Popped::Failed(message) => {
            assert!(matches!(pop_wait(&mut records, &bell), Popped::Done));
            return (got, vec![message], worker.join().unwrap());
        }
        _ => panic!("first event must be Ready or SetupFailed"),
    }
    let mut pending = issues.iter();
    let mut next = pending.next();
    let mut ended = false;
    loop {
        while let Some(&(sample_id, row)) = next {
            if !issue_tx.try_push(IssueCmd::Issue { sample_id, row, issued_ns: monotonic_ns() }) {
                break;
            }
            next = pending.next();
        }
        if next.is_none() && !ended && (end == IssueCmd::Stop || got.len() + 1 >= issues.len()) {
            ended = issue_tx.try_push(end);
        }
        match pop_wait(&mut records, &bell) {
            Popped::Record(r) => got.push(r),
            Popped::Warning(w) => warnings.push(w),
            Popped::Notice => {}
            Popped::Done => break,
            _ => panic!("unexpected event"),
        }
    }
    (got, warnings, worker.join().unwrap())
}

/// Runs a worker on a thread with `cmds` (then Stop) until `records` records came back.
fn run_cmds(spec: WorkerSpec, cmds: &[IssueCmd], records_expected: usize) -> Vec<Got> {
    let bell = Doorbell::create().unwrap();
    let rings =
        WorkerRings::create(2, RingSizes { issue_slots: 8, record_bytes: 1 << 16 }, &bell).unwrap();
    let (issue_rx, records_tx) = rings.worker_ends();
    let (mut issue_tx, mut records) = rings.coordinator_ends();
    let worker = std::thread::spawn(move || run_worker(spec, issue_rx, records_tx));
    assert!(matches!(pop_wait(&mut records, &bell), Popped::Ready(_)));
    for &cmd in cmds.iter().chain([&IssueCmd::Stop]) {
        assert!(issue_tx.try_push(cmd), "the ring has room for the test's few commands");
    }
    let mut got = Vec::new();
    loop {
        match pop_wait(&mut records, &bell) {
            Popped::Record(r) => got.push(r),
            Popped::Warning(_) | Popped::Notice => {}
            Popped::Done => break,
            _ => panic!("unexpected event"),
        }
    }
    assert_eq!(worker.join().unwrap(), 0);
    assert_eq!(got.len(), records_expected, "{got:?}");
    got.sort_by_key(|g| g.sample_id);
    got
}

#[test]
fn a_conversation_s_turns_go_in_order_and_a_failed_turn_aborts_the_rest() {
    let server = Server::start(0);
    let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    // Rows 0, 1, 2 answer; row 3 ("missing") is a 404. Row 1 waits 30 ms after row 0.
    let mut spec = spec(ep, PROMPTS, true, 2, false);
    let delay_ns = 30_000_000;
    spec.turn_delays_ns = Some(Arc::new(vec![0, delay_ns, 0, 0, 0, 0]));
    let cmds = [
        IssueCmd::Conversation { first_sample_id: 10, first_row: 0, turns: 3 },
        IssueCmd::Conversation { first_sample_id: 20, first_row: 3, turns: 3 },
    ];
    let got = run_cmds(spec, &cmds, 6);
    let ids: Vec<(u64, u32)> = got.iter().map(|g| (g.sample_id, g.row)).collect();
    assert_eq!(ids, [(10, 0), (11, 1), (12, 2), (20, 3), (21, 4), (22, 5)]);
    let first = &got[..3];
    assert!(first.iter().all(|g| g.failure == FailureKind::None), "{first:?}");
    // Each turn is issued after the one before it completed, by the worker's own stamps; the
    // second waited out its tool delay first.
    assert!(first[1].issued_ns >= first[0].complete_ns + delay_ns, "{first:?}");
    assert!(first[2].issued_ns >= first[1].complete_ns, "{first:?}");
    let second = &got[3..];
    assert_eq!((second[0].failure, second[0].status), (FailureKind::HttpStatus, 404));
    for g in &second[1..] {
        assert_eq!(g.failure, FailureKind::TurnAborted, "{g:?}");
        assert_eq!(g.error, "prior turn failed: http_status");
        assert_eq!(g.issued_ns, g.complete_ns, "never sent: {g:?}");
    }
    // Four requests reached the server: the aborted turns were never sent.
    assert_eq!(server.requests.load(Ordering::SeqCst), 4);
}

const PROMPTS: &[&str] = &["hello world", "a", "", "missing", "ünïcode ✓ text", "stall"];

#[test]
fn streaming_records_are_exact_on_both_drivers() {
    for epoll in [false, true] {
        let server = Server::start(0);
        let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
        let issues: Vec<(u64, u32)> =
            (0..200).map(|i| (1000 + i, [0, 1, 2, 4][i as usize % 4])).collect();
        let (mut got, warnings, code) =
            run(spec(ep, PROMPTS, true, 4, epoll), &issues, IssueCmd::Stop);
        assert_eq!(code, 0);
        assert!(warnings.iter().all(|w| !w.contains("usage")), "{warnings:?}");
        got.sort_by_key(|g| g.sample_id);
        assert_eq!(got.len(), issues.len());
        for (g, &(id, row)) in got.iter().zip(&issues) {
            let prompt = PROMPTS[row as usize];
            assert_eq!((g.sample_id, g.row), (id, row));
            assert_eq!(
                (g.failure, g.status, g.finish),
                (FailureKind::None, 200, FinishReason::Stop)
            );
            assert_eq!(g.output, prompt);
            assert_eq!(g.error, "");
            let chars = prompt.chars().count() as u32;
            assert_eq!(g.tokens, (Some(chars), Some(chars)));
            if prompt.is_empty() {
                assert_eq!(g.first_chunk_ns, 0);
            } else {
                assert!(g.first_chunk_ns > 0);
                let first: String = prompt.chars().take(2).collect();
                assert_eq!(g.first_chunk_len as usize, first.len());
            }
        }
    }
}

#[test]
fn http_errors_are_records_and_closed_connections_reopen() {
    let server = Server::start(3);
    let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    let issues: Vec<(u64, u32)> = (0..60).map(|i| (i, [0, 3, 1][i as usize % 3])).collect();
    let (got, _, code) = run(spec(ep, PROMPTS, false, 2, false), &issues, IssueCmd::Stop);
    assert_eq!(code, 0);
    assert_eq!(got.len(), 60);
    for g in &got {
        if g.row == 3 {
            assert_eq!(
                (g.failure, g.status, g.error.as_str()),
                (FailureKind::HttpStatus, 404, "HTTP 404: nope")
            );
            assert_eq!(g.output, "");
        } else {
            assert_eq!((g.failure, g.first_chunk_ns), (FailureKind::None, 0));
            assert_eq!(g.output, PROMPTS[g.row as usize]);
            assert_eq!(g.first_chunk_len as usize, g.output.len());
        }
    }
    // Every third response closed its connection, so the worker reconnected many times.
    assert!(server.accepted.load(Ordering::SeqCst) >= 20);
}

#[test]
fn abort_cancels_in_flight_samples() {
    let server = Server::start(0);
    let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    // Two connections: sample 7 stalls on one, sample 8 completes on the other, and only then
    // is Abort sent, so sample 7 is in flight when it arrives.
    let issues = [(7, 5), (8, 0)];
    let (got, _, code) = run(spec(ep, PROMPTS, true, 2, false), &issues, IssueCmd::Abort);
    assert_eq!(code, 0);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].sample_id, got[0].failure), (8, FailureKind::None));
    assert_eq!((got[1].sample_id, got[1].failure), (7, FailureKind::Cancelled));
    assert_eq!(got[1].error, "cancelled by abort");
}

#[test]
fn unreachable_endpoint_is_a_setup_failure() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ep = Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let (got, messages, code) = run(spec(ep, PROMPTS, true, 2, false), &[], IssueCmd::Stop);
    assert_eq!(code, 3);
    assert!(got.is_empty());
    assert!(messages[0].contains("cannot connect"), "{messages:?}");
}

/// A worker spec whose slots are dealt over the `servers`' endpoints, slot 0 to `first`.
fn multi_spec(servers: &[std::net::SocketAddr], first: u32, connections: u32) -> WorkerSpec {
    let endpoint = |addr| Endpoint::parse(&format!("http://{addr}")).unwrap();
    let mut multi = spec(endpoint(servers[0]), PROMPTS, true, connections, false);
    for &addr in &servers[1..] {
        let other = spec(endpoint(addr), PROMPTS, true, connections, false);
        multi.endpoints.extend(other.endpoints);
    }
    multi.first_endpoint = first;
    multi
}

#[test]
fn one_worker_spreads_its_samples_over_every_endpoint_and_records_name_them() {
    let servers = [Server::start(0), Server::start(0), Server::start(0)];
    let addrs: Vec<_> = servers.iter().map(|s| s.addr).collect();
    let issues: Vec<(u64, u32)> = (0..300).map(|i| (i, 0)).collect();
    let (got, _, code) = run(multi_spec(&addrs, 1, 6), &issues, IssueCmd::Stop);
    assert_eq!(code, 0);
    assert_eq!(got.len(), issues.len());
    assert!(got.iter().all(|g| g.failure == FailureKind::None), "{got:?}");
    for (e, server) in servers.iter().enumerate() {
        let named = got.iter().filter(|g| usize::from(g.endpoint) == e).count();
        assert_eq!(named, server.requests.load(Ordering::SeqCst), "endpoint {e}");
        // Taken in turn, a third each; the bound leaves room for a slow, shared machine.
        assert!(named >= issues.len() / 6, "endpoint {e} got {named} of {}", issues.len());
        assert_eq!(server.accepted.load(Ordering::SeqCst), 2, "two of the six slots each");
    }
}

#[test]
fn a_dead_endpoint_fails_setup_naming_it_though_the_other_connects() {
    let live = Server::start(0);
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (got, messages, code) = run(multi_spec(&[live.addr, dead], 0, 4), &[], IssueCmd::Stop);
    assert_eq!((code, got.len()), (3, 0));
    let want = format!("worker 2: endpoint http://{dead}: cannot connect to {dead}: ");
    assert!(messages[0].starts_with(&want), "{messages:?}");
    assert!(!messages[0].contains(&live.addr.to_string()), "{messages:?}");
}

/// `PROMPTS` then `FAULTS`: the row of a fault prompt is its index here.
fn fault_prompts() -> Vec<&'static str> {
    PROMPTS.iter().chain(FAULTS).copied().collect()
}

fn fault_row(name: &str) -> u32 {
    fault_prompts().iter().position(|p| *p == name).unwrap() as u32
}

/// Runs each fault prompt `times` times (streaming or not) on two connections; the records by
/// prompt.
fn run_faults(names: &[&str], streaming: bool, times: u64) -> Vec<(String, Got)> {
    let server = Server::start(0);
    let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    let prompts = fault_prompts();
    let issues: Vec<(u64, u32)> = (0..times * names.len() as u64)
        .map(|i| (i, fault_row(names[(i % names.len() as u64) as usize])))
        .collect();
    let (got, _, code) = run(spec(ep, &prompts, streaming, 2, false), &issues, IssueCmd::Stop);
    assert_eq!(code, 0);
    assert_eq!(got.len(), issues.len());
    got.into_iter().map(|g| (prompts[g.row as usize].to_string(), g)).collect()
}

#[test]
fn an_error_frame_mid_stream_fails_the_sample() {
    for (name, g) in run_faults(&["error-mid-stream", "error-only", "hello world"], true, 4) {
        if name == "hello world" {
            assert_eq!((g.failure, g.output.as_str()), (FailureKind::None, "hello world"));
            continue;
        }
        assert_eq!((g.failure, g.status), (FailureKind::StreamError, 200), "{name}: {g:?}");
        assert_eq!(g.error, "stream error: engine error: out of KV cache", "{name}");
        assert_eq!(g.output, "", "{name}: a failed sample keeps no output");
    }
}

#[test]
fn an_error_body_with_status_200_fails_the_sample() {
    for (name, g) in run_faults(&["error-body"], false, 4) {
        assert_eq!(g.failure, FailureKind::StreamError, "{name}: {g:?}");
        assert_eq!(g.error, "error in response body: the model is not loaded");
    }
}

#[test]
fn a_stream_closed_before_done_is_truncated() {
    for (name, g) in run_faults(&["truncate-close", "truncate-chunked"], true, 4) {
        assert_eq!(g.failure, FailureKind::Truncated, "{name}: {g:?}");
        assert_eq!(
            g.error,
            "stream truncated: the connection closed after 3 frames with no finish_reason and no [DONE]"
        );
        assert_eq!(g.output, "");
    }
}

#[test]
fn multi_line_data_events_join_with_newline() {
    for (name, g) in run_faults(&["multi-line"], true, 4) {
        assert_eq!((g.failure, g.finish), (FailureKind::None, FinishReason::Stop), "{name}: {g:?}");
        assert_eq!(g.output, "two lines");
    }
}

#[test]
fn forty_headers_are_accepted() {
    for (name, g) in run_faults(&["headers-40", "headers-200"], false, 3) {
        if name == "headers-40" {
            assert_eq!((g.failure, g.output.as_str()), (FailureKind::None, "many headers"));
        } else {
            assert_eq!(g.failure, FailureKind::HeadLimit, "{g:?}");
            assert!(g.error.contains("more than 128 headers (MAX_RESPONSE_HEADERS)"), "{g:?}");
        }
    }
}

#[test]
fn a_fresh_connection_is_never_resent() {
    // Every request is read and its connection closed without a byte of response: no
    // connection ever carried a response, so none may be sent twice.
    let server = Server::start_mode(Mode::CloseAfterRead);
    let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    let issues: Vec<(u64, u32)> = (0..40).map(|i| (i, 0)).collect();
    let (got, _, code) = run(spec(ep, PROMPTS, true, 4, false), &issues, IssueCmd::Stop);
    assert_eq!(code, 0);
    assert_eq!(got.len(), 40);
    for g in &got {
        assert_eq!((g.failure, g.resent), (FailureKind::ConnectionClosed, 0), "{g:?}");
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), 40, "each request read once");
}

#[test]
fn a_reused_connection_closed_before_any_byte_is_resent_once_and_counted() {
    // Each connection serves one keep-alive response and then closes, as an idle connection a
    // server drops: the next request on it finds it closed before any byte and is re-sent once,
    // on a fresh connection, which answers.
    let server = Server::start_mode(Mode::OneResponseThenClose);
    let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
    let issues: Vec<(u64, u32)> = (0..30).map(|i| (i, 0)).collect();
    let (got, _, code) = run(spec(ep, PROMPTS, false, 1, false), &issues, IssueCmd::Stop);
    assert_eq!(code, 0);
    assert_eq!(got.len(), 30);
    let resent: usize = got.iter().map(|g| usize::from(g.resent)).sum();
    for g in &got {
        assert_eq!((g.failure, g.output.as_str()), (FailureKind::None, "hello world"), "{g:?}");
        assert!(g.resent <= 1);
    }
    // Sample 0 took the fresh warm connection; every later one found its connection closed.
    assert_eq!(resent, 29, "{got:?}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 30, "the closed sends were never read");
}

#[test]
fn a_stalled_response_times_out() {
    for epoll in [false, true] {
        let server = Server::start(0);
        let ep = Endpoint::parse(&format!("http://{}", server.addr)).unwrap();
        let mut spec = spec(ep, PROMPTS, true, 1, epoll);
        spec.request_timeout_ns = 300_000_000;
        // One connection: the stalled sample times out, its connection is reset, and the next
        // sample gets a fresh connection and a whole answer (not the stalled one's).
        let issues = [(1, 5), (2, 0)];
        let started = std::time::Instant::now();
        let (mut got, _, code) = run(spec, &issues, IssueCmd::Stop);
        assert_eq!(code, 0);
        got.sort_by_key(|g| g.sample_id);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].failure, FailureKind::Timeout, "{:?}", got[0]);
        assert_eq!(got[0].error, "no complete response within 0.3 s (the request timeout)");
        assert_eq!((got[1].failure, got[1].output.as_str()), (FailureKind::None, "hello world"));
        assert!(started.elapsed() >= Duration::from_millis(300));
    }
}

// TLS (`https://`) against the `--tls` echo stub, whose CA certificate the tests write to a
// file as a user's CA bundle.

use loadgen_stubs::{StubConfig, StubKind, StubServer, TruncateFault, TruncateFraming};
use loadgen_worker::http::tls::Verify;

/// A `--tls` echo stub and its CA in a file of its own (removed on drop).
struct TlsStub {
    server: StubServer,
    dir: std::path::PathBuf,
}

impl TlsStub {
    fn start(edit: impl FnOnce(&mut StubConfig)) -> TlsStub {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let mut cfg = StubConfig::new(StubKind::Echo);
        cfg.tls = true;
        edit(&mut cfg);
        let server = StubServer::start(cfg).unwrap();
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("worker-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), server.ca_pem().unwrap()).unwrap();
        TlsStub { server, dir }
    }

    fn ca_bundle(&self) -> Verify {
        Verify::CaBundle(self.dir.join("ca.pem"))
    }

    /// The stub as `https://HOST:PORT`, verified as `verify` says.
    fn endpoint(&self, host: &str, verify: Verify) -> Endpoint {
        let mut ep =
            Endpoint::parse(&format!("https://{host}:{}", self.server.addr().port())).unwrap();
        ep.tls.as_mut().expect("an https url has tls settings").verify = verify;
        ep
    }
}

impl Drop for TlsStub {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const TLS_PROMPTS: &[&str] = &["hello world", "a", "ünïcode ✓ text"];

/// Runs 30 samples over `connections` connections to `ep`; checks each is the echo of its
/// prompt and returns the exit code.
fn run_echo_samples(ep: Endpoint, streaming: bool, epoll: bool) {
    let issues: Vec<(u64, u32)> = (0..30).map(|i| (i, (i % 3) as u32)).collect();
    let (got, messages, code) =
        run(spec(ep, TLS_PROMPTS, streaming, 2, epoll), &issues, IssueCmd::Stop);
    assert_eq!(code, 0, "streaming {streaming} epoll {epoll}: {messages:?}");
    assert_eq!(got.len(), issues.len());
    for g in &got {
        let prompt = TLS_PROMPTS[g.row as usize];
        assert_eq!((g.failure, g.status, g.error.as_str()), (FailureKind::None, 200, ""), "{g:?}");
        assert_eq!((g.output.as_str(), g.finish), (prompt, FinishReason::Stop));
    }
}

#[test]
fn tls_verified_by_the_stubs_ca_gives_exact_records_streaming_and_not_on_both_drivers() {
    let stub = TlsStub::start(|_| {});
    for epoll in [false, true] {
        for streaming in [false, true] {
            // A DNS name (sent as SNI) and an IP literal (no SNI, matched to an IP SAN).
            for host in ["localhost", "127.0.0.1"] {
                let before = stub.server.totals().connections;
                run_echo_samples(stub.endpoint(host, stub.ca_bundle()), streaming, epoll);
                // The two warm connections carried every sample: one handshake each.
                assert_eq!(stub.server.totals().connections - before, 2, "{host}");
            }
        }
    }
}

#[test]
fn without_the_stubs_ca_the_worker_fails_setup_saying_the_certificate_did_not_verify() {
    let stub = TlsStub::start(|_| {});
    let other = TlsStub::start(|_| {});
    // Another CA's bundle: the stub's certificate has an unknown issuer.
    let ep = stub.endpoint("localhost", other.ca_bundle());
    let (got, messages, code) = run(spec(ep, TLS_PROMPTS, true, 2, false), &[], IssueCmd::Stop);
    assert_eq!((code, got.len()), (3, 0));
    let port = stub.server.addr().port();
    assert_eq!(
        messages[0],
        format!(
            "worker 2: endpoint https://localhost:{port}: the certificate of localhost did not \
             verify (invalid peer certificate: UnknownIssuer); pass a CA bundle that holds its issuer (--ca-bundle FILE), or \
             --insecure to skip verification (at 127.0.0.1:{port})"
        )
    );
    // The system roots do not hold the stub's throwaway CA either (and a machine without any
    // system roots says that instead, before connecting).
    let ep = stub.endpoint("localhost", Verify::SystemRoots);
    let (_, messages, code) = run(spec(ep, TLS_PROMPTS, true, 2, true), &[], IssueCmd::Stop);
    assert_eq!(code, 3);
    assert!(
        messages[0].contains("did not verify (invalid peer certificate: UnknownIssuer)")
            || messages[0].contains("no system root certificates found"),
        "{messages:?}"
    );
}

#[test]
fn insecure_accepts_the_stubs_certificate_streaming_and_not_on_both_drivers() {
    let stub = TlsStub::start(|_| {});
    for epoll in [false, true] {
        for streaming in [false, true] {
            run_echo_samples(stub.endpoint("127.0.0.1", Verify::Insecure), streaming, epoll);
        }
    }
}

#[test]
fn a_name_the_certificate_does_not_carry_fails_verification_but_not_insecure() {
    let stub = TlsStub::start(|_| {});
    let mut ep = stub.endpoint("127.0.0.1", stub.ca_bundle());
    ep.tls.as_mut().unwrap().server_name = "api.example.com".into();
    let (_, messages, code) =
        run(spec(ep.clone(), TLS_PROMPTS, false, 1, false), &[], IssueCmd::Stop);
    assert_eq!(code, 3);
    assert!(
        messages[0].contains("the certificate of api.example.com did not verify"),
        "{messages:?}"
    );
    assert!(messages[0].contains("certificate not valid for name \"api.example.com\""));
    assert!(
        messages[0].contains("put a host name the certificate carries in the URL")
            && messages[0].contains("--ca-bundle cannot help), or --insecure"),
        "{messages:?}"
    );
    ep.tls.as_mut().unwrap().verify = Verify::Insecure;
    run_echo_samples(ep, false, false);
}

#[test]
fn a_missing_ca_bundle_is_a_setup_failure_naming_the_file() {
    let stub = TlsStub::start(|_| {});
    let ep = stub.endpoint("localhost", Verify::CaBundle("/nonexistent/ca.pem".into()));
    let (_, messages, code) = run(spec(ep, TLS_PROMPTS, false, 1, false), &[], IssueCmd::Stop);
    assert_eq!(code, 3);
    assert!(
        messages[0].starts_with("worker 2: cannot read the CA bundle \"/nonexistent/ca.pem\": "),
        "{messages:?}"
    );
}

#[test]
fn an_https_endpoint_that_answers_plain_http_fails_setup_as_a_tls_handshake() {
    let server = Server::start(0);
    let mut ep = Endpoint::parse(&format!("https://{}", server.addr)).unwrap();
    ep.tls.as_mut().unwrap().verify = Verify::Insecure;
    let (_, messages, code) = run(spec(ep, TLS_PROMPTS, false, 1, false), &[], IssueCmd::Stop);
    assert_eq!(code, 3);
    assert!(
        messages[0].starts_with(&format!(
            "worker 2: endpoint https://{}: tls handshake with 127.0.0.1 failed: ",
            server.addr
        )),
        "{messages:?}"
    );
}

#[test]
fn a_cut_body_fails_the_same_over_tls_as_over_plain_http() {
    // The stub drops the connection without a close_notify: a TLS read then sees the same
    // close as a plain one, and the framing decides (half a close-delimited JSON body is
    // malformed; a chunked stream without its last chunk is truncated).
    for (streaming, framing) in [
        (false, TruncateFraming::CloseDelimited),
        (true, TruncateFraming::CloseDelimited),
        (true, TruncateFraming::Chunked),
    ] {
        let edit = |cfg: &mut StubConfig| {
            cfg.faults.truncate = Some(TruncateFault { every: 1, after_frames: 1, framing });
            cfg.stream_interval = 2;
        };
        let mut plain_cfg = StubConfig::new(StubKind::Echo);
        edit(&mut plain_cfg);
        let plain = StubServer::start(plain_cfg).unwrap();
        let tls = TlsStub::start(edit);
        let issues: Vec<(u64, u32)> = (0..6).map(|i| (i, 0)).collect();
        let mut outcomes = Vec::new();
        for ep in
            [Endpoint::parse(&plain.url()).unwrap(), tls.endpoint("localhost", tls.ca_bundle())]
        {
            let (got, _, code) =
                run(spec(ep, TLS_PROMPTS, streaming, 1, false), &issues, IssueCmd::Stop);
            assert_eq!((code, got.len()), (0, 6));
            outcomes.push(got.iter().map(|g| (g.failure, g.error.clone())).collect::<Vec<_>>());
        }
        assert_eq!(outcomes[0], outcomes[1], "streaming {streaming} {framing:?}");
        assert_ne!(outcomes[1][0].0, FailureKind::None, "the fault cut every response");
        assert_ne!(outcomes[1][0].0, FailureKind::ConnectionClosed, "{:?}", outcomes[1]);
    }
}
