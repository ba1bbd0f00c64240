//! The `[lints]` table of `prose.toml`, as the compiler takes it. The settings crate reads the
//! table like every other, the user's file and then the project's over it: each entry a code
//! as written and a level (a level other than `allow`, `warn` or `deny` makes the file
//! unreadable). Which codes are lints is the compiler's to say: an entry that names no
//! diagnostic code, or a code that is not a lint, is a problem located where it is written,
//! and is ignored.
//!
//! ```toml
//! [lints]
//! E140 = "allow"   # placeholders in prompts are meant for the model
//! W108 = "deny"    # every conditional loop needs a max
//! ```

use super::Level;
use crate::diagnostics::Code;
use prose_settings::{LintSetting, Place};

/// What a `[lints]` table says.
#[derive(Debug, Default, PartialEq)]
pub struct Config {
    /// Levels, in the order they apply (a later one for a code wins).
    pub levels: Vec<(Code, Level)>,
    /// Entries that could not be used, with where they are and why.
    pub problems: Vec<(Place, String)>,
}

/// The levels `lints` set, and the entries that name no lint.
pub fn levels(lints: &[LintSetting]) -> Config {
    let mut config = Config::default();
    for lint in lints {
        match Code::parse(&lint.code) {
            Some(code) if code.is_lint() => config.levels.push((code, lint.level)),
            Some(code) => config.problems.push((
                lint.at.clone(),
                format!("{code} is not a lint: its level cannot be chosen"),
            )),
            None => config.problems.push((
                lint.at.clone(),
                format!("`{}` is not a diagnostic code", lint.code),
            )),
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_settings::Settings;

    #[test]
    fn levels_in_order_other_keys_left_to_others() {
        let s = Settings::parse(
            "driver = \"mock\"\n[models]\nsonnet = \"x\"\n[lints]\nW108 = \"deny\"\ne140 = \"allow\"\n",
        )
        .expect("valid");
        assert_eq!(
            levels(&s.lints),
            Config {
                levels: vec![(Code::W108, Level::Deny), (Code::E140, Level::Allow)],
                problems: vec![],
            }
        );
        let none = Settings::parse("driver = \"mock\"\n").expect("valid");
        assert_eq!(levels(&none.lints), Config::default());
    }

    #[test]
    fn entries_that_name_no_lint_are_located() {
        let text = "[lints]\nE999 = \"allow\"\nE007 = \"allow\"\nW104 = \"warn\"\n";
        let c = levels(&Settings::parse(text).expect("valid").lints);
        assert_eq!(c.levels, vec![(Code::W104, Level::Warn)]);
        let at: Vec<&str> = c
            .problems
            .iter()
            .map(|(p, _)| &text[p.span.clone()])
            .collect();
        assert_eq!(at, ["E999", "E007"]);
    }
}
