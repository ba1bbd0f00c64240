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

/// The candidate closest to `name`, if one is close enough to be a likely misspelling: at
/// most one edit (insertion, deletion, substitution or transposition) per three
/// characters, and not a complete rewrite. Ties go to the alphabetically first candidate,
/// so the suggestion does not depend on the order candidates come in.
pub fn closest<'n>(name: &str, candidates: impl IntoIterator<Item = &'n str>) -> Option<&'n str> {
    let wanted = normalized(name);
    let len = wanted.chars().count();
    let limit = len.max(3) / 3;
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| {
            let d = strsim::damerau_levenshtein(&wanted, &normalized(c));
            (d <= limit && d < len).then_some((d, c))
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
