//! llm-loadgen: a load generator for LLM inference endpoints.

mod dataset;
mod error;
mod plan;
mod run;
mod tokenizer;

fn main() {}
