//! The timestamps a run can write, checked as its log is read, so a damaged stamp stops every
//! post-run tool with its line instead of stretching a time axis to years.
//!
//! A log's stamps are CLOCK_MONOTONIC nanoseconds (the reference's and ours): time since the
//! host booted, so below 2^63 ns (292 years); one run's stamps lie within days of each other;
//! and nothing a run logs is stamped before its `session.started` or after its
//! `session.ended`. A stamp that breaks one of these was not written by a run.

/// The largest stamp a CLOCK_MONOTONIC clock gives (2^63 − 1 ns: 292 years after boot). The
/// bound also keeps the tools' sums of two stamps within a `u64`.
pub const STAMP_NS_MAX: u64 = i64::MAX as u64;

/// The most a log's stamps may span, in days. The run's own issue log keeps stamps as 48-bit
/// offsets (78 hours, `loadgen_coordinator::settle`), so no run's log spans days beyond it;
/// seven leave room for a long run of the reference.
pub const LOG_SPAN_DAYS_MAX: u64 = 7;

/// [`LOG_SPAN_DAYS_MAX`] in nanoseconds.
pub const LOG_SPAN_NS_MAX: u64 = LOG_SPAN_DAYS_MAX * 86_400 * 1_000_000_000;

/// What a line's stamp is, for the order checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampKind {
    /// `session.started`: nothing is stamped before it.
    SessionStarted,
    /// `session.ended`: nothing is stamped after it.
    SessionEnded,
    /// Every other line.
    Other,
}

/// A line's stamp: its line number and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    line: u64,
    ns: u64,
}

/// Why a stamp cannot be a run's: the line at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadStamp {
    pub line: u64,
    pub what: String,
}

/// The stamps seen so far, fed one line at a time in file order.
#[derive(Debug, Default)]
pub struct StampCheck {
    earliest: Option<Seen>,
    latest: Option<Seen>,
    started: Option<Seen>,
    ended: Option<Seen>,
    /// The latest stamp of a line other than `session.ended`.
    latest_other: Option<Seen>,
}

impl StampCheck {
    /// Checks the stamp `ns` of line `line`.
    pub fn check(&mut self, kind: StampKind, ns: u64, line: u64) -> Result<(), BadStamp> {
        let bad = |line: u64, what: String| Err(BadStamp { line, what });
        if ns > STAMP_NS_MAX {
            return bad(
                line,
                format!(
                    "timestamp_ns {ns} is past any CLOCK_MONOTONIC time (at most {STAMP_NS_MAX}, \
                     292 years after boot): the stamp is damaged"
                ),
            );
        }
        let this = Seen { line, ns };
        self.check_span(this)?;
        if let Some(start) = self.started.filter(|s| ns < s.ns) {
            return bad(
                line,
                format!(
                    "timestamp_ns {ns} is before session.started's {} (line {}): a run stamps \
                     nothing before it starts, so the stamp is damaged",
                    start.ns, start.line
                ),
            );
        }
        match kind {
            StampKind::SessionStarted if self.started.is_none() => {
                if let Some(before) = self.earliest.filter(|e| e.ns < ns) {
                    return bad(
                        before.line,
                        format!(
                            "timestamp_ns {} is before session.started's {ns} (line {line}): a \
                             run stamps nothing before it starts, so the stamp is damaged",
                            before.ns
                        ),
                    );
                }
                self.started = Some(this);
            }
            StampKind::SessionEnded => {
                if let Some(after) = self.latest_other.filter(|l| l.ns > ns) {
                    return bad(after.line, after_end(after.ns, this));
                }
                if self.ended.is_none_or(|e| e.ns < ns) {
                    self.ended = Some(this);
                }
            }
            _ => {
                if let Some(end) = self.ended.filter(|e| ns > e.ns) {
                    return bad(line, after_end(ns, end));
                }
                if self.latest_other.is_none_or(|l| l.ns < ns) {
                    self.latest_other = Some(this);
                }
            }
        }
        Ok(())
    }

    /// The stamps so far and this one lie within [`LOG_SPAN_NS_MAX`].
    fn check_span(&mut self, this: Seen) -> Result<(), BadStamp> {
        let (earliest, latest) = match (self.earliest, self.latest) {
            (Some(e), Some(l)) => (e, l),
            _ => {
                (self.earliest, self.latest) = (Some(this), Some(this));
                return Ok(());
            }
        };
        let far = if this.ns > earliest.ns && this.ns - earliest.ns > LOG_SPAN_NS_MAX {
            Some(earliest)
        } else if this.ns < latest.ns && latest.ns - this.ns > LOG_SPAN_NS_MAX {
            Some(latest)
        } else {
            None
        };
        if let Some(other) = far {
            let days = this.ns.abs_diff(other.ns) as f64 / 86_400e9;
            return Err(BadStamp {
                line: this.line,
                what: format!(
                    "timestamp_ns {} lies {days:.1} days from line {}'s {}, more than a run's \
                     log can span ({LOG_SPAN_DAYS_MAX} days, LOG_SPAN_DAYS_MAX): one of the two \
                     stamps is damaged",
                    this.ns, other.line, other.ns
                ),
            });
        }
        if this.ns < earliest.ns {
            self.earliest = Some(this);
        }
        if this.ns > latest.ns {
            self.latest = Some(this);
        }
        Ok(())
    }
}

fn after_end(ns: u64, end: Seen) -> String {
    format!(
        "timestamp_ns {ns} is after session.ended's {} (line {}): a run stamps nothing after it \
         ends, so the stamp is damaged",
        end.ns, end.line
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use StampKind::{Other, SessionEnded, SessionStarted};

    /// Feeds `stamps` in order; the first refusal's line and message.
    fn first_bad(stamps: &[(StampKind, u64)]) -> Option<(u64, String)> {
        let mut check = StampCheck::default();
        stamps.iter().zip(1..).find_map(|(&(kind, ns), line)| {
            check.check(kind, ns, line).err().map(|e| (e.line, e.what))
        })
    }

    const T: u64 = 5_000_000_000_000;

    #[test]
    fn a_run_s_stamps_pass_in_any_order_between_its_start_and_end() {
        let log = [
            (SessionStarted, T),
            (Other, T + 400),
            (Other, T + 900),
            (Other, T + 500),
            (Other, T + 3 * 86_400_000_000_000),
            (SessionEnded, T + 3 * 86_400_000_000_000),
        ];
        assert_eq!(first_bad(&log), None);
        assert_eq!(first_bad(&[(Other, 0), (Other, 1)]), None, "a log without session marks");
    }

    #[test]
    fn a_stamp_past_any_monotonic_clock_is_refused_naming_it() {
        let (line, what) = first_bad(&[(SessionStarted, T), (Other, u64::MAX)]).unwrap();
        assert_eq!(line, 2);
        assert!(what.contains("timestamp_ns 18446744073709551615 is past any"), "{what}");
        let all_max = [(SessionStarted, u64::MAX), (Other, u64::MAX)];
        assert_eq!(first_bad(&all_max).unwrap().0, 1, "all stamps at u64::MAX: the first line");
        assert_eq!(first_bad(&[(Other, STAMP_NS_MAX)]), None);
    }

    #[test]
    fn a_stamp_further_than_the_span_limit_from_the_others_is_refused_naming_both() {
        let ten_years = 10 * 365 * 86_400_000_000_000;
        let log = [(SessionStarted, T), (Other, T + 10), (Other, T + ten_years)];
        let (line, what) = first_bad(&log).unwrap();
        assert_eq!(line, 3);
        assert!(what.contains(&format!("timestamp_ns {} lies 3650.0 days", T + ten_years)));
        assert!(what.contains(&format!("from line 1's {T}")) && what.contains("7 days"), "{what}");
        // Earlier than the latest by more than the limit (no session mark to order it by).
        let log = [(Other, T + ten_years), (Other, T)];
        let (line, what) = first_bad(&log).unwrap();
        assert_eq!(line, 2);
        assert!(what.contains(&format!("from line 1's {}", T + ten_years)), "{what}");
        let edge = [(Other, T), (Other, T + LOG_SPAN_NS_MAX)];
        assert_eq!(first_bad(&edge), None, "exactly the limit is a run's");
    }

    #[test]
    fn stamps_out_of_order_with_the_session_s_start_or_end_are_refused_naming_the_line() {
        let (line, what) = first_bad(&[(SessionStarted, T), (Other, T - 1)]).unwrap();
        assert_eq!(line, 2);
        assert!(what.contains(&format!("before session.started's {T} (line 1)")), "{what}");
        // A line before session.started stamped before it too.
        let (line, what) = first_bad(&[(Other, T - 5), (SessionStarted, T)]).unwrap();
        assert_eq!(line, 1, "{what}");
        assert_eq!(first_bad(&[(Other, T + 5), (SessionStarted, T)]), None, "a late mark only");
        // A completion stamped a day late, before session.ended is read and after.
        let day = 86_400_000_000_000;
        let log = [(SessionStarted, T), (Other, T + day), (Other, T + 9), (SessionEnded, T + 10)];
        let (line, what) = first_bad(&log).unwrap();
        assert_eq!(line, 2);
        assert!(what.contains(&format!("after session.ended's {} (line 4)", T + 10)), "{what}");
        let log = [(SessionStarted, T), (SessionEnded, T + 10), (Other, T + 11)];
        assert_eq!(first_bad(&log).unwrap().0, 3);
    }
}
