// An MCP client made with the official TypeScript SDK, driven by tests/serve/mcp.rs against a
// running `prosevm serve --mcp`:
//
//   PROSE_TOKEN=... node client.mjs URL PLAN
//
// PLAN is JSON: {"call", "refused", "cancel"}, each {"name", "arguments"}. The client lists
// the tools, calls `call` (following its progress) and `refused`, then calls `cancel` and
// cancels it (the SDK sends `notifications/cancelled`) once its first progress notification
// named the run. It prints one JSON line: {"tools", "called": {"result", "progress"},
// "refused", "cancelled": {"run", "error"}}, then waits until its standard input ends (the
// test has seen the run stop) before it closes the session and exits.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, planText] = process.argv.slice(2);
if (!url || !planText) {
  console.error("usage: PROSE_TOKEN=... node client.mjs URL PLAN");
  process.exit(2);
}
const plan = JSON.parse(planText);
const headers = process.env.PROSE_TOKEN ? { Authorization: `Bearer ${process.env.PROSE_TOKEN}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "prosevm-test-client", version: "1.0.0" });
await client.connect(transport);

const out = {};
const { tools } = await client.listTools();
out.tools = tools;

const progress = [];
const result = await client.callTool(
  { name: plan.call.name, arguments: plan.call.arguments },
  undefined,
  { onprogress: (p) => progress.push(p), timeout: 120_000 },
);
out.called = { result, progress };
out.refused = await client.callTool({ name: plan.refused.name, arguments: plan.refused.arguments });

const stop = new AbortController();
let run = null;
let error = null;
try {
  await client.callTool(
    { name: plan.cancel.name, arguments: plan.cancel.arguments },
    undefined,
    {
      signal: stop.signal,
      timeout: 120_000,
      onprogress: (p) => {
        const named = /^run (\S+) started$/.exec(p.message ?? "");
        if (named && run === null) {
          run = named[1];
          stop.abort("cancelled by the test");
        }
      },
    },
  );
} catch (e) {
  error = String(e);
}
out.cancelled = { run, error };
process.stdout.write(JSON.stringify(out) + "\n");

// Held open until the test has seen the run stop: the cancellation is sent without waiting.
process.stdin.resume();
await new Promise((done) => process.stdin.on("end", done));
await client.close();
