//! The integration tests of `loadgen-perf`, as one test binary.

mod plot;
