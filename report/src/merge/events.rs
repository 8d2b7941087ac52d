//! The merged `events.jsonl`: the shards' logs interleaved by time on the common timeline,
//! each line's `timestamp_ns` shifted by its shard's clock shift and its `sample_uuid` made
//! the single-host run's id, the rest of the line copied as it is. The session's marks appear
//! once, as one run's: the first start and start of tracking, the last stop and end.
//!
//! The shards' logs are streamed (one line of each held), so a merge never holds a log.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use crate::SampleIds;

/// One shard's log, how its lines are rewritten, and what its shard.json says the log holds:
/// its tracked samples' local ids (`ids.local_first` and the `samples` after it) and the stamp
/// of its `session.start_performance_tracking` line.
#[derive(Debug, Clone)]
pub struct ShardLog {
    pub path: PathBuf,
    pub shift_ns: u64,
    pub ids: SampleIds,
    pub samples: u64,
    pub tracking_start_ns: u64,
    /// An agentic run's log: its `session.stop_performance_tracking` line closes its tracking
    /// window mid-run, so the merged log keeps the latest shard's at its time (`latest_stop`).
    pub agentic: bool,
    /// An agentic shard's single-host id of each local id (`ShardFile::agentic_ids`); `None`
    /// maps by `ids`.
    pub agentic_ids: Option<std::sync::Arc<Vec<u64>>>,
}

impl ShardLog {
    /// The single-host run's id of local sample `local`.
    pub fn global_id(&self, local: u64) -> u64 {
        let mapped = self.agentic_ids.as_ref().and_then(|m| m.get(local as usize).copied());
        mapped.unwrap_or_else(|| self.ids.global_id(local))
    }

    /// A line's checks against shard.json: its sample id in the shard's range, its tracking
    /// start at the clock's. `Err` says why (the caller names the file and line).
    fn check(&self, head: &Head, line: &[u8]) -> Result<(), String> {
        let event_type = &line[head.event_type.clone()];
        if event_type == b"session.start_performance_tracking"
            && head.timestamp_ns != self.tracking_start_ns
        {
            return Err(format!(
                "session.start_performance_tracking is stamped {}, but shard.json's \
                 clock.tracking_start_ns is {}: the log and shard.json are not one run's",
                head.timestamp_ns, self.tracking_start_ns
            ));
        }
        let Some(local) = local_id(&line[head.uuid.clone()])? else { return Ok(()) };
        let first = self.ids.local_first;
        let end = first.saturating_add(self.samples);
        if local < first || local >= end {
            return Err(format!(
                "sample id {local} is outside the shard's {first} to {} (shard.json's \
                 sample_ids.local_first {first} and samples {}): the log and shard.json are \
                 not one run's",
                end.saturating_sub(1),
                self.samples
            ));
        }
        Ok(())
    }
}

/// A line's local sample id; `None` for a line without one.
fn local_id(uuid: &[u8]) -> Result<Option<u64>, String> {
    if uuid.is_empty() {
        return Ok(None);
    }
    let text = std::str::from_utf8(uuid).unwrap_or_default();
    u64::from_str_radix(text, 16)
        .ok()
        .filter(|_| text.len() == 32)
        .map(Some)
        .ok_or_else(|| format!("sample_uuid {text:?} is not an llm-loadgen sample id"))
}

/// The line head every event of ours begins with: type, timestamp, uuid.
const TYPE_PREFIX: &[u8] = b"{\"event_type\":\"";
const TS_KEY: &[u8] = b"\",\"timestamp_ns\":";
const UUID_KEY: &[u8] = b",\"sample_uuid\":\"";

/// Where a line's fields sit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    event_type: std::ops::Range<usize>,
    timestamp: std::ops::Range<usize>,
    timestamp_ns: u64,
    uuid: std::ops::Range<usize>,
}

/// Finds the head of an llm-loadgen event line; `None` if it is not one.
fn parse_head(line: &[u8]) -> Option<Head> {
    let rest = line.strip_prefix(TYPE_PREFIX)?;
    let type_len = rest.iter().position(|&b| b == b'"')?;
    let type_start = TYPE_PREFIX.len();
    let ts_start = type_start + type_len + TS_KEY.len();
    if line.get(type_start + type_len..ts_start)? != TS_KEY {
        return None;
    }
    let digits = line[ts_start..].iter().take_while(|b| b.is_ascii_digit()).count();
    let ts_end = ts_start + digits;
    let timestamp_ns = std::str::from_utf8(&line[ts_start..ts_end]).ok()?.parse().ok()?;
    let uuid_start = ts_end + UUID_KEY.len();
    if line.get(ts_end..uuid_start)? != UUID_KEY {
        return None;
    }
    let uuid_len = line[uuid_start..].iter().position(|&b| b == b'"')?;
    Some(Head {
        event_type: type_start..type_start + type_len,
        timestamp: ts_start..ts_end,
        timestamp_ns,
        uuid: uuid_start..uuid_start + uuid_len,
    })
}

/// Appends `line` to `out` with its timestamp and uuid rewritten (and its newline).
fn rewrite(line: &[u8], head: &Head, log: &ShardLog, out: &mut Vec<u8>) -> Result<(), String> {
    out.extend_from_slice(&line[..head.timestamp.start]);
    // Written into `out` in place: a merge of millions of lines makes no string per line.
    let _ = write!(out, "{}", head.timestamp_ns.saturating_add(log.shift_ns));
    out.extend_from_slice(&line[head.timestamp.end..head.uuid.start]);
    if let Some(local) = local_id(&line[head.uuid.clone()])? {
        let _ = write!(out, "{:032x}", log.global_id(local));
    }
    out.extend_from_slice(&line[head.uuid.end..]);
    out.push(b'\n');
    Ok(())
}

/// How a session mark merges: once at the first shard's, or once at the last shard's.
fn session_rule(event_type: &[u8]) -> Option<bool> {
    match event_type {
        b"session.started" | b"session.start_performance_tracking" => Some(true),
        b"session.stop_performance_tracking" | b"session.ended" | b"session.stop_loadgen" => {
            Some(false)
        }
        _ => None,
    }
}

/// One open shard log: its reader, its current line and that line's shifted time.
struct Cursor {
    reader: Box<dyn BufRead>,
    line: Vec<u8>,
    number: u64,
}

impl Cursor {
    /// Reads the next line; `Ok(None)` at the end.
    fn next(&mut self, log: &ShardLog) -> Result<Option<(u64, Head)>, String> {
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        // Named only when a line is bad: a merge of millions of lines makes no string per line.
        let at = || format!("{} line {}", log.path.display(), self.number);
        if self.line.pop() != Some(b'\n') {
            return Err(format!("{}: the last line has no newline; the log is truncated", at()));
        }
        let head = parse_head(&self.line)
            .ok_or_else(|| format!("{}: not an llm-loadgen event line", at()))?;
        log.check(&head, &self.line).map_err(|why| format!("{}: {why}", at()))?;
        let shifted = head.timestamp_ns.checked_add(log.shift_ns).ok_or_else(|| {
            format!("{}: timestamp_ns {} is past any run's clock", at(), head.timestamp_ns)
        })?;
        Ok(Some((shifted, head)))
    }
}

/// Writes the merged log of `logs` to `out`; returns the lines written. A bad line is an
/// error naming its file and line.
pub fn merge_events(logs: &[ShardLog], out: &mut dyn Write) -> Result<u64, String> {
    let mut cursors = Vec::with_capacity(logs.len());
    let mut heads = Vec::with_capacity(logs.len());
    let mut heap = BinaryHeap::new();
    for (i, log) in logs.iter().enumerate() {
        let file = std::fs::File::open(&log.path)
            .map_err(|e| format!("cannot read {}: {e}", log.path.display()))?;
        let reader: Box<dyn BufRead> = Box::new(std::io::BufReader::with_capacity(1 << 20, file));
        let mut cursor = Cursor { reader, line: Vec::new(), number: 0 };
        let next = cursor.next(log)?;
        if let Some((ts, _)) = &next {
            heap.push(Reverse((*ts, i)));
        }
        heads.push(next.map(|(_, h)| h));
        cursors.push(cursor);
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut first_marks: Vec<Vec<u8>> = Vec::new();
    let mut last_marks: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut lines = 0u64;
    let mut stop = if logs.iter().any(|l| l.agentic) { latest_stop(logs)? } else { None };
    while let Some(Reverse((ts, i))) = heap.pop() {
        let head = heads[i].take().ok_or("a merge cursor lost its line")?;
        let line = &cursors[i].line;
        buf.clear();
        rewrite(line, &head, &logs[i], &mut buf)?;
        let event_type = &line[head.event_type.clone()];
        lines += write_stop_before(&mut stop, ts, out)?;
        match session_rule(event_type) {
            _ if event_type == STOP && logs[i].agentic => {}
            Some(true) if first_marks.iter().any(|m| m == event_type) => {}
            Some(true) => {
                first_marks.push(event_type.to_vec());
                out.write_all(&buf).map_err(|e| e.to_string())?;
                lines += 1;
            }
            Some(false) => keep_last(&mut last_marks, event_type, ts, &buf),
            None => {
                out.write_all(&buf).map_err(|e| e.to_string())?;
                lines += 1;
            }
        }
        if let Some((ts, head)) = cursors[i].next(&logs[i])? {
            heads[i] = Some(head);
            heap.push(Reverse((ts, i)));
        }
    }
    lines += write_stop_before(&mut stop, u64::MAX, out)?;
    last_marks.sort_by_key(|(ts, _)| *ts);
    for (_, line) in &last_marks {
        out.write_all(line).map_err(|e| e.to_string())?;
        lines += 1;
    }
    Ok(lines)
}

const STOP: &[u8] = b"session.stop_performance_tracking";

/// The merged window of agentic shards: the latest of their `session.stop_performance_tracking`
/// lines on the common timeline, rewritten, and its time. Each shard closed its own window at
/// its own first finish with no conversation left; the merged log keeps one stop line, at the
/// latest, so every turn a shard tracked is tracked in the merge (docs/CLI.md, sharding).
fn latest_stop(logs: &[ShardLog]) -> Result<Option<(u64, Vec<u8>)>, String> {
    let mut latest: Option<(u64, Vec<u8>)> = None;
    for log in logs {
        let file = std::fs::File::open(&log.path)
            .map_err(|e| format!("cannot read {}: {e}", log.path.display()))?;
        let reader = std::io::BufReader::with_capacity(1 << 20, file);
        for line in reader.split(b'\n') {
            let line = line.map_err(|e| format!("{}: {e}", log.path.display()))?;
            let Some(head) = parse_head(&line).filter(|h| &line[h.event_type.clone()] == STOP)
            else {
                continue;
            };
            let ts = head.timestamp_ns.saturating_add(log.shift_ns);
            if latest.as_ref().is_none_or(|(t, _)| ts > *t) {
                let mut out = Vec::new();
                rewrite(&line, &head, log, &mut out)?;
                latest = Some((ts, out));
            }
        }
    }
    Ok(latest)
}

/// Writes the merged stop line once the merge reaches a line stamped after it; returns the
/// lines written (0 or 1).
fn write_stop_before(
    stop: &mut Option<(u64, Vec<u8>)>,
    ts: u64,
    out: &mut dyn Write,
) -> Result<u64, String> {
    match stop.take_if(|(at, _)| *at < ts) {
        Some((_, line)) => out.write_all(&line).map(|()| 1).map_err(|e| e.to_string()),
        None => Ok(0),
    }
}

/// Keeps the latest line of each closing session mark.
fn keep_last(marks: &mut Vec<(u64, Vec<u8>)>, event_type: &[u8], ts: u64, line: &[u8]) {
    let same = |l: &Vec<u8>| parse_head(l).is_some_and(|h| &l[h.event_type] == event_type);
    match marks.iter_mut().find(|(_, l)| same(l)) {
        Some(slot) if slot.0 <= ts => *slot = (ts, line.to_vec()),
        Some(_) => {}
        None => marks.push((ts, line.to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"event_type":"sample.issued","timestamp_ns":1234,"sample_uuid":"00000000000000000000000000000003","conversation_id":"","turn":null,"data":null}"#;

    fn log(shift_ns: u64, offset: u64) -> ShardLog {
        let ids = SampleIds { local_first: 0, global_first: 0, stride: 2, offset };
        let path = PathBuf::from("x");
        let (agentic, agentic_ids) = (false, None);
        ShardLog { path, shift_ns, ids, samples: 100, tracking_start_ns: 0, agentic, agentic_ids }
    }

    /// Each merged line's event type and timestamp.
    fn kinds_and_times(out: Vec<u8>) -> Vec<(String, u64)> {
        let text = String::from_utf8(out).unwrap();
        let head = |l: &str| {
            let h = parse_head(l.as_bytes()).unwrap();
            (l[h.event_type].to_string(), h.timestamp_ns)
        };
        text.lines().map(head).collect()
    }

    fn owned(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
        pairs.iter().map(|(k, t)| (k.to_string(), *t)).collect()
    }

    fn line(kind: &str, ts: u64, uuid: &str) -> String {
        format!("{{\"event_type\":\"{kind}\",\"timestamp_ns\":{ts},\"sample_uuid\":\"{uuid}\",\"data\":null}}\n")
    }

    #[test]
    fn logs_interleave_by_time_with_one_session_mark_of_each_kind() {
        let dir =
            std::env::temp_dir().join(format!("llm-loadgen-merge-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let id = |n: u64| format!("{n:032x}");
        let a = [
            ("session.started", 1),
            ("sample.issued", 10),
            ("sample.issued", 30),
            ("session.ended", 40),
        ];
        let b = [("session.started", 2), ("sample.issued", 15), ("session.ended", 50)];
        let write = |name: &str, lines: &[(&str, u64)]| {
            let path = dir.join(name);
            let text: String = lines
                .iter()
                .enumerate()
                .map(|(i, (k, ts))| {
                    line(
                        k,
                        *ts,
                        &if k.starts_with("sample") { id(i as u64) } else { String::new() },
                    )
                })
                .collect();
            std::fs::write(&path, text).unwrap();
            path
        };
        let logs = [
            ShardLog { path: write("a", &a), ..log(0, 0) },
            ShardLog { path: write("b", &b), ..log(100, 1) },
        ];
        let mut out = Vec::new();
        assert_eq!(merge_events(&logs, &mut out).unwrap(), 5);
        let got = kinds_and_times(out);
        let want = [
            ("session.started", 1),
            ("sample.issued", 10),
            ("sample.issued", 30),
            ("sample.issued", 115),
            ("session.ended", 150),
        ];
        let want = owned(&want);
        assert_eq!(got, want, "the first start, the lines by shifted time, the last end");
        std::fs::write(dir.join("a"), "{\"event_type\":\"x\"").unwrap();
        let err = merge_events(&logs, &mut Vec::new()).unwrap_err();
        assert!(err.contains("a line 1") && err.contains("truncated"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn agentic_logs_keep_the_latest_stop_of_tracking_at_its_time() {
        let dir = std::env::temp_dir()
            .join(format!("llm-loadgen-merge-agentic-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let id = |n: u64| format!("{n:032x}");
        let a = [
            ("session.start_performance_tracking", 0, String::new()),
            ("sample.issued", 10, id(0)),
            ("session.stop_performance_tracking", 20, String::new()),
            ("sample.issued", 30, id(1)),
        ];
        let b = [
            ("session.start_performance_tracking", 0, String::new()),
            ("sample.issued", 12, id(0)),
            ("sample.issued", 24, id(1)),
            ("session.stop_performance_tracking", 25, String::new()),
            ("sample.issued", 40, id(2)),
        ];
        let write = |name: &str, lines: &[(&str, u64, String)]| {
            let path = dir.join(name);
            let text: String = lines.iter().map(|(k, ts, uuid)| line(k, *ts, uuid)).collect();
            std::fs::write(&path, text).unwrap();
            path
        };
        let logs = [
            ShardLog { path: write("a", &a), agentic: true, ..log(0, 0) },
            ShardLog { path: write("b", &b), agentic: true, ..log(0, 1) },
        ];
        let mut out = Vec::new();
        merge_events(&logs, &mut out).unwrap();
        let got = kinds_and_times(out);
        let want = [
            ("session.start_performance_tracking", 0),
            ("sample.issued", 10),
            ("sample.issued", 12),
            ("sample.issued", 24),
            ("session.stop_performance_tracking", 25),
            ("sample.issued", 30),
            ("sample.issued", 40),
        ];
        let want = owned(&want);
        assert_eq!(got, want, "one stop line, the latest shard's, in time order");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_line_gets_its_time_shifted_and_its_global_sample_id() {
        let head = parse_head(LINE.as_bytes()).expect("our line");
        assert_eq!(head.timestamp_ns, 1234);
        let mut out = Vec::new();
        rewrite(LINE.as_bytes(), &head, &log(1_000, 1), &mut out).unwrap();
        let want = LINE.replace("1234", "2234").replace("00000003\"", "00000007\"");
        assert_eq!(String::from_utf8(out).unwrap(), want + "\n");
        let session = r#"{"event_type":"session.ended","timestamp_ns":5,"sample_uuid":"","conversation_id":"","turn":null,"data":null}"#;
        let head = parse_head(session.as_bytes()).unwrap();
        let mut out = Vec::new();
        rewrite(session.as_bytes(), &head, &log(10, 1), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), session.replace(":5,", ":15,") + "\n");
        assert_eq!(parse_head(b"{\"event_type\": \"x\"}"), None, "not our layout");
    }
}
