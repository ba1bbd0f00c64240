//! The library as a catalog of workflows, each described as a tool an agent can call
//! ([`super::mcp`]): its name is its program's, its description the program's header comment
//! and its cost bounds (as `prosec info` gives them, priced by the server's `prose.toml`), its
//! input schema its inputs (those a caller must give are required), its output schema its
//! outputs.
//!
//! Programs are told apart by name: the version uploaded last has the program's name, and
//! every older one the name and the first eight digits of its SHA-256 (`summarize-9f2c1a0b`),
//! so that a caller of `summarize` runs the newest.

use super::library::Library;
use prosec::cost::Pricing;
use prosec::info::{Info, InfoOptions};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// The longest tool name clients take.
const MAX_NAME: usize = 64;

/// A workflow of the library, as a tool.
#[derive(Clone, Debug)]
pub struct Workflow {
    /// The tool's name.
    pub name: String,
    /// The SHA-256 of its artifact.
    pub sha256: String,
    /// What it is described as.
    pub about: Arc<About>,
}

/// What an artifact is described as (the same whatever its tool is named).
#[derive(Debug)]
pub struct About {
    /// The program's name.
    pub program: String,
    /// The tool's description.
    pub description: String,
    /// The JSON schema of its inputs.
    pub input_schema: Map<String, Value>,
    /// The JSON schema of its outputs.
    pub output_schema: Map<String, Value>,
    /// The most sessions a run asks, when that is a number (not one that depends on the
    /// inputs, nor unbounded).
    pub sessions: Option<u64>,
}

/// The workflows of a library, each artifact described once.
pub struct Catalog {
    options: InfoOptions,
    described: Mutex<HashMap<String, Arc<About>>>,
}

impl Catalog {
    /// The catalog whose cost bounds `pricing` prices, with `mcp_servers` the MCP servers
    /// the server's configuration names.
    pub fn new(pricing: Pricing, mcp_servers: Vec<String>) -> Catalog {
        Catalog {
            options: InfoOptions {
                trust: Vec::new(),
                pricing,
                mcp_servers,
            },
            described: Mutex::new(HashMap::new()),
        }
    }

    /// Every workflow of `library`, newest first.
    pub fn workflows(&self, library: &Library) -> Vec<Workflow> {
        let mut named = HashSet::new();
        let mut out = Vec::new();
        for (sha256, _) in library.list() {
            let Some(about) = self.about(library, &sha256) else {
                continue;
            };
            let base = tool_name(&about.program, MAX_NAME);
            let name = if named.insert(base.clone()) {
                base
            } else {
                let short = &sha256[..8];
                format!("{}-{short}", tool_name(&about.program, MAX_NAME - 9))
            };
            out.push(Workflow {
                name,
                sha256,
                about,
            });
        }
        out
    }

    /// The workflow named `name`.
    pub fn find(&self, library: &Library, name: &str) -> Option<Workflow> {
        self.workflows(library).into_iter().find(|w| w.name == name)
    }

    /// The description of artifact `sha256` (made once).
    fn about(&self, library: &Library, sha256: &str) -> Option<Arc<About>> {
        if let Some(a) = lock(&self.described).get(sha256) {
            return Some(a.clone());
        }
        let program = library.get(sha256)?;
        let info = prosec::info::describe(&program.bytes, &self.options).ok()?;
        let source = &program.artifact.modules[0].source;
        let about = Arc::new(describe(&info, source));
        lock(&self.described).insert(sha256.to_string(), about.clone());
        Some(about)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `program` as a tool name: its letters, digits, `_`, `-` and `.`, anything else `_`, at most
/// `max` characters.
fn tool_name(program: &str, max: usize) -> String {
    let name: String = program
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(max)
        .collect();
    if name.is_empty() {
        "workflow".into()
    } else {
        name
    }
}

/// The first paragraph of the comment a program's source opens with (`# …` lines), as one
/// line.
fn header(source: &str) -> Option<String> {
    let mut words = Vec::new();
    for line in source.lines().skip_while(|l| l.trim().is_empty()) {
        let Some(text) = line.trim().strip_prefix('#') else {
            break;
        };
        let text = text.trim();
        if text.is_empty() {
            if words.is_empty() {
                continue;
            }
            break;
        }
        words.push(text.to_string());
    }
    (!words.is_empty()).then(|| words.join(" "))
}

/// The tool description, schemas and session bound of the program `info` describes, whose
/// source is `source`.
fn describe(info: &Info, source: &str) -> About {
    let mut description =
        header(source).unwrap_or_else(|| format!("The OpenProse program `{}`.", info.program));
    description.push_str(&format!(
        "\n\nEach call runs the workflow `{}` on this server and returns its outputs. ",
        info.program
    ));
    match info.cost.get("unavailable").and_then(Value::as_str) {
        Some(why) => description.push_str(&format!("Cost bound: unknown ({why}).")),
        None => {
            let text = |key: &str| info.cost[key]["text"].as_str().unwrap_or("?").to_string();
            description.push_str(&format!(
                "Cost bound per call: {} session(s), {} judgment(s), {}.",
                text("sessions"),
                text("judgments"),
                text("cost_usd")
            ));
        }
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for input in &info.inputs {
        let mut about = Map::new();
        if let Some(d) = &input.description {
            about.insert("description".into(), d.clone().into());
        }
        properties.insert(input.name.clone(), Value::Object(about));
        if input.parameter {
            required.push(Value::from(input.name.clone()));
        }
    }
    let input_schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    let outputs: Map<String, Value> = info
        .outputs
        .iter()
        .map(|o| (o.clone(), json!({})))
        .collect();
    let output_schema = json!({
        "type": "object",
        "properties": outputs,
        "required": info.outputs,
    });
    About {
        program: info.program.clone(),
        description,
        input_schema: object(input_schema),
        output_schema: object(output_schema),
        sessions: constant(&info.cost["sessions"]["max"]),
    }
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The number a bound's polynomial (its terms, `{"coefficient", "symbols"}`) is, when it
/// names no symbol.
fn constant(poly: &Value) -> Option<u64> {
    let mut total = 0.0;
    for t in poly.as_array()? {
        if !t["symbols"].as_array()?.is_empty() {
            return None;
        }
        total += t["coefficient"].as_f64()?;
    }
    (total >= 0.0 && total.fract() == 0.0).then_some(total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_comment_is_the_description_and_names_are_tool_names() {
        let source = "\n# summarize.prose: one sentence about a text.\n# More of it.\n#\n# Later.\ninput text: \"x\"\n";
        assert_eq!(
            header(source).as_deref(),
            Some("summarize.prose: one sentence about a text. More of it.")
        );
        assert_eq!(header("input x: \"y\"\n# not a header"), None);
        assert_eq!(tool_name("research brief/2", 64), "research_brief_2");
        assert_eq!(tool_name("ab-c.d_e", 3), "ab-");
        assert_eq!(tool_name("", 64), "workflow");
    }

    /// `source` compiled as `dir`'s `name.prose`.
    fn artifact(dir: &std::path::Path, name: &str, source: &str) -> Vec<u8> {
        let file = dir.join(format!("{name}.prose"));
        std::fs::write(&file, source).expect("source");
        let mut c = prosec::compile::Compilation::new(Default::default());
        let root = c.add_file(&file).expect("reads");
        assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
        prosec::codegen::build_bytes(&c, root).expect("builds").0
    }

    #[test]
    fn the_newest_version_of_a_program_has_its_name_and_older_ones_their_hash_too() {
        let dir = std::env::temp_dir().join(format!("prose-catalog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let library = Library::new(dir.join("artifacts"), Vec::new());
        let old = library
            .add(artifact(&dir, "sum", "# Old.\noutput r = session \"A\"\n"))
            .expect("added");
        let new = library
            .add(artifact(
                &dir,
                "sum",
                "# New.\ninput text: \"The text\"\nlet a = session \"A {text}\"\noutput r = session \"B\"\n  context: a\n",
            ))
            .expect("added");
        let at = |sha: &str, secs: u64| {
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            std::fs::File::options()
                .append(true)
                .open(dir.join("artifacts").join(format!("{sha}.pbc")))
                .and_then(|f| f.set_modified(when))
                .expect("time");
        };
        at(&old, 1_000);
        at(&new, 2_000);
        let catalog = Catalog::new(
            prosec::cost::Pricing::from_settings(&Default::default(), 2_000, 1_000),
            Vec::new(),
        );
        let listed: Vec<(String, String)> = catalog
            .workflows(&library)
            .into_iter()
            .map(|w| (w.name, w.sha256))
            .collect();
        assert_eq!(
            listed,
            [
                ("sum".to_string(), new.clone()),
                (format!("sum-{}", &old[..8]), old.clone())
            ]
        );
        let newest = catalog.find(&library, "sum").expect("found");
        assert!(newest.about.description.starts_with("New.\n"));
        assert_eq!(newest.about.sessions, Some(2));
        assert_eq!(newest.about.input_schema["required"], json!(["text"]));
        // Uploaded again, the old version is the newest.
        library
            .add(artifact(&dir, "sum", "# Old.\noutput r = session \"A\"\n"))
            .expect("added");
        assert_eq!(catalog.find(&library, "sum").map(|w| w.sha256), Some(old));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_a_bound_without_symbols_is_a_number() {
        assert_eq!(
            constant(&json!([{"coefficient": 3.0, "symbols": []}])),
            Some(3)
        );
        assert_eq!(constant(&json!([])), Some(0));
        assert_eq!(
            constant(&json!([{"coefficient": 2.0, "symbols": ["n"]}])),
            None
        );
        assert_eq!(constant(&Value::Null), None);
    }
}
