//! The worker's HTTP/1.1 client: response framing, SSE framing, TLS, and the connection loop.

pub mod conn;
pub mod h1;
pub mod ports;
pub mod sse;
pub mod tls;
