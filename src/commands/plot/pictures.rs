//! Which pictures a run gets, each built from its series, and why any is left out.
//!
//! A picture whose data the run does not have (no first chunks in a run that did not stream,
//! no issue lag outside Poisson, one token basis only) is never drawn empty: it is left out
//! with a note that says why.

use loadgen_coordinator::live::format::duration;
use loadgen_coordinator::metrics::stats::lower_percentile_index;
use loadgen_coordinator::metrics::TokenCountSource;

use crate::report::ChunkBlocks;

use super::chart::{palette, Bars, Distribution, Line, PerTurn, Picture, Scatter, Timeline};
use crate::report::agentic::AgenticSummary;
use crate::report::plot_data::bins::{self, HISTOGRAM_BINS};
use crate::report::plot_data::series::RunSeries;

/// Points a scatter draws at most (evenly chosen from the samples).
pub const SCATTER_POINTS: usize = 5_000;

/// The pictures in the order they are written, each with its file stem, and the notes: why a
/// picture is left out (`skipped`) and what a drawn one does not show (`notes`).
#[derive(Debug, Default)]
pub struct Plan {
    pub pictures: Vec<(&'static str, Picture)>,
    pub skipped: Vec<String>,
    pub notes: Vec<String>,
}

impl Plan {
    fn add(&mut self, name: &'static str, picture: Result<Picture, String>) {
        match picture {
            Ok(p) => self.pictures.push((name, p)),
            Err(why) => self.skipped.push(format!("{name}: {why}")),
        }
    }

    /// Adds `picture` with `note` (what it cannot show) on its caption and on stderr.
    fn add_noted(
        &mut self,
        name: &'static str,
        picture: Result<Picture, String>,
        note: Option<&str>,
    ) {
        let picture = match (picture, note) {
            (Ok(Picture::Distribution(mut d)), Some(note)) => {
                d.caption_note = Some(note.to_string());
                self.notes.push(format!("{name}: {note}"));
                Ok(Picture::Distribution(d))
            }
            (picture, _) => picture,
        };
        self.add(name, picture);
    }
}

/// What a chunk-timing picture of a run whose streams mostly came in one read cannot show
/// (the report's rule, `ChunkBlocks::mostly_one_read`); `None` otherwise.
fn one_read_hint(s: &RunSeries) -> Option<String> {
    let chunks = ChunkBlocks {
        itl: None,
        chunks_per_sample: None,
        n_streams_multi_chunk: s.streams_multi_chunk,
        n_streams_in_one_read: s.streams_in_one_read,
    };
    chunks.mostly_one_read().then(|| {
        format!(
            "{} of {} streams came in one read: the endpoint (or a proxy) sent each whole, so \
             this shows the client's reads, not the server's token pacing",
            s.streams_in_one_read, s.streams_multi_chunk
        )
    })
}

/// What the run's files say beside the series.
#[derive(Debug, Clone, Copy)]
pub struct RunFacts {
    pub streaming: bool,
    pub basis: TokenCountSource,
    /// A client tokenizer is loaded here (the run's, or the model's from the local cache).
    pub has_tokenizer: bool,
    /// config.yaml names a tokenizer (`tokenizer_name`): without one loaded here, it is one
    /// this machine cannot load; without either, the run had none.
    pub tokenizer_named: bool,
}

/// The distributions and the time series of `s`.
pub fn performance(s: &RunSeries, facts: RunFacts) -> Plan {
    let mut plan = Plan::default();
    let not_streamed = "the run did not stream, so it has no first-chunk or chunk times";
    let basis = facts.basis.as_str();
    let ttft = match facts.streaming {
        false => Err(not_streamed.to_string()),
        true => distribution("TTFT: time to first token", "TTFT", &s.ttft_ns)
            .ok_or_else(|| "no sample got a first content chunk".to_string()),
    };
    plan.add("ttft", ttft);
    let tpot_title = format!("TPOT: time per output token ({basis} basis)");
    let one_read = one_read_hint(s);
    let tpot = match facts.streaming {
        false => Err(not_streamed.to_string()),
        true => distribution(&tpot_title, "TPOT", &s.tpot_ns).ok_or_else(|| tpot_missing(facts)),
    };
    plan.add_noted("tpot", tpot, one_read.as_deref());
    let itl = match facts.streaming {
        false => Err(not_streamed.to_string()),
        true => {
            distribution("ITL: gap between streamed chunks", "ITL", &s.itl_ns).ok_or_else(|| {
                "no streamed sample has chunk timing (n_chunks / chunk_delta_ns in events.jsonl)"
                    .to_string()
            })
        }
    };
    plan.add_noted("itl", itl, one_read.as_deref());
    let latency = distribution("Latency: issue to completion", "latency", &s.latency_ns);
    plan.add("latency", latency.ok_or_else(|| "no tracked sample completed".to_string()));
    if s.spans_ns.is_empty() {
        plan.skipped.push("qps, in_flight: no tracked sample completed".into());
        return plan;
    }
    let buckets = bins::time_buckets(s.t0_ns, s.end_ns);
    plan.add("qps", Ok(qps(s, &buckets)));
    plan.add("in_flight", Ok(in_flight(s, &buckets)));
    plan
}

fn tpot_missing(facts: RunFacts) -> String {
    match facts.basis {
        TokenCountSource::Client if !facts.has_tokenizer && facts.tokenizer_named => {
            "the run's tokenizer cannot be loaded here, so there is no client TPOT; \
             --token-count-source server draws the server's"
                .into()
        }
        TokenCountSource::Client if !facts.has_tokenizer => {
            "the run had no client tokenizer (config.yaml names no tokenizer_name), so there \
             is no client TPOT; --token-count-source server draws the server's"
                .into()
        }
        TokenCountSource::Client => "no sample has text after its first chunk".into(),
        TokenCountSource::Server => "no sample has usable server usage with more than one \
                                     completion token; --token-count-source client draws the \
                                     tokenizer's"
            .into(),
    }
}

/// A distribution picture of `sorted_ns`; `None` when it is empty.
pub fn distribution(title: &str, name: &str, sorted_ns: &[f64]) -> Option<Picture> {
    let n = sorted_ns.len();
    if n == 0 {
        return None;
    }
    let at = |p: f64| sorted_ns[lower_percentile_index(n, p)];
    let (unit, per) = bins::time_unit(at(50.0));
    let values: Vec<f64> = sorted_ns.iter().map(|v| v / per).collect();
    let hist = bins::histogram(&values, HISTOGRAM_BINS);
    let curve = bins::percentile_curve(&values, bins::CURVE_POINTS);
    let (p50, p90, p99) = (at(50.0) / per, at(90.0) / per, at(99.0) / per);
    let mean = values.iter().sum::<f64>() / n as f64;
    let max = values[n - 1];
    let mut caption = format!(
        "n = {n}   mean {mean:.3}   p50 {p50:.3}   p90 {p90:.3}   p99 {p99:.3}   max {max:.3} {unit}"
    );
    if hist.above > 0 {
        caption += &format!(
            "   ({} past {:.3} {unit}: on the percentile curve only)",
            hist.above, hist.hi
        );
    }
    Some(Picture::Distribution(Distribution {
        title: title.to_string(),
        value_label: format!("{name} ({unit})"),
        marks: vec![("p50".into(), p50), ("p99".into(), p99)],
        hist,
        curve,
        curve_ticks: bins::curve_ticks(n).into_iter().map(|t| t.0).collect(),
        max,
        caption,
        caption_note: None,
    }))
}

/// The x of each bucket of `edges`: its middle, in seconds since the first edge.
fn bucket_middles_s(edges: &[u64]) -> Vec<f64> {
    edges.windows(2).map(|w| ((w[0] - edges[0]) + (w[1] - w[0]) / 2) as f64 / 1e9).collect()
}

/// What one bucket is, for labels: "second", or "30 s" for buckets of 30 seconds.
fn bucket_name(b: &bins::Buckets) -> String {
    match b.seconds {
        1 => "second".to_string(),
        k => format!("{k} s"),
    }
}

fn span_s(edges: &[u64]) -> f64 {
    (edges[edges.len() - 1] - edges[0]) as f64 / 1e9
}

fn qps(s: &RunSeries, buckets: &bins::Buckets) -> Picture {
    let edges = &buckets.edges;
    let completes: Vec<u64> = s.spans_ns.iter().map(|s| s.1).collect();
    let rates = bins::rate_per_bucket(&completes, edges);
    let x = bucket_middles_s(edges);
    let overall = completes.len() as f64 / span_s(edges).max(1e-9);
    Picture::Timeline(Timeline {
        title: "QPS: completions per second".into(),
        y_label: "completions per second".into(),
        seconds: span_s(edges),
        lines: vec![Line {
            label: "completions/s (failures included)".into(),
            color: palette::RATE,
            points: x.into_iter().zip(rates).collect(),
        }],
        caption: format!(
            "{} samples over {:.2} s: {overall:.1} per second overall; one point per {}",
            completes.len(),
            span_s(edges),
            bucket_name(buckets)
        ),
    })
}

fn in_flight(s: &RunSeries, time: &bins::Buckets) -> Picture {
    let edges = &time.edges;
    let buckets = bins::in_flight_per_bucket(&s.spans_ns, edges);
    let x = bucket_middles_s(edges);
    let peak = buckets.iter().map(|b| b.max).max().unwrap_or(0);
    Picture::Timeline(Timeline {
        title: "In flight: samples issued and not yet complete".into(),
        y_label: "samples in flight".into(),
        seconds: span_s(edges),
        lines: vec![
            Line {
                label: format!("mean over the {}", bucket_name(time)),
                color: palette::MEAN,
                points: x.iter().copied().zip(buckets.iter().map(|b| b.mean)).collect(),
            },
            Line {
                label: "most at once".into(),
                color: palette::PEAK,
                points: x.iter().copied().zip(buckets.iter().map(|b| b.max as f64)).collect(),
            },
        ],
        caption: format!("tracked samples; at most {peak} in flight at once"),
    })
}

/// The issue lag over the run from (issue time, lag) pairs.
pub fn issue_lag(s: &RunSeries, lags: &[(u64, u64)], target_qps: f64) -> Picture {
    let buckets = bins::time_buckets(s.t0_ns, s.end_ns);
    let edges = &buckets.edges;
    let per = bins::lag_per_bucket(lags, edges);
    let x = bucket_middles_s(edges);
    let mut sorted: Vec<u64> = lags.iter().map(|l| l.1).collect();
    sorted.sort_unstable();
    // The axis's unit follows the largest lag drawn, so its ticks read as small numbers.
    let (unit, per_unit) = bins::axis_time_unit(sorted.last().copied().unwrap_or(0) as f64);
    let line = |pick: fn((u64, u64)) -> u64| -> Vec<(f64, f64)> {
        let value = |b| pick(b) as f64 / per_unit;
        x.iter().zip(&per).filter_map(|(&x, b)| b.map(|b| (x, value(b)))).collect()
    };
    let at = |p: f64| duration(sorted[lower_percentile_index(sorted.len(), p)]);
    Picture::Timeline(Timeline {
        title: "Poisson issue lag: issue time − scheduled time".into(),
        y_label: format!("issue lag ({unit})"),
        seconds: span_s(edges),
        lines: vec![
            Line {
                label: format!("median of the {}", bucket_name(&buckets)),
                color: palette::MEDIAN,
                points: line(|b| b.0),
            },
            Line {
                label: format!("largest of the {}", bucket_name(&buckets)),
                color: palette::CURVE,
                points: line(|b| b.1),
            },
        ],
        caption: format!(
            "{} samples at a target of {target_qps} qps: p50 {}, p99 {}, max {}",
            sorted.len(),
            at(50.0),
            at(99.0),
            at(100.0)
        ),
    })
}

/// Client against server OSL, one point per sample (thinned past [`SCATTER_POINTS`]).
pub fn osl_scatter(s: &RunSeries) -> Result<Picture, String> {
    if s.osl_pairs.is_empty() {
        return Err("no sample has both a client OSL (the run's tokenizer) and a server OSL \
                    (usage from the endpoint)"
            .into());
    }
    let n = s.osl_pairs.len();
    let (step, kept) = bins::thin(n, SCATTER_POINTS);
    let points: Vec<(f64, f64)> =
        kept.map(|i| (f64::from(s.osl_pairs[i].0), f64::from(s.osl_pairs[i].1))).collect();
    let diff: i64 = s.osl_pairs.iter().map(|&(c, v)| i64::from(c) - i64::from(v)).sum();
    let shown = if step > 1 {
        format!("{} of {n} samples shown (one in {step})", points.len())
    } else {
        format!("{n} samples")
    };
    Ok(Picture::Scatter(Scatter {
        title: "OSL: client tokenizer against server usage".into(),
        x_label: "client OSL (tokens)".into(),
        y_label: "server OSL (tokens)".into(),
        caption: format!(
            "{shown}; mean client − server {:.2} tokens a sample; the grey line is y = x",
            diff as f64 / n as f64
        ),
        points,
    }))
}

/// Grid indices (`PERCENTILE_KEYS`) of p50, p90 and p99.
const P50: usize = 7;
const P90: usize = 4;
const P99: usize = 1;

/// TTFT by turn number of an agentic run: p50, p90 and p99 of each turn number's TTFT (the
/// summary's `agentic.by_turn[].ttft`), so what a prefix cache saves on later turns shows as
/// their TTFT falling below the first's.
pub fn ttft_by_turn(agentic: Option<&AgenticSummary>, streaming: bool) -> Result<Picture, String> {
    let agentic = agentic.ok_or("the run has no conversations (not agentic_inference)")?;
    if !streaming {
        return Err("the run did not stream, so it has no first-chunk times".into());
    }
    let turns: Vec<(u32, &crate::report::SeriesSummary)> =
        agentic.by_turn.iter().filter_map(|t| Some((t.turn, t.ttft.as_ref()?))).collect();
    if turns.is_empty() {
        return Err("no turn got a first content chunk".into());
    }
    let max_ns = turns.iter().map(|(_, b)| b.percentiles[P99]).fold(0.0, f64::max);
    let (unit, per) = bins::axis_time_unit(max_ns);
    let line = |label: &str, color, index: usize| Line {
        label: label.to_string(),
        color,
        points: turns
            .iter()
            .map(|(turn, b)| (f64::from(*turn), b.percentiles[index] / per))
            .collect(),
    };
    let n: u64 = turns.iter().map(|(_, b)| b.count).sum();
    Ok(Picture::PerTurn(PerTurn {
        title: "TTFT by turn: time to first token of each turn of the conversations".into(),
        y_label: format!("TTFT ({unit})"),
        turns: turns.iter().map(|(turn, _)| *turn).collect(),
        lines: vec![
            line("p50", palette::MEDIAN, P50),
            line("p90", palette::MEAN, P90),
            line("p99", palette::CURVE, P99),
        ],
        caption: format!(
            "{n} turns with a first chunk over {} turn numbers; each point is one turn number's \
             percentile (agentic.by_turn in result_summary.json)",
            turns.len()
        ),
    }))
}

/// The accuracy picture's caption: the average, how ROUGE is scaled when a dataset has it,
/// and the axis's scale.
fn accuracy_caption(average: Option<f64>, rouge: bool, full_scale: bool) -> String {
    let mut parts = Vec::new();
    if let Some(avg) = average {
        parts.push(format!("average accuracy {avg:.4}"));
    }
    if rouge {
        parts.push("ROUGE scores (written in percent) as fractions of 1".to_string());
    }
    if full_scale {
        parts.push("the axis spans 0 to a perfect 1".to_string());
    }
    parts.join("; ")
}

/// The numeric scores of `accuracy/accuracy_results.json` (ROUGE entries give one bar per
/// ROUGE key), and notes for entries without a number.
pub fn accuracy(doc: &serde_json::Value) -> Result<(Picture, Vec<String>), String> {
    let entries = doc["accuracy_scores"].as_array().ok_or("it has no accuracy_scores list")?;
    let mut bars = Vec::new();
    let mut notes = Vec::new();
    let mut rouge = false;
    for e in entries {
        let name = e["dataset_name"].as_str().unwrap_or("?");
        match &e["score"] {
            serde_json::Value::Number(v) => {
                bars.push((name.to_string(), v.as_f64().unwrap_or(0.0)))
            }
            serde_json::Value::Object(scores) => {
                for key in ["rouge1", "rouge2", "rougeL", "rougeLsum"] {
                    let value = scores.get(key).and_then(|v| match v {
                        serde_json::Value::String(s) => s.parse::<f64>().ok(),
                        other => other.as_f64(),
                    });
                    // ROUGE is written in percent; the other scores are fractions.
                    if let Some(v) = value {
                        bars.push((format!("{name} {key}"), v / 100.0));
                        rouge = true;
                    }
                }
            }
            _ => notes.push(format!("accuracy: {name} has no score (nothing was scored)")),
        }
    }
    if bars.is_empty() {
        return Err("no dataset has a numeric score".into());
    }
    // A score is a fraction of a perfect 1: the axis shows the whole range, so 0.45 does not
    // look near perfect beside 0.5. A score past 1 is no fraction: the axis fits it instead.
    let full_scale = bars.iter().all(|b| (0.0..=1.0).contains(&b.1)).then_some(1.0);
    let picture = Picture::Bars(Bars {
        title: "Accuracy per dataset".into(),
        y_label: "score".into(),
        caption: accuracy_caption(doc["average_accuracy"].as_f64(), rouge, full_scale.is_some()),
        full_scale,
        bars,
        beside: None,
        bar_label: "score".into(),
    });
    Ok((picture, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(streaming: bool) -> RunFacts {
        RunFacts {
            streaming,
            basis: TokenCountSource::Client,
            has_tokenizer: true,
            tokenizer_named: true,
        }
    }

    fn series() -> RunSeries {
        let spans_ns: Vec<(u64, u64)> =
            (0..30).map(|i| (i * 100_000_000, i * 100_000_000 + 50_000_000)).collect();
        RunSeries {
            latency_ns: vec![50e6; 30],
            ttft_ns: vec![10e6; 30],
            t0_ns: 0,
            end_ns: spans_ns[29].1,
            spans_ns,
            ..RunSeries::default()
        }
    }

    #[test]
    fn a_run_that_did_not_stream_skips_the_chunk_pictures_with_a_reason() {
        let plan = performance(&series(), facts(false));
        let names: Vec<_> = plan.pictures.iter().map(|p| p.0).collect();
        assert_eq!(names, ["latency", "qps", "in_flight"]);
        assert_eq!(plan.skipped.len(), 3);
        assert!(plan.skipped.iter().all(|s| s.contains("did not stream")), "{:?}", plan.skipped);
    }

    #[test]
    fn a_streamed_run_without_tpot_or_gaps_says_which_is_missing() {
        let plan = performance(&series(), facts(true));
        let names: Vec<_> = plan.pictures.iter().map(|p| p.0).collect();
        assert_eq!(names, ["ttft", "latency", "qps", "in_flight"]);
        assert!(plan.skipped[0].starts_with("tpot: no sample has text"), "{:?}", plan.skipped);
        assert!(plan.skipped[1].starts_with("itl: no streamed sample has chunk timing"));
    }

    #[test]
    fn the_qps_picture_has_one_point_per_second_of_the_run() {
        let plan = performance(&series(), facts(false));
        let Picture::Timeline(t) = &plan.pictures[1].1 else { panic!("qps is a timeline") };
        assert_eq!(t.lines[0].points.len(), 3, "2.95 s: three seconds");
        assert_eq!(t.lines[0].points[0], (0.5, 10.0));
    }

    #[test]
    fn accuracy_bars_take_numbers_and_rouge_keys_and_name_the_rest() {
        let doc = serde_json::json!({"average_accuracy": 0.5, "accuracy_scores": [
            {"dataset_name": "math", "score": 0.5},
            {"dataset_name": "sum", "score": {"rouge1": "50.0", "rouge2": "25.0",
                "rougeL": "40.0", "rougeLsum": "40.0", "gen_len": "38", "gen_num": 2}},
            {"dataset_name": "none", "score": null}]});
        let (picture, notes) = accuracy(&doc).unwrap();
        let Picture::Bars(b) = picture else { panic!("bars") };
        let names: Vec<_> = b.bars.iter().map(|b| b.0.as_str()).collect();
        assert_eq!(names, ["math", "sum rouge1", "sum rouge2", "sum rougeL", "sum rougeLsum"]);
        assert_eq!(b.bars[2].1, 0.25);
        assert_eq!(notes, ["accuracy: none has no score (nothing was scored)"]);
        assert!(accuracy(&serde_json::json!({})).is_err());
    }

    #[test]
    fn a_scatter_of_many_samples_is_thinned_and_says_so() {
        let s = RunSeries { osl_pairs: vec![(10, 9); 12_000], ..RunSeries::default() };
        let Ok(Picture::Scatter(p)) = osl_scatter(&s) else { panic!("a scatter") };
        assert_eq!(p.points.len(), 4_000);
        assert!(p.caption.starts_with("4000 of 12000 samples shown (one in 3)"), "{}", p.caption);
        assert!(p.caption.contains("mean client − server 1.00"), "{}", p.caption);
        assert!(osl_scatter(&RunSeries::default()).is_err());
    }

    #[test]
    fn a_missing_client_tpot_says_whether_the_run_had_a_tokenizer() {
        let cases = [
            (true, true, "no sample has text after its first chunk"),
            (false, true, "the run's tokenizer cannot be loaded here"),
            (false, false, "the run had no client tokenizer (config.yaml names no tokenizer_name)"),
        ];
        for (has_tokenizer, tokenizer_named, want) in cases {
            let f = RunFacts { has_tokenizer, tokenizer_named, ..facts(true) };
            let plan = performance(&series(), f);
            let tpot = plan.skipped.iter().find(|s| s.starts_with("tpot: ")).unwrap();
            assert!(tpot.starts_with(&format!("tpot: {want}")), "{tpot}");
        }
    }

    #[test]
    fn chunk_pictures_of_streams_that_came_in_one_read_say_so_on_the_caption_and_stderr() {
        let mut s = series();
        s.tpot_ns = vec![1e3; 30];
        s.itl_ns = vec![1e3; 30];
        for (multi, one_read, noted) in
            [(30, 30, true), (30, 16, true), (30, 15, false), (0, 0, false)]
        {
            (s.streams_multi_chunk, s.streams_in_one_read) = (multi, one_read);
            let plan = performance(&s, facts(true));
            for name in ["tpot", "itl"] {
                let Some((_, Picture::Distribution(d))) =
                    plan.pictures.iter().find(|p| p.0 == name)
                else {
                    panic!("{name} is drawn")
                };
                let want = format!("{one_read} of {multi} streams came in one read");
                assert_eq!(d.caption_note.as_ref().is_some_and(|n| n.starts_with(&want)), noted);
                let on_stderr =
                    plan.notes.iter().any(|n| n.starts_with(&format!("{name}: {want}")));
                assert_eq!(on_stderr, noted, "{:?}", plan.notes);
            }
        }
    }

    #[test]
    fn issue_lag_takes_its_unit_from_its_largest_value() {
        let s = series();
        let cases: [(u64, &str); 3] = [(150_000, "µs"), (200_000_000, "ms"), (12_000_000_000, "s")];
        for (max_ns, unit) in cases {
            let lags: Vec<(u64, u64)> =
                (0..30).map(|i| (i * 100_000_000, max_ns * (i + 1) / 30)).collect();
            let Picture::Timeline(t) = issue_lag(&s, &lags, 10.0) else { panic!("a timeline") };
            assert_eq!(t.y_label, format!("issue lag ({unit})"));
            let top = t.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0, f64::max);
            assert!((1.0..1000.0).contains(&top), "{unit}: ticks read as small numbers: {top}");
            assert!(t.caption.ends_with(&format!(" {unit}")), "{}", t.caption);
        }
    }

    /// An agentic block whose turn `n` (1, 3, 5) has TTFTs of `n` × 10, 20, …, 100 ms.
    fn agentic() -> AgenticSummary {
        use crate::report::agentic::{ConversationStats, TurnCounts, TurnStats};
        use loadgen_coordinator::metrics::SeriesStat;
        let turn = |turn: u32| {
            let mut ttft: Vec<u64> = (1..=10).map(|k| u64::from(turn) * k * 10_000_000).collect();
            let stat = SeriesStat::from_ints("ttft_ns", &mut ttft, false);
            TurnStats {
                turn,
                n_issued: 10,
                n_samples: 10,
                n_failed: 0,
                n_dropped: 0,
                n_abandoned: 0,
                ttft: Some((&stat).into()),
                tpot: None,
                tpot_partial: false,
                tpot_other: None,
                tpot_other_partial: false,
                latency: None,
            }
        };
        AgenticSummary {
            dropped_turns: 0,
            conversations: ConversationStats {
                started: 10,
                completed: 10,
                failed: 0,
                abandoned: 0,
                turns_per_conversation: None,
                duration_ns: None,
            },
            turns: TurnCounts {
                issued: 30,
                succeeded: 30,
                failed: 0,
                dropped: 0,
                abandoned: 0,
                failed_by_kind: Vec::new(),
            },
            by_turn: vec![turn(1), turn(3), turn(5)],
        }
    }

    #[test]
    fn ttft_by_turn_draws_each_turn_number_s_percentiles() {
        let Ok(Picture::PerTurn(p)) = ttft_by_turn(Some(&agentic()), true) else {
            panic!("a picture per turn")
        };
        assert_eq!(p.turns, [1, 3, 5]);
        assert_eq!(p.y_label, "TTFT (ms)");
        let labels: Vec<_> = p.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["p50", "p90", "p99"]);
        // "Lower" percentiles of 10 values: p50 is the 5th, p90 and p99 the 9th.
        assert_eq!(p.lines[0].points, [(1.0, 50.0), (3.0, 150.0), (5.0, 250.0)]);
        assert_eq!(p.lines[1].points[2], (5.0, 450.0));
        assert_eq!(p.lines[2].points[0], (1.0, 90.0));
        assert!(p.caption.starts_with("30 turns with a first chunk over 3 turn numbers"));
    }

    #[test]
    fn ttft_by_turn_is_skipped_with_a_reason_without_conversations_or_first_chunks() {
        let why = |r: Result<Picture, String>| r.err().unwrap_or_default();
        assert!(why(ttft_by_turn(None, true)).contains("no conversations"));
        assert!(why(ttft_by_turn(Some(&agentic()), false)).contains("did not stream"));
        let mut none = agentic();
        none.by_turn.iter_mut().for_each(|t| t.ttft = None);
        assert_eq!(why(ttft_by_turn(Some(&none), true)), "no turn got a first content chunk");
    }

    #[test]
    fn accuracy_bars_span_a_perfect_score_and_name_rouge_only_when_a_dataset_has_it() {
        let doc = serde_json::json!({"average_accuracy": 0.6, "accuracy_scores": [
            {"dataset_name": "math", "score": 0.75}, {"dataset_name": "code", "score": 0.45}]});
        let (Picture::Bars(b), _) = accuracy(&doc).unwrap() else { panic!("bars") };
        assert_eq!(b.full_scale, Some(1.0));
        assert!(!b.caption.contains("ROUGE"), "{}", b.caption);
        let doc = serde_json::json!({"accuracy_scores": [
            {"dataset_name": "sum", "score": {"rouge1": "50.0"}}]});
        let (Picture::Bars(b), _) = accuracy(&doc).unwrap() else { panic!("bars") };
        assert!(b.caption.contains("ROUGE scores"), "{}", b.caption);
        let doc = serde_json::json!({"accuracy_scores": [{"dataset_name": "x", "score": 7.5}]});
        let (Picture::Bars(b), _) = accuracy(&doc).unwrap() else { panic!("bars") };
        assert_eq!(b.full_scale, None, "a score past 1 is no fraction: the axis fits it");
    }
}
