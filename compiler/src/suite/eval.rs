//! The eval file: `NAME.eval.toml`, a program run over a dataset and scored.
//!
//! ```toml
//! program = "summarize.prose"
//! dataset = "cities.jsonl"              # JSON lines or CSV (super::dataset)
//! tries = 1                             # runs of each row
//!
//! [expect]                              # checks of every row's run (the test file's)
//! outputs.summary = { contains = "{expected.city}" }
//!
//! [[judge]]                             # a session that grades an output
//! name = "faithful"
//! output = "summary"
//! rubric = "Does the summary say only what the text says? 1: invents facts, 5: none."
//! scale = { min = 1, max = 5 }          # the default
//! pass = 4                              # a row passes at 4 or above (default: the top)
//! model = "sonnet"                      # default: the run's own model
//! ```
//!
//! Every check scores 1 or 0; a judge's score is mapped onto 0 to 1 over its scale. A row
//! passes when every check holds and every judge gives at least its `pass`.

use super::spec::{Expect, Range};
use serde::Deserialize;
use toml::Spanned;

/// An eval file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalFile {
    /// The program, relative to the file (default: the `.prose` file of the same name).
    pub program: Option<Spanned<String>>,
    /// The dataset, relative to the file: `.jsonl` or `.csv`.
    pub dataset: Spanned<String>,
    /// Runs of each row (to measure how often a model gets it right; default 1).
    #[serde(default = "one")]
    pub tries: u32,
    /// Checks of every row's run; texts may name the row's values (`{expected.city}`).
    #[serde(default)]
    pub expect: Expect,
    /// The judges.
    #[serde(rename = "judge", default)]
    pub judges: Vec<Judge>,
}

fn one() -> u32 {
    1
}

/// A judge: a session with an agent of its own that grades one output of each row's run
/// against a rubric, answering a score and a reason.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Judge {
    /// The score's name in reports.
    pub name: Spanned<String>,
    /// The output it grades.
    pub output: Spanned<String>,
    /// What a good output is, and what each score means; may name the row's values.
    pub rubric: String,
    /// The scores it gives (default 1 to 5).
    pub scale: Option<Range>,
    /// The least score that passes (default: the top of the scale).
    pub pass: Option<f64>,
    /// The model it asks (an alias or a provider's id; default: the run's).
    pub model: Option<String>,
}

impl Judge {
    /// The scale, `(min, max)`.
    pub fn bounds(&self) -> (f64, f64) {
        let s = self.scale.unwrap_or(Range {
            min: Some(1.0),
            max: Some(5.0),
        });
        (s.min.unwrap_or(1.0), s.max.unwrap_or(5.0))
    }

    /// `score` on 0 to 1 over the scale.
    pub fn normalized(&self, score: f64) -> f64 {
        let (lo, hi) = self.bounds();
        if hi <= lo {
            return 0.0;
        }
        ((score - lo) / (hi - lo)).clamp(0.0, 1.0)
    }

    /// Whether `score` passes.
    pub fn passes(&self, score: f64) -> bool {
        score >= self.pass.unwrap_or(self.bounds().1)
    }
}

/// An eval file read from `text`, or TOML's error with the byte range it points at.
pub fn parse(text: &str) -> Result<EvalFile, (String, Option<std::ops::Range<usize>>)> {
    toml::from_str(text).map_err(|e: toml::de::Error| (e.message().to_string(), e.span()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eval_file_reads_with_its_judges() {
        let file = parse(
            "dataset = \"rows.jsonl\"\ntries = 3\n[expect]\noutputs.summary = { contains = \"{expected.city}\" }\n[[judge]]\nname = \"faithful\"\noutput = \"summary\"\nrubric = \"1 to 5\"\npass = 4\n",
        )
        .expect("reads");
        assert_eq!(file.tries, 3);
        let j = &file.judges[0];
        assert_eq!(j.bounds(), (1.0, 5.0));
        assert_eq!(j.normalized(4.0), 0.75);
        assert!(j.passes(4.0) && !j.passes(3.5));
    }
}
