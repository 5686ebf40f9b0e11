//! Pool and message statistics, fed by the policy; written as Prometheus text or one log line.

use core::fmt;

use super::record::{Record, RecordKind};
use super::table::StateCounts;

/// Upper bounds of the scan-time histogram buckets, µs (1 ms to 10 s).
pub const SCAN_BUCKETS_US: [u32; 12] =
    [1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000];

/// The same bounds as Prometheus `le` labels, seconds.
const SCAN_BUCKET_LABELS: [&str; 12] =
    ["0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"];

/// Buckets including the last, unbounded one.
pub const SCAN_BUCKET_COUNT: usize = SCAN_BUCKETS_US.len() + 1;

/// Counters since the master started. All arithmetic saturates: a lying child can
/// skew figures but not crash the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stats {
    /// Messages judged ham.
    pub ham: u64,
    /// Messages judged spam.
    pub spam: u64,
    /// Connections that ended without a verdict.
    pub no_verdict: u64,
    /// Bytes of scanned messages.
    pub bytes: u64,
    /// Sum of scan times, µs.
    pub scan_us_sum: u64,
    /// Scan times per bucket (not cumulative); bucket `i` holds times up to
    /// `SCAN_BUCKETS_US[i]`, the last one everything longer.
    pub scan_buckets: [u64; SCAN_BUCKET_COUNT],
    /// Children per state, as of the last event.
    pub children: StateCounts,
    /// Children spawned (reported `Spawned`).
    pub spawned: u64,
    /// Forks that failed.
    pub spawn_failures: u64,
    /// Retire orders given (too many idle, max connections, reload, shutdown).
    pub retired: u64,
    /// Kill orders given (timeout, bad back-channel).
    pub killed: u64,
    /// Children reaped.
    pub exited: u64,
    /// Children that exited without being told to (crash, outside signal).
    pub crashed: u64,
    /// Accept orders given.
    pub accept_orders: u64,
    /// Connections that had to wait: no idle child, or `max_busy` children serving.
    pub waits: u64,
    /// Reloads handled.
    pub reloads: u64,
    /// Records that failed to decode or named another pid.
    pub bad_records: u64,
    /// Records that did not fit the child's state (e.g. an accept nobody ordered).
    pub protocol_errors: u64,
    /// Records whose sequence number skipped.
    pub seq_gaps: u64,
}

impl Stats {
    /// Counts the figures of a `Served` or `NoVerdict` record.
    pub fn count_record(&mut self, record: &Record) {
        match record.kind {
            RecordKind::Served => {
                if record.spam {
                    self.spam = self.spam.saturating_add(1);
                } else {
                    self.ham = self.ham.saturating_add(1);
                }
                self.bytes = self.bytes.saturating_add(u64::from(record.bytes));
                self.scan_us_sum = self.scan_us_sum.saturating_add(u64::from(record.scan_us));
                let bucket =
                    SCAN_BUCKETS_US.iter().position(|&le| record.scan_us <= le).unwrap_or(SCAN_BUCKETS_US.len());
                if let Some(n) = self.scan_buckets.get_mut(bucket) {
                    *n = n.saturating_add(1);
                }
            }
            RecordKind::NoVerdict => self.no_verdict = self.no_verdict.saturating_add(1),
            RecordKind::Ready | RecordKind::Busy => {}
        }
    }

    /// Messages scanned (ham + spam).
    pub fn messages(&self) -> u64 {
        self.ham.saturating_add(self.spam)
    }

    /// Mean scan time, µs (0 before the first message).
    pub fn mean_scan_us(&self) -> u64 {
        self.scan_us_sum.checked_div(self.messages()).unwrap_or(0)
    }
}

/// Microseconds as seconds with six decimals, without floating point.
struct Seconds(u64);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

/// Microseconds as milliseconds with three decimals.
struct Millis(u64);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1_000, self.0 % 1_000)
    }
}

fn metric_head(out: &mut impl fmt::Write, name: &str, kind: &str, help: &str) -> fmt::Result {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

fn counter(out: &mut impl fmt::Write, name: &str, help: &str, value: u64) -> fmt::Result {
    metric_head(out, name, "counter", help)?;
    writeln!(out, "{name} {value}")
}

/// Writes `stats` in the Prometheus text exposition format (for a textfile collector).
pub fn write_prometheus(stats: &Stats, out: &mut impl fmt::Write) -> fmt::Result {
    metric_head(out, "sift_messages_total", "counter", "Messages scanned, by verdict.")?;
    writeln!(out, "sift_messages_total{{verdict=\"spam\"}} {}", stats.spam)?;
    writeln!(out, "sift_messages_total{{verdict=\"ham\"}} {}", stats.ham)?;
    counter(out, "sift_connections_no_verdict_total", "Connections that ended without a verdict.", stats.no_verdict)?;
    counter(out, "sift_message_bytes_total", "Bytes of scanned messages.", stats.bytes)?;

    metric_head(out, "sift_scan_seconds", "histogram", "Time to parse and scan one message.")?;
    let mut cumulative = 0u64;
    for (label, n) in SCAN_BUCKET_LABELS.iter().zip(stats.scan_buckets.iter()) {
        cumulative = cumulative.saturating_add(*n);
        writeln!(out, "sift_scan_seconds_bucket{{le=\"{label}\"}} {cumulative}")?;
    }
    let total: u64 = stats.scan_buckets.iter().fold(0, |a, n| a.saturating_add(*n));
    writeln!(out, "sift_scan_seconds_bucket{{le=\"+Inf\"}} {total}")?;
    writeln!(out, "sift_scan_seconds_sum {}", Seconds(stats.scan_us_sum))?;
    writeln!(out, "sift_scan_seconds_count {total}")?;

    metric_head(out, "sift_children", "gauge", "Child processes, by state.")?;
    let c = &stats.children;
    for (state, n) in
        [("starting", c.starting), ("idle", c.idle), ("busy", c.busy), ("retiring", c.retiring), ("killed", c.killed)]
    {
        writeln!(out, "sift_children{{state=\"{state}\"}} {n}")?;
    }
    counter(out, "sift_children_spawned_total", "Children forked.", stats.spawned)?;
    counter(out, "sift_children_spawn_failures_total", "Forks that failed.", stats.spawn_failures)?;
    counter(out, "sift_children_retired_total", "Children told to finish and exit.", stats.retired)?;
    counter(out, "sift_children_killed_total", "Children killed (timeout or bad back-channel).", stats.killed)?;
    counter(out, "sift_children_exited_total", "Children reaped.", stats.exited)?;
    counter(out, "sift_children_crashed_total", "Children that exited unbidden.", stats.crashed)?;
    counter(out, "sift_accept_orders_total", "Connections handed to a child.", stats.accept_orders)?;
    counter(out, "sift_connections_waited_total", "Connections that waited: no idle child, or --max-busy children serving.", stats.waits)?;
    counter(out, "sift_reloads_total", "Reloads handled.", stats.reloads)?;
    metric_head(out, "sift_backchannel_errors_total", "counter", "Back-channel records refused or out of place.")?;
    for (kind, n) in
        [("bad_record", stats.bad_records), ("protocol", stats.protocol_errors), ("seq_gap", stats.seq_gaps)]
    {
        writeln!(out, "sift_backchannel_errors_total{{kind=\"{kind}\"}} {n}")?;
    }
    Ok(())
}

/// One line for the log (SIGUSR1).
impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.children;
        write!(
            f,
            "children {} idle {} busy {} starting {} retiring {} killed; \
             messages {} ({} spam, {} ham), {} no verdict, {} bytes, scan mean {} ms; \
             spawned {} retired {} killed {} crashed {}; waits {}; back-channel errors {}",
            c.idle,
            c.busy,
            c.starting,
            c.retiring,
            c.killed,
            self.messages(),
            self.spam,
            self.ham,
            self.no_verdict,
            self.bytes,
            Millis(self.mean_scan_us()),
            self.spawned,
            self.retired,
            self.killed,
            self.crashed,
            self.waits,
            self.bad_records.saturating_add(self.protocol_errors).saturating_add(self.seq_gaps),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Score;
    use alloc::string::{String, ToString};

    #[test]
    fn scan_time_buckets_table() {
        let cases: &[(u32, usize)] = &[
            (0, 0),
            (1_000, 0),
            (1_001, 1),
            (9_999, 2),
            (100_000, 5),
            (1_000_001, 9),
            (10_000_000, 11),
            (10_000_001, 12),
            (u32::MAX, 12),
        ];
        for &(us, bucket) in cases {
            let mut s = Stats::default();
            s.count_record(&Record::served(1, 0, 10, us, Score(0), false));
            assert_eq!(s.scan_buckets.iter().position(|&n| n == 1), Some(bucket), "{us} µs");
        }
    }

    #[test]
    fn verdicts_and_bytes() {
        let mut s = Stats::default();
        s.count_record(&Record::served(1, 0, 1000, 2_000, Score(7_000), true));
        s.count_record(&Record::served(1, 1, 500, 4_000, Score(-1_000), false));
        s.count_record(&Record::served(1, 2, 250, 6_000, Score(0), false));
        s.count_record(&Record::new(RecordKind::NoVerdict, 1, 3));
        s.count_record(&Record::new(RecordKind::Ready, 1, 4));
        assert_eq!((s.spam, s.ham, s.no_verdict, s.bytes, s.messages()), (1, 2, 1, 1750, 3));
        assert_eq!((s.scan_us_sum, s.mean_scan_us()), (12_000, 4_000));
        assert_eq!(Stats::default().mean_scan_us(), 0);
    }

    #[test]
    fn saturates() {
        let mut s = Stats { bytes: u64::MAX - 1, scan_us_sum: u64::MAX, ..Stats::default() };
        s.count_record(&Record::served(1, 0, u32::MAX, u32::MAX, Score(0), true));
        assert_eq!((s.bytes, s.scan_us_sum), (u64::MAX, u64::MAX));
    }

    #[test]
    fn prometheus_text() {
        let mut s = Stats::default();
        s.count_record(&Record::served(1, 0, 1000, 800, Score(7_000), true));
        s.count_record(&Record::served(1, 1, 500, 30_000, Score(0), false));
        s.count_record(&Record::served(1, 2, 500, 20_000_000, Score(0), false));
        s.children = StateCounts { starting: 0, idle: 2, busy: 1, retiring: 0, killed: 0 };
        s.spawned = 3;
        let mut out = String::new();
        assert!(write_prometheus(&s, &mut out).is_ok());
        for line in [
            "# TYPE sift_messages_total counter",
            "sift_messages_total{verdict=\"spam\"} 1",
            "sift_messages_total{verdict=\"ham\"} 2",
            "sift_message_bytes_total 2000",
            "# TYPE sift_scan_seconds histogram",
            "sift_scan_seconds_bucket{le=\"0.001\"} 1",
            "sift_scan_seconds_bucket{le=\"0.025\"} 1",
            "sift_scan_seconds_bucket{le=\"0.05\"} 2",
            "sift_scan_seconds_bucket{le=\"10\"} 2",
            "sift_scan_seconds_bucket{le=\"+Inf\"} 3",
            "sift_scan_seconds_sum 20.030800",
            "sift_scan_seconds_count 3",
            "sift_children{state=\"idle\"} 2",
            "sift_children{state=\"busy\"} 1",
            "sift_children_spawned_total 3",
            "sift_backchannel_errors_total{kind=\"seq_gap\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
        }
        // Every sample line is `name{labels} value` or `name value`.
        for l in out.lines().filter(|l| !l.starts_with('#')) {
            let value = l.rsplit(' ').next().unwrap_or("");
            assert!(!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit() || b == b'.'), "{l}");
        }
    }

    #[test]
    fn log_line() {
        let mut s = Stats::default();
        s.count_record(&Record::served(1, 0, 100, 1_500, Score(0), true));
        s.children.idle = 1;
        let line = s.to_string();
        assert!(line.starts_with("children 1 idle 0 busy"), "{line}");
        assert!(line.contains("messages 1 (1 spam, 0 ham)"), "{line}");
        assert!(line.contains("scan mean 1.500 ms"), "{line}");
        assert!(!line.contains('\n'));
    }
}
