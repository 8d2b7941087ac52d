//! Runs a stub server from the command line, as `llm-loadgen stub …` will:
//! `cargo run -p loadgen-stubs --example stub -- max-throughput --port 8765 --stream`.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    stub: loadgen_stubs::cli::StubCommand,
}

fn main() -> anyhow::Result<()> {
    loadgen_stubs::cli::run(Cli::parse().stub)
}
