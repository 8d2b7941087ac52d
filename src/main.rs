//! llm-loadgen: a load generator for LLM inference endpoints.

mod cli;
mod commands;
mod run;

// The plan's modules under their old names, so `crate::plan::…` keeps resolving in the binary.
use loadgen_plan::{dataset, error, plan, redact, tokenizer, yaml};
// The report crate under its old name, so `crate::report::…` keeps resolving in the binary.
use loadgen_report as report;

use crate::cli::{BenchmarkCommand, Cli, Command};
use crate::error::AppError;
use crate::yaml::{BenchType, Config};

fn main() {
    // A panic is a bug: say so in one line, without a backtrace, and exit 4.
    std::panic::set_hook(Box::new(|info| {
        let text = redact::redact(&info.to_string());
        eprintln!("llm-loadgen: internal error: {text}; please report it");
    }));
    let code = std::panic::catch_unwind(real_main).unwrap_or(4);
    std::process::exit(code);
}

fn real_main() -> i32 {
    let cli = match cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // Usage errors exit 1 as the reference's do (clap's own default is 2);
            // --help and --version exit 0.
            let code = if err.use_stderr() { 1 } else { 0 };
            let _ = err.print();
            return code;
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            // An error may quote a server's answer or a file: no control character of theirs
            // reaches the terminal.
            let text = redact::redact(&err.to_string());
            eprintln!("llm-loadgen: {}", redact::escape_controls(&text));
            err.exit_code()
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32, AppError> {
    match cli.command {
        Command::Benchmark { mode } => {
            run::set_json_stdout(mode.json());
            run::set_quiet(mode.quiet());
            let config = match mode {
                BenchmarkCommand::Offline(flags) => {
                    with_flags(Config::defaults(BenchType::Offline), &flags)?
                }
                BenchmarkCommand::Online(flags) => {
                    with_flags(Config::defaults(BenchType::Online), &flags)?
                }
                BenchmarkCommand::FromConfig(args) => {
                    let mut config = Config::from_yaml_file(&args.config)?;
                    datasets_beside(&mut config, &args.config);
                    with_flags(config, &args.flags)?
                }
            };
            if config.sweep.is_some() {
                return Err(AppError::Usage(
                    "the config's sweep: section is for llm-loadgen sweep -c FILE; a benchmark \
                     runs one load (drop the section)"
                        .into(),
                ));
            }
            let host = plan::Host::read(commands::sys::local_timestamp());
            run::audit::run_config(config, cli.verbose, &host)
        }
        Command::Init { template, output } => commands::init::run(&template, output.as_deref()),
        Command::ValidateYaml { config } => commands::validate_yaml::run(&config),
        Command::Info => commands::info::run(),
        Command::Probe(args) => commands::probe::run(&args, cli.verbose),
        Command::Report(args) => commands::report::run(&commands::report::ReportRequest {
            dir: args.dir,
            token_count_source: args.token_count_source,
            out: args.out,
        }),
        Command::Merge(args) => commands::merge::run(&args),
        Command::EarlyStopping(args) => commands::early_stopping::run(&args),
        Command::Plot(args) => commands::plot::run(&commands::plot::PlotRequest {
            dir: args.dir,
            out: args.out,
            format: args.format,
            token_count_source: args.token_count_source,
        }),
        Command::Sweep(args) => commands::sweep::run(&args, cli.verbose),
        Command::Stub { cmd } => {
            loadgen_stubs::cli::run(*cmd).map_err(|e| AppError::Setup(format!("stub: {e:#}")))?;
            Ok(0)
        }
        Command::Compare(args) => commands::compare::run(&args.dirs, args.json),
        Command::Check(args) => commands::check::run(&args.dirs, &args.ruleset, &args.model),
        Command::Completions { shell } => commands::completions::completions(shell),
        Command::Man { out_dir } => commands::completions::man(out_dir.as_deref()),
    }
}

/// A YAML's relative dataset path that is not found from the current folder (where the
/// reference reads it) but is beside the YAML file: read from there, so a config runs as
/// written from any folder (`init` writes its prompts beside its template). A path found in
/// neither stays as written, and its error names the current folder.
fn datasets_beside(config: &mut Config, yaml: &std::path::Path) {
    let Some(folder) = yaml.parent() else { return };
    for spec in &mut config.datasets {
        let path = std::path::Path::new(&spec.path);
        if spec.path.is_empty() || path.is_absolute() || path.exists() {
            continue;
        }
        let beside = folder.join(path);
        if beside.exists() {
            spec.path = beside.display().to_string();
        }
    }
}

fn with_flags(mut config: Config, flags: &cli::BenchFlags) -> Result<Config, AppError> {
    flags.apply(&mut config)?;
    Ok(config)
}
