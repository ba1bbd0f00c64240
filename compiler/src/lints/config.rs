//! The `[lints]` table of `prose.toml`, found like Cargo finds `Cargo.toml`: in the
//! program's directory or the nearest one above it. Other keys of the file (the VM's
//! settings) are not the compiler's business and are skipped.
//!
//! ```toml
//! [lints]
//! E140 = "allow"   # placeholders in prompts are meant for the model
//! W108 = "deny"    # every conditional loop needs a max
//! ```

use super::Level;
use crate::diagnostics::Code;
use crate::span::Span;
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The file name looked for.

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    lints: Option<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
}

/// What a `prose.toml` says about lints.
#[derive(Debug, Default, PartialEq)]
pub struct Config {
    /// Levels, in the file's order.
    pub levels: Vec<(Code, Level)>,
    /// Entries that could not be used, with where they are and why.
    pub problems: Vec<(Span, String)>,
}

fn span(r: std::ops::Range<usize>) -> Span {
    Span::new(r.start, r.end)
}

/// Reads the `[lints]` table of a `prose.toml`'s text.
pub fn parse(text: &str) -> Config {
    let mut config = Config::default();
    let file: File = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            config
                .problems
                .push((Span::new(span.start, span.end), e.message().to_string()));
            return config;
        }
    };
    let mut entries: Vec<_> = file.lints.unwrap_or_default().into_iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    for (key, value) in entries {
        let Some(code) = Code::parse(key.get_ref()) else {
            config.problems.push((
                span(key.span()),
                format!("`{}` is not a diagnostic code", key.get_ref()),
            ));
            continue;
        };
        if !code.is_lint() {
            config.problems.push((
                span(key.span()),
                format!("{code} is not a lint: its level cannot be chosen"),
            ));
            continue;
        }
        match value.get_ref().as_str().and_then(Level::parse) {
            Some(level) => config.levels.push((code, level)),
            None => config.problems.push((
                span(value.span()),
                format!("the level of {code} must be \"allow\", \"warn\" or \"deny\""),
            )),
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_in_order_other_keys_ignored() {
        let c = parse("driver = \"mock\"\n[models]\nsonnet = \"x\"\n[lints]\nW108 = \"deny\"\ne140 = \"allow\"\n");
        assert_eq!(
            c,
            Config {
                levels: vec![(Code::W108, Level::Deny), (Code::E140, Level::Allow)],
                problems: vec![],
            }
        );
        assert_eq!(parse("driver = \"mock\"\n"), Config::default());
    }

    #[test]
    fn bad_entries_are_located() {
        let text = "[lints]\nE999 = \"allow\"\nE007 = \"allow\"\nW108 = \"off\"\nW104 = \"warn\"\n";
        let c = parse(text);
        assert_eq!(c.levels, vec![(Code::W104, Level::Warn)]);
        let at: Vec<&str> = c.problems.iter().map(|(s, _)| &text[s.range()]).collect();
        assert_eq!(at, ["E999", "E007", "\"off\""]);
        let broken = parse("[lints\n");
        assert_eq!(broken.problems.len(), 1);
    }
}
