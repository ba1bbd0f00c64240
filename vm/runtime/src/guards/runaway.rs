//! Runaway answers: a small model sometimes falls into a loop and writes the same sentence,
//! line or paragraph again and again until its output limit. While an answer streams, the
//! chat drivers watch its end for such a loop and hang up as soon as one shows, instead of
//! paying (in time and tokens) for thousands of repeated tokens.
//!
//! What counts: the answer ends with [`MIN_TIMES`] or more exact copies of one span, covering
//! at least [`MIN_BYTES`] bytes. Lists and tables never qualify, because their rows differ
//! (a number, a name, a cell); a short run of one character (a rule of `=`, a table's
//! `---|`) stays far below the byte threshold. Only exact repetition is caught: a loop whose
//! copies differ is left to the output limit.

/// Fewest copies of a span in a row that make a runaway.
pub const MIN_TIMES: usize = 4;

/// Fewest bytes the copies must cover together.
pub const MIN_BYTES: usize = 512;

/// Longest span looked for (a repeated paragraph).
pub const MAX_SPAN: usize = 2048;

/// How many new bytes an answer grows by between two looks.
const LOOK_EVERY: usize = 48;

/// A loop found at the end of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runaway {
    /// Where the answer should be cut: after the first copy of the span.
    pub keep: usize,
    /// One copy of the repeated span.
    pub span: String,
    /// How many copies there were (the last possibly cut short).
    pub times: usize,
}

/// The longest suffix of `b` that repeats with period `p`, counted in bytes past the first
/// copy (so the periodic tail is `p + run` bytes long), looking no further back than
/// `enough` bytes.
fn periodic_run(b: &[u8], p: usize, enough: usize) -> usize {
    let n = b.len();
    let mut run = 0;
    while run < n - p && run < enough && b[n - 1 - run] == b[n - 1 - run - p] {
        run += 1;
    }
    run
}

/// The loop `text` ends with, if any: the shortest span repeated at its end at least
/// [`MIN_TIMES`] times over at least [`MIN_BYTES`] bytes.
pub fn find(text: &str) -> Option<Runaway> {
    let b = text.as_bytes();
    let n = b.len();
    if n < MIN_BYTES {
        return None;
    }
    for p in 1..=MAX_SPAN.min(n / MIN_TIMES) {
        let needed = MIN_BYTES.max(MIN_TIMES * p);
        let run = periodic_run(b, p, needed - p);
        if p + run < needed {
            continue;
        }
        // The whole periodic tail, to say where it starts.
        let run = periodic_run(b, p, usize::MAX);
        let start = n - p - run;
        // Any `p` bytes of the tail are one copy; the one shown starts a word (right after
        // whitespace) where it can, so that it reads as the model wrote it. It starts on a
        // character boundary, and so does the next copy.
        let space = |i: usize| matches!(b[i], b' ' | b'\n' | b'\t' | b'\r');
        let first = (start..start + p)
            .find(|&c| c > 0 && space(c - 1) && !space(c) && text.is_char_boundary(c))
            .unwrap_or_else(|| {
                (start..start + p)
                    .find(|&c| text.is_char_boundary(c))
                    .unwrap_or(start)
            });
        let keep = first + p;
        return Some(Runaway {
            keep,
            span: text[first..keep].to_string(),
            times: (p + run) / p,
        });
    }
    None
}

/// Watches an answer as it grows, looking for a loop every few dozen bytes.
#[derive(Debug, Default)]
pub struct LoopWatch {
    looked_at: usize,
}

impl LoopWatch {
    /// Looks at `text` (the answer so far) if it grew enough since the last look.
    pub fn look(&mut self, text: &str) -> Option<Runaway> {
        if text.len() < self.looked_at + LOOK_EVERY {
            return None;
        }
        self.looked_at = text.len();
        find(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_said_over_and_over_is_a_runaway() {
        let intro = "Here is the summary you asked for.\n\n";
        let sentence = "The report covers the quarterly results in detail. ";
        let text = format!("{intro}{}", sentence.repeat(12));
        let r = find(&text).expect("a runaway");
        assert_eq!(r.span, sentence);
        assert_eq!(r.times, 12);
        assert_eq!(&text[..r.keep], format!("{intro}{sentence}"));
    }

    #[test]
    fn a_loop_cut_mid_copy_is_found_and_cut_after_one_copy() {
        let line = "- check the inputs again\n";
        let text = format!("Plan:\n{}- check the in", line.repeat(30));
        let r = find(&text).expect("a runaway");
        assert_eq!(text[..r.keep].matches("check the inputs again").count(), 1);
        assert_eq!(r.span.len(), line.len());
        assert!(r.keep < 40, "cut after the first copy, at {}", r.keep);
    }

    #[test]
    fn lists_tables_and_rules_are_not_runaways() {
        let list: String = (1..=200)
            .map(|i| format!("{i}. Item number {i} of the list\n"))
            .collect();
        assert_eq!(find(&list), None);
        let mut table = String::from("| name | count |\n|---|---|\n");
        for i in 0..200 {
            table.push_str(&format!("| row {i} | {} |\n", i * 3));
        }
        assert_eq!(find(&table), None);
        let rule = format!("Title\n{}\nText after the rule.", "=".repeat(80));
        assert_eq!(find(&rule), None);
        let wide = format!("|{}|\n", "---|".repeat(20));
        assert_eq!(find(&wide), None);
        let prose = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".to_string()
            + "Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. "
            + "Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris.";
        assert_eq!(find(&prose.repeat(3)), None, "three copies are not enough");
    }

    #[test]
    fn one_character_and_short_words_repeated_long_enough_are_runaways() {
        let text = format!("Answer: {}", "and ".repeat(200));
        let r = find(&text).expect("a runaway");
        assert_eq!(r.span, "and ");
        let dots = format!("Thinking{}", ".".repeat(600));
        assert_eq!(find(&dots).map(|r| r.span), Some(".".into()));
    }

    #[test]
    fn multibyte_spans_are_cut_on_character_boundaries() {
        let text = format!("Réponse : {}", "déjà vu, encore et toujours — ".repeat(40));
        let r = find(&text).expect("a runaway");
        assert!(text.is_char_boundary(r.keep));
        assert_eq!(r.span, "déjà vu, encore et toujours — ");
    }

    #[test]
    fn the_watch_looks_every_few_dozen_bytes() {
        let mut w = LoopWatch::default();
        let mut text = String::from("Start. ");
        let mut found = None;
        for _ in 0..100 {
            text.push_str("again and again ");
            if let Some(r) = w.look(&text) {
                found = Some((r, text.len()));
                break;
            }
        }
        let (r, at) = found.expect("found while streaming");
        assert_eq!(r.span, "again and again ");
        assert!(at < MIN_BYTES + 100, "found at {at} bytes");
    }
}
