//! The integration tests of `loadgen-worker`, as one test binary: the property-based fuzz
//! targets of the parsers (`fuzz`), and `run_worker` against in-process stubs.

/// Property-based fuzzing of the SSE parser, the HTTP/1.1 response reader and the adapters.
mod fuzz {
    mod adapter;
    mod h1;
    mod sse;
    mod support;
}

mod run_worker;
