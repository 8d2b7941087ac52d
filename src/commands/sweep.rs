//! `llm-loadgen sweep`: benchmark runs in a series, over Poisson rates, concurrency levels or
//! an automatic plan. Each point is a normal run (the benchmark's own `run_benchmark`, in this
//! process) with its own report directory under the sweep's, so `report`, `plot` and `compare`
//! work on each; after each point `sweep.json` and `sweep.txt` are rewritten, so a sweep that
//! stops (Ctrl-C, an error) leaves every finished point and says where it stopped. The knee
//! and the highest passing rate are `loadgen_report::sweep`'s pure functions.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::cli::SweepArgs;
use crate::error::AppError;
use crate::report::sweep::{
    highest_passing, knee, table_line, verdict_lines, Knee, Point, TABLE_HEADER,
};
use crate::yaml::{BenchType, Config, LoadPatternKind, Streaming, SweepSection};

/// One point's load.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Offer {
    Poisson(f64),
    Concurrency(u32),
    MaxThroughput,
}

impl Offer {
    fn pattern(self) -> &'static str {
        match self {
            Offer::Poisson(_) => "poisson",
            Offer::Concurrency(_) => "concurrency",
            Offer::MaxThroughput => "max_throughput",
        }
    }

    fn value(self) -> Option<f64> {
        match self {
            Offer::Poisson(q) => Some(q),
            Offer::Concurrency(n) => Some(f64::from(n)),
            Offer::MaxThroughput => None,
        }
    }

    /// The base configuration with this load and `dir` as its report directory.
    fn apply(self, mut config: Config, dir: &Path) -> Config {
        let lp = &mut config.settings.load_pattern;
        (lp.target_qps, lp.target_concurrency) = (None, None);
        match self {
            Offer::Poisson(q) => (lp.kind, lp.target_qps) = (LoadPatternKind::Poisson, Some(q)),
            Offer::Concurrency(n) => {
                (lp.kind, lp.target_concurrency) = (LoadPatternKind::Concurrency, Some(n));
            }
            Offer::MaxThroughput => {
                lp.kind = LoadPatternKind::MaxThroughput;
                config.kind = BenchType::Offline;
            }
        }
        config.report_dir = Some(dir.display().to_string());
        // A point is a plain run: its config.yaml holds no sweep.
        config.sweep = None;
        config
    }
}

/// `sweep.json`.
#[derive(Debug, Serialize)]
struct SweepJson<'a> {
    version: &'static str,
    /// `rates`, `concurrencies` or `auto`.
    mode: &'a str,
    slo: Option<&'a str>,
    points: &'a [Point],
    knee: Option<Knee>,
    highest_passing: Option<Passing>,
    complete: bool,
    stopped: Option<Stopped>,
    wall_s: f64,
    measured_s: f64,
    outside_measured_fraction: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Passing {
    rate: f64,
    point: usize,
    confident_99: bool,
}

#[derive(Debug, Clone, Serialize)]
struct Stopped {
    /// The point that did not finish (0-based).
    at_point: usize,
    /// `interrupted`, or the error that stopped it.
    reason: String,
}

/// A sweep under way: where it writes and what it has.
struct Sweep {
    dir: PathBuf,
    mode: &'static str,
    base: Config,
    verbose: u8,
    host: crate::plan::Host,
    started: Instant,
    points: Vec<Point>,
}

/// `llm-loadgen sweep`.
pub fn run(args: &SweepArgs, verbose: u8) -> Result<i32, AppError> {
    let base = base_config(args)?;
    let dir = PathBuf::from(base.report_dir.clone().ok_or_else(|| {
        AppError::Usage("sweep needs --report-dir DIR: each point's report goes under it".into())
    })?);
    std::fs::create_dir_all(&dir).map_err(|e| {
        AppError::Setup(format!(
            "cannot create {}: {e}; choose another --report-dir",
            dir.display()
        ))
    })?;
    let (mode, offers, auto) = what_to_sweep(args, base.sweep.as_ref())?;
    crate::run::set_quiet(args.flags.quiet);
    let host = crate::plan::Host::read(super::sys::local_timestamp());
    let mut sweep =
        Sweep { dir, mode, base, verbose, host, started: Instant::now(), points: Vec::new() };
    match auto {
        Some(n) => sweep.run_auto(n)?,
        None => sweep.run_offers(&offers)?,
    }
    let (wall_s, measured_s) = sweep.write(None)?;
    let outside = if wall_s > 0.0 { 100.0 * (wall_s - measured_s).max(0.0) / wall_s } else { 0.0 };
    let note = format!(
        "Sweep: {} points in {wall_s:.2} s, {measured_s:.2} s of them measured ({outside:.1}% \
         outside the points' measured phases); {}\n",
        sweep.points.len(),
        sweep.dir.join("sweep.json").display()
    );
    super::print_stdout(&(verdict_lines(&sweep.points) + &note))?;
    Ok(0)
}

/// Every point's base: the benchmark's defaults (online) or the YAML, with the flags laid
/// over; the load pattern is the sweep's, so the flags that set one are refused.
fn base_config(args: &SweepArgs) -> Result<Config, AppError> {
    let f = &args.flags;
    if f.load_pattern.is_some() || f.target_qps.is_some() || f.concurrency.is_some() {
        return Err(AppError::Usage(
            "sweep sets each point's load itself: drop --load-pattern, --target-qps and \
             --concurrency, and give --rates, --concurrencies or --auto"
                .into(),
        ));
    }
    if f.json {
        return Err(AppError::Usage(
            "sweep has no --json: each point writes its result_summary.json and the sweep its \
             sweep.json"
                .into(),
        ));
    }
    let mut config = match &args.config {
        Some(path) => Config::from_yaml_file(path)?,
        None => Config::defaults(BenchType::Online),
    };
    f.apply(&mut config)?;
    config.kind = BenchType::Online;
    Ok(config)
}

/// The sweep's mode and points: the flags', else the YAML's `sweep:` section's.
fn what_to_sweep(
    args: &SweepArgs,
    yaml: Option<&SweepSection>,
) -> Result<(&'static str, Vec<Offer>, Option<usize>), AppError> {
    let flags = SweepSection {
        rates: args.rates.clone(),
        concurrencies: args.concurrencies.clone(),
        auto: args.auto,
    };
    let given =
        |s: &SweepSection| !s.rates.is_empty() || !s.concurrencies.is_empty() || s.auto.is_some();
    let s =
        match yaml {
            _ if given(&flags) => flags,
            Some(section) if given(section) => section.clone(),
            _ => return Err(AppError::Usage(
                "sweep needs --rates R1,R2,…, --concurrencies C1,C2,… or --auto N (or a sweep: \
                 section in the -c FILE)"
                    .into(),
            )),
        };
    let kinds = usize::from(!s.rates.is_empty())
        + usize::from(!s.concurrencies.is_empty())
        + usize::from(s.auto.is_some());
    if kinds > 1 {
        return Err(AppError::Input(
            "sweep: give one of rates, concurrencies and auto, not several".into(),
        ));
    }
    if let Some(bad) = s.rates.iter().find(|q| !(q.is_finite() && **q > 0.0)) {
        return Err(AppError::Input(format!("sweep rates {bad}: every rate must be above 0")));
    }
    if s.concurrencies.contains(&0) || s.auto == Some(0) {
        return Err(AppError::Input("sweep concurrencies and auto take counts above 0".into()));
    }
    Ok(if let Some(n) = s.auto {
        ("auto", Vec::new(), Some(n))
    } else if s.rates.is_empty() {
        ("concurrencies", s.concurrencies.iter().map(|&n| Offer::Concurrency(n)).collect(), None)
    } else {
        ("rates", s.rates.iter().map(|&q| Offer::Poisson(q)).collect(), None)
    })
}

impl Sweep {
    fn run_offers(&mut self, offers: &[Offer]) -> Result<(), AppError> {
        for &offer in offers {
            self.run_point(offer)?;
        }
        Ok(())
    }

    /// Runs one point and records it; an interrupt or an error that leaves no report stops
    /// the sweep, after sweep.json says where.
    fn run_point(&mut self, offer: Offer) -> Result<&Point, AppError> {
        let index = self.points.len();
        let name = Point::dir_name(index, offer.pattern(), offer.value());
        let dir = self.dir.join(&name);
        let mut config = offer.apply(self.base.clone(), &dir);
        if offer == Offer::MaxThroughput && config.model_params.streaming == Streaming::Auto {
            // Auto streams online and not offline: this point streams as the others do.
            config.model_params.streaming = Streaming::On;
        }
        crate::run::say_line(&format!(
            "sweep point {index}: {} into {}",
            offer_text(offer),
            dir.display()
        ));
        let ran = crate::run::audit::resolve_printed(config, self.verbose, &self.host)
            .and_then(crate::run::run_benchmark);
        let code = match ran {
            Ok(code) => code,
            // The run's report is written (incomplete): the point counts, with its exit code.
            Err(AppError::Execution(_)) if summary_path(&dir).is_file() => 4,
            Err(e) => {
                let reason = match &e {
                    AppError::Interrupted => "interrupted".to_string(),
                    other => other.to_string(),
                };
                self.write(Some(Stopped { at_point: index, reason }))?;
                return Err(e);
            }
        };
        let summary = read_summary(&dir)?;
        self.points.push(Point::of_summary(index, &name, offer.value(), code, &summary));
        self.write(None)?;
        let point = &self.points[index];
        // The sweep's table so far under the point's own summary (its header, then a line a
        // finished point): the console's last lines are always the whole sweep up to now.
        let mut table = String::from(TABLE_HEADER);
        for p in &self.points {
            table.push('\n');
            table.push_str(&table_line(p));
        }
        crate::run::say_line(&table);
        Ok(point)
    }

    /// The automatic plan: a synchronous run and a max-throughput run bound the range, then
    /// `n` Poisson rates spread evenly between their throughputs, then two more between the
    /// last point that followed its rate and the first that did not.
    fn run_auto(&mut self, n: usize) -> Result<(), AppError> {
        let low = self.run_point(Offer::Concurrency(1))?.qps.unwrap_or(0.0);
        let high = self.run_point(Offer::MaxThroughput)?.qps.unwrap_or(0.0);
        if !(low > 0.0 && high > low) {
            return Err(AppError::Execution(format!(
                "sweep --auto: the synchronous run's throughput ({low:.3}) is not below the \
                 max-throughput run's ({high:.3}); give --rates instead"
            )));
        }
        let step = (high - low) / (n as f64 + 1.0);
        let rates: Vec<Offer> =
            (1..=n).map(|i| Offer::Poisson(round3(low + step * i as f64))).collect();
        self.run_offers(&rates)?;
        let refine = knee(&self.points).filter(|k| k.reached).and_then(|k| {
            // The max-throughput point has no rate: its throughput bounds the range.
            let at =
                |i: Option<usize>| i.and_then(|i| self.points[i].offered.or(self.points[i].qps));
            Some((at(k.last_following_index).unwrap_or(low), at(k.first_saturated_index)?))
        });
        if let Some((lo, hi)) = refine {
            let third = (hi - lo) / 3.0;
            self.run_offers(&[
                Offer::Poisson(round3(lo + third)),
                Offer::Poisson(round3(lo + 2.0 * third)),
            ])?;
        }
        Ok(())
    }

    /// Rewrites sweep.json and sweep.txt with the points so far; the wall and measured seconds.
    fn write(&self, stopped: Option<Stopped>) -> Result<(f64, f64), AppError> {
        let wall_s = self.started.elapsed().as_secs_f64();
        let measured_s: f64 =
            self.points.iter().filter_map(|p| p.duration_ns).map(|ns| ns as f64 / 1e9).sum();
        let slo = self.base.settings.slo.as_deref();
        let json = SweepJson {
            version: env!("CARGO_PKG_VERSION"),
            mode: self.mode,
            slo,
            points: &self.points,
            knee: knee(&self.points),
            highest_passing: highest_passing(&self.points)
                .map(|(rate, point, confident_99)| Passing { rate, point, confident_99 }),
            complete: stopped.is_none(),
            stopped: stopped.clone(),
            wall_s,
            measured_s,
            outside_measured_fraction: (wall_s > 0.0)
                .then(|| (wall_s - measured_s).max(0.0) / wall_s),
        };
        let mut bytes = serde_json::to_vec_pretty(&json)
            .map_err(|e| AppError::Execution(format!("cannot write sweep.json: {e}")))?;
        bytes.push(b'\n');
        let mut txt = format!("{TABLE_HEADER}\n");
        for p in &self.points {
            txt.push_str(&table_line(p));
            txt.push('\n');
        }
        txt.push_str(&verdict_lines(&self.points));
        if let Some(s) = &stopped {
            txt.push_str(&format!("Stopped at point {}: {}\n", s.at_point, s.reason));
        }
        for (name, data) in [("sweep.json", bytes.as_slice()), ("sweep.txt", txt.as_bytes())] {
            let path = self.dir.join(name);
            crate::report::write_atomic(&path, data).map_err(|e| {
                AppError::Execution(format!("cannot write {}: {e}", path.display()))
            })?;
        }
        Ok((wall_s, measured_s))
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn offer_text(offer: Offer) -> String {
    match offer {
        Offer::Poisson(q) => format!("poisson at {q} QPS"),
        Offer::Concurrency(n) => format!("concurrency {n}"),
        Offer::MaxThroughput => "max throughput".to_string(),
    }
}

fn summary_path(dir: &Path) -> PathBuf {
    dir.join("performance/result_summary.json")
}

fn read_summary(dir: &Path) -> Result<serde_json::Value, AppError> {
    let path = summary_path(dir);
    let text = crate::report::read_existing(&path).map_err(|e| {
        AppError::Execution(format!("sweep point {} wrote no summary: {e}", dir.display()))
    })?;
    serde_json::from_str(&text)
        .map_err(|e| AppError::Execution(format!("sweep: {}: {e}", path.display())))
}
