//! loadgen-perf: the roofline suite and micro benchmarks.

mod ceiling;
mod framing;
mod make_dataset;
mod plot;
mod procs;
mod roofline;
mod soak;
mod stubbench;
mod tokenizer;

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
    /// The real llm-loadgen against `llm-loadgen stub max-throughput`, row by row, beside the
    /// raw ceiling of the same cores.
    Roofline(roofline::RooflineArgs),
    /// One long max-throughput run against the stub, its processes' resident memory sampled
    /// into a CSV; checks that memory stays flat and issued = completed + abandoned.
    Soak(soak::SoakArgs),
    /// Trains the project's byte-level BPE tokenizer (tests/assets/tokenizers/bpe2k) on the
    /// project's own text; run from the workspace root.
    MakeBpeTokenizer(tokenizer::MakeBpeArgs),
    /// Per-call cost of encode, encode_fast and the split count, after checking they agree.
    CountTokens(tokenizer::CountArgs),
    /// A dataset of N rows (the dummy_1k rows repeated) as JSON Lines or Parquet, for
    /// dataset load-time measurements.
    MakeDataset(make_dataset::MakeDatasetArgs),
    /// A roofline.json as SVG pictures: each row's QPS beside its raw ceiling, and QPS per
    /// client worker count (roofline_rows.svg, roofline_workers.svg).
    Plot(plot::PlotArgs),
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::StubBench(args) => stubbench::run(&args).map(|_| ()),
        Command::Roofline(args) => roofline::run(&args),
        Command::Soak(args) => soak::run(&args),
        Command::MakeBpeTokenizer(args) => tokenizer::make_bpe(&args),
        Command::CountTokens(args) => tokenizer::count_tokens(&args),
        Command::MakeDataset(args) => make_dataset::run(&args),
        Command::Plot(args) => plot::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, never a backtrace.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
