//! Requests as text for drivers that talk to something reading text (a command, a model),
//! and strict parsing of the replies to the requests that are not sessions.

use crate::protocol::{
    ChooseAsk, ConvertAsk, EvaluateAsk, InputAsk, Labelled, RequestId, SessionAnswer, SessionAsk,
};
use bytecode_spec::Shape;
use std::fmt::Write as _;

/// A session's task as one text: its label as a title (when it has one), the prompt, then
/// each context value under its label, then the agent's memory when it is resumed.
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

/// A discretion condition as a yes/no question.
pub fn evaluate(e: &EvaluateAsk) -> String {
    let mut out = format!(
        "Is this true: {}\nAnswer yes or no, then a reason.\n",
        e.condition
    );
    if !e.context.is_empty() {
        out.push_str("\n## Context\n");
        labelled(&mut out, &e.context);
    }
    out
}

/// A choice as a question with numbered options.
pub fn choose(c: &ChooseAsk) -> String {
    let mut out = format!(
        "Choose: {}\nReply with one option's label or number.\n\n",
        c.criteria
    );
    for (i, o) in c.options.iter().enumerate() {
        let _ = writeln!(out, "{}. {o}", i + 1);
    }
    if !c.context.is_empty() {
        out.push_str("\n## Context\n");
        labelled(&mut out, &c.context);
    }
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

/// A verdict: the reply's first word is yes/true or no/false.
pub fn verdict(reply: &str) -> Option<bool> {
    let first: String = reply
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect::<String>()
        .to_lowercase();
    match first.as_str() {
        "yes" | "true" => Some(true),
        "no" | "false" => Some(false),
        _ => None,
    }
}

/// A choice: an option's label (ignoring case and surrounding space) or its 1-based number.
pub fn choice(reply: &str, options: &[String]) -> Option<usize> {
    let r = reply.trim();
    if let Ok(n) = r.parse::<usize>() {
        return (1..=options.len()).contains(&n).then(|| n - 1);
    }
    options
        .iter()
        .position(|o| o.trim().eq_ignore_ascii_case(r))
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
            persistent: true,
            memory: Some("- earlier".into()),
            retry: 0,
            backoff: bytecode_spec::Backoff::None,
        };
        assert_eq!(
            session(&s),
            "Review\n\n## Context\n\n### plan\n\nthe plan\n\n## Your memory\n\n- earlier\n"
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
