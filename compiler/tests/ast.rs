//! One test per construct: the tree the parser builds, rendered as a compact S-expression.
//! Spans are checked separately (every node must carry the exact text it came from).

use prosec::ast::*;
use prosec::parser::parse;

fn name(n: &Name) -> String {
    n.text.clone()
}

fn lit(s: &StrLit) -> String {
    let mut out = String::new();
    for p in &s.parts {
        match p {
            StrPart::Text(t) => out.push_str(&format!("{t:?}")),
            StrPart::Interp(i) => {
                out.push_str(&format!("{{{}", i.root));
                for seg in &i.path {
                    match seg {
                        PathSeg::Field(f) => out.push_str(&format!(".{f}")),
                        PathSeg::Index(n) => out.push_str(&format!("[{n}]")),
                    }
                }
                out.push('}');
            }
        }
    }
    if s.triple {
        format!("\"\"\"{out}\"\"\"")
    } else {
        out
    }
}

fn args(a: &[Arg]) -> String {
    a.iter()
        .map(|a| match &a.name {
            Some(n) => format!("{}: {}", n.text, expr(&a.value)),
            None => expr(&a.value),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn props(ps: &[Property]) -> String {
    ps.iter()
        .map(|p| match &p.value {
            PropValue::Expr(e) => format!(" {}={}", p.key.text, expr(e)),
            PropValue::Block(b) => format!(" {}=[{}]", p.key.text, props(b).trim_start()),
        })
        .collect()
}

fn body(b: &Body) -> String {
    b.stmts.iter().map(stmt).collect::<Vec<_>>().join(" ")
}

fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => name(n),
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Float(f) => f.to_string(),
        ExprKind::Str(s) => lit(s),
        ExprKind::Discretion(s) => format!("**{}**", lit(s)),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Null => "null".into(),
        ExprKind::Array(items) => format!(
            "[{}]",
            items.iter().map(expr).collect::<Vec<_>>().join(", ")
        ),
        ExprKind::Object(es) => format!(
            "{{{}}}",
            es.iter()
                .map(|e| format!("{}: {}", e.key.text, expr(&e.value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprKind::Member(b, f) => format!("{}.{}", expr(b), f.text),
        ExprKind::Index(b, i) => format!("{}[{}]", expr(b), expr(i)),
        ExprKind::Call(c, a) => format!("(call {} {})", expr(c), args(a)),
        ExprKind::Unary(op, x) => format!("({op:?} {})", expr(x)),
        ExprKind::Binary(op, l, r) => format!("({op:?} {} {})", expr(l), expr(r)),
        ExprKind::Session(s) => {
            let kind = match s.kind {
                SessionKind::Session => "session",
                SessionKind::Resume => "resume",
            };
            let mut out = format!("({kind}");
            if let Some(n) = &s.name {
                out.push_str(&format!(" name={}", n.text));
            }
            if let Some(a) = &s.agent {
                out.push_str(&format!(" agent={}", a.text));
            }
            if let Some(t) = &s.text {
                out.push_str(&format!(" {}", lit(t)));
            }
            out.push_str(&props(&s.props));
            out.push(')');
            out
        }
        ExprKind::DoCall { name: n, args: a } => match a {
            Some(a) => format!("(do {}({}))", n.text, args(a)),
            None => format!("(do {})", n.text),
        },
        ExprKind::DoBlock(b) => format!("(do: {})", body(b)),
        ExprKind::Arrow(items) => format!(
            "(-> {})",
            items.iter().map(expr).collect::<Vec<_>>().join(" ")
        ),
        ExprKind::Pipeline(h, stages) => {
            let st: Vec<String> = stages
                .iter()
                .map(|s| match &s.params {
                    Some(p) => format!(
                        "{}({}): {}",
                        s.op.text,
                        p.iter().map(name).collect::<Vec<_>>().join(", "),
                        body(&s.body)
                    ),
                    None => format!("{}: {}", s.op.text, body(&s.body)),
                })
                .collect();
            format!("(pipe {} | {})", expr(h), st.join(" | "))
        }
        ExprKind::Parallel { mods, body: b } => format!("(parallel ({}) {})", args(mods), body(b)),
        ExprKind::For(l) => {
            let ForLoop {
                parallel,
                item,
                index,
                iter,
                body: b,
            } = &**l;
            let head = match parallel {
                Some(m) => format!("parallel-for ({})", args(m)),
                None => "for".into(),
            };
            let idx = index
                .as_ref()
                .map(|i| format!(", {}", i.text))
                .unwrap_or_default();
            format!("({head} {}{idx} in {} {})", item.text, expr(iter), body(b))
        }
        ExprKind::Repeat(l) => {
            let RepeatLoop {
                count,
                index,
                body: b,
            } = &**l;
            let idx = index
                .as_ref()
                .map(|i| format!(" as {}", i.text))
                .unwrap_or_default();
            format!("(repeat {}{idx} {})", expr(count), body(b))
        }
        ExprKind::Loop(l) => {
            let UnboundedLoop {
                kind,
                cond,
                mods,
                index,
                body: b,
            } = &**l;
            let c = cond
                .as_ref()
                .map(|c| format!(" {}", expr(c)))
                .unwrap_or_default();
            let idx = index
                .as_ref()
                .map(|i| format!(" as {}", i.text))
                .unwrap_or_default();
            format!("(loop {kind:?}{c} ({}){idx} {})", args(mods), body(b))
        }
        ExprKind::Try(t) => {
            let TryBlock {
                body: b,
                catch,
                finally,
            } = &**t;
            let mut out = format!("(try {}", body(b));
            if let Some(c) = catch {
                let n = c
                    .name
                    .as_ref()
                    .map(|n| format!(" as {}", n.text))
                    .unwrap_or_default();
                out.push_str(&format!(" catch{n} {}", body(&c.body)));
            }
            if let Some(f) = finally {
                out.push_str(&format!(" finally {}", body(f)));
            }
            out.push(')');
            out
        }
        ExprKind::If {
            branches,
            else_body,
        } => {
            let mut out = "(if".to_string();
            for (c, b) in branches {
                out.push_str(&format!(" [{} {}]", expr(c), body(b)));
            }
            if let Some(b) = else_body {
                out.push_str(&format!(" else {}", body(b)));
            }
            out.push(')');
            out
        }
        ExprKind::Choice { criteria, options } => {
            let opts: Vec<String> = options
                .iter()
                .map(|o| format!("[{} {}]", lit(&o.label), body(&o.body)))
                .collect();
            format!("(choice {} {})", expr(criteria), opts.join(" "))
        }
        ExprKind::Error => "<error>".into(),
    }
}

fn stmt(s: &Stmt) -> String {
    match &s.kind {
        StmtKind::Use { path, alias } => match alias {
            Some(a) => format!("(use {} as {})", lit(path), a.text),
            None => format!("(use {})", lit(path)),
        },
        StmtKind::Import { skill, source } => {
            format!("(import {} from {})", lit(skill), lit(source))
        }
        StmtKind::Input {
            name: n,
            description,
        } => format!(
            "(input {}{})",
            n.as_ref().map(name).unwrap_or_default(),
            description
                .as_ref()
                .map(|d| format!(" {}", expr(d)))
                .unwrap_or_default()
        ),
        StmtKind::Output { name: n, value } => match n {
            Some(n) => format!("(output {} = {})", n.text, expr(value)),
            None => format!("(output {})", expr(value)),
        },
        StmtKind::Agent(a) => format!("(agent {}{})", a.name.text, props(&a.props)),
        StmtKind::Bind {
            kind,
            target,
            value,
        } => {
            let t = match target {
                Target::Name(n) => n.text.clone(),
                Target::Destructure(ns, _) => {
                    format!("{{{}}}", ns.iter().map(name).collect::<Vec<_>>().join(", "))
                }
            };
            format!("({kind:?} {t} {})", expr(value))
        }
        StmtKind::BlockDef(b) => format!(
            "(block {}({}) {})",
            b.name.as_ref().map(name).unwrap_or_default(),
            b.params.iter().map(name).collect::<Vec<_>>().join(", "),
            body(&b.body)
        ),
        StmtKind::Throw(e) => match e {
            Some(e) => format!("(throw {})", expr(e)),
            None => "(throw)".into(),
        },
        StmtKind::Assert { cond, message } => match message {
            Some(m) => format!("(assert {} {})", expr(cond), expr(m)),
            None => format!("(assert {})", expr(cond)),
        },
        StmtKind::Expr(e) => expr(e),
        StmtKind::Error => "<error>".into(),
    }
}

/// Parses `src` (which must have no lexical or syntax problems) and renders it.
fn sexp(src: &str) -> String {
    let parsed = parse(0, src);
    assert!(
        parsed.diagnostics.is_empty(),
        "unexpected diagnostics for {src:?}: {:#?}",
        parsed.diagnostics
    );
    check_spans(src, &parsed.program);
    parsed
        .program
        .stmts
        .iter()
        .map(stmt)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every statement's span covers text that starts with its first token.
fn check_spans(src: &str, p: &Program) {
    for s in &p.stmts {
        let text = &src[s.span.range()];
        assert!(!text.trim().is_empty(), "empty span for {s:?}");
        assert_eq!(
            text,
            text.trim_start(),
            "span starts at whitespace: {text:?}"
        );
    }
}

#[test]
fn use_and_import() {
    assert_eq!(
        sexp("use \"@alice/research\"\nuse \"./lib/x.prose\" as x\nimport \"web-search\" from \"github:a/b\"\n"),
        "(use \"@alice/research\")\n(use \"./lib/x.prose\" as x)\n(import \"web-search\" from \"github:a/b\")"
    );
}

#[test]
fn inputs_in_every_description_form() {
    assert_eq!(
        sexp("input topic: \"The subject\"\ninput notes: \"\"\"\nLong\n\"\"\"\ninput ok: **Do you approve?**\ninput bare\n"),
        "(input topic \"The subject\")\n(input notes \"\"\"\"Long\\n\"\"\"\")\n(input ok **\"Do you approve?\"**)\n(input bare)"
    );
}

#[test]
fn outputs_named_anonymous_and_in_branches() {
    assert_eq!(
        sexp("output a = session \"x\"\noutput b = b\nblock f(d):\n  if d <= 0: output d\n  output session \"y\"\n"),
        "(output a = (session \"x\"))\n(output b = b)\n(block f(d) (if [(Le d 0) (output d)]) (output (session \"y\")))"
    );
}

#[test]
fn agent_with_every_property_kind() {
    let src = "agent security-reviewer:\n  model: opus\n  prompt: \"You review\"\n  persist: project\n  skills: [\"web-search\"]\n  permissions:\n    read: [\"*.md\"]\n    bash: deny\n  tone: \"dry\"\n";
    assert_eq!(
        sexp(src),
        "(agent security-reviewer model=opus prompt=\"You review\" persist=project skills=[\"web-search\"] permissions=[read=[\"*.md\"] bash=deny] tone=\"dry\")"
    );
    assert_eq!(sexp("agent a:\n  persist: true\nagent b:\n  persist: user\nagent c:\n  persist: \".prose/x/\"\n"),
        "(agent a persist=true)\n(agent b persist=user)\n(agent c persist=\".prose/x/\")");
}

#[test]
fn session_forms() {
    let src = "session \"Hello {name}\"\nsession: researcher\nsession analysis: researcher\n  prompt: \"Analyze\"\nsession \"Label\"\n  prompt: \"Task\"\n  context: [a, b]\n  retry: 3\n  backoff: \"exponential\"\n  permissions:\n    network: [\"https://*\"]\n";
    assert_eq!(
        sexp(src),
        "(session \"Hello \"{name})\n(session agent=researcher)\n(session name=analysis agent=researcher prompt=\"Analyze\")\n(session \"Label\" prompt=\"Task\" context=[a, b] retry=3 backoff=\"exponential\" permissions=[network=[\"https://*\"]])"
    );
    assert_eq!(
        sexp("session\n  prompt: \"only props\"\n"),
        "(session prompt=\"only props\")"
    );
}

#[test]
fn resume_as_statement_and_value() {
    assert_eq!(
        sexp(
            "resume: captain\n  prompt: \"Go on\"\nlet review = resume: captain\n  context: plan\n"
        ),
        "(resume agent=captain prompt=\"Go on\")\n(Let review (resume agent=captain context=plan))"
    );
}

#[test]
fn bindings_and_destructuring() {
    assert_eq!(
        sexp("let a = 1\nconst b = \"x\"\na = a + 1\nlet { findings, sources } = research(topic: \"q\")\n"),
        "(Let a 1)\n(Const b \"x\")\n(Assign a (Add a 1))\n(Let {findings, sources} (call research topic: \"q\"))"
    );
}

#[test]
fn do_blocks_and_invocations() {
    assert_eq!(
        sexp("do:\n  session \"a\"\ndo review\ndo f()\ndo process(chunk, depth - 1)\nlet r = do:\n  session \"b\"\n"),
        "(do: (session \"a\"))\n(do review)\n(do f())\n(do process(chunk, (Sub depth 1)))\n(Let r (do: (session \"b\")))"
    );
}

#[test]
fn block_definitions() {
    assert_eq!(
        sexp("block review(topic, mode):\n  session \"Review {topic}\"\nblock go():\n  session \"x\"\nblock plain:\n  session \"y\"\n"),
        "(block review(topic, mode) (session \"Review \"{topic}))\n(block go() (session \"x\"))\n(block plain() (session \"y\"))"
    );
}

#[test]
fn arrow_sequences() {
    assert_eq!(
        sexp("session \"A\" -> session \"B\" -> session \"C\"\nlet w = session \"D\" -> session \"E\"\n  context: x\n"),
        "(-> (session \"A\") (session \"B\") (session \"C\"))\n(Let w (-> (session \"D\") (session \"E\" context=x)))"
    );
}

#[test]
fn parallel_with_modifiers_and_named_branches() {
    let src = "parallel (\"any\", count: 2, on-fail: \"ignore\"):\n  a = session \"A\"\n  b = try:\n    session \"B\"\n  catch:\n    session \"C\"\n  session \"D\"\n";
    assert_eq!(
        sexp(src),
        "(parallel (\"any\", count: 2, on-fail: \"ignore\") (Assign a (session \"A\")) (Assign b (try (session \"B\") catch (session \"C\"))) (session \"D\"))"
    );
    assert_eq!(
        sexp("let r = parallel:\n  session \"x\"\n"),
        "(Let r (parallel () (session \"x\")))"
    );
}

#[test]
fn fixed_loops() {
    let src = "repeat 3:\n  session \"a\"\nrepeat n as i:\n  session \"b\"\nfor item, i in items:\n  session \"c\"\nparallel for t in [\"x\", \"y\"]:\n  session \"d\"\nparallel (\"first\") for t in ts:\n  session \"e\"\n";
    assert_eq!(
        sexp(src),
        "(repeat 3 (session \"a\"))\n(repeat n as i (session \"b\"))\n(for item, i in items (session \"c\"))\n(parallel-for () t in [\"x\", \"y\"] (session \"d\"))\n(parallel-for (\"first\") t in ts (session \"e\"))"
    );
}

#[test]
fn unbounded_loops() {
    let src = "loop:\n  session \"a\"\nloop (max: 5):\n  session \"b\"\nloop until **done well** (max: 3) as i:\n  session \"c\"\nloop while count < 3:\n  session \"d\"\nloop until finished (max: 2):\n  session \"e\"\nloop until ***\n  multi\n  line\n***:\n  session \"f\"\n";
    assert_eq!(
        sexp(src),
        "(loop Plain () (session \"a\"))\n(loop Plain (max: 5) (session \"b\"))\n(loop Until **\"done well\"** (max: 3) as i (session \"c\"))\n(loop While (Lt count 3) () (session \"d\"))\n(loop Until finished (max: 2) (session \"e\"))\n(loop Until **\"\"\"\"multi\\n  line\"\"\"\"** () (session \"f\"))"
    );
}

#[test]
fn pipelines_single_line_chained_and_multi_line() {
    let src = "let a = items | map:\n  session \"m\"\nlet b = items\n  | filter:\n      session \"f\"\n  | map:\n      session \"g\"\n  | reduce(acc, x):\n      session \"r\"\nlet c = [1, 2] | pmap:\n  session \"p\"\n";
    assert_eq!(
        sexp(src),
        "(Let a (pipe items | map: (session \"m\")))\n(Let b (pipe items | filter: (session \"f\") | map: (session \"g\") | reduce(acc, x): (session \"r\")))\n(Let c (pipe [1, 2] | pmap: (session \"p\")))"
    );
}

#[test]
fn error_handling() {
    let src = "try:\n  session \"a\"\ncatch as err:\n  throw\nfinally:\n  session \"b\"\ntry:\n  session \"c\"\nfinally:\n  session \"d\"\nthrow \"bad\"\nassert ok: \"must be ok\"\nassert x == 1\n";
    assert_eq!(
        sexp(src),
        "(try (session \"a\") catch as err (throw) finally (session \"b\"))\n(try (session \"c\") finally (session \"d\"))\n(throw \"bad\")\n(assert ok \"must be ok\")\n(assert (Eq x 1))"
    );
}

#[test]
fn choice_and_conditionals() {
    let src = "choice **the best path**:\n  option \"A\":\n    session \"a\"\n  option \"B\":\n    session \"b\"\nif **big** or depth <= 0:\n  session \"x\"\nelif ready:\n  session \"y\"\nelse:\n  session \"z\"\n";
    assert_eq!(
        sexp(src),
        "(choice **\"the best path\"** [\"A\" (session \"a\")] [\"B\" (session \"b\")])\n(if [(Or **\"big\"** (Le depth 0)) (session \"x\")] [ready (session \"y\")] else (session \"z\"))"
    );
}

#[test]
fn program_invocation_and_member_access() {
    assert_eq!(
        sexp("let r = research(topic: \"q\", depth: 2)\nsession \"s\"\n  context: r.findings\n"),
        "(Let r (call research topic: \"q\", depth: 2))\n(session \"s\" context=r.findings)"
    );
}

#[test]
fn expressions_and_precedence() {
    let src = "let x = not a and b or c == d\nlet y = a.b[0].c + -1 - 2\nlet z = x is \"done\"\nlet w = x is not null\nlet o = {\n  a,\n  key: \"v\",   # comment inside\n  \"quoted\": 1,\n  r.findings,\n}\nlet l = [\n  true, false, null, 2.5,\n]\n";
    assert_eq!(
        sexp(src),
        "(Let x (Or (And (Not a) b) (Eq c d)))\n(Let y (Sub (Add a.b[0].c (Neg 1)) 2))\n(Let z (Eq x \"done\"))\n(Let w (Ne x null))\n(Let o {a: a, key: \"v\", quoted: 1, findings: r.findings})\n(Let l [true, false, null, 2.5])"
    );
}

#[test]
fn contextual_keywords_and_hyphenated_names() {
    assert_eq!(
        sexp("let context = 1\nlet index = 2\nlet map = [3]\nlet project = security-reviewer\nlet d = depth - 1\n"),
        "(Let context 1)\n(Let index 2)\n(Let map [3])\n(Let project security-reviewer)\n(Let d (Sub depth 1))"
    );
}

#[test]
fn strings_escapes_interpolation_and_triple_quotes() {
    let src = "session \"a\\tb \\\"q\\\" \\{x} {y.z[1].w} {} {a, b} src/**/*.ts\"\nsession \"\"\"Starts here\n  kept \\. and {n}\n\"\"\"\n";
    assert_eq!(
        sexp(src),
        "(session \"a\\tb \\\"q\\\" {x} \"{y.z[1].w}\" {} {a, b} src/**/*.ts\")\n(session \"\"\"\"Starts here\\n  kept \\\\. and \"{n}\"\\n\"\"\"\")"
    );
}

#[test]
fn triple_quoted_prompt_closing_at_column_zero_keeps_properties() {
    let src = "session: writer\n  prompt: \"\"\"\nWrite it.\n\"\"\"\n  model: opus\n";
    assert_eq!(
        sexp(src),
        "(session agent=writer prompt=\"\"\"\"Write it.\\n\"\"\"\" model=opus)"
    );
}

#[test]
fn comments_blank_lines_and_crlf() {
    let src = "# header\r\n\r\nif ok:   # trailing\r\n  # inside\r\n\r\n  session \"a\"\r\n# before else\r\nelse:\r\n  session \"b\"\r\n";
    assert_eq!(sexp(src), "(if [ok (session \"a\")] else (session \"b\"))");
}

#[test]
fn context_forms() {
    let src = "session \"s\"\n  context:\n    file: \"a.md\"\n    file: \"b.md\"\nsession \"t\"\n  context: \"notes/path.md\"\n";
    assert_eq!(
        sexp(src),
        "(session \"s\" context=[file=\"a.md\" file=\"b.md\"])\n(session \"t\" context=\"notes/path.md\")"
    );
}

#[test]
fn multi_line_call_arguments() {
    assert_eq!(
        sexp("do process(\n  chunk,\n  depth - 1,\n)\n"),
        "(do process(chunk, (Sub depth 1)))"
    );
}

#[test]
fn spans_cover_the_source_of_each_node() {
    let src = "let r = session \"x\"\n  context: a\nparallel:\n  b = session \"y\"\n";
    let p = parse(0, src).program;
    assert_eq!(
        &src[p.stmts[0].span.range()],
        "let r = session \"x\"\n  context: a\n"
    );
    // Statement spans end after their line break; expression spans end at their last token.
    let StmtKind::Bind {
        target: Target::Name(n),
        value,
        ..
    } = &p.stmts[0].kind
    else {
        panic!("expected a binding");
    };
    assert_eq!(&src[n.span.range()], "r");
    assert_eq!(&src[value.span.range()], "session \"x\"\n  context: a");
    let StmtKind::Expr(par) = &p.stmts[1].kind else {
        panic!("expected parallel");
    };
    assert_eq!(&src[par.span.range()], "parallel:\n  b = session \"y\"\n");
}
