//! Test helpers: a tiny blocking HTTP/1.1 client over std::net::TcpStream.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use loadgen_stubs::{StubConfig, StubKind, StubServer};

/// A server with fixed `created` so bodies are exact.
pub fn start(kind: StubKind, edit: impl FnOnce(&mut StubConfig)) -> StubServer {
    let mut cfg = StubConfig::new(kind);
    cfg.created_unix_s = Some(0);
    edit(&mut cfg);
    StubServer::start(cfg).expect("start stub")
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

pub fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A POST with extra header lines.
pub fn post_with_headers(path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let extra: String =
        headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One response as it came off the wire.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    /// The whole response, head included, exactly as received.
    pub raw: Vec<u8>,
    /// The body with any chunked framing removed.
    pub body: Vec<u8>,
    /// Each HTTP chunk's data (chunked responses only).
    pub chunks: Vec<Vec<u8>>,
}

impl Response {
    pub fn body_str(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A reader that keeps bytes past the end of one response for the next.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn new(addr: SocketAddr) -> Self {
        Self { stream: connect(addr), buf: Vec::new() }
    }

    /// A connection to `addr` (IPv4) that leaves from the local address `source`.
    pub fn from_source(source: std::net::Ipv4Addr, addr: SocketAddr) -> Self {
        use nix::sys::socket::SockaddrIn;
        use nix::sys::socket::{bind, connect, socket, AddressFamily, SockFlag, SockType};
        let SocketAddr::V4(v4) = addr else { panic!("{addr} is not IPv4") };
        let fd = socket(AddressFamily::Inet, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
            .expect("a socket");
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        bind(raw, &SockaddrIn::from(std::net::SocketAddrV4::new(source, 0))).expect("bind");
        connect(raw, &SockaddrIn::from(v4)).expect("connect");
        Self { stream: TcpStream::from(fd), buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn roundtrip(&mut self, path: &str, body: &str) -> Response {
        self.send(&post(path, body));
        self.read_response().expect("response")
    }

    /// Reads more; false on EOF.
    fn fill(&mut self) -> std::io::Result<bool> {
        let mut tmp = [0u8; 65536];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n > 0)
    }

    fn need(&mut self, n: usize) -> std::io::Result<()> {
        while self.buf.len() < n {
            if !self.fill()? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }

    fn find_from(&mut self, from: usize, pat: &[u8]) -> std::io::Result<usize> {
        loop {
            if let Some(i) = self.buf[from..].windows(pat.len()).position(|w| w == pat) {
                return Ok(from + i);
            }
            if !self.fill()? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Reads exactly one response (Content-Length or chunked).
    pub fn read_response(&mut self) -> std::io::Result<Response> {
        let head_end = self.find_from(0, b"\r\n\r\n")? + 4;
        let head = String::from_utf8(self.buf[..head_end].to_vec()).unwrap();
        let status = head[9..12].parse().unwrap();
        let lower = head.to_ascii_lowercase();
        let (mut body, mut chunks, end);
        if let Some(i) = lower.find("content-length: ") {
            let len: usize = lower[i + 16..].split("\r\n").next().unwrap().parse().unwrap();
            self.need(head_end + len)?;
            body = self.buf[head_end..head_end + len].to_vec();
            chunks = Vec::new();
            end = head_end + len;
        } else {
            (body, chunks) = (Vec::new(), Vec::new());
            let mut at = head_end;
            loop {
                let line_end = self.find_from(at, b"\r\n")?;
                let size_text = std::str::from_utf8(&self.buf[at..line_end]).unwrap();
                let size = usize::from_str_radix(size_text, 16).unwrap();
                self.need(line_end + 2 + size + 2)?;
                let data = self.buf[line_end + 2..line_end + 2 + size].to_vec();
                at = line_end + 2 + size + 2;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&data);
                chunks.push(data);
            }
            end = at;
        }
        let raw: Vec<u8> = self.buf.drain(..end).collect();
        Ok(Response { status, head, raw, body, chunks })
    }

    /// Reads and discards until EOF: true on EOF, false on a timeout or error.
    pub fn drains_to_eof(&mut self) -> bool {
        loop {
            match self.fill() {
                Ok(true) => continue,
                Ok(false) => return true,
                Err(_) => return false,
            }
        }
    }

    /// Reads until EOF (or a reset) or until nothing arrives for `quiet`: every byte not yet
    /// consumed, and whether the server ended the connection.
    pub fn read_raw(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(quiet)).unwrap();
        let ended = loop {
            match self.fill() {
                Ok(true) => continue,
                Ok(false) => break true,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        self.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        (std::mem::take(&mut self.buf), ended)
    }

    /// True when the server closed the connection (EOF) with nothing more to read.
    pub fn closed(&mut self) -> bool {
        matches!(self.fill(), Ok(false)) && self.buf.is_empty()
    }
}
