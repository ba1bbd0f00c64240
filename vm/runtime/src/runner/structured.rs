//! What a model is shown in a session whose turns are structured
//! ([`crate::driver::chat::dialect::openai::structured`]): each reply is one step, a call of one tool or the
//! answer, decoded under a schema. The schema makes every reply well-formed; what a small
//! model still lacks is the lay of the land, so the system prompt says what a step is, lists
//! the tools with their arguments (no API carries them: the schema holds only their
//! shapes), and names the files of the working directory the agent may read, so that the
//! first step can be to look at the right one rather than to guess what it holds.

use prose_agent::permissions::Sandbox;
use prose_agent::tools::search;
use prose_machine::protocol::ToolSpec;

/// Files of the working directory named in the system prompt, at most.
pub const FILES_SHOWN: usize = 40;

/// What a step is, before the tools. The same bytes every time, so that a server can cache
/// the prefix.
const STEPS: &str = "You are doing one task, one step per reply. Each reply is one JSON object: {\"tool\": NAME, \"arguments\": {...}} runs a tool, and you then see what it returned; {\"answer\": TEXT} ends the task with TEXT as your answer. Work from what the tools return, never from made-up contents. When the task asks for a file, write it before you answer.";

/// The files of the working directory a session's agent may read, as its system prompt
/// names them: the first [`FILES_SHOWN`], and whether there are more.
pub struct Listing {
    files: Vec<String>,
    more: bool,
}

impl Listing {
    /// The readable files of `sandbox`'s working directory (walked on a blocking thread).
    pub async fn of(sandbox: &Sandbox) -> Listing {
        let sandbox = sandbox.clone();
        let (files, more) =
            tokio::task::spawn_blocking(move || search::listing(&sandbox, FILES_SHOWN))
                .await
                .unwrap_or_default();
        Listing { files, more }
    }
}

/// The system prompt of a structured turn offering `tools`: what a step is, the tools, the
/// files, then the agent's own prompt (`own`).
pub fn system(own: Option<&str>, tools: &[ToolSpec], listing: &Listing) -> String {
    let mut out = format!("{STEPS}\n\nTools:\n");
    for t in tools {
        out.push_str(&format!(
            "- {} {}: {}\n",
            t.name,
            arguments(&t.input_schema),
            t.description
        ));
    }
    out.push('\n');
    match (listing.files.as_slice(), listing.more) {
        ([], _) => out.push_str("The working directory has no files you may read."),
        (files, more) => {
            out.push_str("Files in the working directory: ");
            out.push_str(&files.join(", "));
            if more {
                out.push_str(", and more");
            }
            out.push('.');
        }
    }
    if let Some(own) = own {
        out.push_str("\n\n");
        out.push_str(own);
    }
    out
}

/// A tool's arguments in one line, `{"path": string, "content": string}`, from its schema.
fn arguments(schema: &serde_json::Value) -> String {
    let fields: Vec<String> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, p)| {
            let kind = p["type"].as_str().unwrap_or("value");
            format!("\"{name}\": {kind}")
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_prompt_names_the_step_the_tools_and_the_files() {
        let tools = vec![ToolSpec {
            name: "write_file".into(),
            description: "Create or overwrite a file.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}}}),
        }];
        let listing = Listing {
            files: vec!["a.txt".into(), "b/c.md".into()],
            more: true,
        };
        let s = system(Some("Be brief."), &tools, &listing);
        assert!(s.starts_with(STEPS));
        assert!(s.contains(
            "- write_file {\"path\": string, \"content\": string}: Create or overwrite a file.\n"
        ));
        assert!(s.contains("Files in the working directory: a.txt, b/c.md, and more."));
        assert!(s.ends_with("\n\nBe brief."));
        let empty = Listing {
            files: Vec::new(),
            more: false,
        };
        assert!(system(None, &tools, &empty).ends_with("no files you may read."));
    }
}
