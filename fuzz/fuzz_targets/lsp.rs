//! Drives the language server (`prosec lsp`) as an editor would, from arbitrary bytes: a
//! document opened with fuzzed text and edited by fuzzed ranges, then requests of every
//! kind the server offers at fuzzed positions, and messages with fuzzed methods and
//! parameters. Every request must get a response (a result or an error), never a panic or
//! a hang, whatever the positions (past the end, inside a character) or the parameters.
#![no_main]

use libfuzzer_sys::arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use lsp_server::{Notification, Request, RequestId};
use prosec::lsp::Server;
use serde_json::{json, Value};

const URI: &str = "file:///fuzz/prog.prose";

/// The methods of the requests the server answers.
const METHODS: [&str; 14] = [
    "textDocument/hover",
    "textDocument/definition",
    "textDocument/references",
    "textDocument/documentHighlight",
    "textDocument/completion",
    "textDocument/prepareRename",
    "textDocument/rename",
    "textDocument/codeAction",
    "textDocument/documentSymbol",
    "textDocument/foldingRange",
    "textDocument/formatting",
    "textDocument/inlayHint",
    "textDocument/semanticTokens/full",
    "workspace/symbol",
];

fn position(u: &mut Unstructured) -> Result<Value> {
    // Mostly near the text, sometimes anywhere.
    let (line, character): (u32, u32) = if u.ratio(7, 8)? {
        (u.int_in_range(0..=40)?, u.int_in_range(0..=120)?)
    } else {
        (u.arbitrary()?, u.arbitrary()?)
    };
    Ok(json!({"line": line, "character": character}))
}

fn range(u: &mut Unstructured) -> Result<Value> {
    Ok(json!({"start": position(u)?, "end": position(u)?}))
}

/// The parameters of a request of `method`, at fuzzed places.
fn params(method: &str, u: &mut Unstructured) -> Result<Value> {
    let doc = json!({"uri": URI});
    Ok(match method {
        "textDocument/references" => json!({
            "textDocument": doc, "position": position(u)?,
            "context": {"includeDeclaration": bool::arbitrary(u)?}
        }),
        "textDocument/rename" => json!({
            "textDocument": doc, "position": position(u)?,
            "newName": String::arbitrary(u)?
        }),
        "textDocument/codeAction" => json!({
            "textDocument": doc, "range": range(u)?,
            "context": {"diagnostics": []}
        }),
        "textDocument/inlayHint" => json!({"textDocument": doc, "range": range(u)?}),
        "textDocument/documentSymbol"
        | "textDocument/foldingRange"
        | "textDocument/semanticTokens/full" => json!({"textDocument": doc}),
        "textDocument/formatting" => json!({
            "textDocument": doc,
            "options": {"tabSize": u.int_in_range(0..=8u32)?, "insertSpaces": bool::arbitrary(u)?}
        }),
        "workspace/symbol" => json!({"query": String::arbitrary(u)?}),
        _ => json!({"textDocument": doc, "position": position(u)?}),
    })
}

fn session(u: &mut Unstructured) -> Result<()> {
    let mut server = Server::new(&Default::default());
    let text: String = u.arbitrary()?;
    server.notification(Notification::new(
        "textDocument/didOpen".into(),
        json!({"textDocument": {"uri": URI, "languageId": "prose", "version": 1, "text": text}}),
    ));
    for id in 0..u.int_in_range(0..=16)? {
        match u.int_in_range(0..=3)? {
            // An edit of a range, as an editor sends it.
            0 => {
                let change = if u.ratio(1, 8)? {
                    json!({"text": String::arbitrary(u)?})
                } else {
                    json!({"range": range(u)?, "text": String::arbitrary(u)?})
                };
                server.notification(Notification::new(
                    "textDocument/didChange".into(),
                    json!({"textDocument": {"uri": URI, "version": id + 2}, "contentChanges": [change]}),
                ));
            }
            // Any message at all: a method and parameters as the bytes say.
            1 => {
                let method: String = u.arbitrary()?;
                let params: Value =
                    serde_json::from_str(&String::arbitrary(u)?).unwrap_or(Value::Null);
                if bool::arbitrary(u)? {
                    server.notification(Notification::new(method, params));
                } else {
                    let _ = server.request(Request::new(RequestId::from(id), method, params));
                }
            }
            // A request the server offers, at fuzzed places.
            _ => {
                let method = *u.choose(&METHODS)?;
                let params = params(method, u)?;
                let response =
                    server.request(Request::new(RequestId::from(id), method.into(), params));
                assert_eq!(response.id, RequestId::from(id));
            }
        }
    }
    server.notification(Notification::new(
        "textDocument/didClose".into(),
        json!({"textDocument": {"uri": URI}}),
    ));
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = session(&mut Unstructured::new(data));
});
