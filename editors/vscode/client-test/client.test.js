// The extension's client, as VS Code would start it: `activate` is called with the editor's
// API stubbed (only what the extension itself touches), the language client it builds is
// captured, and the server it names is started exactly as the client would start it and
// spoken to over stdio (JSON-RPC with Content-Length framing). Run by compiler/tests/lsp.rs
// with PROSEC set to the `prosec` just built; not part of `node --test test/`, which runs
// before anything is built.
const { test } = require("node:test");
const assert = require("node:assert");
const Module = require("node:module");
const { spawn } = require("node:child_process");
const path = require("node:path");

const prosec = process.env.PROSEC;

// The editor's API and the language client, stubbed: `vscode` exists only inside VS Code.
const started = [];
const stubs = {
  vscode: {
    workspace: {
      getConfiguration: (section) => ({
        get: (key) => (section === "prose" && key === "server.path" ? prosec : undefined),
      }),
    },
  },
  "vscode-languageclient/node": {
    LanguageClient: class {
      constructor(id, name, serverOptions, clientOptions) {
        Object.assign(this, { id, name, serverOptions, clientOptions });
      }
      start() {
        started.push(this);
        return Promise.resolve();
      }
      stop() {
        return Promise.resolve();
      }
    },
  },
};
const load = Module._load;
Module._load = function (request, parent, isMain) {
  return request in stubs ? stubs[request] : load.call(this, request, parent, isMain);
};

// One JSON-RPC connection over a child's stdio.
function connect(child) {
  let buffer = Buffer.alloc(0);
  const waiting = [];
  const messages = [];
  child.stdout.on("data", (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(buffer.slice(0, end).toString())[1]);
      if (buffer.length < end + 4 + length) return;
      messages.push(JSON.parse(buffer.slice(end + 4, end + 4 + length).toString()));
      buffer = buffer.slice(end + 4 + length);
      for (const w of waiting.splice(0)) w();
    }
  });
  const send = (msg) => {
    const body = JSON.stringify({ jsonrpc: "2.0", ...msg });
    child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  };
  const next = async (pred) => {
    for (;;) {
      const i = messages.findIndex(pred);
      if (i >= 0) return messages.splice(i, 1)[0];
      await new Promise((resolve, reject) => {
        waiting.push(resolve);
        child.once("exit", () => reject(new Error("the server exited")));
      });
    }
  };
  return { send, next };
}

test("the extension starts `prosec lsp` for .prose files, and that server answers", async () => {
  assert.ok(prosec, "PROSEC names the prosec executable");
  const extension = require(path.join(__dirname, "..", "extension.js"));
  const subscriptions = [];
  await extension.activate({ subscriptions });
  assert.strictEqual(started.length, 1);
  const client = started[0];
  assert.strictEqual(subscriptions[0], client);
  assert.deepStrictEqual(client.serverOptions.run, { command: prosec, args: ["lsp"] });
  assert.deepStrictEqual(client.serverOptions.debug, client.serverOptions.run);
  assert.deepStrictEqual(client.clientOptions.documentSelector, [
    { scheme: "file", language: "prose" },
  ]);

  const { command, args } = client.serverOptions.run;
  const server = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const rpc = connect(server);
  rpc.send({ id: 1, method: "initialize", params: { processId: process.pid, rootUri: null, capabilities: {} } });
  const init = await rpc.next((m) => m.id === 1);
  assert.strictEqual(init.result.capabilities.definitionProvider, true);
  assert.ok(init.result.capabilities.documentFormattingProvider);
  rpc.send({ method: "initialized", params: {} });
  const uri = "file:///tmp/client-test.prose";
  const text = 'agent writer:\n  model: sonnet\n  prompt: "You write"\nsession: writr\n  prompt: "Hi"\n';
  rpc.send({
    method: "textDocument/didOpen",
    params: { textDocument: { uri, languageId: "prose", version: 1, text } },
  });
  const published = await rpc.next(
    (m) => m.method === "textDocument/publishDiagnostics" && m.params.uri === uri
  );
  const codes = published.params.diagnostics.map((d) => d.code);
  assert.deepStrictEqual(codes, ["E007"]);
  rpc.send({ id: 2, method: "shutdown", params: null });
  await rpc.next((m) => m.id === 2);
  rpc.send({ method: "exit", params: null });
  const code = await new Promise((resolve) => server.on("exit", resolve));
  assert.strictEqual(code, 0);
  await extension.deactivate();
});
