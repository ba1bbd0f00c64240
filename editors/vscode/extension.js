// The VS Code client: starts `prosec lsp` for .prose files. Everything the editor shows
// beyond highlighting (diagnostics, navigation, completion, rename, hover, formatting,
// inlay hints) comes from the server.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("prose").get("server.path") || "prosec";
  const server = { command, args: ["lsp"] };
  client = new LanguageClient(
    "prose",
    "OpenProse",
    { run: server, debug: server },
    { documentSelector: [{ scheme: "file", language: "prose" }] }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
