//! The scheduler's own figures, read from its Prometheus text page: counters summed over the
//! label sets a filter admits, and quantiles of a histogram as Prometheus'
//! `histogram_quantile` estimates them (linear within the bucket).

/// One sample line: its metric name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The sample lines of a metrics page (comments and lines that do not parse are left out).
pub fn parse(page: &str) -> Vec<Sample> {
    page.lines().filter(|l| !l.starts_with('#')).filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (head, value) = line.trim().rsplit_once(' ')?;
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let (name, labels) = match head.split_once('{') {
        None => (head.to_string(), Vec::new()),
        Some((name, rest)) => (name.to_string(), parse_labels(rest.strip_suffix('}')?)?),
    };
    Some(Sample { name, labels, value })
}

/// `a="x",b="y \"z\""`: values may hold escaped quotes and commas.
fn parse_labels(mut s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => value.push(chars.next()?.1),
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        out.push((key.trim_start_matches(',').to_string(), value));
        s = rest[end + 1..].trim_start_matches(',');
    }
    Some(out)
}

/// The sum of the samples named `name` whose labels `keep` admits.
pub fn sum(samples: &[Sample], name: &str, keep: impl Fn(&Sample) -> bool) -> f64 {
    samples.iter().filter(|s| s.name == name && keep(s)).map(|s| s.value).sum()
}

/// A histogram's cumulative buckets `(le, count)` summed over the label sets `keep` admits,
/// sorted by bound.
pub fn buckets(samples: &[Sample], histogram: &str, keep: impl Fn(&Sample) -> bool) -> Vec<(f64, f64)> {
    let name = format!("{histogram}_bucket");
    let mut by_le: Vec<(f64, f64)> = Vec::new();
    for s in samples.iter().filter(|s| s.name == name && keep(s)) {
        let Some(le) = s.label("le").and_then(|l| if l == "+Inf" { Some(f64::INFINITY) } else { l.parse().ok() })
        else {
            continue;
        };
        match by_le.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += s.value,
            None => by_le.push((le, s.value)),
        }
    }
    by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_le
}

/// The counts of `after` minus those of `before`, bucket by bucket: the observations made
/// between two reads of a page.
pub fn delta(after: &[(f64, f64)], before: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after.iter().map(|(le, c)| (*le, c - before.iter().find(|(b, _)| b == le).map_or(0.0, |(_, c)| *c))).collect()
}

/// The `q` quantile of cumulative buckets, interpolated linearly within the bucket that holds
/// it, as `histogram_quantile` does; the highest finite bound where it falls in `+Inf`.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let within = count - lower.1;
            let share = if within > 0.0 { (rank - lower.1) / within } else { 1.0 };
            return Some(lower.0 + (le - lower.0) * share);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"# HELP scheduler_schedule_attempts_total Number of attempts
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 40
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 3
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="0.01"} 10
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="0.02"} 30
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="+Inf"} 40
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="0.01"} 0
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="0.02"} 0
scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="+Inf"} 0
weird{msg="a \"quoted\", comma"} 1e-3
"#;

    #[test]
    fn counters_sum_over_the_admitted_label_sets() {
        let s = parse(PAGE);
        assert_eq!(sum(&s, "scheduler_schedule_attempts_total", |x| x.label("result") == Some("scheduled")), 40.0);
        assert_eq!(sum(&s, "scheduler_schedule_attempts_total", |_| true), 43.0);
        let weird = s.iter().find(|x| x.name == "weird").unwrap();
        assert_eq!(weird.label("msg"), Some("a \"quoted\", comma"));
        assert_eq!(weird.value, 0.001);
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_as_prometheus_does() {
        let s = parse(PAGE);
        let b = buckets(&s, "scheduler_pod_scheduling_sli_duration_seconds", |_| true);
        assert_eq!(b, vec![(0.01, 10.0), (0.02, 30.0), (f64::INFINITY, 40.0)]);
        // rank 20 of 40: half way through the (0.01, 0.02] bucket's 20 observations.
        assert!((quantile(0.5, &b).unwrap() - 0.015).abs() < 1e-12);
        // rank 4: within the first bucket, from 0.
        assert!((quantile(0.1, &b).unwrap() - 0.004).abs() < 1e-12);
        // rank 39.6 falls in +Inf: the highest finite bound.
        assert_eq!(quantile(0.99, &b), Some(0.02));
        assert_eq!(quantile(0.5, &[]), None);
    }

    #[test]
    fn a_delta_counts_only_what_came_between_two_reads() {
        let before = vec![(0.01, 4.0), (f64::INFINITY, 5.0)];
        let after = vec![(0.01, 10.0), (f64::INFINITY, 15.0)];
        assert_eq!(delta(&after, &before), vec![(0.01, 6.0), (f64::INFINITY, 10.0)]);
    }
}
