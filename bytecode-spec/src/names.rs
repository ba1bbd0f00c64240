//! The names an artifact may carry where they can become file names. Names of agents,
//! variables, inputs, outputs and blocks end up in paths of the run directory
//! (`bindings/{name}.md`, `agents/{name}/`), so the verifier accepts only identifiers as the
//! language defines them, and module names and persist paths only when every path component
//! they yield is a plain file name. The VM's run store maps names to files through
//! [`is_file_name`] too, so both sides apply one rule.

/// Longest identifier accepted: with a scope suffix (`__{execution id}`) and `.md` it still
/// fits the 255 bytes file systems allow in a name.
pub const MAX_IDENTIFIER: usize = 200;

/// Longest file name, in bytes.
pub const MAX_FILE_NAME: usize = 255;

fn name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (!c.is_ascii() && c.is_alphabetic())
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || (!c.is_ascii() && c.is_alphanumeric())
}

/// Whether `s` is an identifier as the language writes one: a letter or `_`, then letters,
/// digits and `_`, with single hyphens between name characters (`security-reviewer`); at
/// most [`MAX_IDENTIFIER`] bytes.
pub fn is_identifier(s: &str) -> bool {
    if s.is_empty() || s.len() > MAX_IDENTIFIER {
        return false;
    }
    let mut chars = s.chars().peekable();
    if !chars.next().is_some_and(name_start) {
        return false;
    }
    while let Some(c) = chars.next() {
        let ok = if c == '-' {
            chars.peek().is_some_and(|&n| name_char(n))
        } else {
            name_char(c)
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Whether `s` names a variable: an identifier, or one the compiler makes up (`$index`, an
/// identifier after a `$`, which no program can write).
pub fn is_variable(s: &str) -> bool {
    is_identifier(s.strip_prefix('$').unwrap_or(s))
}

/// Whether `s` can be used as one component of a path without leaving the directory it is
/// joined to: not empty, not `.` or `..`, no `/`, `\`, NUL or control character, at most
/// [`MAX_FILE_NAME`] bytes.
pub fn is_file_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_FILE_NAME
        && s != "."
        && s != ".."
        && !s.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

/// The components of a relative directory path such as a `persist: "dir"` value: `.` and
/// empty components are skipped, every other one must be a [`is_file_name`] (so no `..`);
/// an absolute path, or one with no component left, is refused (`None`).
pub fn relative_components(path: &str) -> Option<Vec<&str>> {
    if path.starts_with('/') {
        return None;
    }
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (!parts.is_empty() && parts.iter().all(|p| is_file_name(p))).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_follow_the_language() {
        for ok in [
            "a",
            "_x",
            "security-reviewer",
            "depth-1",
            "café",
            "r2d2",
            "a_b-c",
        ] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in [
            "", "1a", "-a", "a-", "a--b", "a/b", "..", ".", "a.b", "a b", "/etc", "$x", "a\0",
        ] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
        assert!(is_identifier(&"x".repeat(MAX_IDENTIFIER)));
        assert!(!is_identifier(&"x".repeat(MAX_IDENTIFIER + 1)));
        assert!(is_variable("$index") && is_variable("item") && !is_variable("$../x"));
    }

    #[test]
    fn file_names_stay_in_their_directory() {
        for ok in ["x.md", "local--inner", ".prose", "my prog", "v1.2"] {
            assert!(is_file_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "/", "a\\b", "a\nb", "a\0b"] {
            assert!(!is_file_name(bad), "{bad:?}");
        }
        assert!(!is_file_name(&"x".repeat(MAX_FILE_NAME + 1)));
    }

    #[test]
    fn relative_paths_never_climb() {
        assert_eq!(
            relative_components(".prose/custom/shared-agent/"),
            Some(vec![".prose", "custom", "shared-agent"])
        );
        assert_eq!(relative_components("./a//b"), Some(vec!["a", "b"]));
        for bad in ["/etc/x", "../x", "a/../../b", "", ".", "./", "a/\0"] {
            assert_eq!(relative_components(bad), None, "{bad:?}");
        }
    }
}
