//! `sample_idx_map.json`: which dataset row each sample sent, by phase, in the order and
//! layout the reference writes it.

use loadgen_coordinator::aggregate::events::{push_u64, push_uuid};
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

/// The performance samples of `sample_idx_map.json`, `(sample id, dataset row)` each, handed to
/// the visitor in issue order, as the reference fills its map while it issues: by issue stamp,
/// ties by sample id, the order of events.jsonl's `sample.issued` lines. A run's come from a
/// `TupleSpool` keyed by both (in bounded memory); a merge's from a sorted list (`slice_rows`).
pub type PerfRows<'a> = Box<dyn FnOnce(&mut dyn FnMut(u64, u32)) + 'a>;

/// `rows`, in their order, as `PerfRows`.
pub fn slice_rows(rows: &[(u64, u32)]) -> PerfRows<'_> {
    Box::new(move |f| rows.iter().for_each(|&(id, row)| f(id, row)))
}

/// Writes the map's phases one entry at a time, keeping the first write error. Entries are
/// formatted into a reused buffer (a map has one a sample: millions at the end of a run).
struct PhaseWriter<'a> {
    out: &'a mut dyn std::io::Write,
    line: Vec<u8>,
    first_phase: bool,
    entries: u64,
    error: Option<std::io::Error>,
}

impl PhaseWriter<'_> {
    fn write(&mut self, text: &[u8]) {
        if self.error.is_none() {
            self.error = self.out.write_all(text).err();
        }
    }

    fn begin(&mut self, name: &str) {
        let sep = if self.first_phase { "" } else { "," };
        self.first_phase = false;
        self.entries = 0;
        let name = serde_json::to_string(name).unwrap_or_default();
        self.write(format!("{sep}\n  {name}: {{").as_bytes());
    }

    fn entry(&mut self, sample_id: u64, row: u64) {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        if self.entries > 0 {
            line.push(b',');
        }
        self.entries += 1;
        line.extend_from_slice(b"\n    \"");
        push_uuid(&mut line, sample_id);
        line.extend_from_slice(b"\": ");
        push_u64(&mut line, row);
        self.write(&line);
        self.line = line;
    }

    fn end(&mut self) {
        let close: &[u8] = if self.entries > 0 { b"\n  }" } else { b"}" };
        self.write(close);
    }
}

/// `{"performance": {uuid: dataset_index}, <phase>: {…}}`, as the reference writes it
/// (`msgspec.json.format(..., indent=2)`): two-space indent, one key a line, no trailing
/// newline; an empty map is `{}`. An accuracy-only run has no `performance` phase (`None`).
pub fn write_sample_idx_map(
    out: &mut dyn std::io::Write,
    perf_rows: Option<PerfRows<'_>>,
    phases: &[IdxPhase],
) -> std::io::Result<()> {
    let mut w = PhaseWriter { out, line: Vec::new(), first_phase: true, entries: 0, error: None };
    w.write(b"{");
    if let Some(rows) = perf_rows {
        w.begin("performance");
        rows(&mut |id, row| w.entry(id, u64::from(row)));
        w.end();
    }
    for p in phases {
        w.begin(&p.name);
        (0..p.issued).for_each(|k| w.entry(p.first_sample_id + k, k % p.unit_rows.max(1)));
        w.end();
    }
    let close: &[u8] = if w.first_phase { b"}" } else { b"\n}" };
    w.write(close);
    w.error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_coordinator::aggregate::events::sample_uuid;

    #[test]
    fn sample_idx_map_is_indented_as_the_reference_writes_it() {
        let text = |rows: &[(u64, u32)]| {
            let mut out = Vec::new();
            write_sample_idx_map(&mut out, Some(slice_rows(rows)), &[]).unwrap();
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
}
