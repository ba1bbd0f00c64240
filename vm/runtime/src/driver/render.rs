//! Requests as text for drivers that talk to something reading text (a command, a model),
//! and strict parsing of the replies to the requests that are not sessions.

use bytecode_spec::Shape;
use prose_machine::protocol::{
    ChooseAsk, ConvertAsk, EvaluateAsk, InputAsk, Labelled, RequestId, SessionAnswer, SessionAsk,
};
use std::fmt::Write as _;

/// A session's task as one text: its label as a title (when it has one), the prompt, then
/// each context value under its label, then the agent's memory when it is resumed; after
/// context or memory the task is said once more, since models answer what they read last.
pub fn session(s: &SessionAsk) -> String {
    let mut out = match &s.label {
        Some(label) => format!("# {label}\n\n{}", s.prompt),
        None => s.prompt.clone(),
    };
    if !s.context.is_empty() {
        out.push_str("\n\n## Context\n");
        labelled(&mut out, &s.context);
    }
    if let Some(memory) = &s.memory {
        let _ = write!(out, "\n## Your memory\n\n{memory}\n");
    }
    if !s.context.is_empty() || s.memory.is_some() {
        let _ = write!(out, "\n## Your task\n\n{}\n", s.prompt);
    }
    out
}

/// A session's answer from a driver whose model keeps no memory of its own: a persistent
/// agent's memory becomes its earlier memory (when resumed) plus a line for this answer.
pub fn answer(id: &RequestId, s: &SessionAsk, text: String) -> SessionAnswer {
    let memory = s.persistent.then(|| {
        let line = format!("- {id}: {}", text.lines().next().unwrap_or_default());
        match &s.memory {
            Some(m) => format!("{m}\n{line}"),
            None => line,
        }
    });
    SessionAnswer { text, memory }
}

/// Each value under its label as a `###` heading.
fn labelled(out: &mut String, values: &[Labelled]) {
    for Labelled { label, value } in values {
        let _ = write!(out, "\n### {label}\n\n{value}\n");
    }
}

/// A discretion condition as a yes/no question: the condition, what it is judged on, then
/// the question again (models answer what they read last).
pub fn evaluate(e: &EvaluateAsk) -> String {
    let mut out = format!("Is this true: {}\n", e.condition);
    if !e.context.is_empty() {
        out.push_str("\n## Context\n");
        labelled(&mut out, &e.context);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Is this true: {}? Answer yes or no first, then give a reason.",
        e.condition
    );
    out
}

/// A choice as a question with numbered options: the criteria, what it is judged on, the
/// options, then how to answer (models answer what they read last).
pub fn choose(c: &ChooseAsk) -> String {
    let mut out = format!("Choose: {}\n", c.criteria);
    if !c.context.is_empty() {
        out.push_str("\n## Context\n");
        labelled(&mut out, &c.context);
    }
    out.push_str("\n## Options\n\n");
    for (i, o) in c.options.iter().enumerate() {
        let _ = writeln!(out, "{}. {o}", i + 1);
    }
    let _ = writeln!(
        out,
        "\nChoose: {}. Reply with the number of one option, nothing else.",
        c.criteria
    );
    out
}

/// An input's question.
pub fn input(i: &InputAsk) -> String {
    format!("{}: {}\n", i.name, i.question)
}

/// A conversion: the text and the shape wanted, as JSON.
pub fn convert(c: &ConvertAsk) -> String {
    let what = match c.shape {
        Shape::List => "a JSON list",
        Shape::Record => "a JSON object",
        Shape::Int => "an integer",
        Shape::Bool => "true or false",
    };
    format!(
        "Rewrite this as {what}, and reply with nothing else.\n\n{}\n",
        c.text
    )
}

/// Text without Markdown decoration: emphasis, code ticks, quotes, heading and quote marks.
fn plain(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '*' | '_' | '`' | '"' | '\u{201c}' | '\u{201d}'))
        .collect::<String>()
        .trim_start_matches(['#', '>', ' ', '-'])
        .trim()
        .to_string()
}

/// `line` without a lead-in such as "Answer:", "Verdict -" or "My choice is".
fn after_lead_in(line: &str) -> &str {
    let lower = line.to_lowercase();
    for lead in [
        "final answer",
        "my answer is",
        "the answer is",
        "answer",
        "verdict",
        "decision",
        "my choice is",
        "i choose",
        "i pick",
        "choice",
        "selected",
    ] {
        if lower.starts_with(lead) {
            return line[lead.len()..].trim_start_matches([':', '-', ' ', '=']);
        }
    }
    line
}

/// The lines worth reading for a short answer: the first, and the last (small models often
/// explain first and answer last), each without decoration or lead-in.
fn answer_lines(reply: &str) -> Vec<String> {
    let lines: Vec<&str> = reply.lines().filter(|l| !plain(l).is_empty()).collect();
    let mut out = Vec::new();
    for l in [lines.first(), lines.last()].into_iter().flatten() {
        let p = plain(after_lead_in(&plain(l)));
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// A verdict: yes/true or no/false as the first word of the reply (after any Markdown and a
/// lead-in such as "Answer:"), or of its last line; replies that say both are not verdicts.
pub fn verdict(reply: &str) -> Option<bool> {
    let verdict_word = |w: &str| match w.to_lowercase().as_str() {
        "yes" | "true" => Some(true),
        "no" | "false" => Some(false),
        _ => None,
    };
    let words = |line: &str| -> Vec<String> {
        line.split(|c: char| !c.is_alphabetic())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let lines = answer_lines(reply);
    let mut found: Vec<bool> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let w = words(line);
        // The first word of the first line; on a short last line ("Actually, no."), any word.
        let v = if i == 0 || w.len() > 6 {
            w.first().and_then(|w| verdict_word(w))
        } else {
            w.iter().find_map(|w| verdict_word(w))
        };
        found.extend(v);
    }
    match found.as_slice() {
        [v] => Some(*v),
        [a, b] if a == b => Some(*a),
        _ => None,
    }
}

/// A choice: an option's 1-based number (`2`, `2.`, `(2)`, `Option 2: ...`) or its label
/// (ignoring case, Markdown and a lead-in such as "My choice is"), read from the reply's first
/// line or its last; a line that names exactly one option's label also counts. Replies that
/// point at two options are not choices.
pub fn choice(reply: &str, options: &[String]) -> Option<usize> {
    let number = |line: &str| -> Option<usize> {
        let l = line.to_lowercase();
        let l = l
            .strip_prefix("option")
            .or_else(|| l.strip_prefix("choice"))
            .unwrap_or(&l)
            .trim_start_matches(['(', '#', ' ']);
        let digits: String = l.chars().take_while(|c| c.is_ascii_digit()).collect();
        let rest = &l[digits.len()..];
        // A number alone, or followed by punctuation and (optionally) the option's text.
        let n: usize = digits.parse().ok()?;
        let ok = rest.is_empty() || rest.starts_with(['.', ')', ':', ' ', '-', ',']);
        // "1 or 2" points at two options.
        let another = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|d| d.parse::<usize>().ok())
            .any(|m| m != n && (1..=options.len()).contains(&m));
        (ok && !another && (1..=options.len()).contains(&n)).then(|| n - 1)
    };
    let label = |line: &str| -> Option<usize> {
        let l = line.trim_end_matches(['.', '!']).trim();
        if let Some(i) = options
            .iter()
            .position(|o| o.trim().eq_ignore_ascii_case(l))
        {
            return Some(i);
        }
        let lower = line.to_lowercase();
        let named: Vec<usize> = options
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                let o = o.trim().to_lowercase();
                !o.is_empty() && contains_word(&lower, &o)
            })
            .map(|(i, _)| i)
            .collect();
        match named.as_slice() {
            [i] => Some(*i),
            _ => None,
        }
    };
    let mut found: Vec<usize> = answer_lines(reply)
        .iter()
        .filter_map(|l| number(l).or_else(|| label(l)))
        .collect();
    found.dedup();
    match found.as_slice() {
        [i] => Some(*i),
        _ => None,
    }
}

/// Whether `needle` occurs in `hay` with no letter or digit right before or after it.
fn contains_word(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(at, _)| {
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_read_the_first_word() {
        assert_eq!(verdict("Yes, because the tests pass"), Some(true));
        assert_eq!(verdict("  true\n"), Some(true));
        assert_eq!(verdict("NO: it is not"), Some(false));
        assert_eq!(verdict("false"), Some(false));
        assert_eq!(verdict("maybe"), None);
        assert_eq!(verdict("yesterday"), None);
        assert_eq!(verdict(""), None);
    }

    #[test]
    fn persistent_agents_remember_a_line_per_answer() {
        let mut s = SessionAsk {
            resume: true,
            agent: Some("captain".into()),
            label: None,
            prompt: "Review".into(),
            system: None,
            model: None,
            context: vec![],
            permissions: vec![],
            skills: vec![],
            tools: Default::default(),
            agent_tools: None,
            persistent: true,
            memory: Some("- 0:0: earlier".into()),
            retry: 0,
            backoff: bytecode_spec::Backoff::None,
        };
        let id: RequestId = "0:3".parse().expect("id");
        let a = answer(&id, &s, "Approved.\nDetails follow.".into());
        assert_eq!(
            a.memory.as_deref(),
            Some("- 0:0: earlier\n- 0:3: Approved.")
        );
        s.memory = None;
        assert_eq!(
            answer(&id, &s, "Fresh".into()).memory.as_deref(),
            Some("- 0:3: Fresh")
        );
        s.persistent = false;
        assert_eq!(answer(&id, &s, "x".into()).memory, None);
    }

    #[test]
    fn choices_are_labels_or_numbers() {
        let opts = vec!["Ship it".to_string(), "Hold".to_string()];
        assert_eq!(choice("hold\n", &opts), Some(1));
        assert_eq!(choice("1", &opts), Some(0));
        assert_eq!(choice("3", &opts), None);
        assert_eq!(choice("0", &opts), None);
        assert_eq!(choice("neither", &opts), None);
    }

    #[test]
    fn choices_read_the_way_real_models_answer() {
        let opts = vec![
            "Ship it".to_string(),
            "Hold".to_string(),
            "Roll back".to_string(),
        ];
        for (reply, want) in [
            ("**2.**", Some(1)),
            ("2. Hold", Some(1)),
            ("(3)", Some(2)),
            ("Option 2: Hold", Some(1)),
            ("**Option 3** - Roll back the release", Some(2)),
            ("My choice is: Ship it.", Some(0)),
            ("`Hold`", Some(1)),
            (
                "The tests are failing, so shipping is risky.\n\nAnswer: 3",
                Some(2),
            ),
            ("I would hold for now because the canary is red.", Some(1)),
            ("Either ship it or hold, hard to say.", None),
            ("1 or 2", None),
            ("12", None),
            ("", None),
        ] {
            assert_eq!(choice(reply, &opts), want, "{reply:?}");
        }
    }

    #[test]
    fn verdicts_read_the_way_real_models_answer() {
        for (reply, want) in [
            ("**Yes**, the draft covers every point.", Some(true)),
            ("Answer: no", Some(false)),
            ("## Verdict: YES", Some(true)),
            (
                "The draft misses the summary.\n\nFinal answer: No.",
                Some(false),
            ),
            ("Yes.\n...\nActually, no.", None),
            ("It depends on the reader.", None),
        ] {
            assert_eq!(verdict(reply), want, "{reply:?}");
        }
    }

    #[test]
    fn sessions_carry_context_and_memory() {
        let s = SessionAsk {
            resume: true,
            agent: Some("captain".into()),
            label: None,
            prompt: "Review".into(),
            system: None,
            model: None,
            context: vec![Labelled::new("plan", "the plan")],
            permissions: vec![],
            skills: vec![],
            tools: Default::default(),
            agent_tools: None,
            persistent: true,
            memory: Some("- earlier".into()),
            retry: 0,
            backoff: bytecode_spec::Backoff::None,
        };
        assert_eq!(
            session(&s),
            "Review\n\n## Context\n\n### plan\n\nthe plan\n\n## Your memory\n\n- earlier\n\n## Your task\n\nReview\n"
        );
        let labelled = SessionAsk {
            label: Some("Weekly review".into()),
            context: vec![],
            memory: None,
            ..s
        };
        assert_eq!(session(&labelled), "# Weekly review\n\nReview");
    }
}
