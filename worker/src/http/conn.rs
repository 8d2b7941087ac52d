//! One keep-alive connection and the exchange of one request and its response, with buffers
//! reused across requests (no allocation per request after warm-up).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;

use loadgen_wire::FailureKind;
use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use monoio::BufResult;

use super::h1::{H1Error, ResponseReader};
use super::sse::{stream_end, stream_failure, BodyEnd, SseItem, SseParser, StreamFailure};
use super::tls::{HandshakeError, TlsClient, TlsStream};
use crate::adapter::Accumulator;
use crate::request::{ApiType, RequestBytes};

/// Bytes read from the socket at a time (and the largest response head accepted, doubled).
const READ_BUF_BYTES: usize = 64 * 1024;
/// Largest response head accepted (past it the sample fails with `FailureKind::HeadLimit`).
pub const MAX_RESPONSE_HEAD_BYTES: usize = 256 * 1024;
/// Room a response body has past four times the output it may carry (JSON escapes, usage and
/// the envelope): `max_response_body_bytes`.
const RESPONSE_BODY_SLACK_BYTES: usize = 64 * 1024;

/// The largest non-streaming response body (and SSE event) read for a run that keeps
/// `max_output_bytes` of output: `4 × max_output_bytes + RESPONSE_BODY_SLACK_BYTES`
/// (1,114,112 bytes under the plan's `MAX_OUTPUT_BYTES`). No flag sets it.
pub fn max_response_body_bytes(max_output_bytes: usize) -> usize {
    max_output_bytes.saturating_mul(4).saturating_add(RESPONSE_BODY_SLACK_BYTES)
}

/// The largest video generation response body: a video answered as raw mp4 or base64 in JSON
/// is megabytes (a 5 s 720p clip is about 2–20 MB, a third more as base64), so the text
/// APIs' cap does not fit it. No flag sets it.
pub const VIDEO_RESPONSE_BODY_BYTES: usize = 256 * 1024 * 1024;

/// A body buffer grown past this by a video answer is given back after it (a video run's
/// connections would otherwise each keep their largest video's bytes).
const BODY_KEEP_BYTES: usize = 1024 * 1024;

/// Bytes of an error body quoted in the record's error text.
const ERROR_BODY_QUOTE_BYTES: usize = 1024;

/// Makes the socket's close send a reset (SO_LINGER 0) instead of a FIN, so the closing side
/// keeps no TIME_WAIT entry: load generators that open thousands of connections to one address
/// run after run would otherwise fill the ephemeral port range.
pub fn reset_on_close(socket: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: the descriptor belongs to `socket`, alive for the call; the option value points at
    // a local of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// How a connection's socket is bound before it connects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalBind {
    /// The source address (`--source-addresses`); `None` = the kernel picks it.
    pub addr: Option<IpAddr>,
    /// Bind a local port first (`bind()` takes odd ports; see `http::ports`). Without it a
    /// source address is bound with IP_BIND_ADDRESS_NO_PORT, so `connect()` picks the port
    /// by the whole 4-tuple and the address's ports are shared across destinations.
    pub port_first: bool,
}

/// Connects to `addr`; with `bind_first`, from a socket bound to a local port first (see
/// `http::ports`).
pub async fn connect_tcp(addr: SocketAddr, bind_first: bool) -> std::io::Result<TcpStream> {
    connect_from(addr, LocalBind { addr: None, port_first: bind_first }).await
}

/// Connects to `addr` from the local side `local` says.
pub async fn connect_from(addr: SocketAddr, local: LocalBind) -> std::io::Result<TcpStream> {
    if local == LocalBind::default() {
        TcpStream::connect_addr(addr).await
    } else {
        connect_bound(addr, local).await
    }
}

/// Connects to `addr` from a socket bound first as `local` says, instead of letting
/// `connect()` pick both the source address and the port.
async fn connect_bound(addr: SocketAddr, local: LocalBind) -> std::io::Result<TcpStream> {
    let stream = TcpStream::from_std(bound_nonblocking_connect(addr, local)?)?;
    stream.writable(false).await?;
    match socket_error(&stream)? {
        0 => Ok(stream),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// A non-blocking TCP socket bound to `local` (its address, or the unspecified one; port 0),
/// with its connect to `addr` started (EINPROGRESS) or done.
fn bound_nonblocking_connect(
    addr: SocketAddr,
    local: LocalBind,
) -> std::io::Result<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    let (domain, unspecified) = match addr {
        SocketAddr::V4(_) => (libc::AF_INET, IpAddr::from([0u8; 4])),
        SocketAddr::V6(_) => (libc::AF_INET6, IpAddr::from([0u16; 8])),
    };
    let source = local.addr.unwrap_or(unspecified);
    if source.is_ipv4() != addr.is_ipv4() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("source address {source} is not of the family of {addr}"),
        ));
    }
    let (local_addr, remote) = (socket_addr(SocketAddr::new(source, 0)), socket_addr(addr));
    let kind = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: plain integer arguments; the result is checked before use.
    let fd = unsafe { libc::socket(domain, kind, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a socket just created and owned by nobody else; the TcpStream closes it.
    let socket = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    if local.addr.is_some() && !local.port_first {
        set_bind_address_no_port(&socket)?;
    }
    // SAFETY: the address pointers and lengths come from `socket_addr`, live locals of the
    // sizes passed; `fd` is open (owned by `socket`).
    unsafe {
        if libc::bind(fd, &local_addr.0 as *const _ as *const libc::sockaddr, local_addr.1) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::connect(fd, &remote.0 as *const _ as *const libc::sockaddr, remote.1) != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e);
            }
        }
    }
    Ok(socket)
}

/// IP_BIND_ADDRESS_NO_PORT: `bind()` then fixes only the address, and the port is chosen at
/// `connect()`, by the 4-tuple, so one address's ports serve every destination.
fn set_bind_address_no_port(socket: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: the descriptor belongs to `socket`, alive for the call; the option value points at
    // a local of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A socket address in the kernel's layout, with its length.
fn socket_addr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (unspecified) value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { (&mut storage as *mut _ as *mut libc::sockaddr_in).write(sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { (&mut storage as *mut _ as *mut libc::sockaddr_in6).write(sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The socket's pending error (`SO_ERROR`): 0 once a non-blocking connect succeeded.
fn socket_error(socket: &impl std::os::fd::AsRawFd) -> std::io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the value and length pointers are live locals of the sizes passed; the descriptor
    // belongs to `socket`, alive for the call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut value as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// An open connection: plain TCP, or TLS over it.
enum Stream {
    Plain(TcpStream),
    /// Boxed: a rustls session is a few KiB, and most runs hold plain connections.
    Tls(Box<TlsStream>),
}

impl Stream {
    async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Tls(s) => {
                let (result, buf) = s.read(buf).await;
                (ragged_eof_as_close(result), buf)
            }
        }
    }

    /// Writes a request's segments, copied into `write_buf` up to `REQUEST_WRITE_BYTES` at a
    /// time: a request up to that size is one write (one TLS record), as it was from one
    /// buffer. A gathered `writev` straight from the table cost 16% of a c=1,000 run's QPS
    /// (perf/runs/2026-12-02-vm/issue25-before-after): io_uring's WRITEV is not the socket
    /// send path its plain write takes, and a 1 KiB copy is far cheaper.
    async fn write_request(
        &mut self,
        request: &RequestBytes,
        write_buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let mut buf = std::mem::take(write_buf);
        buf.clear();
        buf.reserve(request.len().min(REQUEST_WRITE_BYTES));
        for segment in request.segments() {
            for piece in segment.chunks(REQUEST_WRITE_BYTES) {
                if buf.len() + piece.len() > REQUEST_WRITE_BYTES {
                    let (result, back) = self.write_all(buf).await;
                    (buf, _) = (back, result?);
                    buf.clear();
                }
                buf.extend_from_slice(piece);
            }
        }
        let (result, mut back) = self.write_all(buf).await;
        back.clear();
        *write_buf = back;
        result.map(|_| ())
    }

    async fn write_all(&mut self, buf: Vec<u8>) -> BufResult<usize, Vec<u8>> {
        match self {
            Stream::Plain(s) => s.write_all(buf).await,
            Stream::Tls(s) => s.write_all(buf).await,
        }
    }

    /// The socket under the stream, to close it with a reset.
    fn into_tcp(self) -> TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.into_parts().0,
        }
    }
}

/// The most request bytes handed to the stream at once: one TLS record's plaintext (RFC 8446
/// §5.1). A connection's write buffer grows to its largest request up to this size.
const REQUEST_WRITE_BYTES: usize = 16 * 1024;

/// A TLS peer that closes its socket without a close_notify alert reads as a close (0 bytes),
/// as Python's `ssl` reads it (`suppress_ragged_eofs`) and as HTTP servers commonly close:
/// the response's own framing (Content-Length, the last chunk, `[DONE]`) still tells a cut
/// response from a whole one.
fn ragged_eof_as_close(result: std::io::Result<usize>) -> std::io::Result<usize> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        other => other,
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub enum ConnectError {
    /// The TCP connect (or a socket option) failed.
    Tcp(std::io::Error),
    /// The TLS handshake failed (the certificate did not verify, or the protocol failed).
    Tls(HandshakeError),
}

impl ConnectError {
    /// The failure kind of a sample whose connection could not be opened.
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            ConnectError::Tcp(_) => FailureKind::Connect,
            ConnectError::Tls(_) => FailureKind::Tls,
        }
    }

    /// The message, naming `addr` (the TCP side) or the host (the TLS side).
    pub fn message(&self, addr: SocketAddr) -> String {
        match self {
            ConnectError::Tcp(e) => format!("cannot connect to {addr}: {e}"),
            ConnectError::Tls(e) => format!("{e} (at {addr})"),
        }
    }
}

/// How one exchange ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub failure: FailureKind,
    pub http_status: u16,
    /// When the response ended or the failure was seen.
    pub complete_ns: u64,
    /// The request was sent a second time (see `may_resend`).
    pub resent: bool,
}

impl Outcome {
    /// A failure seen at `complete_ns`, before or without a response.
    pub fn failed(failure: FailureKind, complete_ns: u64) -> Outcome {
        Outcome { failure, http_status: 0, complete_ns, resent: false }
    }
}

/// Whether a request whose exchange failed may be sent once more: only when its connection had
/// already carried a whole response (a keep-alive connection the server may have closed while
/// it sat idle), it closed, and not one byte of this response had arrived. A fresh connection
/// that fails is the server's answer, never a reason to send again; the caller re-sends at most
/// once and counts it.
pub fn may_resend(carried_response: bool, failure: FailureKind, response_bytes: bool) -> bool {
    carried_response && failure == FailureKind::ConnectionClosed && !response_bytes
}

/// A connection slot: the socket (None until connected or after a close) and its buffers.
pub struct Conn {
    addr: SocketAddr,
    /// Which of the run's endpoints this slot reaches (its index in `WorkerSpec::endpoints`).
    endpoint: u8,
    stream: Option<Stream>,
    /// Set for an `https://` endpoint: every connect handshakes before it counts as open.
    tls: Option<Rc<TlsClient>>,
    read_buf: Vec<u8>,
    read_start: usize,
    /// A request's bytes on their way into the stream (`REQUEST_WRITE_BYTES` at most), reused.
    write_buf: Vec<u8>,
    body: Vec<u8>,
    /// Where a Content-Length body lies in `read_buf` when it arrived whole (then `body` stays
    /// empty: the common case is parsed in place, not copied).
    body_in_read_buf: Option<std::ops::Range<usize>>,
    max_body_bytes: usize,
    reader: ResponseReader,
    sse: SseParser,
    /// The response's output, stamps and counts (valid after `exchange`).
    pub acc: Accumulator,
    /// Failure text of the last exchange (empty on success).
    pub error: Vec<u8>,
    /// When the last exchange started writing its request (its first write, when it was sent
    /// twice); 0 when it was never written.
    pub sent_ns: u64,
    /// Whether the current response is parsed as SSE.
    sse_mode: bool,
    /// How the socket is bound before it connects (see `set_bind_before_connect`,
    /// `set_source_address`).
    local: LocalBind,
    /// The open socket has carried at least one whole response (so it is a reused keep-alive
    /// connection, not a fresh one).
    carried_response: bool,
    /// A byte of the current response has arrived.
    response_bytes: bool,
    /// The current request's write started (so a second exchange sent it twice).
    wrote: bool,
    /// SSE events of the current response handed to the adapter, and whether `[DONE]` came.
    sse_frames: u32,
    saw_done: bool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("addr", &self.addr)
            .field("open", &self.stream.is_some())
            .finish()
    }
}

impl Conn {
    pub fn new(addr: SocketAddr, api: ApiType, max_output_bytes: usize) -> Conn {
        let text_body_bytes = max_response_body_bytes(max_output_bytes);
        let max_body_bytes = match api {
            ApiType::Videogen => VIDEO_RESPONSE_BODY_BYTES,
            _ => text_body_bytes,
        };
        Conn {
            addr,
            endpoint: 0,
            stream: None,
            tls: None,
            read_buf: Vec::with_capacity(READ_BUF_BYTES),
            read_start: 0,
            write_buf: Vec::new(),
            body: Vec::with_capacity(16 * 1024),
            body_in_read_buf: None,
            max_body_bytes,
            reader: ResponseReader::new(),
            sse: SseParser::new(text_body_bytes),
            acc: Accumulator::new(api, max_output_bytes),
            error: Vec::with_capacity(256),
            sent_ns: 0,
            sse_mode: false,
            local: LocalBind::default(),
            carried_response: false,
            response_bytes: false,
            wrote: false,
            sse_frames: 0,
            saw_done: false,
        }
    }

    /// Makes every connect of this slot bind a local port first. The kernel's `bind()` takes
    /// odd ports, `connect()` even ones; a run with more connections to one address than there
    /// are even ports binds its surplus so no connect scans the exhausted even half.
    pub fn set_bind_before_connect(&mut self, bind_first: bool) {
        self.local.port_first = bind_first;
    }

    /// Makes this slot reach the run's endpoint `index` (records name it).
    pub fn set_endpoint(&mut self, index: u8) {
        self.endpoint = index;
    }

    /// The run's endpoint this slot reaches.
    pub fn endpoint(&self) -> u8 {
        self.endpoint
    }

    /// The endpoint address this slot connects to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes every connect of this slot leave from `source` (`None`: the kernel's choice).
    pub fn set_source_address(&mut self, source: Option<IpAddr>) {
        self.local.addr = source;
    }

    /// Makes every connect of this slot a TLS connection (an `https://` endpoint).
    pub fn set_tls(&mut self, tls: Option<Rc<TlsClient>>) {
        self.tls = tls;
    }

    pub fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    /// Opens the socket if it is closed, and runs the TLS handshake on it for an `https://`
    /// endpoint: a slot is open only once it can carry a request.
    pub async fn connect(&mut self) -> Result<(), ConnectError> {
        if self.stream.is_none() {
            let tcp = connect_from(self.addr, self.local).await.map_err(ConnectError::Tcp)?;
            tcp.set_nodelay(true).map_err(ConnectError::Tcp)?;
            let stream = match &self.tls {
                None => Stream::Plain(tcp),
                Some(tls) => {
                    Stream::Tls(Box::new(tls.handshake(tcp).await.map_err(ConnectError::Tls)?))
                }
            };
            self.stream = Some(stream);
            self.carried_response = false;
            self.read_buf.clear();
            self.read_start = 0;
            // An exchange dropped mid-read (timeout, abort) took the read buffer with it.
            if self.read_buf.capacity() < READ_BUF_BYTES {
                self.read_buf = Vec::with_capacity(READ_BUF_BYTES);
            }
        }
        Ok(())
    }

    /// Sends `request` and reads its response into `acc` / `error`. A reused keep-alive
    /// connection that turns out closed before any response byte is reopened and the request
    /// sent once more (`may_resend`); the outcome says so.
    pub async fn exchange(&mut self, request: &RequestBytes, now_ns: fn() -> u64) -> Outcome {
        self.exchange_noticing(request, now_ns, &|_| {}).await
    }

    /// `exchange`, calling `on_first_chunk` with the first content chunk's stamp as soon as it is
    /// parsed, when more of the response is still to come (a response that ends in the read that
    /// brought its first chunk is reported whole, by its record).
    pub async fn exchange_noticing(
        &mut self,
        request: &RequestBytes,
        now_ns: fn() -> u64,
        on_first_chunk: &dyn Fn(u64),
    ) -> Outcome {
        let carried = self.stream.is_some() && self.carried_response;
        self.sent_ns = 0;
        let first = self.exchange_once(request, now_ns, on_first_chunk).await;
        if !may_resend(carried, first.failure, self.response_bytes) {
            return first;
        }
        let mut second = self.exchange_once(request, now_ns, on_first_chunk).await;
        second.resent = self.wrote;
        second
    }

    async fn exchange_once(
        &mut self,
        request: &RequestBytes,
        now_ns: fn() -> u64,
        on_first_chunk: &dyn Fn(u64),
    ) -> Outcome {
        self.reset_response();
        if let Err(e) = self.connect().await {
            self.error.extend_from_slice(e.message(self.addr).as_bytes());
            return self.fail(e.failure_kind(), 0, now_ns);
        }
        let Conn { stream, write_buf, .. } = self;
        let stream = stream.as_mut().expect("connected above");
        self.wrote = true;
        if self.sent_ns == 0 {
            self.sent_ns = now_ns();
        }
        if let Err(e) = stream.write_request(request, write_buf).await {
            let _ = write!(self.error, "connection closed while sending: {e}");
            return self.fail(FailureKind::ConnectionClosed, 0, now_ns);
        }
        self.read_response(now_ns, on_first_chunk).await
    }

    /// Clears the per-response state (buffers keep their capacity).
    fn reset_response(&mut self) {
        self.reader.reset();
        self.sse.reset();
        self.acc.reset();
        self.body.clear();
        if self.body.capacity() > BODY_KEEP_BYTES {
            self.body = Vec::with_capacity(16 * 1024);
        }
        self.body_in_read_buf = None;
        self.error.clear();
        self.sse_mode = false;
        self.response_bytes = false;
        self.wrote = false;
        self.sse_frames = 0;
        self.saw_done = false;
    }

    fn fail(&mut self, kind: FailureKind, http_status: u16, now_ns: fn() -> u64) -> Outcome {
        self.stream = None;
        self.read_buf.clear();
        self.read_start = 0;
        self.acc.clear_output();
        Outcome { failure: kind, http_status, complete_ns: now_ns(), resent: false }
    }

    async fn read_response(
        &mut self,
        now_ns: fn() -> u64,
        on_first_chunk: &dyn Fn(u64),
    ) -> Outcome {
        let mut first_chunk_told = false;
        loop {
            match self.parse_buffered(now_ns) {
                Err(e) => {
                    let _ = write!(self.error, "{e}");
                    let kind = match e {
                        H1Error::TooManyHeaders => FailureKind::HeadLimit,
                        _ => FailureKind::Malformed,
                    };
                    return self.fail(kind, self.reader.head().status, now_ns);
                }
                Ok(true) => return self.finish(BodyEnd::Finished, now_ns),
                Ok(false) => {}
            }
            if !first_chunk_told && self.acc.first_chunk_ns != 0 {
                first_chunk_told = true;
                on_first_chunk(self.acc.first_chunk_ns);
            }
            if self.read_start > 0 {
                self.read_buf.drain(..self.read_start);
                self.read_start = 0;
            }
            if self.read_buf.len() == self.read_buf.capacity() {
                if self.read_buf.capacity() >= MAX_RESPONSE_HEAD_BYTES {
                    let _ = write!(
                        self.error,
                        "response head exceeds {MAX_RESPONSE_HEAD_BYTES} bytes (MAX_RESPONSE_HEAD_BYTES)"
                    );
                    return self.fail(FailureKind::HeadLimit, 0, now_ns);
                }
                self.read_buf.reserve(self.read_buf.capacity());
            }
            let stream = self.stream.as_mut().expect("open while reading");
            let len = self.read_buf.len();
            let buf = std::mem::take(&mut self.read_buf);
            let (result, slice) = stream.read(buf.slice_mut(len..)).await;
            self.read_buf = slice.into_inner();
            match result {
                Ok(0) if self.reader.ends_at_close() || self.sse_mode => {
                    // A stream cut short still ends: `finish` decides if it was complete.
                    self.stream = None;
                    return self.finish(BodyEnd::Closed, now_ns);
                }
                Ok(0) => {
                    let _ = write!(self.error, "connection closed by the endpoint mid-response");
                    let status = self.reader.head().status;
                    return self.fail(FailureKind::ConnectionClosed, status, now_ns);
                }
                Ok(_) => {
                    self.response_bytes = true;
                    self.acc.chunks.note_read();
                }
                Err(_) if self.sse_mode => {
                    self.stream = None;
                    return self.finish(BodyEnd::Closed, now_ns);
                }
                Err(e) => {
                    let _ = write!(self.error, "connection error: {e}");
                    let status = self.reader.head().status;
                    return self.fail(FailureKind::ConnectionClosed, status, now_ns);
                }
            }
        }
    }

    /// Parses what is buffered; `Ok(true)` once the response is complete.
    fn parse_buffered(&mut self, now_ns: fn() -> u64) -> Result<bool, super::h1::H1Error> {
        if !self.reader.head_done() {
            let used = self.reader.feed_head(&self.read_buf[self.read_start..])?;
            self.read_start += used;
            // Interim (1xx) answers may have been passed over before the final head.
            if !self.reader.head_done() {
                return Ok(false);
            }
            let head = self.reader.head();
            self.sse_mode = head.status == 200 && head.event_stream;
        }
        let Conn {
            reader,
            read_buf,
            read_start,
            sse,
            acc,
            body,
            body_in_read_buf,
            max_body_bytes,
            sse_mode,
            sse_frames,
            saw_done,
            ..
        } = self;
        if !*sse_mode && body.is_empty() {
            if let Some(len) = reader.whole_length_body() {
                let available = read_buf.len() - *read_start;
                if len as usize <= available.min(*max_body_bytes) {
                    let start = *read_start;
                    *body_in_read_buf = Some(start..start + len as usize);
                    *read_start += len as usize;
                    reader.skip_whole_body();
                    return Ok(true);
                }
            }
        }
        loop {
            let input = &read_buf[*read_start..];
            let progress = if *sse_mode {
                reader.feed(input, &mut |bytes| {
                    sse.feed(bytes, &mut |item| on_item(acc, sse_frames, saw_done, item, now_ns))
                })?
            } else {
                reader.feed(input, &mut |bytes| {
                    let room = max_body_bytes.saturating_sub(body.len());
                    body.extend_from_slice(&bytes[..bytes.len().min(room)]);
                })?
            };
            *read_start += progress.consumed;
            if progress.done {
                return Ok(true);
            }
            if progress.consumed == 0 {
                return Ok(false);
            }
        }
    }

    /// Ends the response (its body finished, or closed by the endpoint) and decides its outcome.
    fn finish(&mut self, end: BodyEnd, now_ns: fn() -> u64) -> Outcome {
        let complete_ns = now_ns();
        let head = self.reader.head();
        if head.close || end == BodyEnd::Closed {
            self.stream = None;
        }
        self.carried_response = true;
        let failure = if self.sse_mode {
            self.finish_stream(end, now_ns)
        } else {
            self.finish_body(head.status)
        };
        if failure != FailureKind::None {
            // A failed sample carries no output, as every other failure.
            self.acc.clear_output();
        }
        // Bytes after a complete response belong to nobody (no pipelining): drop them.
        self.read_buf.clear();
        self.read_start = 0;
        Outcome { failure, http_status: head.status, complete_ns, resent: false }
    }

    /// Ends an SSE body: the pending event, then the error frame or the truncation rule.
    fn finish_stream(&mut self, end: BodyEnd, now_ns: fn() -> u64) -> FailureKind {
        let Conn { sse, acc, sse_frames, saw_done, error, .. } = self;
        sse.finish(&mut |item| on_item(acc, sse_frames, saw_done, item, now_ns));
        acc.finish_stream();
        let saw_finish = acc.finish != loadgen_wire::FinishReason::None;
        let stream = stream_end(*saw_done, saw_finish, end);
        match stream_failure(acc.stream_error, stream, acc.malformed_frames) {
            StreamFailure::None => FailureKind::None,
            StreamFailure::ErrorFrame => {
                error.extend_from_slice(b"stream error: ");
                error.extend_from_slice(&acc.error_message);
                FailureKind::StreamError
            }
            StreamFailure::Truncated => {
                let finish = if saw_finish { "a finish_reason" } else { "no finish_reason" };
                let how = match end {
                    BodyEnd::Finished => "its body ended",
                    BodyEnd::Closed => "the connection closed",
                };
                let _ = write!(
                    error,
                    "stream truncated: {how} after {} frames with {finish} and no [DONE]",
                    sse_frames
                );
                FailureKind::Truncated
            }
            StreamFailure::MalformedFrame => {
                let _ = write!(
                    error,
                    "malformed SSE frame: {} of {} frames did not decode, their content lost; \
                     the first: ",
                    acc.malformed_frames, sse_frames
                );
                error.extend_from_slice(&acc.malformed_quote);
                FailureKind::MalformedFrame
            }
        }
    }

    /// Hands a whole non-streaming body to the accumulator (or the error text); the body is read
    /// where it lies, in `read_buf` or in `body`.
    fn finish_body(&mut self, status: u16) -> FailureKind {
        let Conn { read_buf, body, body_in_read_buf, acc, error, max_body_bytes, .. } = self;
        let body: &[u8] = match body_in_read_buf.take() {
            Some(range) => &read_buf[range],
            None => body,
        };
        if status != 200 {
            let quote = &body[..body.len().min(ERROR_BODY_QUOTE_BYTES)];
            let _ = write!(error, "HTTP {status}: {}", String::from_utf8_lossy(quote));
            acc.clear_output();
            return FailureKind::HttpStatus;
        }
        if body.len() >= *max_body_bytes && acc.api == ApiType::Videogen {
            let _ = write!(
                error,
                "response body over the cap of {max_body_bytes} bytes (a video answer's fixed \
                 limit, no flag sets it): ask the server for response_format video_path"
            );
            return FailureKind::Malformed;
        }
        if body.len() >= *max_body_bytes {
            let _ = write!(
                error,
                "response body over the cap of {max_body_bytes} bytes (4 × the {} bytes of \
                 output a sample keeps + 64 KiB; a fixed limit, no flag sets it): ask for less \
                 output (--max-output-tokens) or check what the endpoint sends",
                acc.max_output_bytes()
            );
            return FailureKind::Malformed;
        }
        if !acc.on_body(body) {
            let _ = write!(error, "malformed response body ({} bytes)", body.len());
            if !acc.malformed_quote.is_empty() {
                error.extend_from_slice(b": ");
                error.extend_from_slice(&acc.malformed_quote);
            }
            return FailureKind::Malformed;
        }
        if acc.stream_error {
            error.extend_from_slice(b"error in response body: ");
            error.extend_from_slice(&acc.error_message);
            return FailureKind::StreamError;
        }
        FailureKind::None
    }

    /// Abandons the exchange in flight (timed out): the socket closes with a reset, so a late
    /// response can never be read as the next request's; the next exchange reconnects.
    pub fn abandon(&mut self) {
        self.close_with_reset();
        self.read_start = 0;
    }

    /// Closes the socket (the next exchange reconnects).
    pub fn close(&mut self) {
        self.stream = None;
    }

    /// Closes the socket for good at the end of a run with a reset instead of a FIN, so the
    /// client keeps no TIME_WAIT entry per connection: a sweep of runs with thousands of
    /// connections each to one address would otherwise exhaust the ephemeral ports (and make
    /// every connect search them) within TIME_WAIT's 60 s.
    pub fn close_with_reset(&mut self) {
        if let Some(stream) = self.stream.take() {
            let tcp = stream.into_tcp();
            let _ = reset_on_close(&tcp);
            drop(tcp);
        }
    }
}

/// One SSE event of a streaming response: data to the adapter, `[DONE]` noted.
fn on_item(
    acc: &mut Accumulator,
    frames: &mut u32,
    saw_done: &mut bool,
    item: SseItem<'_>,
    now_ns: fn() -> u64,
) {
    match item {
        SseItem::Data(json) => {
            *frames += 1;
            acc.on_sse_frame(json, now_ns);
        }
        SseItem::Done => *saw_done = true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> u64 {
        9
    }

    /// Runs the connection's own parse path over `wire` delivered in two reads split at `split`.
    fn parse_in_two_reads(conn: &mut Conn, wire: &[u8], split: usize) -> Outcome {
        conn.reset_response();
        conn.read_buf.clear();
        conn.read_start = 0;
        for piece in [&wire[..split], &wire[split..]] {
            conn.read_buf.drain(..conn.read_start);
            conn.read_start = 0;
            conn.read_buf.extend_from_slice(piece);
            if conn.parse_buffered(clock).unwrap() {
                return conn.finish(BodyEnd::Finished, clock);
            }
        }
        panic!("response incomplete at split {split}");
    }

    fn chunked(body: &str, chunk: usize) -> Vec<u8> {
        let mut out =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        for part in body.as_bytes().chunks(chunk) {
            out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
            out.extend_from_slice(part);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    #[test]
    fn chunked_sse_parses_the_same_at_every_split() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":5.5}}\n\n",
            "data: [DONE]\n\n"
        );
        let wire = chunked(body, 11);
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        for split in 0..=wire.len() {
            let outcome = parse_in_two_reads(&mut conn, &wire, split);
            assert_eq!(outcome.failure, FailureKind::None, "split {split}");
            assert_eq!(conn.acc.output, b"Hello", "split {split}");
            assert_eq!((conn.acc.first_chunk_ns, conn.acc.first_chunk_len), (9, 3));
            let timing = loadgen_wire::ChunkTiming::decode(conn.acc.chunks.as_bytes()).unwrap();
            assert_eq!(timing.n_chunks, 2, "two content frames, split {split}");
            assert_eq!(timing.gaps_ns().collect::<Vec<_>>(), [0], "split {split}");
            assert_eq!(conn.acc.malformed_frames, 0, "split {split}");
            assert_eq!(conn.acc.finish, loadgen_wire::FinishReason::Stop);
            assert_eq!(conn.acc.usage.prompt_tokens, Some(2));
            assert_eq!(conn.acc.usage.completion_tokens, None);
            assert_eq!(conn.acc.usage.first_bad, Some("a float"));
        }
    }

    /// Feeds `wire` in one read; a response its framing did not end is then closed by the
    /// endpoint (EOF), as `read_response` does.
    fn parse_then_close(conn: &mut Conn, wire: &[u8]) -> Outcome {
        conn.reset_response();
        conn.read_buf.clear();
        conn.read_start = 0;
        conn.read_buf.extend_from_slice(wire);
        conn.sse_mode = false;
        if conn.parse_buffered(clock).unwrap() {
            return conn.finish(BodyEnd::Finished, clock);
        }
        assert!(conn.sse_mode, "only a stream ends at a close here");
        conn.finish(BodyEnd::Closed, clock)
    }

    fn sse_frames(contents: &[&str], finish: bool, done: bool) -> String {
        let mut body = String::new();
        for content in contents {
            body +=
                &format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{content}\"}}}}]}}\n\n");
        }
        if finish {
            body += "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
        }
        if done {
            body += "data: [DONE]\n\n";
        }
        body
    }

    const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";

    #[test]
    fn an_error_frame_mid_stream_fails_the_sample() {
        let error = r#"data: {"error": {"object":"error","message":"engine died: CUDA out of memory","type":"InternalServerError","code":500}}"#;
        let body = sse_frames(&["Hel", "lo"], false, false) + error + "\n\n" + "data: [DONE]\n\n";
        let wire = chunked(&body, 13);
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        for split in 0..=wire.len() {
            let outcome = parse_in_two_reads(&mut conn, &wire, split);
            assert_eq!((outcome.failure, outcome.http_status), (FailureKind::StreamError, 200));
            assert_eq!(conn.error, b"stream error: engine died: CUDA out of memory");
            assert!(conn.acc.output.is_empty(), "a failed sample keeps no output");
        }
    }

    #[test]
    fn a_stream_of_only_an_error_frame_fails_the_sample() {
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), api, 1 << 16);
            let wire = chunked("data: {\"error\":{\"message\":\"overloaded\"}}\n\n", 64);
            let outcome = parse_then_close(&mut conn, &wire);
            assert_eq!(outcome.failure, FailureKind::StreamError, "{api:?}");
            assert_eq!(conn.error, b"stream error: overloaded");
            // An error without a message is quoted as its frame.
            let wire = chunked("data: {\"error\":{\"code\":7}}\n\n", 64);
            assert_eq!(parse_then_close(&mut conn, &wire).failure, FailureKind::StreamError);
            assert_eq!(conn.error, br#"stream error: {"error":{"code":7}}"#);
            // `"error": null` is no error.
            let wire =
                chunked(&(sse_frames(&["a"], true, true) + "data: {\"error\":null}\n\n"), 64);
            let outcome = parse_then_close(&mut conn, &wire);
            assert_eq!(
                outcome.failure,
                FailureKind::None,
                "{api:?}: {:?}",
                String::from_utf8_lossy(&conn.error)
            );
        }
    }

    #[test]
    fn a_body_over_the_size_cap_names_the_cap_and_what_to_do() {
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 10);
        let cap = max_response_body_bytes(1 << 10);
        assert_eq!(cap, 4 * 1024 + 64 * 1024);
        for (framing, body_len) in [("Content-Length", cap + 10), ("chunked", cap + 10)] {
            let body = vec![b'x'; body_len];
            let wire = match framing {
                "chunked" => {
                    let mut w = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                    w.extend_from_slice(format!("{body_len:x}\r\n").as_bytes());
                    w.extend_from_slice(&body);
                    w.extend_from_slice(b"\r\n0\r\n\r\n");
                    w
                }
                _ => {
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {body_len}\r\n\r\n");
                    [head.as_bytes(), &body].concat()
                }
            };
            let outcome = parse_in_two_reads(&mut conn, &wire, wire.len() / 2);
            assert_eq!(outcome.failure, FailureKind::Malformed, "{framing}");
            let error = String::from_utf8_lossy(&conn.error).into_owned();
            assert!(error.contains(&format!("over the cap of {cap} bytes")), "{framing}: {error}");
            assert!(error.contains("no flag sets it"), "{error}");
            assert!(error.contains("--max-output-tokens"), "{error}");
        }
        let small = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnot";
        assert_eq!(parse_in_two_reads(&mut conn, small, 5).failure, FailureKind::Malformed);
        assert_eq!(String::from_utf8_lossy(&conn.error), "malformed response body (3 bytes)");
    }

    #[test]
    fn a_video_answer_of_megabytes_fits_its_cap_and_its_buffer_is_given_back() {
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::Videogen, 1 << 10);
        assert_eq!(conn.max_body_bytes, VIDEO_RESPONSE_BODY_BYTES);
        let payload = "A".repeat(3 << 20);
        let body = format!("{{\"video_id\":\"v\",\"video_bytes\":\"{payload}\"}}");
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        let wire = [head.as_bytes(), body.as_bytes()].concat();
        let outcome = parse_in_two_reads(&mut conn, &wire, wire.len() / 2);
        assert_eq!(outcome.failure, FailureKind::None, "{}", String::from_utf8_lossy(&conn.error));
        assert!(conn.acc.output.is_empty());
        conn.reset_response();
        assert!(conn.body.capacity() <= BODY_KEEP_BYTES);
        let bad = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]";
        assert_eq!(parse_in_two_reads(&mut conn, bad, 5).failure, FailureKind::Malformed);
        assert_eq!(
            String::from_utf8_lossy(&conn.error),
            "malformed response body (2 bytes): the body is JSON but not an object"
        );
    }

    #[test]
    fn a_malformed_frame_fails_the_sample_as_malformed_frame_at_every_split() {
        // The stub's malformed frame between whole ones: the stream still ends with its
        // finish_reason and [DONE], but a frame's content is lost.
        let body = sse_frames(&["Hel"], false, false)
            + "data: {\"choices\":[{\n\n"
            + &sse_frames(&["lo"], true, true);
        let wire = chunked(&body, 11);
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), api, 1 << 16);
            for split in 0..=wire.len() {
                let outcome = parse_in_two_reads(&mut conn, &wire, split);
                assert_eq!(outcome.failure, FailureKind::MalformedFrame, "{api:?} split {split}");
                assert_eq!(
                    String::from_utf8_lossy(&conn.error),
                    "malformed SSE frame: 1 of 4 frames did not decode, their content lost; the \
                     first: {\"choices\":[{",
                    "{api:?} split {split}"
                );
                assert!(conn.acc.output.is_empty(), "a failed sample keeps no output");
            }
        }
    }

    #[test]
    fn an_error_frame_outranks_a_malformed_one_and_a_cut_stream_is_truncated() {
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        let body = "data: {broken\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n";
        let outcome = parse_then_close(&mut conn, &chunked(body, 64));
        assert_eq!(outcome.failure, FailureKind::StreamError);
        assert_eq!(conn.error, b"stream error: boom");
        // A close inside a frame leaves a cut frame: the stream is truncated, not malformed.
        let cut = format!(
            "{SSE_HEAD}\r\n{}data: {{\"choices\":[{{\"del",
            sse_frames(&["a"], false, false)
        );
        let outcome = parse_then_close(&mut conn, cut.as_bytes());
        assert_eq!(
            outcome.failure,
            FailureKind::Truncated,
            "{}",
            String::from_utf8_lossy(&conn.error)
        );
    }

    #[test]
    fn vllms_unwrapped_error_object_fails_as_a_stream_error_streaming_and_not() {
        let error = r#"{"object":"error","message":"context too long","type":"BadRequestError","param":null,"code":400}"#;
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), api, 1 << 16);
            // The only frame of a stream, with and without [DONE] after it.
            for tail in ["data: [DONE]\n\n", ""] {
                let wire = chunked(&format!("data: {error}\n\n{tail}"), 64);
                let outcome = parse_then_close(&mut conn, &wire);
                assert_eq!((outcome.failure, outcome.http_status), (FailureKind::StreamError, 200));
                assert_eq!(conn.error, b"stream error: context too long", "{api:?}");
            }
            // The same object as a 200 body.
            let wire = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{error}",
                error.len()
            );
            let outcome = parse_then_close(&mut conn, wire.as_bytes());
            assert_eq!(outcome.failure, FailureKind::StreamError, "{api:?}");
            assert_eq!(conn.error, b"error in response body: context too long", "{api:?}");
        }
    }

    #[test]
    fn an_error_body_with_status_200_fails_the_sample() {
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), api, 1 << 16);
            let body = r#"{"error":{"message":"model not loaded","type":"BadRequestError"}}"#;
            let wire = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let outcome = parse_then_close(&mut conn, wire.as_bytes());
            assert_eq!(outcome.failure, FailureKind::StreamError, "{api:?}");
            assert_eq!(conn.error, b"error in response body: model not loaded");
        }
    }

    #[test]
    fn a_stream_closed_before_done_is_truncated() {
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        let three = sse_frames(&["a", "b", "c"], false, false);
        // Close-delimited, chunked without its last chunk, and a sized body cut short.
        let close_delimited = format!("{SSE_HEAD}\r\n{three}");
        let mut no_last_chunk = chunked(&three, 10);
        no_last_chunk.truncate(no_last_chunk.len() - 5);
        let cut_short = format!("{SSE_HEAD}Content-Length: {}\r\n\r\n{three}", three.len() + 40);
        for wire in [close_delimited.as_bytes(), &no_last_chunk, cut_short.as_bytes()] {
            let outcome = parse_then_close(&mut conn, wire);
            assert_eq!(
                outcome.failure,
                FailureKind::Truncated,
                "{}",
                String::from_utf8_lossy(wire)
            );
            assert_eq!(
                String::from_utf8_lossy(&conn.error),
                "stream truncated: the connection closed after 3 frames with no finish_reason and no [DONE]"
            );
            assert!(conn.acc.output.is_empty());
        }
    }

    #[test]
    fn a_stream_ends_complete_by_done_or_by_a_finished_body_after_a_finish_reason() {
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        // (body, chunked framing, failure)
        let cases = [
            (sse_frames(&["a"], true, true), true, FailureKind::None),
            (sse_frames(&["a"], true, false), true, FailureKind::None),
            (sse_frames(&["a"], false, true), true, FailureKind::None),
            (sse_frames(&["a"], false, false), true, FailureKind::Truncated),
            (sse_frames(&["a"], true, true), false, FailureKind::None),
            (sse_frames(&["a"], true, false), false, FailureKind::Truncated),
        ];
        for (body, is_chunked, failure) in cases {
            let wire = if is_chunked {
                chunked(&body, 16)
            } else {
                format!("{SSE_HEAD}\r\n{body}").into_bytes()
            };
            let outcome = parse_then_close(&mut conn, &wire);
            assert_eq!(outcome.failure, failure, "{body:?} chunked {is_chunked}");
        }
        // A Content-Length body read whole after a finish_reason is complete too.
        let body = sse_frames(&["a"], true, false);
        let wire = format!("{SSE_HEAD}Content-Length: {}\r\n\r\n{body}", body.len());
        assert_eq!(parse_then_close(&mut conn, wire.as_bytes()).failure, FailureKind::None);
        assert_eq!(conn.acc.output, b"a");
    }

    #[test]
    fn only_a_reused_connection_closed_before_any_byte_may_resend() {
        use FailureKind::*;
        // (carried a whole response before, failure, a response byte arrived) -> may resend
        let table = [
            (true, ConnectionClosed, false, true),
            (false, ConnectionClosed, false, false),
            (true, ConnectionClosed, true, false),
            (true, Malformed, false, false),
            (true, Connect, false, false),
            (true, None, false, false),
        ];
        for (carried, failure, bytes, want) in table {
            assert_eq!(may_resend(carried, failure, bytes), want, "{carried} {failure:?} {bytes}");
        }
    }

    #[test]
    fn a_slot_that_binds_first_connects_from_an_odd_port_and_exchanges() {
        for io_uring in [true, false] {
            let peer = bound_exchange(io_uring, LocalBind { addr: None, port_first: true });
            assert_eq!(
                peer.port() % 2,
                1,
                "bind() hands out odd ports, connect() even ones: {peer}"
            );
        }
    }

    /// One exchange through a slot bound as `local`, on io_uring or epoll; the peer address
    /// the server saw.
    fn bound_exchange(io_uring: bool, local: LocalBind) -> SocketAddr {
        use std::io::{Read, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut socket, peer) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                socket.read_exact(&mut byte).unwrap();
                head.push(byte[0]);
            }
            let body = r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(response.as_bytes()).unwrap();
            peer
        });
        let mut table = crate::request::RequestTable::new();
        table.push(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let request = table.row_bytes(0);
        let mut conn = Conn::new(addr, ApiType::OpenAiChat, 1 << 16);
        conn.set_bind_before_connect(local.port_first);
        conn.set_source_address(local.addr);
        let outcome = if io_uring {
            let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build().unwrap();
            rt.block_on(conn.exchange(&request, clock))
        } else {
            let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().build().unwrap();
            rt.block_on(conn.exchange(&request, clock))
        };
        assert_eq!(outcome.failure, FailureKind::None, "{}", String::from_utf8_lossy(&conn.error));
        assert_eq!(conn.acc.output, b"hi");
        server.join().unwrap()
    }

    /// A request of a few MiB in shared segments (a large header, a large body) goes out whole,
    /// in `REQUEST_WRITE_BYTES` writes, on io_uring and epoll.
    #[test]
    fn a_large_request_in_segments_arrives_whole_on_both_drivers() {
        use std::io::{Read, Write as _};
        let head = format!("POST / HTTP/1.1\r\nX-Big: {}\r\nContent-Length: ", "h".repeat(1 << 20));
        let mut table = crate::request::RequestTable::with_shared(head.as_bytes(), b"{\"model\":1");
        let body = format!("{{\"model\":1,\"p\":\"{}\"}}", "b".repeat(3 << 20));
        table.push_body(body.as_bytes()).unwrap();
        let whole = table.request(0);
        for io_uring in [true, false] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let expected = whole.clone();
            let server = std::thread::spawn(move || {
                let (mut socket, _) = listener.accept().unwrap();
                let mut got = vec![0u8; expected.len()];
                socket.read_exact(&mut got).unwrap();
                let body = r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}"#;
                let response =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                socket.write_all(response.as_bytes()).unwrap();
                got == expected
            });
            let request = table.row_bytes(0);
            let mut conn = Conn::new(addr, ApiType::OpenAiChat, 1 << 16);
            let outcome = if io_uring {
                let mut rt =
                    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build().unwrap();
                rt.block_on(conn.exchange(&request, clock))
            } else {
                let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().build().unwrap();
                rt.block_on(conn.exchange(&request, clock))
            };
            assert_eq!(
                outcome.failure,
                FailureKind::None,
                "{}",
                String::from_utf8_lossy(&conn.error)
            );
            assert!(server.join().unwrap(), "the bytes differ (io_uring {io_uring})");
        }
    }

    #[test]
    fn a_slot_with_a_source_address_connects_from_it() {
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        for io_uring in [true, false] {
            // Address only (IP_BIND_ADDRESS_NO_PORT): connect() picks the port, an even one;
            // a plain bind() of the address would have taken an odd one.
            let peer =
                bound_exchange(io_uring, LocalBind { addr: Some(source), port_first: false });
            assert_eq!(peer.ip(), source, "io_uring {io_uring}");
            assert_eq!(peer.port() % 2, 0, "the port is left to connect(): {peer}");
            let peer = bound_exchange(io_uring, LocalBind { addr: Some(source), port_first: true });
            assert_eq!(peer.ip(), source, "io_uring {io_uring}");
            assert_eq!(peer.port() % 2, 1, "bind() of address and port takes odd ones: {peer}");
        }
    }

    /// One exchange through a TLS slot to a one-connection server that `answer`s the
    /// ClientHello, on io_uring or epoll (both with the timer, as the worker's runtime): the
    /// outcome, its error text and the server's address.
    fn tls_exchange(
        io_uring: bool,
        handshake_timeout: std::time::Duration,
        answer: fn(std::net::TcpStream),
    ) -> (Outcome, String, SocketAddr) {
        use crate::http::tls::{TlsSettings, Verify};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || answer(listener.accept().unwrap().0));
        let settings = TlsSettings { server_name: "127.0.0.1".into(), verify: Verify::Insecure };
        let tls = TlsClient::new(&settings).unwrap().with_handshake_timeout(handshake_timeout);
        let mut table = crate::request::RequestTable::new();
        table.push(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let request = table.row_bytes(0);
        let mut conn = Conn::new(addr, ApiType::OpenAiChat, 1 << 16);
        conn.set_tls(Some(Rc::new(tls)));
        let outcome = if io_uring {
            let builder = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new();
            builder.enable_timer().build().unwrap().block_on(conn.exchange(&request, clock))
        } else {
            let builder = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new();
            builder.enable_timer().build().unwrap().block_on(conn.exchange(&request, clock))
        };
        assert!(!conn.is_open());
        let error = String::from_utf8_lossy(&conn.error).into_owned();
        // The failed handshake dropped the socket: the server sees its close and returns.
        server.join().unwrap();
        (outcome, error, addr)
    }

    #[test]
    fn a_failed_handshake_on_a_reconnect_fails_the_sample_as_tls() {
        use std::io::{Read, Write as _};
        for io_uring in [true, false] {
            // A server that answers the ClientHello with plain HTTP.
            let (outcome, error, addr) =
                tls_exchange(io_uring, std::time::Duration::from_secs(30), |mut socket| {
                    let _ = socket.read(&mut [0u8; 512]).unwrap();
                    let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
                });
            assert_eq!(outcome.failure, FailureKind::Tls, "{error}");
            assert!(error.starts_with("tls handshake with 127.0.0.1 failed: "), "{error}");
            assert!(error.ends_with(&format!("(at {addr})")), "{error}");
            // What the answer means, and what to do about it.
            assert!(
                error.contains("plain HTTP") && error.contains("use an http:// URL"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_handshake_the_server_never_answers_fails_at_the_handshake_limit() {
        use std::io::Read;
        for io_uring in [true, false] {
            // A server that reads the ClientHello and says nothing until the client leaves.
            let (outcome, error, _) =
                tls_exchange(io_uring, std::time::Duration::from_millis(200), |mut socket| {
                    let mut sink = Vec::new();
                    let _ = socket.read_to_end(&mut sink);
                });
            assert_eq!(outcome.failure, FailureKind::Tls, "{error}");
            assert!(
                error.starts_with(
                    "tls handshake with 127.0.0.1 failed: no handshake within 0.2 s \
                     (TLS_HANDSHAKE_TIMEOUT)"
                ),
                "{error}"
            );
            assert!(error.contains("use an http:// URL"), "{error}");
        }
    }

    #[test]
    fn a_tls_close_without_close_notify_reads_as_a_close() {
        use std::io::{Error, ErrorKind};
        let ragged = Err(Error::new(ErrorKind::UnexpectedEof, "no close_notify"));
        assert_eq!(ragged_eof_as_close(ragged).unwrap(), 0);
        assert_eq!(ragged_eof_as_close(Ok(7)).unwrap(), 7);
        let reset = Err(Error::from(ErrorKind::ConnectionReset));
        assert_eq!(ragged_eof_as_close(reset).unwrap_err().kind(), ErrorKind::ConnectionReset);
    }

    #[test]
    fn a_source_address_of_the_other_family_is_refused_naming_it() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let local = LocalBind { addr: Some("::1".parse().unwrap()), port_first: false };
        let e = bound_nonblocking_connect(addr, local).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("::1"), "{e}");
    }

    #[test]
    fn content_length_json_parses_the_same_whole_or_split() {
        // Arriving whole (split before or inside the head) the body is parsed in place; split
        // inside the body it is gathered first. Both must give the same sample.
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let wire = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        for split in 0..=wire.len() {
            let outcome = parse_in_two_reads(&mut conn, wire.as_bytes(), split);
            assert_eq!(outcome.failure, FailureKind::None, "split {split}");
            assert_eq!(conn.acc.output, b"Hello there", "split {split}");
            assert!(conn.acc.chunks.as_bytes().is_empty(), "a whole body has no chunk timing");
            assert_eq!(conn.acc.finish, loadgen_wire::FinishReason::Length, "split {split}");
            assert_eq!(conn.acc.usage.completion_tokens, Some(2), "split {split}");
            assert!(conn.body_in_read_buf.is_none() && conn.read_buf.is_empty());
        }
        let wire = b"HTTP/1.1 503 Unavailable\r\nContent-Length: 9\r\n\r\noverload!";
        for split in [0, 10, wire.len() - 3] {
            let outcome = parse_in_two_reads(&mut conn, wire, split);
            assert_eq!((outcome.failure, outcome.http_status), (FailureKind::HttpStatus, 503));
            assert_eq!(conn.error, b"HTTP 503: overload!", "split {split}");
        }
    }

    #[test]
    fn error_status_and_bad_body_are_failures() {
        let mut conn = Conn::new("127.0.0.1:9".parse().unwrap(), ApiType::OpenAiChat, 1 << 16);
        let wire = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\n\r\nslow";
        let outcome = parse_in_two_reads(&mut conn, wire, 10);
        assert_eq!((outcome.failure, outcome.http_status), (FailureKind::HttpStatus, 429));
        assert_eq!(conn.error, b"HTTP 429: slow");
        let wire =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n{x}";
        let outcome = parse_in_two_reads(&mut conn, wire, 5);
        assert_eq!(outcome.failure, FailureKind::Malformed);
        assert!(conn.acc.output.is_empty());
    }
}
