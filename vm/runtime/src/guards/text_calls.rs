//! Tool calls written as text. Models without native tool calling (small local ones, or a
//! server that does not parse their calls) write a call into their answer: the whole answer
//! as a JSON object `{"name": ..., "arguments": {...}}` (fenced or not), a fenced JSON block
//! holding one, or Qwen's and Hermes' `<tool_call>{...}</tool_call>` blocks. Such text
//! counts as a call only when it names a tool on offer and its arguments are an object:
//! anything else, however much it looks like a call, is the model's answer (a model asked
//! for a greeting that answers `{"name": "greet", ...}` has answered, badly, not called).

use super::astray;
use prose_machine::protocol::{ToolCall, ToolSpec};
use serde_json::{Map, Value};

/// The calls `text` makes of the tools named in `offered`, if it is a call (or a series of
/// `<tool_call>` blocks) and every call in it names an offered tool with object arguments;
/// ids are `text_call_{turn}_{n}`.
pub fn parse(text: &str, offered: &[&str], turn: u32) -> Option<Vec<ToolCall>> {
    let bodies = tagged_blocks(text)
        .or_else(|| whole(text).map(|b| vec![b]))
        .or_else(|| fenced_block(text).map(|b| vec![b]))?;
    bodies
        .iter()
        .enumerate()
        .map(|(n, body)| {
            let (name, arguments) = call(body)?;
            offered
                .contains(&name.as_str())
                .then(|| ToolCall::in_text(&format!("{turn}_{n}"), name, arguments))
        })
        .collect()
}

/// How an answer without a tool call shows that the tools on offer confused the model, if
/// it does: it writes the declarations back (a `<tools>` block, the tag small models' chat
/// templates wrap them in, or the description of a tool on offer word for word), or it is
/// (or opens, when the driver hung up on it) a call of a tool it does not have. Such an
/// answer is no call; the model is asked once more, without tools.
pub fn confusion(text: &str, offered: &[ToolSpec]) -> Option<String> {
    let echoes = astray::echoes_declarations(text)
        || offered
            .iter()
            .any(|t| t.description.len() >= 16 && text.contains(t.description.as_str()));
    if echoes {
        return Some("it wrote the tool declarations back instead of answering".into());
    }
    let is_offered = |n: &str| offered.iter().any(|t| t.name == n);
    let name = match astray::made_up_call(text, is_offered) {
        Some(name) => name.to_string(),
        None => {
            let (name, _) = call(whole(text)?)?;
            if is_offered(&name) {
                return None;
            }
            name
        }
    };
    Some(format!(
        "it answered with a call of `{name}`, a tool it does not have, written as text"
    ))
}

/// The bodies of `<tool_call>...</tool_call>` blocks, when the text has any.
fn tagged_blocks(text: &str) -> Option<Vec<&str>> {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut bodies = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let end = after.find(CLOSE).unwrap_or(after.len());
        bodies.push(after[..end].trim());
        rest = after.get(end + CLOSE.len()..).unwrap_or("");
    }
    (!bodies.is_empty()).then_some(bodies)
}

/// The whole text, less a code fence around it, when that is all there is.
fn whole(text: &str) -> Option<&str> {
    let t = text.trim();
    let body = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|b| b.trim_end().strip_suffix("```"))
        .unwrap_or(t)
        .trim();
    body.starts_with('{').then_some(body)
}

/// The one fenced JSON block of a text that has exactly one.
fn fenced_block(text: &str) -> Option<&str> {
    let mut blocks = text.split("```").skip(1).step_by(2);
    let block = blocks.next()?;
    if blocks.next().is_some() {
        return None;
    }
    let body = block.strip_prefix("json").unwrap_or(block).trim();
    body.starts_with('{').then_some(body)
}

/// The name and arguments of the call `body` holds, or of the first of the calls it holds
/// one after another (a small model writes its whole plan of calls at once, the later ones
/// guessing what the first will return: only the first is made, and the model sees its
/// result before it goes on).
fn call(body: &str) -> Option<(String, Value)> {
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    let first = call_of(values.next()?.ok()?)?;
    // What follows is another object (a call, or the start of one however it goes on).
    let rest = body[values.byte_offset()..].trim_start();
    (rest.is_empty() || rest.starts_with('{')).then_some(first)
}

/// The name and arguments of a call object: `name` with `arguments` (or `parameters`, or
/// `input`) as an object or as a string holding one, and no other keys but `id` and `type`.
fn call_of(value: Value) -> Option<(String, Value)> {
    let Value::Object(obj) = value else {
        return None;
    };
    let obj: Map<String, Value> = match obj.get("function") {
        // `{"type": "function", "function": {"name": ..., "arguments": ...}}`
        Some(Value::Object(f)) => f.clone(),
        _ => obj,
    };
    let known = |k: &String| {
        matches!(
            k.as_str(),
            "name" | "arguments" | "parameters" | "input" | "id" | "type"
        )
    };
    if !obj.keys().all(known) {
        return None;
    }
    let name = obj.get("name")?.as_str()?.to_string();
    let args = ["arguments", "parameters", "input"]
        .iter()
        .find_map(|k| obj.get(*k))?;
    let args = match args {
        Value::String(s) => serde_json::from_str(s).ok()?,
        other => other.clone(),
    };
    args.is_object().then_some((name, args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OFFERED: &[&str] = &["read_file", "write_file", "list_files"];

    #[test]
    fn a_call_of_an_offered_tool_counts() {
        let calls = parse(
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n```",
            OFFERED,
            3,
        )
        .expect("a call");
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, json!({"path": "a.md"}));
        assert_eq!(calls[0].id, "text_call_3_0");
        assert!(calls[0].is_in_text());
        let calls = parse(
            "I will list them.\n```json\n{\"name\": \"list_files\", \"parameters\": {\"pattern\": \"*.md\"}}\n```",
            OFFERED,
            0,
        )
        .expect("a fenced call after some words");
        assert_eq!(calls[0].name, "list_files");
        let calls = parse(
            "{\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"b\\\"}\"}}",
            OFFERED,
            0,
        )
        .expect("OpenAI's shape, arguments as a string");
        assert_eq!(calls[0].arguments, json!({"path": "b"}));
    }

    #[test]
    fn of_calls_written_one_after_another_the_first_is_made() {
        // Qwen2.5-Coder-1.5B asked to read a file and write another.
        let plan = "```json\n{\n  \"name\": \"read_file\",\n  \"arguments\": {\"path\": \"notes.txt\"}\n}\n{\n  \"name\": \"write_file\",\n  \"arguments\": {\"path\": \"count.txt\", \"content\": \"3\"}\n}\n```";
        let calls = parse(plan, OFFERED, 0).expect("the first call");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, json!({"path": "notes.txt"}));
        // A call followed by words is still no call.
        let said =
            "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}} and then I will write";
        assert_eq!(parse(said, OFFERED, 0), None);
        // A later call that is not valid JSON (the model wrote `String(count)`) does not
        // spoil the first.
        let broken = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n{\"name\": \"edit_file\", \"arguments\": {\"new_string\": String(count)}}";
        assert_eq!(parse(broken, OFFERED, 0).expect("the first").len(), 1);
    }

    #[test]
    fn tool_call_tags_may_hold_several_calls() {
        let text = "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"b\", \"content\": \"x\"}}\n</tool_call>";
        let calls = parse(text, OFFERED, 1).expect("two calls");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].id, "text_call_1_1");
    }

    #[test]
    fn answers_confused_by_the_tools_are_recognised() {
        let offered = [ToolSpec {
            name: "write_file".into(),
            description: "Create or overwrite a file.".into(),
            input_schema: json!({"type": "object"}),
        }];
        // Qwen2.5-Coder-1.5B asked for a poem, with tools on offer.
        let echo = "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"write_file\", \"description\": \"Create or overwrite a file.\"}}\n</tools>\n\n```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"greeting.txt\", \"content\": \"Hello\"}}\n```";
        assert!(confusion(echo, &offered).is_some_and(|w| w.contains("declarations")));
        assert!(confusion("<tools></tools>\n```json\n{}\n```", &offered).is_some());
        // The README's hello program, as the issue saw it answered.
        let greet =
            "{\"name\": \"greet\", \"arguments\": {\"message\": \"Hello, welcome to OpenProse!\"}}";
        assert!(confusion(greet, &offered).is_some_and(|w| w.contains("`greet`")));
        let poem = "Running your first OpenProse program,\nA new chapter in your journey begins.";
        assert_eq!(confusion(poem, &offered), None);
        assert_eq!(confusion("I will create a file.", &offered), None);
        assert_eq!(
            confusion("{\"score\": 3, \"name\": \"x\"}", &offered),
            None,
            "JSON data"
        );
    }

    #[test]
    fn anything_else_is_an_answer() {
        // The README's hello program on a 1.5B model: a made-up tool.
        assert_eq!(
            parse(
                "{\"name\": \"greet\", \"arguments\": {\"message\": \"Hello, welcome to OpenProse!\"}}",
                OFFERED,
                0
            ),
            None
        );
        // Arguments that are not an object.
        assert_eq!(
            parse(
                "{\"name\": \"read_file\", \"arguments\": \"a.md\"}",
                OFFERED,
                0
            ),
            None
        );
        // A JSON answer that merely has a name.
        assert_eq!(
            parse(
                "{\"name\": \"read_file\", \"arguments\": {}, \"score\": 3}",
                OFFERED,
                0
            ),
            None
        );
        // Two fenced blocks: an explanation, not a call.
        let two = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\nor\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}\n```";
        assert_eq!(parse(two, OFFERED, 0), None);
        // One unknown call among tagged ones spoils them all.
        let mixed = "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call><tool_call>{\"name\": \"greet\", \"arguments\": {}}</tool_call>";
        assert_eq!(parse(mixed, OFFERED, 0), None);
        assert_eq!(parse("Roses are red.", OFFERED, 0), None);
        assert_eq!(parse("{\"name\": \"read_file\"", OFFERED, 0), None);
    }
}
