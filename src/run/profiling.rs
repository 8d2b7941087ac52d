//! Server profiling during a run (`settings.profiling`, the reference's `ProfileController`):
//! POST the engine's start URL of each endpoint when the performance phase starts, and its
//! stop URL after the run for each start that got 200. A call that fails is recorded and
//! warned about, never fatal: the run goes on, as the reference's does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_report::profiling::{render_status, ProfileCall, ProfilingRecord, PROFILING_FILE};
use loadgen_wire::monotonic_ns;
use loadgen_worker::http::tls::{client_config, Verify};
use loadgen_worker::request::Endpoint;

use crate::plan::ProfilingPlan;
use crate::redact::redact;

/// How long one start or stop POST may take, connect to response head (the reference's
/// `_PROFILE_POST_TIMEOUT_S`).
const PROFILE_POST_TIMEOUT: Duration = Duration::from_secs(2);
/// Most bytes of a response head read; the body is not read.
const HEAD_MAX_BYTES: usize = 16 * 1024;

/// The profiler triggers of one run and what each call got.
pub struct ProfileController {
    engine: &'static str,
    start_urls: Vec<String>,
    stop_urls: Vec<String>,
    verify: Verify,
    starts: Vec<ProfileCall>,
    stops: Vec<ProfileCall>,
}

impl ProfileController {
    /// The triggers of `plan`, derived before the run; `embedded_url` stands for the
    /// endpoints when the run drives the embedded stub.
    pub fn new(plan: &ProfilingPlan, embedded_url: &str, verify: Verify) -> ProfileController {
        let (start_urls, stop_urls) = plan.urls(embedded_url);
        let engine = plan.engine.as_str();
        ProfileController { engine, start_urls, stop_urls, verify, starts: vec![], stops: vec![] }
    }

    /// POSTs each start URL in turn (the performance phase starts when this returns).
    pub fn start(&mut self) {
        for url in &self.start_urls {
            let call = post_profile(url, &self.verify);
            say_call("profile start", &call);
            self.starts.push(call);
        }
    }

    /// POSTs the stop URL of each start that got 200; `completed` = the run ended normally
    /// (`phase_end`), else `abort`.
    pub fn stop(&mut self, completed: bool) {
        let reason = if completed { "phase_end" } else { "abort" };
        for (start, url) in self.starts.iter().zip(&self.stop_urls) {
            if start.status != Some(200) {
                continue;
            }
            let mut call = post_profile(url, &self.verify);
            call.stop_reason = Some(reason.to_string());
            say_call("profile stop", &call);
            self.stops.push(call);
        }
    }

    /// The `{engine, starts, stops}` record (present whenever an engine is set, even when no
    /// performance phase started).
    pub fn record(self) -> ProfilingRecord {
        ProfilingRecord { engine: self.engine.to_string(), starts: self.starts, stops: self.stops }
    }
}

/// A call on stderr: a warning unless it got 200.
fn say_call(what: &str, call: &ProfileCall) {
    if call.status == Some(200) {
        eprintln!("{what}: {} -> 200 OK", call.url);
    } else {
        eprintln!("warning: {what}: {} -> {}", call.url, render_status(call));
    }
}

/// POSTs `url` with an empty body; never fails: what went wrong is in the record.
pub fn post_profile(url: &str, verify: &Verify) -> ProfileCall {
    let mut call = ProfileCall {
        url: redact(url),
        sent_at_ns: monotonic_ns(),
        sent_at_iso: crate::commands::sys::local_iso_millis(),
        status: None,
        error: None,
        stop_reason: None,
    };
    let deadline = Instant::now() + PROFILE_POST_TIMEOUT;
    match exchange_head(url, verify, deadline) {
        Ok((status, _)) if (200..300).contains(&status) => call.status = Some(status),
        Ok((status, reason)) => {
            call.status = Some(status);
            call.error = Some(redact(&format!("{status} {reason}")));
        }
        Err(e) => call.error = Some(redact(&e)),
    }
    call
}

/// Sends `POST <path>` with no body and reads the response's status line: `(status, reason)`.
fn exchange_head(url: &str, verify: &Verify, deadline: Instant) -> Result<(u16, String), String> {
    let ep = Endpoint::parse(url).map_err(|e| format!("BadUrl: {e}"))?;
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let tcp = TcpStream::connect_timeout(&ep.addr, left()).map_err(io_text)?;
    let _ = tcp.set_read_timeout(Some(left()));
    let _ = tcp.set_write_timeout(Some(left()));
    let path = if ep.path_prefix.is_empty() { "/" } else { ep.path_prefix.as_str() };
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ep.host_header()
    );
    let head = match &ep.tls {
        None => send_and_read_head(tcp, request.as_bytes(), deadline),
        Some(tls) => {
            let config: Arc<rustls::ClientConfig> =
                client_config(verify).map_err(|e| format!("TlsSetup: {e}"))?;
            let name = rustls::pki_types::ServerName::try_from(tls.server_name.clone())
                .map_err(|_| format!("BadUrl: {:?} is not a TLS server name", tls.server_name))?;
            let conn = rustls::ClientConnection::new(config, name)
                .map_err(|e| format!("TlsSetup: {e}"))?;
            send_and_read_head(rustls::StreamOwned::new(conn, tcp), request.as_bytes(), deadline)
        }
    }?;
    status_line(&head)
}

/// Writes `request` and reads until the response head ends, the peer closes, or `deadline`.
fn send_and_read_head(
    mut stream: impl Read + Write,
    request: &[u8],
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    stream.write_all(request).map_err(io_text)?;
    let mut head = Vec::with_capacity(512);
    let mut piece = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_MAX_BYTES {
        if Instant::now() >= deadline {
            return Err("TimedOut: no response head within 2 s".into());
        }
        match stream.read(&mut piece) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&piece[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_text(e)),
        }
    }
    Ok(head)
}

/// `(status, reason)` from a response head's status line.
fn status_line(head: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(head);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.splitn(3, ' ');
    let (version, status) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    match (version.starts_with("HTTP/"), status.parse::<u16>()) {
        (true, Ok(status)) => Ok((status, parts.next().unwrap_or_default().trim().to_string())),
        _ if head.is_empty() => Err("RemoteDisconnected: closed without a response".into()),
        _ => Err(format!("BadStatusLine: {:?}", line.chars().take(80).collect::<String>())),
    }
}

/// An I/O error as `Kind: message` (the reference writes `Type: message`).
fn io_text(e: std::io::Error) -> String {
    let kind = match e.kind() {
        std::io::ErrorKind::WouldBlock => std::io::ErrorKind::TimedOut,
        kind => kind,
    };
    format!("{kind:?}: {e}")
}

/// Writes the run's `profiling.json` beside report.txt (2-space indent, as the reference's
/// `json.dumps(indent=2)`); a failure is a warning, as the reference's (the measured report
/// is already written).
pub fn write_profiling_json(dir: &crate::report::OpenDir, record: &ProfilingRecord) {
    let written = loadgen_py::json::to_python_json(record)
        .map_err(std::io::Error::other)
        .and_then(|bytes| dir.write_atomic(PROFILING_FILE, &bytes));
    if let Err(e) = written {
        eprintln!("warning: cannot write {PROFILING_FILE}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_gives_the_status_and_its_reason() {
        let ok = status_line(b"HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(ok, Ok((200, "OK".to_string())));
        let missing = status_line(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(missing, Ok((404, "Not Found".to_string())));
        assert!(status_line(b"").unwrap_err().starts_with("RemoteDisconnected"));
        assert!(status_line(b"garbage\r\n\r\n").unwrap_err().starts_with("BadStatusLine"));
    }

    #[test]
    fn a_closed_port_is_a_recorded_failure_not_a_panic() {
        // Bound then dropped: nothing listens there now.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let url = format!("http://{port}/start_profile");
        let call = post_profile(&url, &Verify::SystemRoots);
        assert_eq!(call.status, None);
        let error = call.error.unwrap_or_default();
        assert!(error.starts_with("ConnectionRefused: "), "{error}");
        assert_eq!(call.url, url);
    }
}
