//! Text: names shown bare or quoted, escaping, and ids that point nowhere.

use cranelift_entity::{EntityRef, PrimaryMap};
use std::fmt::Display;

/// Shows an out-of-range id.
pub(super) fn bad(id: impl Display) -> String {
    format!("<bad {id}>")
}

/// Shows a name bare when it is a plain word, quoted otherwise.
pub(super) fn word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@' | '/' | '$' | '+')
        });
    if plain {
        s.to_string()
    } else {
        quoted(s, false, None)
    }
}

/// Appends `s` escaped (and, for template text, with literal braces escaped), stopping after
/// `limit` characters if given. Returns whether the text was cut.
pub(super) fn escape_into(
    out: &mut String,
    s: &str,
    braces: bool,
    limit: &mut Option<usize>,
) -> bool {
    for c in s.chars() {
        if let Some(left) = limit {
            if *left == 0 {
                return true;
            }
            *left -= 1;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '{' if braces => out.push_str("\\{"),
            '}' if braces => out.push_str("\\}"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    false
}

/// A quoted, escaped string, cut after `limit` characters if given.
pub(super) fn quoted(s: &str, braces: bool, limit: Option<usize>) -> String {
    let mut out = String::from("\"");
    let mut limit = limit;
    if escape_into(&mut out, s, braces, &mut limit) {
        out.push_str("...");
    }
    out.push('"');
    out
}

/// Looks `k` up in `map`, or shows it as a bad id.
pub(super) fn lookup<K: EntityRef + Display, V>(
    map: &PrimaryMap<K, V>,
    k: K,
) -> Result<&V, String> {
    map.get(k).ok_or_else(|| bad(k))
}
