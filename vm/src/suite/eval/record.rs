//! What an eval keeps (its record, in the store beside the runs it scored) and what it
//! says of them in all: each score's mean and spread, the pass rate, the cost (judges'
//! apart) and the times.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// An eval: a program over a dataset, once per model, each row's runs scored.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EvalRecord {
    /// Its id (the form of a run's: when it started, and six letters).
    pub id: String,
    /// When it started (UTC, ISO 8601).
    pub started: String,
    /// When it ended, once every row is scored.
    pub finished: Option<String>,
    /// The eval file.
    pub file: PathBuf,
    /// The program's name.
    pub program: String,
    /// The SHA-256 of the artifact run.
    pub artifact_sha256: String,
    /// The dataset.
    pub dataset: PathBuf,
    /// Rows in the dataset.
    pub rows: usize,
    /// Runs of each row.
    pub tries: u32,
    /// The driver, in words.
    pub driver: String,
    /// The scores every row gets, in order: the checks, then the judges.
    pub scores: Vec<String>,
    /// One set of results per model.
    pub variants: Vec<Variant>,
}

/// The results of one model.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Variant {
    /// The model (none: the driver's own).
    pub model: Option<String>,
    /// Each row's try, in the dataset's order.
    pub results: Vec<RowResult>,
}

/// One try of one row.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RowResult {
    /// The row's index in the dataset, from 0.
    pub row: usize,
    /// The row's name.
    pub name: String,
    /// Which try, from 0.
    pub try_index: u32,
    /// The run, once started.
    pub run: Option<String>,
    /// How it ended (`finished`, `failed`, ...); `pending` until it ran.
    pub status: String,
    /// Its error, when it did not finish.
    pub error: Option<String>,
    /// The row's inputs.
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The run's outputs.
    pub outputs: serde_json::Map<String, serde_json::Value>,
    /// Its scores, in the record's order.
    pub scores: Vec<Score>,
    /// Whether every check held and every judge passed it.
    pub passed: bool,
    /// What its run cost, where known.
    pub cost: Option<f64>,
    /// What its judges cost, where known.
    pub judge_cost: Option<f64>,
    /// Tokens in and out.
    pub tokens: (u64, u64),
    /// Model requests answered from the memo, and sent.
    pub memo: (u64, u64),
    /// Seconds its run took.
    pub seconds: f64,
    /// Milliseconds to its first streamed token.
    pub first_token_ms: Option<u64>,
    /// Each request's milliseconds.
    pub latencies: Vec<u64>,
    /// Whether it has been scored (a try an interrupted eval did not reach has not).
    pub scored: bool,
}

/// One score of a row's try.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Score {
    /// The score's name (a check's `what`, or a judge's name).
    pub name: String,
    /// From 0 to 1.
    pub value: f64,
    /// What a judge answered, on its own scale.
    pub raw: Option<f64>,
    /// Why: the check's first difference, or the judge's reason.
    pub reason: Option<String>,
    /// The judge's run.
    pub judge_run: Option<String>,
}

/// What an eval's results say in all.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Each score's mean and spread (standard deviation), by name, in the record's order.
    pub scores: Vec<(String, f64, f64)>,
    /// Tries passed, of those scored.
    pub passed: usize,
    /// Tries scored.
    pub scored: usize,
    /// The runs' cost, where known.
    pub cost: f64,
    /// The judges' cost.
    pub judge_cost: f64,
    /// Median milliseconds to the first streamed token.
    pub first_token_p50: Option<u64>,
    /// Median and 95th percentile of the requests' milliseconds.
    pub latency_p50: Option<u64>,
    /// 95th percentile of the requests' milliseconds.
    pub latency_p95: Option<u64>,
    /// Seconds of run time, summed.
    pub seconds: f64,
}

impl Summary {
    /// The pass rate, from 0 to 1.
    pub fn pass_rate(&self) -> f64 {
        if self.scored == 0 {
            0.0
        } else {
            self.passed as f64 / self.scored as f64
        }
    }

    /// The mean of score `name`.
    pub fn mean(&self, name: &str) -> Option<f64> {
        self.scores.iter().find(|(n, ..)| n == name).map(|s| s.1)
    }
}

/// The `p`-th percentile (0 to 100) of `values`, by nearest rank.
fn percentile(values: &mut [u64], p: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

impl Variant {
    /// What its scored results say in all, for the score names `names`.
    pub fn summary(&self, names: &[String]) -> Summary {
        let scored: Vec<&RowResult> = self.results.iter().filter(|r| r.scored).collect();
        let mut by_name: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in &scored {
            for s in &r.scores {
                by_name.entry(&s.name).or_default().push(s.value);
            }
        }
        let scores = names
            .iter()
            .filter_map(|n| {
                let v = by_name.get(n.as_str())?;
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
                Some((n.clone(), mean, var.sqrt()))
            })
            .collect();
        let mut latencies: Vec<u64> = scored.iter().flat_map(|r| r.latencies.clone()).collect();
        let mut first: Vec<u64> = scored.iter().filter_map(|r| r.first_token_ms).collect();
        Summary {
            scores,
            passed: scored.iter().filter(|r| r.passed).count(),
            scored: scored.len(),
            // `+ 0.0`: an empty sum of floats is -0, which would print as "-0".
            cost: scored.iter().filter_map(|r| r.cost).sum::<f64>() + 0.0,
            judge_cost: scored.iter().filter_map(|r| r.judge_cost).sum::<f64>() + 0.0,
            first_token_p50: percentile(&mut first, 50.0),
            latency_p50: percentile(&mut latencies.clone(), 50.0),
            latency_p95: percentile(&mut latencies, 95.0),
            seconds: scored.iter().map(|r| r.seconds).sum(),
        }
    }
}

/// A score that dropped from a baseline by more than allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct Drop {
    /// The model it is about (none: the driver's own).
    pub model: Option<String>,
    /// The score (or `pass rate`).
    pub name: String,
    /// What it was.
    pub before: f64,
    /// What it is.
    pub now: f64,
}

/// Every score of `now` (and its pass rate) that dropped by more than `threshold` from
/// `baseline`, model by model (a model the baseline did not run is not compared).
pub fn drops(baseline: &EvalRecord, now: &EvalRecord, threshold: f64) -> Vec<Drop> {
    let mut found = Vec::new();
    for v in &now.variants {
        let Some(b) = baseline.variants.iter().find(|b| b.model == v.model) else {
            continue;
        };
        let (was, is) = (b.summary(&baseline.scores), v.summary(&now.scores));
        let mut pairs: Vec<(String, f64, f64)> = is
            .scores
            .iter()
            .filter_map(|(n, mean, _)| Some((n.clone(), was.mean(n)?, *mean)))
            .collect();
        pairs.push(("pass rate".into(), was.pass_rate(), is.pass_rate()));
        for (name, before, now) in pairs {
            if before - now > threshold + 1e-9 {
                found.push(Drop {
                    model: v.model.clone(),
                    name,
                    before,
                    now,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(scores: &[(&str, f64)], passed: bool, latency: u64) -> RowResult {
        RowResult {
            scores: scores
                .iter()
                .map(|(n, v)| Score {
                    name: n.to_string(),
                    value: *v,
                    ..Score::default()
                })
                .collect(),
            passed,
            scored: true,
            cost: Some(0.01),
            latencies: vec![latency],
            ..RowResult::default()
        }
    }

    #[test]
    fn a_summary_has_means_spreads_rates_and_percentiles() {
        let v = Variant {
            model: None,
            results: vec![
                result(&[("faithful", 1.0)], true, 100),
                result(&[("faithful", 0.5)], false, 300),
                RowResult::default(),
            ],
        };
        let s = v.summary(&["faithful".into()]);
        assert_eq!(s.scored, 2);
        assert_eq!(s.scores, vec![("faithful".into(), 0.75, 0.25)]);
        assert_eq!(s.pass_rate(), 0.5);
        assert_eq!((s.latency_p50, s.latency_p95), (Some(100), Some(300)));
        assert!((s.cost - 0.02).abs() < 1e-12);
    }

    #[test]
    fn a_drop_beyond_the_threshold_is_found_model_by_model() {
        let record = |v: f64, passed: bool| EvalRecord {
            scores: vec!["faithful".into()],
            variants: vec![Variant {
                model: Some("m".into()),
                results: vec![result(&[("faithful", v)], passed, 1)],
            }],
            ..EvalRecord::default()
        };
        assert!(drops(&record(0.8, true), &record(0.78, true), 0.05).is_empty());
        let d = drops(&record(0.8, true), &record(0.5, false), 0.05);
        let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["faithful", "pass rate"]);
    }
}
