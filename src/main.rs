//! llm-loadgen: a load generator for LLM inference endpoints.

mod run;

fn main() {}
