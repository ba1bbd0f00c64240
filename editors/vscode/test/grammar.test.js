// Tokenizes every example program with the TextMate grammar (vscode-textmate with the
// Oniguruma engine, as VS Code does) and checks the scopes given to comments, keywords,
// strings and interpolations.
const { test } = require("node:test");
const assert = require("node:assert");
const fs = require("node:fs");
const path = require("node:path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const root = path.join(__dirname, "..", "..", "..");
const grammarPath = path.join(__dirname, "..", "syntaxes", "prose.tmLanguage.json");

async function loadGrammar() {
  const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (p) => new oniguruma.OnigScanner(p),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async () =>
      vsctm.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath),
  });
  return registry.loadGrammar("source.prose");
}

function programs() {
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".prose")) out.push(p);
    }
  };
  walk(path.join(root, "examples"));
  return out.sort();
}

/** Each line's tokens: [{ start, end, scopes }]. */
function tokenize(grammar, text) {
  let stack = vsctm.INITIAL;
  return text.split("\n").map((line) => {
    const r = grammar.tokenizeLine(line, stack);
    stack = r.ruleStack;
    return r.tokens.map((t) => ({ start: t.startIndex, end: t.endIndex, scopes: t.scopes }));
  });
}

function scopesAt(tokens, col) {
  const t = tokens.find((t) => t.start <= col && col < t.end);
  return t ? t.scopes.join(" ") : "";
}

test("every example tokenizes with the expected scopes", async () => {
  const grammar = await loadGrammar();
  const files = programs();
  assert.ok(files.length >= 10, `only ${files.length} examples`);
  const counts = { comment: 0, keyword: 0, string: 0, interpolation: 0 };
  for (const file of files) {
    const lines = fs.readFileSync(file, "utf8").split("\n");
    const tokens = tokenize(grammar, lines.join("\n"));
    lines.forEach((line, i) => {
      const where = `${path.basename(file)}:${i + 1}`;
      const first = line.search(/\S/);
      if (first < 0) return;
      const inString = /string/.test(scopesAt(tokens[i], first));
      if (inString) return;
      if (line[first] === "#") {
        assert.match(scopesAt(tokens[i], first), /comment\.line\.number-sign\.prose/, where);
        counts.comment++;
        return;
      }
      const kw = /^(agent|session|let|const|parallel|for|loop|if|output|input|use|import|repeat|try|catch|block|choice|resume)\b/.exec(line.slice(first));
      if (kw) {
        assert.match(scopesAt(tokens[i], first), /(keyword\.control|storage\.type)[\w.]*\.prose/, `${where}: ${kw[1]}`);
        counts.keyword++;
      }
      // A one-line string, and each `{name}` inside it.
      const str = /"([^"\\]|\\.)*"/.exec(line.slice(first));
      if (str && !line.includes('"""')) {
        const at = first + str.index;
        if (/comment|discretion/.test(scopesAt(tokens[i], at))) return;
        assert.match(scopesAt(tokens[i], at), /string\.quoted\.double\.prose/, where);
        counts.string++;
        const interp = /\{([A-Za-z_][\w-]*)\}/.exec(str[0]);
        if (interp) {
          const col = at + interp.index + 1;
          assert.match(scopesAt(tokens[i], col), /meta\.interpolation\.prose.*variable\.other\.prose/, where);
          counts.interpolation++;
        }
      }
    });
  }
  for (const [what, n] of Object.entries(counts)) assert.ok(n >= 10, `only ${n} ${what}(s) checked`);
});

test("multi-line strings, discretion and comments after code", async () => {
  const grammar = await loadGrammar();
  const text = [
    'let brief = session "Write"   # trailing',
    '  prompt: """Line one {topic}',
    "# not a comment inside the string",
    '"""',
    "loop until **the draft is {good}** (max: 3):",
    "  session: writer",
  ].join("\n");
  const t = tokenize(grammar, text);
  assert.match(scopesAt(t[0], 31), /comment\.line/);
  assert.match(scopesAt(t[0], 0), /storage\.type\.prose/);
  assert.match(scopesAt(t[1], 23), /string\.quoted\.triple\.prose.*variable\.other\.prose/);
  assert.match(scopesAt(t[2], 0), /string\.quoted\.triple\.prose/);
  assert.doesNotMatch(scopesAt(t[2], 0), /comment/);
  assert.match(scopesAt(t[4], 12), /string\.other\.discretion\.prose/);
  assert.match(scopesAt(t[4], 0), /keyword\.control\.prose/);
  assert.match(scopesAt(t[4], 41), /constant\.numeric\.prose/);
});
