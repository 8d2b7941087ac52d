//! What the pictures draw, taken from the replayed run's own `SampleTable` by the rules its
//! report follows: TTFT and latency per row, TPOT under the chosen basis (the metrics' own
//! `client_tokens` / `server_tokens`), the chunk gaps, each sample's span and both OSLs.

use loadgen_coordinator::metrics::snapshot::streams_in_one_read;
use loadgen_coordinator::metrics::tokens::{client_tokens, server_tokens};
use loadgen_coordinator::metrics::{classify_usage, SampleTable, TokenCountSource, UsageClass};

/// The per-sample values of one run, ready to bin.
#[derive(Debug, Default)]
pub struct RunSeries {
    /// Ascending, in ns. TTFT and ITL are empty for a run that did not stream.
    pub ttft_ns: Vec<f64>,
    pub tpot_ns: Vec<f64>,
    pub itl_ns: Vec<f64>,
    pub latency_ns: Vec<f64>,
    /// (issued, complete) of every row, failures included, in table order.
    pub spans_ns: Vec<(u64, u64)>,
    /// (client OSL, server OSL) of the successful samples that have both.
    pub osl_pairs: Vec<(u32, u32)>,
    /// Start of the time axis (tracking start, else the first issue) and its end (the last
    /// completion).
    pub t0_ns: u64,
    pub end_ns: u64,
    /// Streamed samples of two or more chunks, and those of them whose chunks all came in one
    /// socket read (the report's `n_streams_multi_chunk` / `n_streams_in_one_read`).
    pub streams_multi_chunk: u64,
    pub streams_in_one_read: u64,
}

/// The series of `table` under `basis`; `tracking_start_ns` (0: unknown) starts the clock.
pub fn run_series(
    table: &SampleTable,
    streaming: bool,
    has_tokenizer: bool,
    basis: TokenCountSource,
    tracking_start_ns: u64,
) -> RunSeries {
    let mut s = RunSeries::default();
    table.for_each_row(|row| {
        s.spans_ns.push((row.issued_ns, row.complete_ns));
        s.latency_ns.push(row.complete_ns.saturating_sub(row.issued_ns) as f64);
        if let (true, Some(first)) = (streaming, row.first_chunk_ns) {
            s.ttft_ns.push(first.saturating_sub(row.issued_ns) as f64);
        }
        if row.failed {
            return;
        }
        let usable = classify_usage(row.prompt_tokens, row.completion_tokens, row.output_empty)
            == UsageClass::Usable;
        if let (true, Some(client), Some(server)) = (usable, row.osl_client, row.completion_tokens)
        {
            s.osl_pairs.push((client, server));
        }
    });
    s.tpot_ns = match basis {
        TokenCountSource::Client => client_tokens(table, streaming, has_tokenizer).tpot_ns.to_vec(),
        TokenCountSource::Server => server_tokens(table, streaming).0.tpot_ns.to_vec(),
    };
    if streaming {
        s.itl_ns = table.chunk_delta_ns().to_vec().iter().map(|&g| g as f64).collect();
        (s.streams_multi_chunk, s.streams_in_one_read) = streams_in_one_read(table);
    }
    for v in [&mut s.ttft_ns, &mut s.tpot_ns, &mut s.itl_ns, &mut s.latency_ns] {
        v.sort_unstable_by(f64::total_cmp);
    }
    let first_issue = s.spans_ns.iter().map(|s| s.0).min().unwrap_or(0);
    s.t0_ns = if tracking_start_ns > 0 && tracking_start_ns <= first_issue {
        tracking_start_ns
    } else {
        first_issue
    };
    s.end_ns = s.spans_ns.iter().map(|s| s.1).max().unwrap_or(s.t0_ns);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_coordinator::metrics::column::Column;
    use loadgen_coordinator::metrics::SampleRow;

    fn row(issued: u64, first: Option<u64>, complete: u64) -> SampleRow {
        SampleRow {
            issued_ns: issued,
            first_chunk_ns: first,
            complete_ns: complete,
            osl_client: Some(10),
            tpot_tokens_client: Some(9),
            prompt_tokens: Some(4),
            completion_tokens: Some(11),
            n_chunks: Some(10),
            ..SampleRow::default()
        }
    }

    #[test]
    fn series_follow_the_report_rules_and_the_basis() {
        let mut table = SampleTable::with_capacity(3);
        table.push(&row(100, Some(150), 240));
        table.push(&row(200, Some(260), 320));
        table.push(&SampleRow { failed: true, ..row(300, None, 400) });
        table.set_chunk_delta_ns(Column::from_vec("gaps", vec![9, 7]));
        let c = run_series(&table, true, true, TokenCountSource::Client, 90);
        assert_eq!(c.ttft_ns, vec![50.0, 60.0], "the failed row has no first chunk");
        assert_eq!(c.latency_ns, vec![100.0, 120.0, 140.0], "failures have a latency");
        assert_eq!(c.tpot_ns, vec![60.0 / 9.0, 90.0 / 9.0]);
        assert_eq!(c.itl_ns, vec![7.0, 9.0]);
        assert_eq!(c.osl_pairs, vec![(10, 11), (10, 11)]);
        assert_eq!((c.t0_ns, c.end_ns), (90, 400));
        let s = run_series(&table, true, true, TokenCountSource::Server, 0);
        assert_eq!(s.tpot_ns, vec![6.0, 9.0], "(complete − first) / (completion_tokens − 1)");
        assert_eq!(s.t0_ns, 100, "no tracking mark: the first issue");
        let off = run_series(&table, false, true, TokenCountSource::Client, 90);
        assert!(off.ttft_ns.is_empty() && off.itl_ns.is_empty() && off.tpot_ns.is_empty());
    }
}
