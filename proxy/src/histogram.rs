//! A latency histogram in the Prometheus text format: fixed buckets of atomics, so
//! that an observation is a few relaxed adds and p50 / p99 can be computed from
//! `_bucket` / `_sum` / `_count` by whoever scrapes them
//! (`histogram_quantile(0.99, rate(cutpoint_proxy_added_seconds_bucket[5m]))`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets, in microseconds: from 25 µs (a decision read from
/// its session) to a minute (a model's first token); `+Inf` after them.
pub(crate) const BUCKETS_MICROS: [u64; 20] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// Observations of one duration, by bucket. Every method is lock-free.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative), the last one `+Inf`.
    counts: [AtomicU64; BUCKETS_MICROS.len() + 1],
    /// Sum of the observations, in nanoseconds.
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Counts one observation. **O(log buckets)**.
    pub fn observe(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let at = BUCKETS_MICROS.partition_point(|&b| b < micros);
        self.counts[at].fetch_add(1, Relaxed);
        self.sum_nanos
            .fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// Observations so far. **O(1)**.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Their sum. **O(1)**.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos.load(Relaxed))
    }

    /// The upper bound of the bucket holding the `q`-quantile observation (what
    /// Prometheus' `histogram_quantile` interpolates within); `None` with no
    /// observation, `Duration::MAX` when it is past the last bound. **O(buckets)**.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        // The rank of the quantile observation, 1-based, at least 1.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(
                    BUCKETS_MICROS
                        .get(i)
                        .map_or(Duration::MAX, |&b| Duration::from_micros(b)),
                );
            }
        }
        Some(Duration::MAX)
    }

    /// Writes it as `name` with `labels` (`key="value"` pairs, comma-separated, or
    /// empty): cumulative `_bucket` lines, `_sum` in seconds, `_count`. The `# HELP`
    /// and `# TYPE` lines are the caller's (one per name). **O(buckets)**.
    pub(crate) fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Relaxed);
            let le = match BUCKETS_MICROS.get(i) {
                Some(&b) => format!("{}", b as f64 / 1e6),
                None => "+Inf".to_owned(),
            };
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(
            out,
            "{name}_sum{braces} {}",
            self.sum_nanos.load(Relaxed) as f64 / 1e9
        );
        let _ = writeln!(out, "{name}_count{braces} {}", self.count.load(Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cumulative buckets ending in `+Inf` at the count, the sum in seconds, and the
    /// quantiles the buckets that hold them.
    #[test]
    fn buckets_are_cumulative_and_quantiles_fall_in_them() {
        let h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        for micros in [10, 30, 30, 400, 2_000, 90_000_000] {
            h.observe(Duration::from_micros(micros));
        }
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "path=\"a\"");
        assert!(out.contains("x_seconds_bucket{path=\"a\",le=\"0.000025\"} 1\n"));
        assert!(out.contains("x_seconds_bucket{path=\"a\",le=\"0.00005\"} 3\n"));
        assert!(out.contains("x_seconds_bucket{path=\"a\",le=\"0.0025\"} 5\n"));
        assert!(out.contains("x_seconds_bucket{path=\"a\",le=\"60\"} 5\n"));
        assert!(out.contains("x_seconds_bucket{path=\"a\",le=\"+Inf\"} 6\n"));
        assert!(out.contains("x_seconds_count{path=\"a\"} 6\n"));
        assert!(
            out.contains("x_seconds_sum{path=\"a\"} 90.00247\n"),
            "{out}"
        );
        assert_eq!(h.quantile(0.5), Some(Duration::from_micros(50)));
        assert_eq!(h.quantile(0.8), Some(Duration::from_micros(2_500)));
        assert_eq!(h.quantile(1.0), Some(Duration::MAX));
        let mut plain = String::new();
        h.render(&mut plain, "y", "");
        assert!(plain.contains("y_bucket{le=\"+Inf\"} 6\n") && plain.contains("y_count 6\n"));
    }
}
