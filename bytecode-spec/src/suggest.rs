//! "Did you mean": the defined name closest to a misspelt one.

/// Letters compared without case, and `-` the same as `_` (`code_changes` for
/// `code-changes`).
fn normalized(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// Whether one name is the other with another ending (`retries` for `retry`, `skill` for
/// `skills`): the shorter, less its last letter, starts the longer, which is at most three
/// letters longer.
fn inflected(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 4
        && short.is_ascii()
        && long.len() - short.len() <= 3
        && long.starts_with(&short[..short.len() - 1])
}

/// The candidate closest to `name`, if one is close enough to be a likely misspelling: at
/// most one edit (insertion, deletion, substitution or transposition) per three
/// characters, or the same word with another ending, and not a complete rewrite. Ties go to the alphabetically first candidate,
/// so the suggestion does not depend on the order candidates come in.
pub fn closest<'n>(name: &str, candidates: impl IntoIterator<Item = &'n str>) -> Option<&'n str> {
    let wanted = normalized(name);
    let len = wanted.chars().count();
    let limit = len.max(3) / 3;
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| {
            let other = normalized(c);
            let d = strsim::damerau_levenshtein(&wanted, &other);
            ((d <= limit || inflected(&wanted, &other)) && d < len).then_some((d, c))
        })
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn close_names_are_suggested() {
        assert_eq!(closest("reviewr", ["reviewer", "writer"]), Some("reviewer"));
        assert_eq!(
            closest("code_changes", ["code-changes"]),
            Some("code-changes")
        );
        assert_eq!(closest("Summary", ["summary", "summit"]), Some("summary"));
        assert_eq!(closest("frist", ["first", "all", "any"]), Some("first"));
        assert_eq!(closest("retries", ["retry", "prompt"]), Some("retry"));
        assert_eq!(closest("skill", ["skills", "model"]), Some("skills"));
    }

    #[test]
    fn distant_or_tiny_names_are_not() {
        assert_eq!(closest("x", ["y"]), None);
        assert_eq!(closest("research", ["review"]), None);
        assert_eq!(closest("a", []), None);
    }

    #[test]
    fn ties_do_not_depend_on_candidate_order() {
        assert_eq!(closest("cat", ["bat", "car"]), Some("bat"));
        assert_eq!(closest("cat", ["car", "bat"]), Some("bat"));
    }
}
