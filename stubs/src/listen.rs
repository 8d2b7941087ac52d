//! Listening sockets: one per worker on the same port with SO_REUSEPORT, so the kernel
//! spreads connections over the workers.

use std::io;
use std::net::{SocketAddr, TcpListener};

use nix::sys::socket::{
    bind, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType,
    SockaddrIn, SockaddrIn6,
};

const BACKLOG: i32 = 4096;

/// Binds `count` listeners on `addr`; when its port is 0 the first picks one and the others
/// share it.
pub fn bind_listeners(addr: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    let mut out: Vec<TcpListener> = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let listener = bind_one(addr)?;
        addr = listener.local_addr()?;
        out.push(listener);
    }
    Ok(out)
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    setsockopt(&fd, sockopt::ReusePort, &true)?;
    match addr {
        SocketAddr::V4(a) => bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(a))?,
        SocketAddr::V6(a) => bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn6::from(a))?,
    }
    let backlog = Backlog::new(BACKLOG).map_err(io::Error::from)?;
    listen(&fd, backlog)?;
    let listener = TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    Ok(listener)
}
