//! Judges: a judge grades one output of a row's run against a rubric. It is itself a small
//! OpenProse program (one session of an agent of its own, without tools), run durably in the
//! same store and through the same driver as the rows, so its requests are journaled, kept
//! in the memo and counted apart.

use prosec::suite::eval::Judge;

/// The judge's program: its agent (with `judge`'s model, if it names one) grades the
/// `subject` input against the `rubric` input and answers a score and a reason.
pub fn program(judge: &Judge) -> String {
    let (lo, hi) = judge.bounds();
    let model = match &judge.model {
        // An alias as the language writes it, else a provider's id, quoted.
        Some(m) if matches!(m.as_str(), "sonnet" | "opus" | "haiku") => format!("  model: {m}\n"),
        Some(m) => format!("  model: \"{}\"\n", escape(m)),
        None => String::new(),
    };
    format!(
        "input rubric: \"What a good output is\"\n\
         input subject: \"The output to grade\"\n\
         \n\
         agent judge:\n\
         {model}  prompt: \"You grade one output against a rubric. Reply with one JSON object and nothing else: \\{{\\\"score\\\": NUMBER, \\\"reason\\\": \\\"ONE SENTENCE\\\"}}.\"\n\
         \x20 tools: none\n\
         \n\
         output verdict = session: judge\n\
         \x20 prompt: \"Rubric: {{rubric}}\\n\\nGive a score from {lo} to {hi}.\\n\\nThe output to grade:\\n{{subject}}\"\n"
    )
}

/// `text` as it may stand inside a double-quoted string of the language.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('{', "\\{")
}

/// The score and reason in a judge's answer: the JSON object it was asked for, or else the
/// first number in it within the scale (`(lo, hi)`), with the answer as the reason.
pub fn verdict(answer: &str, (lo, hi): (f64, f64)) -> Option<(f64, String)> {
    let in_scale = |n: f64| n.is_finite() && n >= lo && n <= hi;
    if let (Some(start), Some(end)) = (answer.find('{'), answer.rfind('}')) {
        if start < end {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&answer[start..=end]) {
                let score = match &v["score"] {
                    serde_json::Value::Number(n) => n.as_f64(),
                    serde_json::Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                };
                if let Some(s) = score.filter(|s| in_scale(*s)) {
                    let reason = v["reason"].as_str().unwrap_or("").trim().to_string();
                    return Some((s, reason));
                }
            }
        }
    }
    let number = answer
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.trim_matches('.').parse::<f64>().ok())
        .find(|n| in_scale(*n))?;
    let reason: String = answer.trim().chars().take(300).collect();
    Some((number, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(model: Option<&str>) -> Judge {
        let text =
            format!(
            "dataset = \"d.jsonl\"\n[[judge]]\nname = \"j\"\noutput = \"o\"\nrubric = \"r\"\n{}",
            model.map(|m| format!("model = '{m}'\n")).unwrap_or_default()
        );
        prosec::suite::eval::parse(&text)
            .expect("eval")
            .judges
            .remove(0)
    }

    #[test]
    fn the_judges_program_compiles_with_and_without_a_model() {
        for j in [
            judge(None),
            judge(Some("sonnet")),
            judge(Some("gpt-4o \"mini\"")),
        ] {
            let source = program(&j);
            let mut c = prosec::compile::Compilation::new(Default::default());
            c.add_source(std::path::Path::new("judge.prose"), &source);
            assert_eq!(c.error_count(), 0, "{source}\n{:?}", c.diagnostics);
        }
    }

    #[test]
    fn a_score_is_read_from_json_or_the_first_number_in_scale() {
        assert_eq!(
            verdict(
                "```json\n{\"score\": 4, \"reason\": \"Close.\"}\n```",
                (1.0, 5.0)
            ),
            Some((4.0, "Close.".into()))
        );
        assert_eq!(
            verdict("{\"score\": \"3\"}", (1.0, 5.0)).map(|v| v.0),
            Some(3.0)
        );
        assert_eq!(
            verdict("I'd give it 9, no, 2 out of 5.", (1.0, 5.0)).map(|v| v.0),
            Some(2.0)
        );
        assert_eq!(verdict("no idea", (1.0, 5.0)), None);
        assert_eq!(verdict("{\"score\": 7}", (1.0, 5.0)), None);
    }
}
