//! `prosec lsp`: a language server on standard input and output (LSP 3.17).
//!
//! Every open document is analysed by the compiler's own front end ([`document`]): the
//! parser's tree, the resolved program and the name index analysis records as it binds
//! names, with the other open documents standing for their files ([`workspace`]). The
//! features read those: [`diagnostics`], [`navigate`] (definition, references, highlights,
//! rename, across the workspace for the inputs and outputs of programs), [`hover`],
//! [`complete`], [`outline`] (symbols, folding, semantic tokens), [`hints`] (session bounds
//! of loops and fan-outs), [`actions`] (quick fixes), and formatting by [`crate::fmt`].
//! Messages come and go through [`frame`], which reads the client's with limits.

pub mod actions;
pub mod complete;
pub mod diagnostics;
pub mod document;
pub mod frame;
pub mod hints;
pub mod hover;
pub mod navigate;
pub mod outline;
pub mod workspace;

use document::{uri_path, Document};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types as lsp;
use lsp_types::notification::Notification as _;
use lsp_types::request::Request as _;
use serde_json::Value;
use std::path::PathBuf;
use workspace::Workspace;

/// The server's state: the workspace and its open documents.
pub struct Server {
    workspace: Workspace,
    /// Where each code's documentation is (`...diagnostics.md`), for `codeDescription`.
    docs_url: Option<String>,
}

/// What the server can do, as sent in the `initialize` reply.
pub fn capabilities() -> lsp::ServerCapabilities {
    lsp::ServerCapabilities {
        text_document_sync: Some(lsp::TextDocumentSyncCapability::Kind(
            lsp::TextDocumentSyncKind::INCREMENTAL,
        )),
        definition_provider: Some(lsp::OneOf::Left(true)),
        references_provider: Some(lsp::OneOf::Left(true)),
        document_highlight_provider: Some(lsp::OneOf::Left(true)),
        hover_provider: Some(lsp::HoverProviderCapability::Simple(true)),
        completion_provider: Some(lsp::CompletionOptions {
            trigger_characters: Some(vec![":".into(), "{".into(), " ".into()]),
            ..lsp::CompletionOptions::default()
        }),
        rename_provider: Some(lsp::OneOf::Right(lsp::RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        code_action_provider: Some(lsp::CodeActionProviderCapability::Simple(true)),
        document_symbol_provider: Some(lsp::OneOf::Left(true)),
        folding_range_provider: Some(lsp::FoldingRangeProviderCapability::Simple(true)),
        document_formatting_provider: Some(lsp::OneOf::Left(true)),
        inlay_hint_provider: Some(lsp::OneOf::Left(true)),
        semantic_tokens_provider: Some(
            lsp::SemanticTokensServerCapabilities::SemanticTokensOptions(
                lsp::SemanticTokensOptions {
                    legend: lsp::SemanticTokensLegend {
                        token_types: outline::TOKEN_TYPES.to_vec(),
                        token_modifiers: outline::TOKEN_MODIFIERS.to_vec(),
                    },
                    full: Some(lsp::SemanticTokensFullOptions::Bool(true)),
                    range: None,
                    work_done_progress_options: Default::default(),
                },
            ),
        ),
        ..lsp::ServerCapabilities::default()
    }
}

/// Serves on standard input and output until the client says `exit`, through the bounded
/// transport of [`frame`]: a message the client frames wrongly, or longer than
/// [`frame::MAX_CONTENT_LENGTH`], ends the session with an error.
pub fn run_stdio() -> Result<(), String> {
    let (connection, transport) =
        frame::connect(std::io::BufReader::new(std::io::stdin()), std::io::stdout());
    let served = serve(&connection);
    transport.finish(connection, served)
}

/// Runs the protocol on `connection`: initialization, then requests until shutdown.
pub fn serve(connection: &Connection) -> Result<(), String> {
    let caps = serde_json::to_value(capabilities()).map_err(|e| e.to_string())?;
    let params = connection.initialize(caps).map_err(|e| e.to_string())?;
    let params: lsp::InitializeParams = serde_json::from_value(params).unwrap_or_default();
    let mut server = Server::new(&params);
    for msg in &connection.receiver {
        match msg {
            Message::Request(req) => {
                if connection
                    .handle_shutdown(&req)
                    .map_err(|e| e.to_string())?
                {
                    return Ok(());
                }
                let resp = server.request(req);
                connection
                    .sender
                    .send(Message::Response(resp))
                    .map_err(|e| e.to_string())?;
            }
            Message::Notification(n) => {
                for out in server.notification(n) {
                    connection
                        .sender
                        .send(Message::Notification(out))
                        .map_err(|e| e.to_string())?;
                }
            }
            Message::Response(_) => {}
        }
    }
    Ok(())
}

/// Why a request failed: the JSON-RPC error code and a message for the user.
type Failure = (ErrorCode, String);

fn param<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Failure> {
    serde_json::from_value(v).map_err(|e| (ErrorCode::InvalidParams, e.to_string()))
}

impl Server {
    /// A server for a client that sent `params`: the diagnostics documentation is the
    /// `docsUrl` initialization option, else `docs/diagnostics.md` in the workspace.
    #[allow(deprecated)]
    pub fn new(params: &lsp::InitializeParams) -> Server {
        let option = params
            .initialization_options
            .as_ref()
            .and_then(|o| o.get("docsUrl"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let root: Option<PathBuf> = params
            .workspace_folders
            .as_ref()
            .and_then(|f| f.first())
            .map(|f| &f.uri)
            .or(params.root_uri.as_ref())
            .and_then(uri_path);
        let local = root
            .as_ref()
            .map(|r| r.join("docs").join("diagnostics.md"))
            .filter(|p| p.is_file())
            .and_then(|p| document::path_uri(&p))
            .map(|u| u.as_str().to_string());
        Server {
            workspace: Workspace::new(root),
            docs_url: option.or(local),
        }
    }

    /// An open document.
    pub fn document(&self, uri: &lsp::Uri) -> Option<&Document> {
        self.workspace.document(uri)
    }

    /// The diagnostics notification of each open document in `uris`.
    fn publish(&self, uris: Vec<lsp::Uri>) -> Vec<Notification> {
        uris.into_iter()
            .filter_map(|uri| {
                let doc = self.workspace.document(&uri)?;
                let diagnostics = diagnostics::of(doc, self.docs_url.as_deref());
                Some(Notification::new(
                    lsp::notification::PublishDiagnostics::METHOD.into(),
                    lsp::PublishDiagnosticsParams::new(uri, diagnostics, None),
                ))
            })
            .collect()
    }

    /// Opens (or replaces) a document; returns its diagnostics notification, then those of
    /// the open documents that import it, analysed again with its new text.
    pub fn open(&mut self, uri: lsp::Uri, text: String) -> Vec<Notification> {
        let changed = self.workspace.open(uri, text);
        self.publish(changed)
    }

    /// Handles a notification; returns what to send back.
    pub fn notification(&mut self, n: Notification) -> Vec<Notification> {
        use lsp::notification as N;
        match n.method.as_str() {
            N::DidOpenTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidOpenTextDocumentParams>(n.params)
                else {
                    return Vec::new();
                };
                self.open(p.text_document.uri, p.text_document.text)
            }
            N::DidChangeTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidChangeTextDocumentParams>(n.params)
                else {
                    return Vec::new();
                };
                let uri = p.text_document.uri;
                let Some(doc) = self.workspace.document(&uri) else {
                    return Vec::new();
                };
                let mut text = doc.text.clone();
                for change in p.content_changes {
                    match change.range {
                        None => text = change.text,
                        Some(r) => {
                            let lines = document::Lines::new(&text);
                            let a = lines.offset(&text, r.start);
                            let b = lines.offset(&text, r.end).max(a);
                            text.replace_range(a..b, &change.text);
                        }
                    }
                }
                self.open(uri, text)
            }
            N::DidCloseTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidCloseTextDocumentParams>(n.params)
                else {
                    return Vec::new();
                };
                let importers = self.workspace.close(&p.text_document.uri);
                let mut out = vec![Notification::new(
                    N::PublishDiagnostics::METHOD.into(),
                    lsp::PublishDiagnosticsParams::new(p.text_document.uri, Vec::new(), None),
                )];
                out.extend(self.publish(importers));
                out
            }
            _ => Vec::new(),
        }
    }

    /// Answers a request.
    pub fn request(&mut self, req: Request) -> Response {
        let id = req.id.clone();
        match self.answer(req) {
            Ok(v) => Response::new_ok(id, v),
            Err((code, message)) => Response::new_err(id, code as i32, message),
        }
    }

    fn doc_at(&self, p: &lsp::TextDocumentPositionParams) -> Result<(&Document, usize), Failure> {
        let doc = self.doc(&p.text_document.uri)?;
        Ok((doc, doc.offset(p.position)))
    }

    fn doc(&self, uri: &lsp::Uri) -> Result<&Document, Failure> {
        self.document(uri).ok_or_else(|| {
            (
                ErrorCode::InvalidParams,
                format!("{} is not open", uri.as_str()),
            )
        })
    }

    fn answer(&mut self, req: Request) -> Result<Value, Failure> {
        use lsp::request as R;
        let refused = |msg: String| (ErrorCode::RequestFailed, msg);
        let json = |v: serde_json::Result<Value>| v.map_err(|e| refused(e.to_string()));
        match req.method.as_str() {
            R::GotoDefinition::METHOD => {
                let p: lsp::GotoDefinitionParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p.text_document_position_params)?;
                json(serde_json::to_value(navigate::definition(doc, at)))
            }
            R::References::METHOD => {
                let p: lsp::ReferenceParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p.text_document_position)?;
                json(serde_json::to_value(navigate::references(
                    &self.workspace,
                    doc,
                    at,
                    p.context.include_declaration,
                )))
            }
            R::DocumentHighlightRequest::METHOD => {
                let p: lsp::DocumentHighlightParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p.text_document_position_params)?;
                json(serde_json::to_value(navigate::highlights(doc, at)))
            }
            R::HoverRequest::METHOD => {
                let p: lsp::HoverParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p.text_document_position_params)?;
                json(serde_json::to_value(hover::hover(doc, at).map(
                    |(text, span)| lsp::Hover {
                        contents: lsp::HoverContents::Markup(lsp::MarkupContent {
                            kind: lsp::MarkupKind::Markdown,
                            value: text,
                        }),
                        range: Some(doc.range(span)),
                    },
                )))
            }
            R::Completion::METHOD => {
                let p: lsp::CompletionParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p.text_document_position)?;
                json(serde_json::to_value(complete::complete(doc, at)))
            }
            R::PrepareRenameRequest::METHOD => {
                let p: lsp::TextDocumentPositionParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p)?;
                let range = navigate::prepare_rename(doc, at).map_err(refused)?;
                json(serde_json::to_value(range))
            }
            R::Rename::METHOD => {
                let p: lsp::RenameParams = param(req.params)?;
                let (doc, at) = self.doc_at(&p.text_document_position)?;
                let edit =
                    navigate::rename(&self.workspace, doc, at, &p.new_name).map_err(refused)?;
                json(serde_json::to_value(edit))
            }
            R::Formatting::METHOD => {
                let p: lsp::DocumentFormattingParams = param(req.params)?;
                let doc = self.doc(&p.text_document.uri)?;
                let dir = doc.path.parent().unwrap_or(std::path::Path::new("."));
                let options = crate::fmt::FmtOptions::for_dir(dir).map_err(refused)?;
                let out =
                    crate::fmt::format(&doc.text, &options).map_err(|e| refused(e.to_string()))?;
                if out == doc.text {
                    return Ok(Value::Array(Vec::new()));
                }
                let end = doc.lines.position(&doc.text, doc.text.len());
                json(serde_json::to_value(vec![lsp::TextEdit::new(
                    lsp::Range::new(lsp::Position::new(0, 0), end),
                    out,
                )]))
            }
            R::DocumentSymbolRequest::METHOD => {
                let p: lsp::DocumentSymbolParams = param(req.params)?;
                let doc = self.doc(&p.text_document.uri)?;
                json(serde_json::to_value(lsp::DocumentSymbolResponse::Nested(
                    outline::document_symbols(doc),
                )))
            }
            R::FoldingRangeRequest::METHOD => {
                let p: lsp::FoldingRangeParams = param(req.params)?;
                let doc = self.doc(&p.text_document.uri)?;
                json(serde_json::to_value(outline::folding_ranges(doc)))
            }
            R::SemanticTokensFullRequest::METHOD => {
                let p: lsp::SemanticTokensParams = param(req.params)?;
                let doc = self.doc(&p.text_document.uri)?;
                json(serde_json::to_value(lsp::SemanticTokens {
                    result_id: None,
                    data: outline::semantic_tokens(doc),
                }))
            }
            R::InlayHintRequest::METHOD => {
                let p: lsp::InlayHintParams = param(req.params)?;
                let doc = self.doc(&p.text_document.uri)?;
                json(serde_json::to_value(hints::inlay_hints(doc, p.range)))
            }
            R::CodeActionRequest::METHOD => {
                let p: lsp::CodeActionParams = param(req.params)?;
                let doc = self.doc(&p.text_document.uri)?;
                json(serde_json::to_value(actions::code_actions(
                    doc,
                    &p.context.diagnostics,
                )))
            }
            other => Err((
                ErrorCode::MethodNotFound,
                format!("`{other}` is not supported"),
            )),
        }
    }
}
