//! loadgen-perf: the roofline suite and micro benchmarks.

fn main() {}
