//! "Did you mean": the defined name closest to a misspelt one.

/// The candidate closest to `name` (Jaro-Winkler similarity, which favours a shared
/// beginning), when it is close enough to be worth suggesting; ties go to the first.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let score = strsim::jaro_winkler(&name.to_lowercase(), &c.to_lowercase());
        if score >= 0.8 && best.is_none_or(|(_, b)| score > b) {
            best = Some((c, score));
        }
    }
    best.map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn close_names_are_suggested_and_distant_ones_are_not() {
        let names = ["writer", "reviewer", "researcher"];
        assert_eq!(closest("writr", names), Some("writer"));
        assert_eq!(closest("Reviewer", names), Some("reviewer"));
        assert_eq!(closest("researcer", names), Some("researcher"));
        assert_eq!(closest("budget", names), None);
        assert_eq!(closest("x", []), None);
    }
}
