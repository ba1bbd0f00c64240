//! Answers that have gone astray before they are done. Offered tools, a small model often
//! does not answer at all: it writes the tool declarations of its chat template back, or it
//! opens a call, written as text, of a tool it made up (`{"name": "readme_generator",
//! "arguments": {...`), and then goes on for thousands of tokens. Both show in the first few
//! tokens, so the chat drivers hang up there ([`prose_machine::protocol::Stop::Astray`]),
//! and the agent loop reads the same signs in a whole answer: either way the model is asked
//! once more, without tools.

/// The tag small models' chat templates (Qwen's, Hermes') wrap the tool declarations in: an
/// answer that writes it is writing the declarations back, not answering.
pub const DECLARATIONS: &str = "<tools>";

/// Whether `text` writes the tool declarations back (their tag, opening or closing).
pub fn echoes_declarations(text: &str) -> bool {
    text.contains(DECLARATIONS) || text.contains("</tools>")
}

/// The tool `text` opens a call of, written as text, when it is one `offered` does not
/// hold: the answer starts (after a code fence, if any) with `{"name": "NAME",` and then an
/// `"arguments"` or `"parameters"` key. A JSON answer that merely has a `name` field does
/// not qualify.
pub fn made_up_call(text: &str, offered: impl Fn(&str) -> bool) -> Option<&str> {
    let name = opened_call(text)?;
    (!offered(name)).then_some(name)
}

/// The name of the call `text` opens, as [`made_up_call`] reads it.
fn opened_call(text: &str) -> Option<&str> {
    let mut rest = text.trim_start();
    if let Some(r) = rest.strip_prefix("```") {
        rest = r.strip_prefix("json").unwrap_or(r).trim_start();
    }
    rest = rest.strip_prefix('{')?.trim_start();
    rest = rest.strip_prefix("\"name\"")?.trim_start();
    rest = rest.strip_prefix(':')?.trim_start();
    rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    let (name, after) = (&rest[..end], &rest[end + 1..]);
    if name.is_empty() || name.contains(['\\', '\n']) {
        return None;
    }
    let after = after.trim_start().strip_prefix(',')?.trim_start();
    (after.starts_with("\"arguments\"") || after.starts_with("\"parameters\"")).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_of_a_made_up_tool_shows_in_its_first_tokens() {
        let offered = |n: &str| n == "read_file";
        let opening =
            "```json\n{\n  \"name\": \"readme_generator\",\n  \"arguments\": {\n    \"desc";
        assert_eq!(made_up_call(opening, offered), Some("readme_generator"));
        assert_eq!(
            made_up_call("{\"name\": \"say_hello\", \"parameters\": {}}", offered),
            Some("say_hello")
        );
        // A tool on offer is a call, not a made-up one.
        assert_eq!(
            made_up_call("{\"name\": \"read_file\", \"arguments\": {}}", offered),
            None
        );
        // Not yet, or never, a call: too early to tell, or data that has a name.
        for text in [
            "```json\n{\n  \"name\": \"readme_gen",
            "{\"name\": \"Alice\", \"age\": 3}",
            "{\"name\": \"Alice\"}",
            "Here is the call: {\"name\": \"x\", \"arguments\": {}}",
            "",
        ] {
            assert_eq!(made_up_call(text, offered), None, "{text}");
        }
    }

    #[test]
    fn the_declarations_written_back_show_by_their_tag() {
        assert!(echoes_declarations("<tools>\n{\"type\": \"function\""));
        assert!(echoes_declarations("...</tools>"));
        assert!(!echoes_declarations("Use the tools you have."));
    }
}
