//! loadgen-stubs: stub servers (echo, max-throughput, variable) that speak the endpoint protocols.
