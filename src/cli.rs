//! Raw command-line arguments (clap derive): syntax only. `BenchFlags::apply` lays the
//! flags over a `yaml::Config`, and `plan::resolve_plan` validates the result.

use std::path::PathBuf;

use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use loadgen_coordinator::TokenCountSource;

use crate::dataset::DatasetSpec;
use crate::error::AppError;
use crate::yaml::{
    parse_duration_ms, ApiTypeName, Config, LoadPatternKind, ModelParams, OslDistribution, OslKind,
    Streaming, TestMode,
};

/// The exit codes of every command, one row each: `--help`'s "Exit status" and the man
/// page's EXIT STATUS section are written from this table, and a test holds it to
/// `AppError::exit_code`.
pub const EXIT_CODES: [(i32, &str); 6] = [
    (0, "success; some samples may have failed, and the summary counts them"),
    (
        1,
        "usage error: a flag, argument or subcommand that cannot be understood; or a failed \
         compliance check (`check`) or output-caching audit",
    ),
    (2, "bad input: a dataset, a YAML file, a value out of range"),
    (3, "setup error: cannot connect, bad tokenizer, contradictory settings"),
    (
        4,
        "execution error: nothing succeeded, a report incomplete under the primary token \
         basis, a report file that could not be written, a worker that died, probe below \
         half success (each named on stderr)",
    ),
    (130, "interrupted by Ctrl-C or SIGTERM; the reports are written and marked interrupted"),
];

/// `--help`'s closing section: the exit codes, from `EXIT_CODES`.
pub fn exit_status_help() -> String {
    let mut text = String::from("Exit status:\n");
    for (code, meaning) in EXIT_CODES {
        text.push_str(&format!("  {code:<4} {meaning}\n"));
    }
    text
}

/// The command line's definition as users see it: the derive's, with the exit codes closing
/// every command's `--help`.
pub fn command() -> clap::Command {
    with_exit_status(Cli::command(), &exit_status_help())
}

fn with_exit_status(cmd: clap::Command, text: &str) -> clap::Command {
    cmd.after_help(text.to_string()).mut_subcommands(|sub| with_exit_status(sub, text))
}

/// Parses the process's arguments against `command()`.
pub fn try_parse() -> Result<Cli, clap::Error> {
    let matches = command().try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

/// A load generator for LLM inference endpoints.
#[derive(Debug, Parser)]
// The version line names the commit the binary was built from (build.rs).
#[command(name = "llm-loadgen", version = env!("LLM_LOADGEN_VERSION"), about, propagate_version = true)]
pub struct Cli {
    /// More output: -v info, -vv debug (the CPU plan, per-phase timings).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark.
    Benchmark {
        #[command(subcommand)]
        mode: BenchmarkCommand,
    },
    /// Write a commented YAML template (offline, online or concurrency) to
    /// <TEMPLATE>_template.yaml.
    Init {
        /// offline | online | concurrency
        template: String,
        /// Where to write it (default: <TEMPLATE>_template.yaml in the current folder).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Check a YAML file against the schema.
    ValidateYaml {
        /// The YAML file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
    },
    /// Version, CPUs and affinity, io_uring availability, memlock and open-file limits.
    Info,
    /// A few requests to each endpoint: latency and sample answers (as the reference), then
    /// whether streams carry usage, how they are chunked, and which token basis to trust.
    Probe(Box<ProbeArgs>),
    /// Rebuild a finished run's report.txt, result_summary.json and final_snapshot.json from
    /// its events.jsonl, under its token basis or the other.
    Report(ReportArgs),
    /// One report from the report directories of a sharded run's shards (--shard I/N), from
    /// their events.jsonl on one timeline: exact counts, rates and distributions.
    Merge(MergeArgs),
    /// The MLPerf early-stopping estimates of a finished run, from its events.jsonl, as the
    /// reference's scripts/early_stopping_estimate_from_events.py prints them.
    EarlyStopping(EarlyStoppingArgs),
    /// Pictures of a finished run (SVG and PNG): TTFT, TPOT, ITL and latency distributions,
    /// QPS, in-flight samples and Poisson issue lag over time, client against server OSL,
    /// accuracy scores.
    Plot(PlotArgs),
    /// A series of benchmark runs over Poisson rates or concurrency levels (or an automatic
    /// plan), one report directory each under --report-dir, then the knee and the highest rate
    /// whose --slo objectives held: sweep.json and sweep.txt.
    Sweep(Box<SweepArgs>),
    /// Stub servers (echo, max-throughput, variable) for local testing.
    Stub {
        #[command(subcommand)]
        cmd: Box<loadgen_stubs::cli::StubCommand>,
    },
    /// The headline figures of two or more finished runs side by side, with ratios to the
    /// first (from each DIR/performance/result_summary.json).
    Compare(CompareArgs),
    /// The compliance check of finished runs, as the reference's scripts/check_compliance.py:
    /// the config lock, the accuracy gate against the ruleset's targets and the run's
    /// validity, one PASS/FAIL line each; exit 0 when every check of every DIR passes, 1 when
    /// one fails.
    Check(CheckArgs),
    /// A shell completion script, on stdout (e.g. `llm-loadgen completions bash >
    /// /etc/bash_completion.d/llm-loadgen`).
    Completions {
        /// bash | zsh | fish | elvish | powershell
        shell: clap_complete::Shell,
    },
    /// The man page (roff), on stdout (e.g. `llm-loadgen man > llm-loadgen.1`), or with
    /// --out-dir one page per command.
    Man {
        /// Write one page per command into DIR (llm-loadgen.1,
        /// llm-loadgen-benchmark-offline.1, …) and list them, instead of the top page on stdout.
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// `check` arguments.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Report directories of finished runs (each holds config.yaml and the scorer output).
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// The registered ruleset to check against.
    #[arg(long = "ruleset", default_value = loadgen_report::compliance::DEFAULT_RULESET)]
    pub ruleset: String,
    /// The model within the ruleset.
    #[arg(long = "model", default_value = loadgen_report::compliance::DEFAULT_MODEL)]
    pub model: String,
}

/// `sweep` arguments: what to sweep, then every benchmark flag (the points' base).
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Poisson rates (samples/s), one point each, in the order given, e.g. 10,20,40.
    #[arg(
        long = "rates",
        value_delimiter = ',',
        value_name = "QPS[,QPS...]",
        help_heading = "Sweep"
    )]
    pub rates: Vec<f64>,
    /// Concurrency levels, one closed-loop point each, e.g. 1,4,16.
    #[arg(
        long = "concurrencies",
        value_delimiter = ',',
        value_name = "N[,N...]",
        conflicts_with = "rates",
        help_heading = "Sweep"
    )]
    pub concurrencies: Vec<u32>,
    /// The automatic plan: a synchronous run (concurrency 1) and a max-throughput run bound
    /// the range, then N Poisson rates between them, then two more around the knee.
    #[arg(long = "auto", value_name = "N", conflicts_with_all = ["rates", "concurrencies"],
          help_heading = "Sweep")]
    pub auto: Option<usize>,
    /// A YAML file in the reference's schema as every point's base; flags override it.
    #[arg(short = 'c', long = "config", help_heading = "Sweep")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub flags: Box<BenchFlags>,
}

/// `compare` arguments.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Report directories of finished runs (llm-loadgen's or the reference's), two or more;
    /// the first is the baseline of the ratios. Fewer is a usage error the tool reports itself.
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Print the comparison as one JSON object on stdout instead of a table.
    #[arg(long = "json")]
    pub json: bool,
}

/// `report` flags.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The report directory of a finished run (it holds events.jsonl and config.yaml).
    pub dir: PathBuf,
    /// Rebuild under this basis: client (tokenizer) or server (endpoint usage) [default: the
    /// run's, from result_summary.json, else config.yaml, else client].
    #[arg(long = "token-count-source", value_parser = basis_parser())]
    pub token_count_source: Option<TokenCountSource>,
    /// Write the rebuilt files under this directory instead of DIR.
    #[arg(long = "out", value_name = "OUT")]
    pub out: Option<PathBuf>,
}

/// `merge` flags.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' report directories (each holds events.jsonl, config.yaml and shard.json).
    #[arg(value_name = "DIR", num_args = 1.., required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where the merged report directory goes (created; its files are replaced).
    #[arg(long = "out", value_name = "OUT", required = true)]
    pub out: PathBuf,
    /// Merge under this basis: client (tokenizer) or server (endpoint usage) [default: the
    /// run's, from the first shard's result_summary.json, else config.yaml, else client].
    #[arg(long = "token-count-source", value_parser = basis_parser())]
    pub token_count_source: Option<TokenCountSource>,
    /// Refuse shards whose starts lie further apart than this, in ms.
    #[arg(long = "max-skew-ms", value_name = "MS", default_value_t = 50)]
    pub max_skew_ms: u64,
}

/// `plot` flags.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// The report directory of a finished run (it holds events.jsonl and config.yaml).
    pub dir: PathBuf,
    /// Write the pictures under this directory [default: DIR/plots].
    #[arg(long = "out", value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// svg, png or both.
    #[arg(long = "format", value_enum, default_value = "both")]
    pub format: crate::commands::plot::Format,
    /// TPOT under this basis: client (tokenizer) or server (endpoint usage) [default: the
    /// run's, from result_summary.json, else config.yaml, else client].
    #[arg(long = "token-count-source", value_parser = basis_parser())]
    pub token_count_source: Option<TokenCountSource>,
}

/// `early-stopping` flags.
#[derive(Debug, Args)]
pub struct EarlyStoppingArgs {
    /// The report directory of a finished run (it holds events.jsonl and config.yaml).
    pub dir: PathBuf,
    /// TPOT under this basis: client (tokenizer) or server (endpoint usage) [default: the
    /// run's, from result_summary.json, else config.yaml, else client].
    #[arg(long = "token-count-source", value_parser = basis_parser())]
    pub token_count_source: Option<TokenCountSource>,
    /// Percentiles to estimate when the run's summary has no grid, in the grid convention
    /// (0-100), comma-separated [default: 99.9,99.0,97.0,95.0,90.0,80.0,75.0,50.0].
    #[arg(long = "percentiles")]
    pub percentiles: Option<String>,
}

/// `probe` flags: the reference's, then the benchmark's endpoint flags and the checks' own.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Endpoint base URLs (http:// or https://), comma-separated or repeated; each is probed in
    /// turn.
    #[arg(long = "endpoints", value_delimiter = ',', action = ArgAction::Append, required = true)]
    pub endpoints: Vec<String>,
    /// Model name sent in requests.
    #[arg(long = "model", required = true)]
    pub model: String,
    /// Request protocol (videogen is refused, as the reference refuses it).
    #[arg(long = "api-type", default_value = "openai")]
    pub api_type: ApiTypeName,
    /// Plain (non-streaming) requests sent, one at a time.
    #[arg(long = "requests", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// The prompt of every request.
    #[arg(long = "prompt", default_value = "Please write me a joke in 30 words.")]
    pub prompt: String,
    /// Skip TLS certificate verification for https:// endpoints.
    #[arg(long = "insecure")]
    pub insecure: bool,
    /// Trust only the PEM certificates in FILE for https:// endpoints.
    #[arg(long = "ca-bundle", value_name = "FILE")]
    pub ca_bundle: Option<String>,
    /// Sent as `Authorization: Bearer <KEY>` [default: OPENAI_API_KEY when set].
    #[arg(long = "api-key")]
    pub api_key: Option<String>,
    /// A header for every request, `NAME: VALUE` (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", action = ArgAction::Append)]
    pub headers: Vec<String>,
    /// A tokenizer (as the benchmark's --tokenizer) to compare client and server token counts.
    #[arg(long = "tokenizer")]
    pub tokenizer: Option<String>,
    /// Print the findings as one JSON object on stdout (the console lines go to stderr).
    #[arg(long = "json")]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchmarkCommand {
    /// max_throughput: issue every sample at t=0.
    Offline(Box<BenchFlags>),
    /// Poisson (--load-pattern poisson --target-qps Q) or concurrency
    /// (--load-pattern concurrency --concurrency N).
    Online(Box<BenchFlags>),
    /// Run from a YAML file in the reference's schema; flags given here override it.
    FromConfig(FromConfigArgs),
}

impl BenchmarkCommand {
    /// Whether `--json` was given: stdout then holds only the summary object.
    pub fn json(&self) -> bool {
        match self {
            BenchmarkCommand::Offline(flags) | BenchmarkCommand::Online(flags) => flags.json,
            BenchmarkCommand::FromConfig(args) => args.flags.json,
        }
    }

    /// Whether `--quiet` was given: no live view.
    pub fn quiet(&self) -> bool {
        match self {
            BenchmarkCommand::Offline(flags) | BenchmarkCommand::Online(flags) => flags.quiet,
            BenchmarkCommand::FromConfig(args) => args.flags.quiet,
        }
    }
}

#[derive(Debug, Args)]
pub struct FromConfigArgs {
    /// The YAML file.
    #[arg(short = 'c', long = "config")]
    pub config: PathBuf,
    #[command(flatten)]
    pub flags: Box<BenchFlags>,
}

/// `--streaming` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamingArg {
    Auto,
    On,
    Off,
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Perf,
    Acc,
    Both,
}

/// Every benchmark flag; each is optional so that only given flags override the YAML or
/// the defaults.
#[derive(Debug, Default, Args)]
pub struct BenchFlags {
    /// Model name sent in requests; also the tokenizer unless --tokenizer is given
    /// [required with --endpoints].
    #[arg(long = "model", visible_alias = "model-params.name", help_heading = "Endpoint")]
    pub model: Option<String>,
    /// Endpoint base URLs (http:// or https://), comma-separated or repeated; none = the
    /// embedded max-throughput stub.
    #[arg(long = "endpoints", visible_alias = "endpoint-config.endpoints", value_delimiter = ',',
          action = ArgAction::Append, help_heading = "Endpoint")]
    pub endpoints: Vec<String>,
    /// Sent as `Authorization: Bearer <KEY>`; redacted in config.yaml [default: the
    /// OPENAI_API_KEY environment variable, when set and an endpoint is given].
    #[arg(long = "api-key", visible_alias = "endpoint-config.api-key", help_heading = "Endpoint")]
    pub api_key: Option<String>,
    /// Trust only the PEM certificates in FILE for https:// endpoints, instead of the system's
    /// trust store (as curl's --cacert).
    #[arg(long = "ca-bundle", value_name = "FILE", help_heading = "Endpoint")]
    pub ca_bundle: Option<String>,
    /// A header for every request, `NAME: VALUE` (repeatable); the value of one named for a
    /// secret (Authorization, Cookie, X-Api-Key, *-Token, …) is redacted wherever shown.
    /// Replaces YAML `endpoint_config.headers`.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", action = ArgAction::Append,
          help_heading = "Endpoint")]
    pub headers: Vec<String>,
    /// Request protocol [default: openai].
    #[arg(
        long = "api-type",
        visible_alias = "endpoint-config.api-type",
        help_heading = "Endpoint"
    )]
    pub api_type: Option<ApiTypeName>,

    /// PATH[,parser.prompt=COL,parser.system=COL,name=N,format=F,samples=N] (repeatable;
    /// one performance dataset); none = the built-in synthetic dataset.
    #[arg(long = "dataset", action = ArgAction::Append, help_heading = "Data")]
    pub datasets: Vec<String>,
    /// A tokenizer.json, a folder holding one, or a model id in the local HF cache.
    #[arg(
        long = "tokenizer",
        visible_alias = "model-params.tokenizer-name",
        help_heading = "Data"
    )]
    pub tokenizer: Option<String>,
    /// A jinja chat template that replaces the tokenizer folder's for client ISL counting
    /// (give the server's `--chat-template` file) [default: the tokenizer folder's].
    #[arg(long = "chat-template", value_name = "FILE", help_heading = "Data")]
    pub chat_template: Option<String>,

    /// auto = off for offline, on for online [default: auto].
    #[arg(long = "streaming", visible_alias = "model-params.streaming", help_heading = "Request")]
    pub streaming: Option<StreamingArg>,
    /// Max output tokens per request [default: 1024].
    #[arg(
        long = "max-output-tokens",
        visible_alias = "model-params.max-new-tokens",
        help_heading = "Request"
    )]
    pub max_output_tokens: Option<u32>,
    /// Min output tokens (openai_completions only) [default: 1].
    #[arg(
        long = "min-new-tokens",
        visible_alias = "model-params.min-new-tokens",
        help_heading = "Request"
    )]
    pub min_new_tokens: Option<u32>,
    #[arg(
        long = "temperature",
        visible_alias = "model-params.temperature",
        help_heading = "Request"
    )]
    pub temperature: Option<f64>,
    #[arg(long = "top-p", visible_alias = "model-params.top-p", help_heading = "Request")]
    pub top_p: Option<f64>,
    #[arg(
        long = "top-k",
        visible_alias = "model-params.top-k",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub top_k: Option<i64>,
    /// Sampling seed sent in requests.
    #[arg(long = "seed", visible_alias = "model-params.seed", help_heading = "Request")]
    pub seed: Option<u64>,
    /// Sent as repetition_penalty (SGLang: inside sampling_params).
    #[arg(
        long = "repetition-penalty",
        value_name = "X",
        visible_alias = "model-params.repetition-penalty",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub repetition_penalty: Option<f64>,
    /// Sent as presence_penalty (SGLang: inside sampling_params).
    #[arg(
        long = "presence-penalty",
        value_name = "X",
        visible_alias = "model-params.presence-penalty",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub presence_penalty: Option<f64>,
    /// Sent as frequency_penalty (SGLang: inside sampling_params).
    #[arg(
        long = "frequency-penalty",
        value_name = "X",
        visible_alias = "model-params.frequency-penalty",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub frequency_penalty: Option<f64>,
    /// [true|false] skip_special_tokens in completions requests (false: openai_completions only).
    #[arg(
        long = "skip-special-tokens",
        visible_alias = "model-params.skip-special-tokens",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL",
        help_heading = "Request"
    )]
    pub skip_special_tokens: Option<bool>,
    /// Send skip_special_tokens: false (openai_completions only).
    #[arg(
        long = "no-skip-special-tokens",
        visible_alias = "model-params.no-skip-special-tokens",
        conflicts_with = "skip_special_tokens",
        help_heading = "Request"
    )]
    pub no_skip_special_tokens: bool,
    /// Per-sample output length: original|fixed|uniform|normal [default: original].
    #[arg(
        long = "osl-distribution.type",
        value_name = "TYPE",
        visible_alias = "model-params.osl-distribution.type",
        help_heading = "Request"
    )]
    pub osl_type: Option<OslKind>,
    /// Output length mean (fixed, normal).
    #[arg(
        long = "osl-distribution.mean",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.mean",
        help_heading = "Request"
    )]
    pub osl_mean: Option<i64>,
    /// Output length standard deviation (normal).
    #[arg(
        long = "osl-distribution.std",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.std",
        help_heading = "Request"
    )]
    pub osl_std: Option<i64>,
    /// Smallest drawn output length [default: 1].
    #[arg(
        long = "min-output-tokens",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.min",
        help_heading = "Request"
    )]
    pub osl_min: Option<i64>,
    /// Largest drawn output length [default: 2048].
    #[arg(
        long = "osl-distribution.max",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.max",
        help_heading = "Request"
    )]
    pub osl_max: Option<i64>,
    /// Send ignore_eos: true (beyond the reference; vLLM and SGLang honour it).
    #[arg(
        long = "ignore-eos",
        visible_alias = "model-params.ignore-eos",
        help_heading = "Request"
    )]
    pub ignore_eos: bool,
    /// A JSON object merged into every request body's top level; its keys replace built ones.
    #[arg(
        long = "extra-body",
        visible_alias = "model-params.extra-body",
        value_name = "JSON",
        help_heading = "Request"
    )]
    pub extra_body: Option<String>,
    /// Ask streaming OpenAI requests for usage (stream_options.include_usage) [default].
    #[arg(
        long = "stream-include-usage",
        visible_alias = "client.stream-include-usage",
        overrides_with = "no_stream_include_usage",
        help_heading = "Request"
    )]
    pub stream_include_usage: bool,
    /// Send the reference's pre-usage request bytes (no stream_options).
    #[arg(
        long = "no-stream-include-usage",
        visible_alias = "client.no-stream-include-usage",
        overrides_with = "stream_include_usage",
        help_heading = "Request"
    )]
    pub no_stream_include_usage: bool,

    /// Exact number of samples; wins over --duration.
    #[arg(
        long = "num-samples",
        visible_alias = "runtime.n-samples-to-issue",
        help_heading = "Run length"
    )]
    pub num_samples: Option<u64>,
    /// Sizes the sample count, not the wall time: ceil(QPS x duration x 1.1) samples (QPS:
    /// --target-qps, else 10), rounded up to whole passes of the dataset; 0 = the dataset
    /// once. The run ends when those samples are done, so it can take longer (a small dataset
    /// repeated, a slow server) or shorter; the summary's "Run length" line says which
    /// applied. 600s, 10m, 600000ms or plain ms [default: 600000].
    #[arg(long = "duration", visible_alias = "runtime.min-duration-ms",
          value_parser = parse_duration_ms, help_heading = "Run length")]
    pub duration_ms: Option<u64>,
    /// Wall-time cap (same units as --duration; 0 = none); in-flight samples are abandoned.
    #[arg(long = "runtime.max-duration-ms", visible_alias = "max-duration",
          value_parser = parse_duration_ms, help_heading = "Run length")]
    pub max_duration_ms: Option<u64>,
    /// Wait for in-flight samples after the last issue, in seconds [default: 240].
    #[arg(
        long = "performance-drain-timeout",
        visible_alias = "drain.performance-timeout-s",
        help_heading = "Run length"
    )]
    pub performance_drain_timeout_s: Option<f64>,
    /// Live client tokenizer threads; 0 = count every output after the last sample
    /// [default: 4 on cores the load leaves spare, 0 where there are none].
    #[arg(
        long = "metrics-tokenizer-workers",
        visible_alias = "drain.metrics-tokenizer-workers",
        allow_negative_numbers = true,
        help_heading = "Report"
    )]
    pub metrics_tokenizer_workers: Option<i64>,
    /// Seconds the end-of-run client token count may take; 0 = unlimited [default: 0].
    #[arg(
        long = "metrics-drain-timeout",
        visible_alias = "drain.metrics-drain-timeout-s",
        allow_negative_numbers = true,
        help_heading = "Report"
    )]
    pub metrics_drain_timeout_s: Option<f64>,
    /// Test mode: perf and both run the performance phase, then every accuracy dataset;
    /// acc runs the accuracy datasets alone (one worker, one connection) [default: perf].
    #[arg(long = "mode", help_heading = "Run length")]
    pub mode: Option<ModeArg>,
    /// The reference's alias for --mode acc.
    #[arg(
        long = "accuracy-only",
        overrides_with = "no_accuracy_only",
        help_heading = "Run length"
    )]
    pub accuracy_only: bool,
    /// Per-request timeout in seconds, from the request's write to the response's end; past
    /// it the sample fails with kind timeout [default: none].
    #[arg(long = "timeout", help_heading = "Run length")]
    pub timeout: Option<f64>,

    /// max_throughput (offline) | poisson | concurrency.
    #[arg(long = "load-pattern", visible_alias = "load-pattern.type", help_heading = "Load")]
    pub load_pattern: Option<LoadPatternKind>,
    /// Poisson arrival rate; also sizes the sample count of any pattern [sizing default: 10].
    #[arg(long = "target-qps", visible_alias = "load-pattern.target-qps", help_heading = "Load")]
    pub target_qps: Option<f64>,
    /// Requests in flight for --load-pattern concurrency.
    #[arg(long = "concurrency", visible_aliases = ["target-concurrency", "load-pattern.target-concurrency"],
          help_heading = "Load")]
    pub concurrency: Option<u32>,
    /// Report QPS in LoadGen's form (poisson only) [default].
    #[arg(
        long = "use-legacy-loadgen-qps-metrics",
        overrides_with = "no_legacy_qps",
        help_heading = "Load"
    )]
    pub legacy_qps: bool,
    #[arg(
        long = "no-use-legacy-loadgen-qps-metrics",
        overrides_with = "legacy_qps",
        help_heading = "Load"
    )]
    pub no_legacy_qps: bool,
    /// Seed of the poisson arrival times [default: 42].
    #[arg(long = "runtime.scheduler-random-seed", help_heading = "Load")]
    pub scheduler_seed: Option<u64>,
    /// Seed of the sample order [default: 42].
    #[arg(long = "runtime.dataloader-random-seed", help_heading = "Load")]
    pub dataloader_seed: Option<u64>,

    /// Worker processes; -1 = available cores - 1 [default: -1].
    #[arg(long = "workers", visible_aliases = ["num-workers", "client.num-workers"],
          allow_negative_numbers = true, help_heading = "Client")]
    pub workers: Option<i64>,
    /// Connections across all workers; -1 = 32 per worker (at least --concurrency)
    /// [default: -1].
    #[arg(
        long = "max-connections",
        visible_alias = "client.max-connections",
        allow_negative_numbers = true,
        help_heading = "Client"
    )]
    pub max_connections: Option<i64>,
    /// Connections each worker opens before the clock starts; -1 = auto, 0 = none
    /// [default: -1].
    #[arg(
        long = "client.warmup-connections",
        visible_alias = "warmup-connections",
        allow_negative_numbers = true,
        help_heading = "Client"
    )]
    pub warmup_connections: Option<i64>,
    /// Seconds workers may take to start and connect [default: 60].
    #[arg(long = "client.worker-initialization-timeout", help_heading = "Client")]
    pub worker_init_timeout_s: Option<f64>,
    /// Pin workers to cores [default].
    #[arg(
        long = "enable-cpu-affinity",
        overrides_with = "no_cpu_affinity",
        help_heading = "Client"
    )]
    pub cpu_affinity: bool,
    #[arg(long = "no-cpu-affinity", overrides_with = "cpu_affinity", help_heading = "Client")]
    pub no_cpu_affinity: bool,
    /// Local IP addresses the connections leave from, in turn (comma-separated or repeated);
    /// needed past one address's ephemeral ports (~24,000 connections to one endpoint);
    /// loopback endpoints get 127.0.0.2, … themselves [default: the kernel's choice].
    #[arg(long = "source-addresses", value_name = "ADDR[,ADDR...]", value_delimiter = ',',
          action = ArgAction::Append, help_heading = "Client")]
    pub source_addresses: Vec<String>,

    /// Issue warm-up samples before tracking starts.
    #[arg(long = "warmup", visible_aliases = ["warmup.enabled", "enabled"],
          overrides_with = "no_warmup", help_heading = "Warm-up")]
    pub warmup: bool,
    /// Warm-up samples [default: the dataset once].
    #[arg(long = "warmup-requests", visible_aliases = ["warmup.n-requests", "n-requests"],
          help_heading = "Warm-up")]
    pub warmup_requests: Option<u64>,
    /// Wait for warm-up samples before the performance phase.
    #[arg(
        long = "warmup-drain",
        visible_alias = "warmup.drain",
        overrides_with = "no_warmup_drain",
        help_heading = "Warm-up"
    )]
    pub warmup_drain: bool,

    /// MLPerf early-stopping estimates [default].
    #[arg(
        long = "early-stopping",
        visible_alias = "early-stopping.enabled",
        overrides_with = "no_early_stopping",
        help_heading = "Report"
    )]
    pub early_stopping: bool,
    #[arg(long = "no-early-stopping", overrides_with = "early_stopping", help_heading = "Report")]
    pub no_early_stopping: bool,
    /// Service-level objectives judged per sample, e.g. ttft_p99=500ms,tpot_p99=50ms: goodput
    /// (samples/s that met every one) and the share that met each.
    #[arg(long = "slo", value_name = "NAME=BOUND[,...]", help_heading = "Report")]
    pub slo: Option<String>,
    /// Report directory [default: /tmp/reports_YYYYMMDD_HHMMSS].
    #[arg(long = "report-dir", help_heading = "Report")]
    pub report_dir: Option<PathBuf>,
    /// Write no events.jsonl (the per-sample event log); the other report files are complete.
    #[arg(long = "no-events", help_heading = "Report")]
    pub no_events: bool,
    /// Directory for the per-sample rows past --spill-budget-mib (unlinked files: nothing is
    /// left there) [default: the report directory].
    #[arg(long = "spill-dir", value_name = "DIR", help_heading = "Report")]
    pub spill_dir: Option<PathBuf>,
    /// MiB of per-sample rows kept in memory; past it they go to files in --spill-dir, so a
    /// run of any length stays in bounded memory (0: keep every row in memory) [default: 256].
    #[arg(long = "spill-budget-mib", value_name = "MIB", help_heading = "Report")]
    pub spill_budget_mib: Option<u64>,
    /// Headline token counts: client (tokenizer) or server (endpoint usage) [default: client].
    #[arg(
        long = "token-count-source",
        visible_alias = "settings.token-count-source",
        help_heading = "Report",
        value_parser = basis_parser()
    )]
    pub token_count_source: Option<TokenCountSource>,

    /// Print the run's summary (result_summary.json plus `report_dir`) as one JSON object on
    /// stdout; every other line goes to stderr.
    #[arg(long = "json", help_heading = "Report")]
    pub json: bool,
    /// No live view: neither the terminal display nor the plain progress lines on stderr.
    #[arg(long = "quiet", help_heading = "Report")]
    pub quiet: bool,

    /// This host's shard of a benchmark run from several hosts, I/N (0 ≤ I < N): every N-th
    /// sample from the I-th, target QPS / N, its share of the concurrency [default: Slurm's
    /// SLURM_PROCID/SLURM_NTASKS, or JOB_COMPLETION_INDEX with --shards].
    #[arg(long = "shard", value_name = "I/N", help_heading = "Shards")]
    pub shard: Option<String>,
    /// The shard count, for a Kubernetes Indexed Job's JOB_COMPLETION_INDEX [default: the
    /// LOADGEN_SHARDS environment variable].
    #[arg(long = "shards", value_name = "N", help_heading = "Shards")]
    pub shards: Option<u64>,
    /// Start the performance phase at this wall-clock time, once connected and warmed up
    /// (RFC 3339, e.g. 2026-12-01T18:00:00Z, or Unix seconds); give every shard the same.
    #[arg(long = "start-at", value_name = "TIME", help_heading = "Shards")]
    pub start_at: Option<String>,

    /// The rest of the reference's spellings (see `SpellingFlags`).
    #[command(flatten)]
    pub spellings: SpellingFlags,
}

/// `client` | `server`, listed in `--help`, parsed into the one basis type.
fn basis_parser() -> impl clap::builder::TypedValueParser<Value = TokenCountSource> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["client", "server"])
        // Only the two listed names get here, and both parse.
        .map(|name| name.parse().unwrap_or_default())
}

/// The reference's remaining flag spellings, each landing on the same `Config` field as its
/// YAML key, so `plan::check_reference_only` judges flag and YAML alike: a setting that only
/// tunes the reference's own machinery gets a note, one whose feature is missing is refused.
#[derive(Debug, Default, Args)]
pub struct SpellingFlags {
    /// No warm-up phase [default].
    #[arg(
        long = "no-warmup",
        visible_alias = "no-enabled",
        overrides_with = "warmup",
        help_heading = "Warm-up"
    )]
    pub no_warmup: bool,
    /// Start the performance phase without waiting for warm-up samples [default].
    #[arg(
        long = "no-warmup-drain",
        visible_alias = "no-drain",
        overrides_with = "warmup_drain",
        help_heading = "Warm-up"
    )]
    pub no_warmup_drain: bool,
    /// Prefix each warm-up prompt with a salt of its own, `[<16 hex>] `, so a server's prefix
    /// cache cannot answer the measured phase from the warm-up (text-prompt datasets).
    #[arg(
        long = "warmup-salt",
        visible_alias = "salt",
        overrides_with = "no_warmup_salt",
        help_heading = "Warm-up"
    )]
    pub warmup_salt: bool,
    /// Unsalted warm-up prompts [default].
    #[arg(
        long = "no-warmup-salt",
        visible_alias = "no-salt",
        overrides_with = "warmup_salt",
        help_heading = "Warm-up"
    )]
    pub no_warmup_salt: bool,
    /// Warm-up seed: its Poisson schedule, its sample order (+1) and its salts (+2), as the
    /// reference draws them [default: 42].
    #[arg(long = "warmup-seed", visible_alias = "warmup-random-seed", help_heading = "Warm-up")]
    pub warmup_seed: Option<u64>,
    /// How long --warmup-drain waits for warm-up samples, in seconds [default: 240].
    #[arg(
        long = "warmup-drain-timeout",
        visible_alias = "drain.warmup-timeout-s",
        help_heading = "Warm-up"
    )]
    pub warmup_drain_timeout_s: Option<f64>,
    /// How long each accuracy phase waits for its in-flight samples, in seconds [default:
    /// without limit].
    #[arg(
        long = "accuracy-drain-timeout",
        visible_alias = "drain.accuracy-timeout-s",
        help_heading = "Run length"
    )]
    pub accuracy_drain_timeout_s: Option<f64>,
    /// Undo --accuracy-only (the mode is --mode's, else perf).
    #[arg(
        long = "no-accuracy-only",
        overrides_with = "accuracy_only",
        help_heading = "Run length"
    )]
    pub no_accuracy_only: bool,

    /// Skip TLS certificate checks on https:// endpoints: any certificate for any name is
    /// accepted (encrypted, not authenticated).
    #[arg(
        long = "insecure",
        visible_alias = "client.insecure",
        overrides_with = "no_insecure",
        help_heading = "Client"
    )]
    pub insecure: bool,
    /// Check TLS certificates [default].
    #[arg(
        long = "no-insecure",
        visible_alias = "client.no-insecure",
        overrides_with = "insecure",
        help_heading = "Client"
    )]
    pub no_insecure: bool,
    /// The reference's ZMQ transport (no effect: workers use shared-memory rings).
    #[arg(long = "client.transport.type", help_heading = "Reference-only (no effect)")]
    pub transport_type: Option<String>,
    /// The reference's worker log level (no effect).
    #[arg(long = "client.log-level", help_heading = "Reference-only (no effect)")]
    pub log_level: Option<String>,
    /// The reference's worker GC mode: disabled | relaxed | system (no effect).
    #[arg(long = "client.worker-gc-mode", value_parser = ["disabled", "relaxed", "system"],
          help_heading = "Reference-only (no effect)")]
    pub worker_gc_mode: Option<String>,
    /// Seconds the reference waits for its workers to stop (no effect).
    #[arg(
        long = "client.worker-graceful-shutdown-wait",
        help_heading = "Reference-only (no effect)"
    )]
    pub worker_graceful_shutdown_wait: Option<f64>,
    /// Seconds the reference waits before killing its workers (no effect).
    #[arg(long = "client.worker-force-kill-timeout", help_heading = "Reference-only (no effect)")]
    pub worker_force_kill_timeout: Option<f64>,
    /// Seconds the reference waits for its services (no effect).
    #[arg(
        long = "service-ready-timeout",
        visible_alias = "service-ready-timeout-s",
        allow_negative_numbers = true,
        help_heading = "Reference-only (no effect)"
    )]
    pub service_ready_timeout_s: Option<f64>,
    /// Forward every chunk to the reference's main thread (no effect).
    #[arg(
        long = "client.stream-all-chunks",
        overrides_with = "no_stream_all_chunks",
        help_heading = "Reference-only (no effect)"
    )]
    pub stream_all_chunks: bool,
    #[arg(
        long = "client.no-stream-all-chunks",
        overrides_with = "stream_all_chunks",
        help_heading = "Reference-only (no effect)"
    )]
    pub no_stream_all_chunks: bool,
    /// The reference's auto warm-up port fraction (no effect).
    #[arg(
        long = "client.auto-warmup-budget-fraction",
        help_heading = "Reference-only (no effect)"
    )]
    pub auto_warmup_budget_fraction: Option<f64>,
    /// The reference's connect pacing per worker (no effect).
    #[arg(
        long = "max-concurrent-warmup-connects",
        visible_alias = "client.max-concurrent-warmup-connects",
        help_heading = "Reference-only (no effect)"
    )]
    pub max_concurrent_warmup_connects: Option<i64>,
    /// The reference's idle-connection discard, in seconds (no effect).
    #[arg(long = "client.max-idle-time", help_heading = "Reference-only (no effect)")]
    pub max_idle_time: Option<f64>,
    /// The reference's ephemeral-port warning threshold (no effect).
    #[arg(
        long = "client.min-required-connections",
        allow_negative_numbers = true,
        help_heading = "Reference-only (no effect)"
    )]
    pub min_required_connections: Option<i64>,

    /// Profile the named inference engine around the performance phase: vllm (POST
    /// /start_profile when it starts, /stop_profile after the run).
    #[arg(long = "profile", visible_alias = "engine", help_heading = "Profiling")]
    pub profile: Option<String>,
    /// URLs the profiler triggers are derived from (default: the endpoints; a trailing /v1 is
    /// dropped, the engine's paths appended).
    #[arg(long = "profile-urls", visible_alias = "urls", value_delimiter = ',',
          action = ArgAction::Append, help_heading = "Profiling")]
    pub profile_urls: Vec<String>,
}

impl SpellingFlags {
    /// Lays these flags over `config`, each on its YAML key's field.
    fn apply(&self, config: &mut Config) {
        let s = &mut config.settings;
        replace(&mut s.warmup.salt, pick(self.warmup_salt, self.no_warmup_salt));
        replace(&mut s.warmup.warmup_random_seed, self.warmup_seed);
        set(&mut s.drain.warmup_timeout_s, self.warmup_drain_timeout_s);
        set(&mut s.drain.accuracy_timeout_s, self.accuracy_drain_timeout_s);
        replace(&mut s.service_ready_timeout_s, self.service_ready_timeout_s);
        let c = &mut s.client;
        replace(&mut c.insecure, pick(self.insecure, self.no_insecure));
        replace(&mut c.transport.kind, self.transport_type.clone());
        replace(&mut c.log_level, self.log_level.clone());
        replace(&mut c.worker_gc_mode, self.worker_gc_mode.clone());
        replace(&mut c.worker_graceful_shutdown_wait, self.worker_graceful_shutdown_wait);
        replace(&mut c.worker_force_kill_timeout, self.worker_force_kill_timeout);
        replace(&mut c.stream_all_chunks, pick(self.stream_all_chunks, self.no_stream_all_chunks));
        replace(&mut c.auto_warmup_budget_fraction, self.auto_warmup_budget_fraction);
        replace(&mut c.max_concurrent_warmup_connects, self.max_concurrent_warmup_connects);
        replace(&mut c.max_idle_time, self.max_idle_time);
        replace(&mut c.min_required_connections, self.min_required_connections);
        set(&mut s.profiling.engine, self.profile.clone());
        if !self.profile_urls.is_empty() {
            s.profiling.urls = Some(self.profile_urls.clone());
        }
    }
}

fn pick(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (_, true) => Some(false),
        (true, false) => Some(true),
        _ => None,
    }
}

impl BenchFlags {
    /// The request-parameter flags beyond the first four sampling keys.
    fn apply_request_params(&self, mp: &mut ModelParams) -> Result<(), AppError> {
        set(&mut mp.repetition_penalty, self.repetition_penalty);
        set(&mut mp.presence_penalty, self.presence_penalty);
        set(&mut mp.frequency_penalty, self.frequency_penalty);
        replace(&mut mp.skip_special_tokens, self.skip_special_tokens);
        if self.no_skip_special_tokens {
            mp.skip_special_tokens = false;
        }
        let osl_given = self.osl_type.is_some()
            || self.osl_mean.is_some()
            || self.osl_std.is_some()
            || self.osl_min.is_some()
            || self.osl_max.is_some();
        if osl_given {
            // A flag overrides one field and keeps the YAML's others, as the reference merges.
            let osl = mp.osl_distribution.get_or_insert_with(OslDistribution::default);
            replace(&mut osl.kind, self.osl_type);
            set(&mut osl.mean, self.osl_mean);
            set(&mut osl.std, self.osl_std);
            replace(&mut osl.min, self.osl_min);
            replace(&mut osl.max, self.osl_max);
        }
        if self.ignore_eos {
            mp.ignore_eos = true;
        }
        if let Some(text) = &self.extra_body {
            let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                AppError::Input(format!(
                    "--extra-body {text:?} is not valid JSON ({e}); give an object such as \
                     '{{\"logprobs\":2}}'"
                ))
            })?;
            if !value.is_object() {
                return Err(AppError::Input(format!(
                    "--extra-body {text:?} is not a JSON object; give one such as \
                     '{{\"logprobs\":2}}'"
                )));
            }
            // Read again as YAML (JSON is a subset) to keep the user's key order.
            mp.extra_body = Some(serde_yaml_ng::from_str(text).map_err(|e| {
                AppError::Input(format!("--extra-body {text:?} cannot be read: {e}"))
            })?);
        }
        Ok(())
    }

    /// Lays every given flag over `config`.
    pub fn apply(&self, config: &mut Config) -> Result<(), AppError> {
        if let Some(mode) = self.mode {
            config.test_mode = Some(match mode {
                ModeArg::Perf => TestMode::Perf,
                ModeArg::Acc => TestMode::Acc,
                ModeArg::Both => TestMode::Both,
            });
        }
        // The reference's `--accuracy-only` resolves to `TestMode.ACC`, whatever --mode says.
        if self.accuracy_only {
            config.test_mode = Some(TestMode::Acc);
        }
        let mp = &mut config.model_params;
        set(&mut mp.name, self.model.clone());
        set(&mut mp.tokenizer_name, self.tokenizer.clone());
        if let Some(s) = self.streaming {
            mp.streaming = match s {
                StreamingArg::Auto => Streaming::Auto,
                StreamingArg::On => Streaming::On,
                StreamingArg::Off => Streaming::Off,
            };
        }
        replace(&mut mp.max_new_tokens, self.max_output_tokens);
        replace(&mut mp.min_new_tokens, self.min_new_tokens);
        set(&mut mp.temperature, self.temperature);
        set(&mut mp.top_p, self.top_p);
        set(&mut mp.top_k, self.top_k);
        set(&mut mp.seed, self.seed);
        self.apply_request_params(mp)?;
        if !self.datasets.is_empty() {
            config.datasets =
                self.datasets.iter().map(|d| DatasetSpec::parse(d)).collect::<Result<_, _>>()?;
        }
        let ep = &mut config.endpoint_config;
        let endpoints: Vec<String> =
            self.endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect();
        if !endpoints.is_empty() {
            ep.endpoints = endpoints;
        }
        set(&mut ep.api_key, self.api_key.clone());
        if !self.headers.is_empty() {
            ep.headers = self.headers.clone();
        }
        set(&mut ep.ca_bundle, self.ca_bundle.clone());
        replace(&mut ep.api_type, self.api_type);
        let s = &mut config.settings;
        set(&mut s.runtime.n_samples_to_issue, self.num_samples);
        replace(&mut s.runtime.min_duration_ms, self.duration_ms);
        replace(&mut s.runtime.max_duration_ms, self.max_duration_ms);
        replace(&mut s.runtime.scheduler_random_seed, self.scheduler_seed);
        replace(&mut s.runtime.dataloader_random_seed, self.dataloader_seed);
        set(&mut s.drain.performance_timeout_s, self.performance_drain_timeout_s);
        set(&mut s.drain.metrics_tokenizer_workers, self.metrics_tokenizer_workers);
        replace(&mut s.drain.metrics_drain_timeout_s, self.metrics_drain_timeout_s);
        replace(&mut s.load_pattern.kind, self.load_pattern);
        set(&mut s.load_pattern.target_qps, self.target_qps);
        set(&mut s.load_pattern.target_concurrency, self.concurrency);
        replace(
            &mut s.load_pattern.use_legacy_loadgen_qps_metrics,
            pick(self.legacy_qps, self.no_legacy_qps),
        );
        replace(&mut s.client.num_workers, self.workers);
        replace(&mut s.client.max_connections, self.max_connections);
        replace(&mut s.client.warmup_connections, self.warmup_connections);
        replace(&mut s.client.worker_initialization_timeout, self.worker_init_timeout_s);
        replace(
            &mut s.client.stream_include_usage,
            pick(self.stream_include_usage, self.no_stream_include_usage),
        );
        replace(&mut s.warmup.enabled, pick(self.warmup, self.spellings.no_warmup));
        set(&mut s.warmup.n_requests, self.warmup_requests);
        replace(&mut s.warmup.drain, pick(self.warmup_drain, self.spellings.no_warmup_drain));
        replace(&mut s.early_stopping.enabled, pick(self.early_stopping, self.no_early_stopping));
        replace(&mut s.token_count_source, self.token_count_source);
        set(&mut s.slo, self.slo.clone());
        replace(&mut config.enable_cpu_affinity, pick(self.cpu_affinity, self.no_cpu_affinity));
        set(&mut config.report_dir, self.report_dir.as_ref().map(|p| p.display().to_string()));
        set(&mut config.timeout, self.timeout);
        self.apply_report_files(config);
        if !self.source_addresses.is_empty() {
            config.source_addresses = self.source_addresses.clone();
        }
        set(&mut config.chat_template, self.chat_template.clone());
        set(&mut config.shard.shard, self.shard.clone());
        set(&mut config.shard.shards, self.shards);
        set(&mut config.shard.start_at, self.start_at.clone());
        self.spellings.apply(config);
        Ok(())
    }

    /// `--no-events`, `--spill-dir`, `--spill-budget-mib`: what the run keeps in files.
    fn apply_report_files(&self, config: &mut Config) {
        set(&mut config.events, self.no_events.then_some(false));
        set(&mut config.spill_dir, self.spill_dir.as_ref().map(|p| p.display().to_string()));
        set(&mut config.spill_budget_mib, self.spill_budget_mib);
    }
}

fn set<T>(slot: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *slot = value;
    }
}

fn replace<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// Parses a `benchmark offline|online …` command line into a config, as main does (tests).
#[cfg(test)]
pub(crate) fn config_from_args(args: &[&str]) -> Result<Config, AppError> {
    use crate::yaml::BenchType;
    let cli = Cli::try_parse_from(["llm-loadgen", "benchmark"].iter().chain(args)).unwrap();
    let Command::Benchmark { mode } = cli.command else { unreachable!() };
    let (kind, flags) = match mode {
        BenchmarkCommand::Offline(f) => (BenchType::Offline, f),
        BenchmarkCommand::Online(f) => (BenchType::Online, f),
        BenchmarkCommand::FromConfig(_) => unreachable!(),
    };
    let mut config = Config::defaults(kind);
    flags.apply(&mut config)?;
    Ok(config)
}

/// `plan::resolve_plan` on this machine now, its notes dropped (tests).
#[cfg(test)]
pub(crate) fn resolve_plan(config: Config, verbose: u8) -> Result<crate::plan::Plan, AppError> {
    let host = crate::plan::Host::read(crate::commands::sys::local_timestamp());
    crate::plan::resolve_plan(config, verbose, &host, &mut Vec::new())
}

/// Parses a `benchmark offline|online …` command line into a plan, as main does (tests).
#[cfg(test)]
pub(crate) fn plan_from_args(args: &[&str]) -> Result<crate::plan::Plan, AppError> {
    resolve_plan(config_from_args(args)?, 0)
}

#[cfg(test)]
mod accuracy_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod request_tests;
#[cfg(test)]
mod specs_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// The table `--help` and the man page print is the one the errors exit with.
    #[test]
    fn the_exit_code_table_is_every_code_the_binary_exits_with() {
        let errors = [
            AppError::Usage(String::new()),
            AppError::Input(String::new()),
            AppError::Setup(String::new()),
            AppError::Execution(String::new()),
            AppError::Interrupted,
        ];
        let mut codes: Vec<i32> = errors.iter().map(AppError::exit_code).collect();
        codes.insert(0, 0);
        let table: Vec<i32> = EXIT_CODES.iter().map(|(code, _)| *code).collect();
        assert_eq!(table, codes);
        let help = exit_status_help();
        for (code, meaning) in EXIT_CODES {
            assert!(help.contains(&format!("  {code:<4} {meaning}\n")), "{help}");
        }
    }

    #[test]
    fn paired_flags_take_the_last_one() {
        let cli = Cli::try_parse_from([
            "llm-loadgen",
            "benchmark",
            "offline",
            "--no-cpu-affinity",
            "--enable-cpu-affinity",
            "--early-stopping",
            "--no-early-stopping",
        ])
        .unwrap();
        let Command::Benchmark { mode: BenchmarkCommand::Offline(flags) } = cli.command else {
            panic!("not offline")
        };
        let mut config = Config::defaults(crate::yaml::BenchType::Offline);
        config.enable_cpu_affinity = false;
        flags.apply(&mut config).unwrap();
        assert!(config.enable_cpu_affinity);
        assert!(!config.settings.early_stopping.enabled);
    }
}

/// Every reference flag spelling of `SpellingFlags` (and the older ones beside it) against
/// its YAML key: both must give the same `Config`, then the same plan, note or refusal.
#[cfg(test)]
mod spelling_tests {
    use super::{config_from_args, resolve_plan};
    use crate::error::AppError;
    use crate::plan::{check_reference_only, Plan};
    use crate::yaml::Config;

    enum Expect {
        /// Resolves, with no note, to a plan for which the check holds.
        Plan(fn(&Plan) -> bool),
        /// Resolves, with exactly one note holding this text.
        Note(&'static str),
        /// Refused with exit 2 and a message holding this text.
        Refused(&'static str),
    }
    use Expect::{Note, Plan as Resolves, Refused};

    #[rustfmt::skip]
    fn cases() -> Vec<(&'static [&'static str], &'static str, Expect)> {
        vec![
            (&["--enabled"], "warmup:\n    enabled: true", Resolves(|p| p.warmup.enabled)),
            (&["--warmup", "--no-enabled"], "warmup:\n    enabled: false",
             Resolves(|p| !p.warmup.enabled)),
            (&["--warmup", "--no-warmup"], "warmup:\n    enabled: false",
             Resolves(|p| !p.warmup.enabled)),
            (&["--n-requests", "7"], "warmup:\n    n_requests: 7",
             Resolves(|p| p.warmup.requests == Some(7))),
            (&["--warmup-drain", "--no-drain"], "warmup:\n    drain: false",
             Resolves(|p| !p.warmup.drain)),
            (&["--warmup-drain", "--no-warmup-drain"], "warmup:\n    drain: false",
             Resolves(|p| !p.warmup.drain)),
            (&["--warmup-drain-timeout", "1.5"], "drain:\n    warmup_timeout_s: 1.5",
             Resolves(|p| p.warmup.drain_timeout_ms == 1_500 && p.drain_timeout_ms == 240_000)),
            (&["--drain.warmup-timeout-s", "2"], "drain:\n    warmup_timeout_s: 2",
             Resolves(|p| p.warmup.drain_timeout_ms == 2_000)),
            (&["--salt", "--no-salt"], "warmup:\n    salt: false", Resolves(|p| !p.warmup.salt)),
            (&["--warmup-salt", "--no-warmup-salt"], "warmup:\n    salt: false",
             Resolves(|p| !p.warmup.salt)),
            (&["--salt"], "warmup:\n    salt: true", Resolves(|p| p.warmup.salt)),
            (&["--warmup-salt"], "warmup:\n    salt: true", Resolves(|p| p.warmup.salt)),
            (&["--warmup-seed", "7"], "warmup:\n    warmup_random_seed: 7",
             Resolves(|p| p.warmup.random_seed == 7)),
            (&["--warmup-random-seed", "7"], "warmup:\n    warmup_random_seed: 7",
             Resolves(|p| p.warmup.random_seed == 7)),
            (&["--insecure", "--no-insecure"], "client:\n    insecure: false",
             Resolves(|p| p.tls_verify == loadgen_worker::http::tls::Verify::SystemRoots)),
            (&["--client.insecure", "--client.no-insecure"], "client:\n    insecure: false",
             Resolves(|_| true)),
            (&["--no-early-stopping", "--early-stopping.enabled"],
             "early_stopping:\n    enabled: true", Resolves(|p| p.early_stopping)),
            (&["--accuracy-only", "--no-accuracy-only"], "runtime: {}", Resolves(|_| true)),
            (&["--client.stream-all-chunks", "--client.no-stream-all-chunks"],
             "client:\n    stream_all_chunks: false", Resolves(|_| true)),
            (&["--metrics-tokenizer-workers", "2"], "drain:\n    metrics_tokenizer_workers: 2",
             Resolves(|p| p.token_pool.workers == Some(2))),
            (&["--drain.metrics-tokenizer-workers", "0"],
             "drain:\n    metrics_tokenizer_workers: 0",
             Resolves(|p| p.token_pool.workers == Some(0))),
            (&["--metrics-drain-timeout", "3"], "drain:\n    metrics_drain_timeout_s: 3",
             Resolves(|p| p.token_pool.drain_timeout_ms == 3_000)),
            (&["--drain.metrics-drain-timeout-s", "3"], "drain:\n    metrics_drain_timeout_s: 3",
             Resolves(|p| p.token_pool.drain_timeout_ms == 3_000)),
            (&["--client.auto-warmup-budget-fraction", "0.5"],
             "client:\n    auto_warmup_budget_fraction: 0.5",
             Note("settings.client.auto_warmup_budget_fraction")),
            (&["--client.log-level", "DEBUG"], "client:\n    log_level: DEBUG",
             Note("settings.client.log_level (--client.log-level) has no effect here")),
            (&["--client.max-concurrent-warmup-connects", "8"],
             "client:\n    max_concurrent_warmup_connects: 8",
             Note("settings.client.max_concurrent_warmup_connects")),
            (&["--max-concurrent-warmup-connects", "8"],
             "client:\n    max_concurrent_warmup_connects: 8",
             Note("settings.client.max_concurrent_warmup_connects")),
            (&["--client.max-idle-time", "9"], "client:\n    max_idle_time: 9",
             Note("settings.client.max_idle_time")),
            (&["--client.min-required-connections", "0"],
             "client:\n    min_required_connections: 0",
             Note("settings.client.min_required_connections")),
            (&["--client.stream-all-chunks"], "client:\n    stream_all_chunks: true",
             Note("settings.client.stream_all_chunks")),
            (&["--client.transport.type", "tcp"], "client:\n    transport:\n      type: tcp",
             Note("settings.client.transport.type (--client.transport.type) has no effect")),
            (&["--client.worker-force-kill-timeout", "2"],
             "client:\n    worker_force_kill_timeout: 2",
             Note("settings.client.worker_force_kill_timeout")),
            (&["--client.worker-gc-mode", "disabled"], "client:\n    worker_gc_mode: disabled",
             Note("no garbage collector")),
            (&["--client.worker-graceful-shutdown-wait", "2"],
             "client:\n    worker_graceful_shutdown_wait: 2",
             Note("settings.client.worker_graceful_shutdown_wait")),
            (&["--service-ready-timeout", "5"], "service_ready_timeout_s: 5",
             Note("settings.service_ready_timeout_s")),
            (&["--service-ready-timeout-s", "5"], "service_ready_timeout_s: 5",
             Note("settings.service_ready_timeout_s")),
            (&["--accuracy-drain-timeout", "5"], "drain:\n    accuracy_timeout_s: 5",
             Note("settings.drain.accuracy_timeout_s")),
            (&["--drain.accuracy-timeout-s", "5"], "drain:\n    accuracy_timeout_s: 5",
             Note("no accuracy phase runs")),
            (&["--insecure"], "client:\n    insecure: true",
             Resolves(|p| p.tls_verify == loadgen_worker::http::tls::Verify::Insecure)),
            (&["--client.insecure"], "client:\n    insecure: true",
             Resolves(|p| p.tls_verify == loadgen_worker::http::tls::Verify::Insecure)),
            (&["--profile", "vllm"], "profiling:\n    engine: vllm", Resolves(|p| p.profiling.is_some())),
            (&["--engine", "vllm"], "profiling:\n    engine: vllm", Resolves(|p| p.profiling.is_some())),
            (&["--profile", "sglang"], "profiling:\n    engine: sglang", Refused("\"sglang\" is not an")),
            (&["--profile-urls", "http://a:9"], "profiling:\n    urls: ['http://a:9']",
             Resolves(|p| p.profiling.is_none())),
            (&["--urls", "a:9"], "profiling:\n    urls: ['a:9']", Refused("--urls) \"a:9\" has no scheme")),
            (&["--client.auto-warmup-budget-fraction", "1.5"],
             "client:\n    auto_warmup_budget_fraction: 1.5",
             Refused("settings.client.auto_warmup_budget_fraction \
                      (--client.auto-warmup-budget-fraction) 1.5 is not valid")),
            (&["--max-concurrent-warmup-connects", "0"],
             "client:\n    max_concurrent_warmup_connects: 0", Refused("0 is not valid")),
            (&["--service-ready-timeout", "-1"], "service_ready_timeout_s: -1",
             Refused("(--service-ready-timeout) -1 is not valid")),
            (&["--warmup-drain-timeout", "0"], "drain:\n    warmup_timeout_s: 0",
             Refused("settings.drain.warmup_timeout_s (--warmup-drain-timeout) 0 is not valid")),
            (&["--accuracy-drain-timeout", "0"], "drain:\n    accuracy_timeout_s: 0",
             Refused("(--accuracy-drain-timeout) 0 is not valid")),
        ]
    }

    fn from_flags(flags: &[&str]) -> Config {
        let args: Vec<&str> = ["offline"].iter().chain(flags).copied().collect();
        config_from_args(&args).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
    }

    fn from_yaml(yaml: &str) -> Config {
        let text = format!("type: offline\nsettings:\n  {yaml}\n");
        Config::from_yaml_str(&text, "t.yaml").unwrap_or_else(|e| panic!("{yaml:?}: {e}"))
    }

    fn check(flags: &[&str], config: Config, expect: &Expect) {
        let notes = check_reference_only(&config);
        match expect {
            Resolves(holds) => {
                assert_eq!(notes.as_ref().map(Vec::len).ok(), Some(0), "{flags:?}: no note");
                let plan = resolve_plan(config, 0).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
                assert!(holds(&plan), "{flags:?}: the plan does not hold what the flag says");
            }
            Note(text) => {
                let notes = notes.unwrap_or_else(|e| panic!("{flags:?}: {e}"));
                assert_eq!(notes.len(), 1, "{flags:?}: {notes:?}");
                assert!(notes[0].contains(text) && notes[0].starts_with("note: "), "{notes:?}");
                assert!(resolve_plan(config, 0).is_ok(), "{flags:?}: a note does not refuse");
            }
            Refused(text) => {
                let err: AppError = notes.expect_err(&format!("{flags:?} is refused"));
                assert_eq!(err.exit_code(), 2, "{flags:?}");
                assert!(err.to_string().contains(text), "{flags:?}: {err}");
                let Err(err) = resolve_plan(config, 0) else {
                    panic!("{flags:?}: the run takes it")
                };
                assert!(err.to_string().contains(text), "{flags:?}: {err}");
            }
        }
    }

    #[test]
    fn every_reference_spelling_resolves_like_its_yaml_key() {
        for (flags, yaml, expect) in cases() {
            let flagged = from_flags(flags);
            let keyed = from_yaml(yaml);
            assert_eq!(flagged, keyed, "{flags:?} and `{yaml}` give different configs");
            check(flags, flagged, &expect);
            check(flags, keyed, &expect);
        }
    }

    #[test]
    fn reference_defaults_in_yaml_give_no_note() {
        let bad_gc = "type: offline\nsettings:\n  client:\n    worker_gc_mode: never\n";
        let err = check_reference_only(&Config::from_yaml_str(bad_gc, "t.yaml").unwrap());
        let msg = err.expect_err("an unknown gc mode is refused").to_string();
        assert!(msg.contains("worker_gc_mode (--client.worker-gc-mode) \"never\""), "{msg}");
        let text = "type: offline\nsettings:\n  client:\n    log_level: INFO\n    \
                    worker_gc_mode: relaxed\n    transport:\n      type: zmq\n  \
                    service_ready_timeout_s: 30\n  warmup:\n    salt: false\n    \
                    warmup_random_seed: 42\n";
        let config = Config::from_yaml_str(text, "t.yaml").unwrap();
        assert_eq!(check_reference_only(&config).unwrap(), Vec::<String>::new());
    }
}
