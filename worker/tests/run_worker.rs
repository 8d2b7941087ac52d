//! End-to-end tests of `run_worker` against a tiny in-test HTTP server (std threads, port 0):
//! records come back exact, failures are data, connections are reopened, abort cancels.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use loadgen_worker::request::{ApiType, Endpoint, Prompt, RequestOptions, RequestTable};
use loadgen_worker::wire::{
    Doorbell, FailureKind, FinishReason, IssueCmd, RecordConsumer, RingSizes, WorkerEvent,
    WorkerRings,
};
use loadgen_worker::{monotonic_ns, run_worker, WorkerSpec};

/// A canned-response server: echoes the prompt as SSE (split across HTTP chunks) or JSON;
/// "missing" gives 404, "stall" never answers, every `close_every`-th response closes.
struct Server {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    accepted: Arc<AtomicUsize>,
}

impl Server {
    fn start(close_every: usize) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (stop2, accepted2) = (stop.clone(), accepted.clone());
        let accept = std::thread::spawn(move || {
            let mut handlers = Vec::new();
            let served = Arc::new(AtomicUsize::new(0));
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                accepted2.fetch_add(1, Ordering::SeqCst);
                let served = served.clone();
                handlers
                    .push(std::thread::spawn(move || serve(stream.unwrap(), close_every, &served)));
            }
            for h in handlers {
                h.join().unwrap();
            }
        });
        Server { addr, stop, accept: Some(accept), accepted }
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

fn serve(stream: TcpStream, close_every: usize, served: &AtomicUsize) {
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
            reader.read_line(&mut header).unwrap();
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
        reader.read_exact(&mut body).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let prompt = json["messages"][0]["content"].as_str().unwrap_or("").to_string();
        if prompt == "stall" {
            // Wait for the client to go away.
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
            return;
        }
        let n = served.fetch_add(1, Ordering::SeqCst) + 1;
        let close = close_every > 0 && n % close_every == 0;
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
    }
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
        api: ApiType::OpenAiChat,
        model: "m".into(),
        streaming,
        stream_include_usage: true,
        max_output_tokens: 16,
        min_output_tokens: None,
        temperature: None,
        top_p: None,
        top_k: None,
        seed: None,
        extra: Vec::new(),
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
        endpoint,
        connections,
        warm_connections: connections,
        bind_from_slot: connections,
        api: ApiType::OpenAiChat,
        streaming,
        requests: Arc::new(table),
        force_epoll: epoll,
        max_output_bytes: 1 << 16,
        request_timeout_ns: 0,
        in_flight: None,
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
}

enum Popped {
    Ready(u32),
    Failed(String),
    Record(Got),
    Warning(String),
    Done,
}

fn pop_wait(records: &mut RecordConsumer, bell: &Doorbell) -> Popped {
    loop {
        let seen = bell.epoch();
        let popped = records.pop(|event| match event {
            WorkerEvent::Ready { connections_open } => Popped::Ready(connections_open),
            WorkerEvent::SetupFailed { message } => Popped::Failed(message.to_string()),
            WorkerEvent::Warning { message } => Popped::Warning(message.to_string()),
            WorkerEvent::Done => Popped::Done,
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
            Popped::Done => break,
            _ => panic!("unexpected event"),
        }
    }
    (got, warnings, worker.join().unwrap())
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
