//! The integration tests of `loadgen-stubs`, as one test binary: the stubs over real sockets,
//! read with the small blocking client of `support`.

mod support;

mod faults;
mod golden;
mod prefix_cache;
mod server;
mod tls;
