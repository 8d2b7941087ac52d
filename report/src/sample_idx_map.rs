//! `sample_idx_map.json`: which dataset row each sample sent, by phase, in the order and
//! layout the reference writes it.

use loadgen_coordinator::aggregate::events::sample_uuid;
use loadgen_coordinator::run::PhaseOutcome;

use loadgen_plan::plan::Plan;

/// An accuracy phase in sample_idx_map.json: its name, first sample id, issued samples and
/// dataset rows (sample `k` of the phase sent row `k % unit_rows`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxPhase {
    pub name: String,
    pub first_sample_id: u64,
    pub issued: u64,
    pub unit_rows: u64,
}

pub fn idx_phases(plan: &Plan, phases: &[PhaseOutcome]) -> Vec<IdxPhase> {
    phases
        .iter()
        .zip(&plan.accuracy.datasets)
        .map(|(p, d)| IdxPhase {
            name: p.name.clone(),
            first_sample_id: p.first_sample_id,
            issued: p.issued,
            unit_rows: d.dataset.rows.len() as u64,
        })
        .collect()
}

/// The performance samples `(sample id, dataset row)` in issue order, as the reference fills
/// its map while it issues: by issue stamp (`issued_ns`, one per sample, in the same order),
/// ties by sample id, the order of events.jsonl's `sample.issued` lines. The aggregator
/// holds them in completion order.
pub fn in_issue_order(rows: &[(u64, u32)], issued_ns: &[u64]) -> Vec<(u64, u32)> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_unstable_by_key(|&i| (issued_ns.get(i).copied().unwrap_or(u64::MAX), rows[i].0));
    order.into_iter().map(|i| rows[i]).collect()
}

/// `{"performance": {uuid: dataset_index}, <phase>: {…}}`, as the reference writes it
/// (`msgspec.json.format(..., indent=2)`): two-space indent, one key a line, no trailing
/// newline; an empty map is `{}`. An accuracy-only run has no `performance` phase.
pub fn write_sample_idx_map(
    out: &mut dyn std::io::Write,
    rows: &[(u64, u32)],
    perf: bool,
    phases: &[IdxPhase],
) -> std::io::Result<()> {
    out.write_all(b"{")?;
    let mut first_phase = true;
    let mut phase = |out: &mut dyn std::io::Write,
                     name: &str,
                     entries: &mut dyn Iterator<Item = (u64, u64)>| {
        let sep = if first_phase { "" } else { "," };
        first_phase = false;
        let name = serde_json::to_string(name).unwrap_or_default();
        write!(out, "{sep}\n  {name}: {{")?;
        let mut any = false;
        for (i, (sample_id, row)) in entries.enumerate() {
            let sep = if i > 0 { "," } else { "" };
            write!(out, "{sep}\n    \"{}\": {row}", sample_uuid(sample_id))?;
            any = true;
        }
        out.write_all(if any { b"\n  }" } else { b"}" })
    };
    if perf {
        phase(out, "performance", &mut rows.iter().map(|&(id, row)| (id, u64::from(row))))?;
    }
    for p in phases {
        let mut ids = (0..p.issued).map(|k| (p.first_sample_id + k, k % p.unit_rows.max(1)));
        phase(out, &p.name, &mut ids)?;
    }
    out.write_all(if first_phase { b"}" } else { b"\n}" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_idx_map_is_indented_as_the_reference_writes_it() {
        let text = |rows: &[(u64, u32)]| {
            let mut out = Vec::new();
            write_sample_idx_map(&mut out, rows, true, &[]).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(&[]), "{\n  \"performance\": {}\n}");
        let two = text(&[(0, 776), (1, 507)]);
        let (a, b) = (sample_uuid(0), sample_uuid(1));
        assert_eq!(
            two,
            format!("{{\n  \"performance\": {{\n    \"{a}\": 776,\n    \"{b}\": 507\n  }}\n}}")
        );
        let json: serde_json::Value = serde_json::from_str(&two).unwrap();
        assert_eq!(json["performance"][&b], 507);
    }

    #[test]
    fn sample_idx_map_rows_follow_issue_order_not_completion_order() {
        // Completion order: sample 2 answered first, then 0, then 1 and 3 issued together.
        let rows = [(2, 20), (0, 0), (3, 30), (1, 10)];
        let issued_ns = [300, 100, 200, 200];
        assert_eq!(in_issue_order(&rows, &issued_ns), [(0, 0), (1, 10), (3, 30), (2, 20)]);
        assert_eq!(in_issue_order(&[], &[]), []);
    }
}
