//! The figures of one load run, as a human summary and as one JSON line.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use siftd_common::json;

/// Errors of one kind: how many, and the first one's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCount {
    /// How many requests failed this way.
    pub count: u64,
    /// What the first of them said.
    pub example: String,
}

/// Latency percentiles of the answered requests, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Slowest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    /// Nearest-rank percentiles of latencies sorted ascending.
    pub fn of_sorted(sorted_us: &[u64]) -> Latency {
        let sum: u64 = sorted_us.iter().sum();
        Latency {
            p50: percentile(sorted_us, 50),
            p99: percentile(sorted_us, 99),
            max: sorted_us.last().copied().unwrap_or(0),
            mean: if sorted_us.is_empty() { 0.0 } else { sum as f64 / sorted_us.len() as f64 },
        }
    }
}

/// The nearest-rank `pct`th percentile of an ascending slice (0 when empty).
pub fn percentile(sorted: &[u64], pct: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len() as u64;
    // rank = ceil(pct/100 * n), at least 1
    let rank = (pct.min(100) * n).div_ceil(100).max(1);
    let index = usize::try_from(rank - 1).unwrap_or(usize::MAX);
    sorted.get(index).or(sorted.last()).copied().unwrap_or(0)
}

/// Everything one run measured.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The command sent.
    pub command: String,
    /// The daemon's address.
    pub target: String,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests answered and verified.
    pub messages: u64,
    /// Message bytes of the answered requests.
    pub bytes: u64,
    /// Length of the measured window, in seconds.
    pub seconds: f64,
    /// Answers whose `Spam:` header said spam.
    pub spam: u64,
    /// Latency of the answered requests.
    pub latency: Latency,
    /// Failed requests by kind.
    pub errors: BTreeMap<String, ErrorCount>,
}

impl Summary {
    /// Answered messages per second.
    pub fn messages_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.messages as f64 / self.seconds } else { 0.0 }
    }

    /// Answered megabytes (10^6 bytes) of messages per second.
    pub fn megabytes_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 / 1e6 / self.seconds } else { 0.0 }
    }

    /// Failed requests, all kinds.
    pub fn error_total(&self) -> u64 {
        self.errors.values().map(|e| e.count).sum()
    }

    /// A few lines for a person.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} to {} at concurrency {}: {} messages in {:.2} s, {} spam",
            self.command, self.target, self.concurrency, self.messages, self.seconds, self.spam
        );
        let _ = writeln!(out, "  {:.1} messages/s, {:.2} MB/s", self.messages_per_second(), self.megabytes_per_second());
        let l = &self.latency;
        let _ = writeln!(out, "  latency p50 {} us, p99 {} us, max {} us, mean {:.0} us", l.p50, l.p99, l.max, l.mean);
        let _ = writeln!(out, "  errors: {}", self.error_total());
        for (kind, e) in &self.errors {
            let _ = writeln!(out, "    {kind}: {} (first: {})", e.count, e.example);
        }
        out
    }

    /// One line of JSON with every figure, for scripts.
    pub fn json(&self) -> String {
        let mut kinds = String::new();
        for (i, (kind, e)) in self.errors.iter().enumerate() {
            if i > 0 {
                kinds.push(',');
            }
            let _ = write!(kinds, "{}:{{\"count\":{},\"example\":{}}}", quote(kind), e.count, quote(&e.example));
        }
        let l = &self.latency;
        format!(
            concat!(
                "{{\"command\":{},\"target\":{},\"concurrency\":{},\"messages\":{},\"bytes\":{},",
                "\"seconds\":{:.6},\"messages_per_s\":{:.3},\"mb_per_s\":{:.4},\"spam\":{},",
                "\"latency_us\":{{\"p50\":{},\"p99\":{},\"max\":{},\"mean\":{:.1}}},",
                "\"errors\":{},\"error_kinds\":{{{}}}}}"
            ),
            quote(&self.command),
            quote(&self.target),
            self.concurrency,
            self.messages,
            self.bytes,
            self.seconds,
            self.messages_per_second(),
            self.megabytes_per_second(),
            self.spam,
            l.p50,
            l.p99,
            l.max,
            l.mean,
            self.error_total(),
            kinds
        )
    }
}

/// A JSON string literal, escaped as siftd's `--json` output escapes it.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    json::push_str(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let hundred: Vec<u64> = (1..=100).collect();
        let cases: &[(&[u64], u64, u64)] = &[
            (&[], 50, 0),
            (&[7], 50, 7),
            (&[7], 99, 7),
            (&[1, 2], 50, 1),
            (&[1, 2], 99, 2),
            (&hundred, 50, 50),
            (&hundred, 99, 99),
            (&hundred, 100, 100),
            (&hundred, 0, 1),
        ];
        for (values, pct, want) in cases {
            assert_eq!(percentile(values, *pct), *want, "p{pct} of {} values", values.len());
        }
        let l = Latency::of_sorted(&[10, 20, 30, 1000]);
        assert_eq!((l.p50, l.p99, l.max), (20, 1000, 1000));
        assert!((l.mean - 265.0).abs() < 1e-9);
    }

    #[test]
    fn quotes_json_strings() {
        for (s, want) in [("plain", "\"plain\""), ("a\"b\\c", "\"a\\\"b\\\\c\""), ("l1\nl2\t\r", "\"l1\\nl2\\t\\r\""), ("\u{1}", "\"\\u0001\""), ("é", "\"é\"")] {
            assert_eq!(quote(s), want);
        }
    }

    #[test]
    fn json_line_carries_rates_and_errors() {
        let mut s = Summary {
            command: "CHECK".into(),
            target: "127.0.0.1:783".into(),
            concurrency: 4,
            messages: 200,
            bytes: 4_000_000,
            seconds: 2.0,
            spam: 50,
            latency: Latency { p50: 100, p99: 900, max: 1500, mean: 120.0 },
            errors: BTreeMap::new(),
        };
        s.errors.insert("connect".into(), ErrorCount { count: 3, example: "refused \"x\"".into() });
        let json = s.json();
        assert_eq!(
            json,
            concat!(
                "{\"command\":\"CHECK\",\"target\":\"127.0.0.1:783\",\"concurrency\":4,\"messages\":200,\"bytes\":4000000,",
                "\"seconds\":2.000000,\"messages_per_s\":100.000,\"mb_per_s\":2.0000,\"spam\":50,",
                "\"latency_us\":{\"p50\":100,\"p99\":900,\"max\":1500,\"mean\":120.0},",
                "\"errors\":3,\"error_kinds\":{\"connect\":{\"count\":3,\"example\":\"refused \\\"x\\\"\"}}}"
            )
        );
        assert!(s.human().contains("100.0 messages/s, 2.00 MB/s"));
        let empty = Summary::default();
        assert_eq!((empty.messages_per_second(), empty.megabytes_per_second()), (0.0, 0.0));
    }
}
