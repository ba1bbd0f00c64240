//! `prosec lsp` driven as an editor drives it: a real process, JSON-RPC over its standard
//! input and output, on a fixture workspace with an import and on the example programs.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A language client talking to one `prosec lsp` process.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    /// Notifications received while waiting for responses.
    notifications: Vec<Value>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp-workspace")
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display()).replace(' ', "%20")
}

impl Client {
    fn start(root: &Path) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_prosec"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start prosec lsp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = Client {
            child,
            stdin,
            stdout,
            next_id: 1,
            notifications: Vec::new(),
        };
        let init = c.request(
            "initialize",
            json!({"processId": null, "rootUri": uri(root), "capabilities": {},
                   "initializationOptions": {"docsUrl": "https://example.org/docs/diagnostics.md"}}),
        );
        assert!(
            init["capabilities"]["definitionProvider"].as_bool() == Some(true),
            "{init}"
        );
        c.notify("initialized", json!({}));
        c
    }

    fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    fn read(&mut self) -> Value {
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("read header");
            assert!(!line.is_empty(), "the server closed its output");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = v.parse().expect("length");
            }
        }
        let mut body = vec![0u8; len];
        self.stdout.read_exact(&mut body).expect("read body");
        serde_json::from_slice(&body).expect("JSON body")
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its response (`result`, or the whole error response).
    fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let msg = self.read();
            if msg.get("id") == Some(&json!(id)) {
                return msg;
            }
            self.notifications.push(msg);
        }
    }

    /// Sends a request and returns its result and how long the server took to start
    /// answering (its first byte), which leaves this client's own reading out. The answer
    /// must be the next message.
    fn request_timed(&mut self, method: &str, params: Value) -> (Value, std::time::Duration) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let started = std::time::Instant::now();
        self.stdout.fill_buf().expect("an answer");
        let took = started.elapsed();
        let msg = self.read();
        assert_eq!(msg["id"], json!(id), "{msg}");
        assert!(msg.get("error").is_none(), "{method}: {msg}");
        (msg["result"].clone(), took)
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let resp = self.request_raw(method, params);
        assert!(resp.get("error").is_none(), "{method}: {resp}");
        resp["result"].clone()
    }

    /// Opens a document and returns the diagnostics published for it.
    fn open(&mut self, path: &Path, text: &str) -> Vec<Value> {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri(path), "languageId": "prose", "version": 1, "text": text}}),
        );
        self.diagnostics(path)
    }

    fn diagnostics(&mut self, path: &Path) -> Vec<Value> {
        let want = uri(path);
        loop {
            let msg = self.read();
            if msg["method"] == "textDocument/publishDiagnostics" && msg["params"]["uri"] == want {
                return msg["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
            }
        }
    }

    fn at(&mut self, method: &str, path: &Path, line: u32, character: u32) -> Value {
        self.request(
            method,
            json!({"textDocument": {"uri": uri(path)}, "position": {"line": line, "character": character}}),
        )
    }

    fn stop(mut self) {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "{status}");
    }
}

/// The line and UTF-16 column of the `nth` (0-based) occurrence of `needle` in `text`,
/// plus `skip` characters.
fn pos(text: &str, needle: &str, nth: usize, skip: u32) -> (u32, u32) {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} not in text"))
        .0;
    let line = text[..at].matches('\n').count() as u32;
    let col = text[..at]
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .encode_utf16()
        .count() as u32;
    (line, col + skip)
}

fn range_text<'t>(text: &'t str, range: &Value) -> &'t str {
    let off = |p: &Value| {
        let line = p["line"].as_u64().expect("line") as usize;
        let ch = p["character"].as_u64().expect("character") as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        start + ch
    };
    &text[off(&range["start"])..off(&range["end"])]
}

fn main_text() -> String {
    std::fs::read_to_string(workspace().join("main.prose")).expect("main.prose")
}

#[test]
fn a_mistyped_agent_is_e007_on_the_name_with_a_fix() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = main_text().replacen(
        "let draft = session: writer",
        "let draft = session: writr",
        1,
    );
    let mut c = Client::start(&root);
    let diags = c.open(&path, &text);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d["code"], "E007");
    assert_eq!(d["severity"], 1);
    assert_eq!(d["source"], "prosec");
    assert_eq!(range_text(&text, &d["range"]), "writr");
    assert_eq!(
        (
            d["range"]["start"]["line"].as_u64(),
            d["range"]["start"]["character"].as_u64()
        ),
        (Some(14), Some(21))
    );
    assert!(
        d["message"]
            .as_str()
            .expect("message")
            .contains("did you mean `writer`?"),
        "{d}"
    );
    assert_eq!(
        d["codeDescription"]["href"],
        "https://example.org/docs/diagnostics.md#e007"
    );
    // The quick fixes: the suggestion, and declaring the agent.
    let actions = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri(&path)}, "range": d["range"], "context": {"diagnostics": [d]}}),
    );
    let titles: Vec<&str> = actions
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| a["title"].as_str().expect("title"))
        .collect();
    assert_eq!(titles, ["Change to `writer`", "Declare agent `writr`"]);
    let fix = &actions[0]["edit"]["changes"][uri(&path)][0];
    assert_eq!(fix["newText"], "writer");
    assert_eq!(range_text(&text, &fix["range"]), "writr");
    let declare = &actions[1]["edit"]["changes"][uri(&path)][0];
    assert!(declare["newText"]
        .as_str()
        .expect("text")
        .starts_with("agent writr:\n  model: sonnet\n"));
    // Typing the fix clears the error (an incremental change).
    let (line, col) = pos(&text, "writr\n", 0, 0);
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&path), "version": 2},
               "contentChanges": [{"range": {"start": {"line": line, "character": col + 4}, "end": {"line": line, "character": col + 4}}, "text": "e"}]}),
    );
    assert_eq!(c.diagnostics(&path), Vec::<Value>::new());
    c.stop();
}

#[test]
fn definitions_and_references_across_files() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = main_text();
    let mut c = Client::start(&root);
    assert_eq!(c.open(&path, &text), Vec::<Value>::new());
    // The agent of a session.
    let (l, ch) = pos(&text, "session: writer", 0, 10);
    let def = c.at("textDocument/definition", &path, l, ch);
    assert_eq!(def["uri"], uri(&path));
    assert_eq!(def["range"]["start"], json!({"line": 4, "character": 6}));
    // A variable inside `{...}` in a prompt.
    let (l, ch) = pos(&text, "{subject}", 0, 2);
    let def = c.at("textDocument/definition", &path, l, ch);
    assert_eq!(def["range"]["start"], json!({"line": 2, "character": 6}));
    assert_eq!(range_text(&text, &def["range"]), "subject");
    // A loop variable.
    let (l, ch) = pos(&text, "{round}", 0, 1);
    let def = c.at("textDocument/definition", &path, l, ch);
    assert_eq!(range_text(&text, &def["range"]), "round");
    // The imported program: its call goes to the `use`, the `use` to the file.
    let (l, ch) = pos(&text, "research(", 0, 1);
    let def = c.at("textDocument/definition", &path, l, ch);
    assert_eq!(def["range"]["start"], json!({"line": 0, "character": 30}));
    let def = c.at("textDocument/definition", &path, 0, 32);
    let lib = std::fs::canonicalize(root.join("lib/research.prose")).expect("lib");
    assert_eq!(def["uri"], uri(&lib));
    // A named argument goes to the input it sets, in the other file.
    let (l, ch) = pos(&text, "depth: 2", 0, 1);
    let def = c.at("textDocument/definition", &path, l, ch);
    assert_eq!(def["uri"], uri(&lib));
    assert_eq!(def["range"]["start"], json!({"line": 2, "character": 6}));
    // Every use of `draft`: declaration, reassignment, context, output.
    let (l, ch) = pos(&text, "let draft", 0, 5);
    let refs = c.request(
        "textDocument/references",
        json!({"textDocument": {"uri": uri(&path)}, "position": {"line": l, "character": ch}, "context": {"includeDeclaration": true}}),
    );
    let lines: Vec<u64> = refs
        .as_array()
        .expect("refs")
        .iter()
        .map(|r| r["range"]["start"]["line"].as_u64().expect("line"))
        .collect();
    assert_eq!(lines, [14, 19, 21, 23]);
    c.stop();
}

/// Where an edit or location is: the file (relative to the workspace) and the text it
/// covers, with the new text for an edit.
fn places(root: &Path, by_uri: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (u, items) in by_uri {
        let path = u.strip_prefix("file://").expect("file URI");
        let text = std::fs::read_to_string(path).expect("file");
        let rel = Path::new(path)
            .strip_prefix(std::fs::canonicalize(root).expect("root"))
            .expect("in the workspace")
            .display()
            .to_string();
        for i in items.as_array().expect("items") {
            out.push((rel.clone(), range_text(&text, &i["range"]).to_string()));
        }
    }
    out.sort();
    out
}

/// Locations grouped by URI, as `places` takes them.
fn by_uri(locations: &Value) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    for l in locations.as_array().expect("locations") {
        let u = l["uri"].as_str().expect("uri").to_string();
        map.entry(u)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("array")
            .push(l.clone());
    }
    map
}

#[test]
fn inputs_and_outputs_are_referenced_and_renamed_across_the_workspace() {
    let root = workspace();
    let lib = std::fs::canonicalize(root.join("lib/research.prose")).expect("lib");
    let lib_text = std::fs::read_to_string(&lib).expect("lib text");
    let main = root.join("main.prose");
    let mut c = Client::start(&root);
    // Only the imported program is open: its importers are read from disk.
    assert_eq!(c.open(&lib, &lib_text), Vec::<Value>::new());
    let (l, ch) = pos(&lib_text, "input topic", 0, 7);
    let refs = c.request(
        "textDocument/references",
        json!({"textDocument": {"uri": uri(&lib)}, "position": {"line": l, "character": ch}, "context": {"includeDeclaration": true}}),
    );
    let s = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        places(&root, &by_uri(&refs)),
        s(&[
            ("lib/research.prose", "topic"),
            ("lib/research.prose", "topic"),
            ("lib/research.prose", "topic"),
            ("main.prose", "topic"),
            ("reports/weekly.prose", "topic"),
        ])
    );
    // Renaming the input renames the named arguments that set it.
    let edit = c.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri(&lib)}, "position": {"line": l, "character": ch}, "newName": "subject"}),
    );
    let changes = edit["changes"].as_object().expect("changes");
    assert_eq!(changes.len(), 3, "{edit}");
    assert!(changes
        .values()
        .flat_map(|v| v.as_array().expect("edits"))
        .all(|e| e["newText"] == "subject"));
    assert_eq!(places(&root, changes), places(&root, &by_uri(&refs)));
    // A name another input has is refused.
    let resp = c.request_raw(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri(&lib)}, "position": {"line": l, "character": ch}, "newName": "depth"}),
    );
    assert!(resp["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("already named `depth`")));
    // The output: read as a member in one importer, destructured in the other.
    let (l, ch) = pos(&lib_text, "output findings", 0, 8);
    let refs = c.request(
        "textDocument/references",
        json!({"textDocument": {"uri": uri(&lib)}, "position": {"line": l, "character": ch}, "context": {"includeDeclaration": false}}),
    );
    assert_eq!(
        places(&root, &by_uri(&refs)),
        s(&[
            ("main.prose", "findings"),
            ("reports/weekly.prose", "findings")
        ])
    );
    // Renamed from an importer: the destructured variable and its uses go with it.
    let main_text = main_text();
    assert_eq!(c.open(&main, &main_text), Vec::<Value>::new());
    let (l, ch) = pos(&main_text, "notes.findings", 0, 8);
    let prep = c.at("textDocument/prepareRename", &main, l, ch);
    assert_eq!(range_text(&main_text, &prep), "findings");
    let def = c.at("textDocument/definition", &main, l, ch);
    assert_eq!(def["uri"], uri(&lib));
    assert_eq!(range_text(&lib_text, &def["range"]), "findings");
    let edit = c.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri(&main)}, "position": {"line": l, "character": ch}, "newName": "results"}),
    );
    assert_eq!(
        places(&root, edit["changes"].as_object().expect("changes")),
        s(&[
            ("lib/research.prose", "findings"),
            ("main.prose", "findings"),
            ("reports/weekly.prose", "findings"),
            ("reports/weekly.prose", "findings"),
        ])
    );
    c.stop();
}

#[test]
fn an_importer_sees_the_unsaved_text_of_an_open_import() {
    let root = workspace();
    let lib = std::fs::canonicalize(root.join("lib/research.prose")).expect("lib");
    let lib_text = std::fs::read_to_string(&lib).expect("lib text");
    let main = root.join("main.prose");
    let main_text = main_text();
    let mut c = Client::start(&root);
    assert_eq!(c.open(&main, &main_text), Vec::<Value>::new());
    // The imported program's input renamed in the editor, not saved: the importer is
    // analysed again with that text and its argument `depth` is now wrong.
    let edited = lib_text.replace("depth", "level");
    assert_eq!(c.open(&lib, &edited), Vec::<Value>::new());
    let diags = c.diagnostics(&main);
    let codes: Vec<&str> = diags
        .iter()
        .map(|d| d["code"].as_str().expect("code"))
        .collect();
    assert_eq!(codes, ["E026", "E027"], "{diags:?}");
    let e027 = &diags[1];
    assert_eq!(range_text(&main_text, &e027["range"]), "depth");
    // Opening (or changing) the importer itself also reads the editor's text of the import.
    let diags = c.open(&main, &main_text);
    assert_eq!(diags.len(), 2, "{diags:?}");
    // Closing the import without saving: the file on disk counts again.
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri(&lib)}}),
    );
    assert_eq!(c.diagnostics(&main), Vec::<Value>::new());
    assert_eq!(std::fs::read_to_string(&lib).expect("lib"), lib_text);
    c.stop();
}

#[test]
fn hover_shows_agents_sessions_and_loop_bounds() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = main_text();
    let mut c = Client::start(&root);
    c.open(&path, &text);
    let (l, ch) = pos(&text, "session: writer", 0, 12);
    let h = c.at("textDocument/hover", &path, l, ch);
    let v = h["contents"]["value"].as_str().expect("markdown");
    for want in [
        "**agent** `writer`",
        "model: `opus`",
        "You write short, clear briefs.",
        "read: `notes/*.md`",
        "skills: web-search",
    ] {
        assert!(v.contains(want), "{want} not in {v}");
    }
    let (l, ch) = pos(&text, "session: writer", 0, 2);
    let h = c.at("textDocument/hover", &path, l, ch);
    let v = h["contents"]["value"].as_str().expect("markdown");
    for want in ["agent: `writer`", "model: `opus`", "context: `notes`"] {
        assert!(v.contains(want), "{want} not in {v}");
    }
    let (l, ch) = pos(&text, "repeat 3", 0, 1);
    let h = c.at("textDocument/hover", &path, l, ch);
    assert!(
        h["contents"]["value"]
            .as_str()
            .expect("markdown")
            .contains("3 session(s)"),
        "{h}"
    );
    // The same bound as an inlay hint at the end of the loop's header.
    let hints = c.request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": uri(&path)}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 40, "character": 0}}}),
    );
    assert_eq!(hints.as_array().expect("hints").len(), 1, "{hints}");
    assert_eq!(hints[0]["label"], "3 session(s)");
    assert_eq!(hints[0]["position"], json!({"line": 18, "character": 18}));
    c.stop();
}

#[test]
fn completion_offers_what_fits_where_the_cursor_is() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = format!(
        "{}session: \nsession \"Tell me about {{sub\"\nagent extra:\n  mo\n",
        main_text()
    );
    let mut c = Client::start(&root);
    c.open(&path, &text);
    let labels = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("items")
            .iter()
            .map(|i| i["label"].as_str().expect("label").to_string())
            .collect()
    };
    let (l, _) = pos(&text, "session: \n", 0, 0);
    assert_eq!(
        labels(&c.at("textDocument/completion", &path, l, 9)),
        ["writer"]
    );
    let (l, ch) = pos(&text, "{sub\"", 0, 4);
    let vars = labels(&c.at("textDocument/completion", &path, l, ch));
    for want in ["subject", "notes", "draft", "brief"] {
        assert!(vars.iter().any(|v| v == want), "{want} not in {vars:?}");
    }
    // Not an agent, nor the variable of a loop that has ended.
    assert!(
        !vars.iter().any(|v| v == "writer" || v == "round"),
        "{vars:?}"
    );
    let (l, ch) = pos(&text, "  mo\n", 0, 4);
    let props = labels(&c.at("textDocument/completion", &path, l, ch));
    assert!(
        props.contains(&"model".to_string()) && props.contains(&"permissions".to_string()),
        "{props:?}"
    );
    let (l, ch) = pos(&text, "model: opus", 0, 7);
    let models = labels(&c.at("textDocument/completion", &path, l, ch));
    assert_eq!(models, ["sonnet", "opus", "haiku"]);
    c.stop();
}

#[test]
fn completion_offers_exactly_the_variables_in_scope() {
    let root = workspace();
    let path = root.join("main.prose");
    // The fixture declares `subject`, `notes`, `draft` and `brief` in the program's own
    // namespace, and `round` as the variable of a `repeat` loop.
    let text = format!(
        "{}block polish(text):\n  let better = session \"Polish {{text}}\"\n  session \"A {{}}\"\n\nfor chapter in [\"a\", \"b\"]:\n  let line = session \"Write {{chapter}}\"\n  session \"B {{}}\"\n\n  \nsession \"C {{}}\"\n",
        main_text()
    );
    let mut c = Client::start(&root);
    let diags = c.open(&path, &text);
    assert!(diags.iter().all(|d| d["severity"] != 1), "{diags:?}");
    let mut offered = |needle: &str, skip: u32| -> Vec<String> {
        let (l, ch) = pos(&text, needle, 0, skip);
        let items = c.at("textDocument/completion", &path, l, ch);
        let mut names: Vec<String> = items
            .as_array()
            .expect("items")
            .iter()
            .filter(|i| i["kind"] == 6)
            .map(|i| i["label"].as_str().expect("label").to_string())
            .collect();
        names.sort();
        names
    };
    // In a block: its parameter and variables, and every variable of the program's own
    // namespace (blocks run when called), the loop's `line` included; no loop variable.
    assert_eq!(
        offered("A {}", 3),
        ["better", "brief", "draft", "line", "notes", "subject", "text"]
    );
    // In the loop: its variable, and what is declared before the cursor.
    assert_eq!(
        offered("B {}", 3),
        ["brief", "chapter", "draft", "line", "notes", "subject"]
    );
    // On a blank line as deep as the loop's body, still in it; on the next line less deep,
    // after it.
    assert_eq!(
        offered("  \nsession \"C", 2),
        ["brief", "chapter", "draft", "line", "notes", "subject"]
    );
    // After the loop: not its variable (`line` is the program's, declared in the loop).
    assert_eq!(
        offered("C {}", 3),
        ["brief", "draft", "line", "notes", "subject"]
    );
    // In an agent's prompt, filled in where a session uses the agent: every variable.
    let agent_text = text.replace(
        "prompt: \"You write short, clear briefs.\"",
        "prompt: \"You write briefs on {}\"",
    );
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&path), "version": 2}, "contentChanges": [{"text": agent_text}]}),
    );
    c.diagnostics(&path);
    let (l, ch) = pos(&agent_text, "briefs on {}", 0, 11);
    let items = c.at("textDocument/completion", &path, l, ch);
    let mut names: Vec<&str> = items
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["label"].as_str().expect("label"))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["better", "brief", "chapter", "draft", "line", "notes", "round", "subject", "text"]
    );
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&path), "version": 3}, "contentChanges": [{"text": text}]}),
    );
    c.diagnostics(&path);
    // Before a declaration: not yet.
    let (l, ch) = pos(&text, "{notes.findings}", 0, 1);
    let items = c.at("textDocument/completion", &path, l, ch);
    let names: Vec<&str> = items
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["label"].as_str().expect("label"))
        .collect();
    assert!(
        names.contains(&"notes") && !names.contains(&"draft"),
        "{names:?}"
    );
    c.stop();
}

/// A client claiming a message of 100 GB and sending one byte of it ends the session at
/// once, with an error on standard error and a failing exit status, its input still open:
/// nothing is allocated for what it claims (before, the server made room for all of it).
#[test]
fn a_huge_content_length_ends_the_session_cleanly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_prosec"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start prosec lsp");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"Content-Length: 100000000000\r\n\r\n{")
        .expect("write");
    stdin.flush().expect("flush");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the server did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(!status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("Content-Length 100000000000")
            && stderr.contains(&format!("{} bytes", prosec::lsp::frame::MAX_CONTENT_LENGTH)),
        "{stderr}"
    );
}

/// References and rename take time in proportion to the text: on one line of 100,000
/// interpolations of a variable (after a character that is not ASCII, so columns are
/// counted in UTF-16 units) each took 26 s or more before, positions being counted from
/// the start of the line for every use and duplicates found by a linear search. Timed to
/// the server's first byte of each answer.
#[test]
fn references_and_rename_on_a_long_line_take_time_in_proportion() {
    const USES: usize = 100_000;
    let root = workspace();
    let path = root.join("long-line.prose");
    let text = format!("let a = \"x\"\nsession \"é{}\"\n", "{a}".repeat(USES));
    let mut c = Client::start(&root);
    c.open(&path, &text);
    let at = json!({"uri": uri(&path)});
    let (refs, references) = c.request_timed(
        "textDocument/references",
        json!({"textDocument": at, "position": {"line": 0, "character": 4},
               "context": {"includeDeclaration": true}}),
    );
    let refs = refs.as_array().expect("locations");
    assert_eq!(refs.len(), USES + 1);
    // The last use: after `session "é` (10 UTF-16 units) and every `{a}` before it.
    let last = 10 + 3 * (USES - 1) + 1;
    assert_eq!(
        refs[USES]["range"],
        json!({"start": {"line": 1, "character": last}, "end": {"line": 1, "character": last + 1}})
    );
    let (edit, rename) = c.request_timed(
        "textDocument/rename",
        json!({"textDocument": at, "position": {"line": 0, "character": 4}, "newName": "b"}),
    );
    assert_eq!(
        edit["changes"][uri(&path)].as_array().expect("edits").len(),
        USES + 1
    );
    // A debug build answers each in about 5 s on an idle machine; the quadratic work this
    // guards against took 10 and 21 minutes. The bound leaves room for a loaded CI machine.
    let bound = std::time::Duration::from_secs(120);
    assert!(
        references < bound && rename < bound,
        "references took {references:?}, rename {rename:?}"
    );
    c.stop();
}

#[test]
fn rename_edits_every_use_and_refuses_clashes() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = main_text();
    let mut c = Client::start(&root);
    c.open(&path, &text);
    let (l, ch) = pos(&text, "input subject", 0, 7);
    let prep = c.at("textDocument/prepareRename", &path, l, ch);
    assert_eq!(range_text(&text, &prep), "subject");
    let edit = c.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri(&path)}, "position": {"line": l, "character": ch}, "newName": "theme"}),
    );
    let edits = edit["changes"][uri(&path)]
        .as_array()
        .expect("edits")
        .clone();
    assert_eq!(edits.len(), 3, "{edits:?}");
    assert!(edits
        .iter()
        .all(|e| range_text(&text, &e["range"]) == "subject" && e["newText"] == "theme"));
    for (new, why) in [
        ("draft", "already named `draft`"),
        ("writer", "agent is already named"),
        ("loop", "not a valid name"),
        ("two words", "not a valid name"),
    ] {
        let resp = c.request_raw(
            "textDocument/rename",
            json!({"textDocument": {"uri": uri(&path)}, "position": {"line": l, "character": ch}, "newName": new}),
        );
        let msg = resp["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{new}: {resp}"));
        assert!(msg.contains(why), "{new}: {msg}");
    }
    // An agent renamed everywhere it is used.
    let (l, ch) = pos(&text, "agent writer", 0, 7);
    let edit = c.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": uri(&path)}, "position": {"line": l, "character": ch}, "newName": "author"}),
    );
    assert_eq!(
        edit["changes"][uri(&path)].as_array().expect("edits").len(),
        3
    );
    c.stop();
}

#[test]
fn formatting_symbols_folding_and_tokens() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = main_text().replace(
        "let notes = research(topic: subject, depth: 2)",
        "let notes=research( topic:subject,depth :2 )",
    );
    let mut c = Client::start(&root);
    c.open(&path, &text);
    let edits = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri(&path)}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert_eq!(edits[0]["newText"].as_str(), Some(main_text().as_str()));
    let symbols = c.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri(&path)}}),
    );
    let names: Vec<&str> = symbols
        .as_array()
        .expect("symbols")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        ["research", "subject", "writer", "notes", "draft", "brief"]
    );
    let folds = c.request(
        "textDocument/foldingRange",
        json!({"textDocument": {"uri": uri(&path)}}),
    );
    let spans: Vec<(u64, u64)> = folds
        .as_array()
        .expect("folds")
        .iter()
        .map(|f| {
            (
                f["startLine"].as_u64().expect("s"),
                f["endLine"].as_u64().expect("e"),
            )
        })
        .collect();
    assert!(
        spans.contains(&(4, 9)) && spans.contains(&(18, 21)),
        "{spans:?}"
    );
    let tokens = c.request(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": uri(&path)}}),
    );
    let data: Vec<u64> = tokens["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_u64().expect("n"))
        .collect();
    // The first token is `use`, a keyword (type 0) at 0:0 of length 3; then its string.
    assert_eq!(&data[..10], &[0, 0, 3, 0, 0, 0, 4, 22, 1, 0]);
    c.stop();
}

#[test]
fn the_example_programs_answer_navigation_hover_and_formatting() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut c = Client::start(&examples);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&examples)
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "prose"))
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    let mut sessions = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read");
        let diags = c.open(&path, &text);
        assert!(
            diags.iter().all(|d| d["severity"] != 1),
            "{}: {diags:?}",
            path.display()
        );
        // Every `session: agent` leads to `agent agent:`, whose hover names its model.
        for (at, _) in text.match_indices("session: ") {
            let name: String = text[at + 9..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            // Only code: the name of an agent the program defines.
            if name.is_empty() || !text.contains(&format!("agent {name}:")) {
                continue;
            }
            let line = text[..at].matches('\n').count() as u32;
            let col = text[..at].rsplit('\n').next().unwrap_or("").len() as u32 + 9;
            let def = c.at("textDocument/definition", &path, line, col);
            assert!(def.is_object(), "{}:{line}: {name}", path.display());
            assert_eq!(
                range_text(&text, &def["range"]),
                name,
                "{}:{line}",
                path.display()
            );
            let hover = c.at("textDocument/hover", &path, line, col);
            let v = hover["contents"]["value"].as_str().unwrap_or_default();
            assert!(
                v.contains(&format!("**agent** `{name}`")) && v.contains("model:"),
                "{v}"
            );
            // Completion just after `session: ` offers the program's agents, this one among
            // them.
            let items = c.at("textDocument/completion", &path, line, col);
            assert!(
                items
                    .as_array()
                    .is_some_and(|a| a.iter().any(|i| i["label"] == name.as_str())),
                "{}:{line}: {name} not offered: {items}",
                path.display()
            );
            // Renaming the agent edits its definition and every session naming it, and
            // only the name.
            let renamed = format!("{name}-renamed");
            let edit = c.request(
                "textDocument/rename",
                json!({"textDocument": {"uri": uri(&path)}, "position": {"line": line, "character": col},
                       "newName": renamed}),
            );
            let edits = edit["changes"][uri(&path)]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let uses = text.matches(&format!("session: {name}\n")).count()
                + text.matches(&format!("session: {name} ")).count();
            assert!(
                edits.len() > uses,
                "{}: {name}: {} edit(s) for {uses} session(s) and a definition",
                path.display(),
                edits.len()
            );
            for e in &edits {
                assert_eq!(range_text(&text, &e["range"]), name, "{}", path.display());
                assert_eq!(e["newText"], renamed.as_str());
            }
            sessions += 1;
        }
        let formatted = c.request(
            "textDocument/formatting",
            json!({"textDocument": {"uri": uri(&path)}, "options": {"tabSize": 2, "insertSpaces": true}}),
        );
        let out = formatted.get(0).map_or(text.clone(), |e| {
            e["newText"].as_str().expect("text").to_string()
        });
        assert_eq!(
            out,
            prosec::fmt::format(&text, &Default::default()).expect("fmt")
        );
    }
    assert!(sessions >= 10, "only {sessions} sessions naming agents");
    c.stop();
}

/// What the other tests leave out: a block's definition and references, a fan-out's bounds in
/// hover and inlay hints, keywords and snippets where a statement starts, the quick fix that
/// allows a warning, and a diagnostic's related information.
#[test]
fn blocks_fan_outs_keywords_snippets_allow_fixes_and_related_information() {
    let root = workspace();
    let path = root.join("main.prose");
    let text = format!(
        "{}\nblock polish(text):\n  session: writer\n    prompt: \"Polish {{text}}\"\n\n\
         do polish(draft)\nlet parts = parallel for part in [\"intro\", \"body\"]:\n  \
         session \"Expand the {{part}}\"\nsession \"\"\n\n",
        main_text()
    );
    let mut c = Client::start(&root);
    let diags = c.open(&path, &text);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["code"], "W001", "{diags:?}");

    // The block: from its call to its definition, and every reference.
    let (l, ch) = pos(&text, "do polish", 0, 4);
    let def = c.at("textDocument/definition", &path, l, ch);
    assert_eq!(range_text(&text, &def["range"]), "polish");
    assert_eq!(
        def["range"]["start"]["line"].as_u64(),
        Some(u64::from(pos(&text, "block polish", 0, 0).0))
    );
    let refs = c.request(
        "textDocument/references",
        json!({"textDocument": {"uri": uri(&path)}, "position": {"line": l, "character": ch},
               "context": {"includeDeclaration": true}}),
    );
    let refs = refs.as_array().expect("locations");
    assert_eq!(refs.len(), 2, "{refs:?}");
    assert!(refs
        .iter()
        .all(|r| range_text(&text, &r["range"]) == "polish"));

    // The fan-out: two branches of one session each, in hover and as an inlay hint.
    let (l, ch) = pos(&text, "parallel for", 0, 1);
    let h = c.at("textDocument/hover", &path, l, ch);
    let v = h["contents"]["value"].as_str().expect("markdown");
    assert!(v.contains("2 session(s)"), "{v}");
    let hints = c.request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": uri(&path)}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 80, "character": 0}}}),
    );
    let hints = hints.as_array().expect("hints");
    let fan_out = hints
        .iter()
        .find(|h| h["position"]["line"].as_u64() == Some(u64::from(l)))
        .unwrap_or_else(|| panic!("no hint on the fan-out's line: {hints:?}"));
    assert_eq!(fan_out["label"], "2 session(s)");

    // Where a statement starts: keywords and snippets (with placeholders).
    let (l, _) = pos(&text, "session \"\"", 0, 0);
    let items = c.at("textDocument/completion", &path, l, 0);
    let items = items.as_array().expect("items");
    let has = |label: &str, kind: u64| {
        items
            .iter()
            .any(|i| i["label"] == label && i["kind"].as_u64() == Some(kind))
    };
    for keyword in ["parallel", "loop", "try", "choice", "block"] {
        assert!(has(keyword, 14), "keyword {keyword} not offered");
    }
    let snippet = items
        .iter()
        .find(|i| i["label"] == "loop until" && i["kind"].as_u64() == Some(15))
        .expect("the loop snippet");
    assert_eq!(snippet["insertTextFormat"], 2);
    assert!(snippet["insertText"]
        .as_str()
        .expect("text")
        .starts_with("loop until **${1:done}**"));

    // The warning's quick fix: an allow comment on the line above, at its indentation.
    let actions = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri(&path)}, "range": diags[0]["range"], "context": {"diagnostics": [diags[0].clone()]}}),
    );
    let allow = actions
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["title"] == "Allow W001 here")
        .unwrap_or_else(|| panic!("no allow action: {actions}"));
    let edit = &allow["edit"]["changes"][uri(&path)][0];
    assert_eq!(edit["newText"], "# prose: allow(W001)\n");
    assert_eq!(edit["range"]["start"], json!({"line": l, "character": 0}));
    // Applied, the warning is gone.
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&path), "version": 2},
               "contentChanges": [{"range": edit["range"], "text": edit["newText"]}]}),
    );
    assert_eq!(c.diagnostics(&path), Vec::<Value>::new());

    // An agent defined twice points back at its first definition.
    let twice = format!("{text}agent writer:\n  model: haiku\n  prompt: \"Again\"\n");
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&path), "version": 3}, "contentChanges": [{"text": twice}]}),
    );
    let diags = c.diagnostics(&path);
    let e006 = diags
        .iter()
        .find(|d| d["code"] == "E006")
        .unwrap_or_else(|| panic!("{diags:?}"));
    let related = e006["relatedInformation"].as_array().expect("related");
    assert_eq!(related.len(), 1, "{e006}");
    assert_eq!(related[0]["message"], "first defined here");
    assert_eq!(related[0]["location"]["uri"], uri(&path));
    assert_eq!(
        related[0]["location"]["range"]["start"],
        json!({"line": 4, "character": 6})
    );
    c.stop();
}

/// The VS Code extension's client starts this server and talks to it: its test
/// (`editors/vscode/client-test/`) calls `activate` as VS Code would, then starts the
/// server the client names, with `PROSEC` set to this build's `prosec`. Needs Node and the
/// extension's packages (`npm ci --prefix editors/vscode`): required on CI, skipped saying
/// so elsewhere.
#[test]
fn the_vscode_extension_starts_this_server() {
    let ext = Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors/vscode");
    let ready = ext.join("node_modules/vscode-languageclient").is_dir()
        && Command::new("node").arg("--version").output().is_ok();
    if !ready {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI needs node and `npm ci --prefix editors/vscode` for the extension's client test"
        );
        eprintln!(
            "skipped: node or editors/vscode/node_modules missing (npm ci --prefix editors/vscode)"
        );
        return;
    }
    let out = Command::new("node")
        .args(["--test", "client-test/"])
        .current_dir(&ext)
        .env("PROSEC", env!("CARGO_BIN_EXE_prosec"))
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
