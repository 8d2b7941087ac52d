//! Per-endpoint counts of a run: samples, failures by kind and latency for each of the run's
//! endpoints, from the sample table's endpoint column (a pure function over it).

use loadgen_wire::FailureKind;

use super::column::Column;
use super::select::int_column_stat;
use super::series::SeriesStat;
use super::table::SampleTable;

/// What one endpoint got over the tracked samples that have a record.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointStat {
    /// Tracked samples sent to it that completed (failures included, as `n_samples_completed`).
    pub n_samples: u64,
    /// Of those, the failed ones.
    pub n_samples_failed: u64,
    /// Failed samples per kind, indexed by the `FailureKind` wire value (`None` stays 0).
    pub failures: [u64; FailureKind::ALL.len()],
    /// Latency (complete − issued) over its samples, failures included, from the exact
    /// values as `sample_latency_ns`; `None` when it got no sample.
    pub latency: Option<SeriesStat>,
}

impl EndpointStat {
    /// The kinds that failed at least once, in wire order, with their counts.
    pub fn failure_counts(&self) -> impl Iterator<Item = (FailureKind, u64)> + '_ {
        FailureKind::ALL.iter().zip(self.failures).filter(|(_, n)| *n > 0).map(|(k, n)| (*k, n))
    }
}

/// An endpoint's latency series: with room for every row when it is the run's only one.
fn latency_column(table: &SampleTable, endpoints: usize) -> Column<u64> {
    if endpoints == 1 {
        table.series_column("endpoint_latency_ns")
    } else {
        Column::new("endpoint_latency_ns", table.spill().cloned())
    }
}

/// One `EndpointStat` per endpoint of the run (`endpoints` of them); a row naming no endpoint of
/// the run (`NO_ENDPOINT`) counts under none.
pub fn endpoint_stats(table: &SampleTable, endpoints: usize) -> Vec<EndpointStat> {
    let mut latency: Vec<Column<u64>> =
        (0..endpoints).map(|_| latency_column(table, endpoints)).collect();
    let mut stats: Vec<EndpointStat> = (0..endpoints)
        .map(|_| EndpointStat {
            n_samples: 0,
            n_samples_failed: 0,
            failures: [0; FailureKind::ALL.len()],
            latency: None,
        })
        .collect();
    table.for_each_chunk(|t| {
        for i in 0..t.len() {
            let e = usize::from(t.endpoint[i]);
            let Some(stat) = stats.get_mut(e) else { continue };
            stat.n_samples += 1;
            if t.flags[i] & super::table::FLAG_FAILED != 0 {
                stat.n_samples_failed += 1;
                // An unknown wire value reads as malformed, as the record's `failure_kind` does.
                let kind = FailureKind::from_u8(t.failure[i]).unwrap_or(FailureKind::Malformed);
                stat.failures[kind as usize] += 1;
            }
            latency[e].push_spilling(t.complete_ns[i].saturating_sub(t.issued_ns[i]));
        }
    });
    for (stat, mut values) in stats.iter_mut().zip(latency) {
        if !values.is_empty() {
            stat.latency = Some(int_column_stat("sample_latency_ns", &mut values, false));
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::SampleRow;

    fn row(endpoint: u8, latency_ns: u64, failure: FailureKind) -> SampleRow {
        SampleRow {
            issued_ns: 1_000,
            complete_ns: 1_000 + latency_ns,
            failed: failure != FailureKind::None,
            failure: failure as u8,
            endpoint,
            ..SampleRow::default()
        }
    }

    #[test]
    fn each_endpoint_counts_its_own_samples_failures_and_latency() {
        let mut table = SampleTable::with_capacity(8);
        for (e, lat, kind) in [
            (0, 10, FailureKind::None),
            (1, 200, FailureKind::Connect),
            (0, 30, FailureKind::None),
            (1, 400, FailureKind::Connect),
            (1, 100, FailureKind::HttpStatus),
            (0, 20, FailureKind::Timeout),
            (u8::MAX, 5, FailureKind::None),
        ] {
            table.push(&row(e, lat, kind));
        }
        let stats = endpoint_stats(&table, 3);
        assert_eq!(stats.len(), 3);
        assert_eq!((stats[0].n_samples, stats[0].n_samples_failed), (3, 1));
        assert_eq!((stats[1].n_samples, stats[1].n_samples_failed), (3, 3));
        let kinds: Vec<_> = stats[1].failure_counts().collect();
        assert_eq!(kinds, [(FailureKind::Connect, 2), (FailureKind::HttpStatus, 1)]);
        assert_eq!(stats[0].failure_counts().collect::<Vec<_>>(), [(FailureKind::Timeout, 1)]);
        let lat0 = stats[0].latency.as_ref().unwrap();
        assert_eq!((lat0.count, lat0.avg(), lat0.median()), (3, 20.0, 20.0));
        let lat1 = stats[1].latency.as_ref().unwrap();
        assert_eq!((lat1.count, lat1.avg(), lat1.max.as_f64()), (3, 700.0 / 3.0, 400.0));
        assert_eq!(stats[2].n_samples, 0, "an endpoint without samples");
        assert!(stats[2].latency.is_none());
    }
}
