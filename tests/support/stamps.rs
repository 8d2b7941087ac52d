//! A server that stamps each request as it arrives: one thread per connection reads the request
//! whole, notes (the kernel's receive stamp of the bytes that completed it, the last user prompt)
//! and answers a fixed non-streaming chat completion. The kernel stamps a loopback segment as the
//! sender's write puts it on the wire (SO_TIMESTAMPNS, CLOCK_REALTIME ns), so the stamps are an
//! independent clock of when the client sent each request, whatever delays this server's
//! threads on a busy host. Compare them with each other, not with CLOCK_MONOTONIC.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

/// Arrivals in the order the server read them: (kernel receive stamp in ns, prompt).
pub type Arrivals = Arc<Mutex<Vec<(u64, String)>>>;

/// The server; its listener thread ends with the test process.
pub struct StampServer {
    pub url: String,
    pub arrivals: Arrivals,
}

/// Asks the kernel to stamp every segment `stream` receives.
fn enable_timestamps(stream: &TcpStream) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads `on`, a c_int of the size passed, on this open socket.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_TIMESTAMPNS");
}

/// Reads into `buf`; returns the bytes read (0 at the end) and the kernel's receive stamp of
/// the last segment read, in ns.
fn read_stamped(stream: &TcpStream, buf: &mut [u8]) -> (usize, Option<u64>) {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; zeroed is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: recvmsg writes at most iov_len bytes into `buf` and msg_controllen into
    // `control`, both alive and exclusively borrowed for the call.
    let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, 0) };
    if n <= 0 {
        return (0, None);
    }
    let mut stamp = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel just filled, within
    // msg_controllen; an SCM_TIMESTAMPNS payload is one timespec.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    (n as usize, stamp)
}

/// Where a whole request ends in `buf` (head and Content-Length body), if it is all there.
fn request_end(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buf.len() >= head_end + length).then_some(head_end + length)
}

const BODY: &str = r#"{"id":"s","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

impl StampServer {
    /// Listens on 127.0.0.1, port 0.
    pub fn start() -> StampServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let arrivals = Arrivals::default();
        let log = arrivals.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        StampServer { url, arrivals }
    }

    /// What arrived so far.
    pub fn arrivals(&self) -> Vec<(u64, String)> {
        self.arrivals.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, log: &Arrivals) {
    let _ = stream.set_nodelay(true);
    enable_timestamps(&stream);
    let mut out = stream.try_clone().expect("clone the stream");
    let (mut pending, mut chunk) = (Vec::new(), vec![0u8; 64 * 1024]);
    loop {
        let (n, stamp) = read_stamped(&stream, &mut chunk);
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&chunk[..n]);
        while let Some(end) = request_end(&pending) {
            let body_start = pending.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let prompt = serde_json::from_slice::<serde_json::Value>(&pending[body_start..end])
                .ok()
                .and_then(|v| {
                    v["messages"].as_array()?.last()?["content"].as_str().map(String::from)
                })
                .unwrap_or_default();
            log.lock().unwrap().push((stamp.unwrap_or(0), prompt));
            pending.drain(..end);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                BODY.len()
            );
            let sent = out.write_all(head.as_bytes()).and_then(|_| out.write_all(BODY.as_bytes()));
            if sent.is_err() {
                return;
            }
        }
    }
}
