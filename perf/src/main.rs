//! loadgen-perf: the roofline suite and micro benchmarks.

mod stubbench;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "loadgen-perf", about = "llm-loadgen roofline suite and micro benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The max-throughput stub next to a minimal responder (one server core, one client core).
    StubBench(stubbench::StubBenchArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::StubBench(args) => stubbench::run(&args).map(|_| ()),
    }
}
