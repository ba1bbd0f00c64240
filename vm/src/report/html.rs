//! The report as one HTML page: a header with the run's figures, the timeline (a lane per
//! fiber), the program's source with a line anchor per line, and every request in full.
//! All text is escaped; style and script are inline, so the page opens anywhere, offline.

use super::{Entry, Report};
use prose_machine::protocol::{Answer, Ask, Labelled, Reply, Step, Usage};
use prose_runtime::observe::{grouped, human_duration};
use std::fmt::Write;
use std::time::Duration;

/// The report's style sheet (the server's web page uses it too).
pub const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// `s` as HTML text or attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The anchor of line `line` of module `module` in the source pane.
fn line_anchor(module: u32, line: u32) -> String {
    format!("m{module}-L{line}")
}

/// The anchor of a request's details.
fn request_anchor(e: &Entry) -> String {
    format!("req-{}", e.exchange.request.id)
}

fn short(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max - 1).collect::<String>())
    } else {
        line.to_string()
    }
}

/// A lane's title: `program` for the program's fiber, `fork 1 · branch 2` for a branch.
fn lane_title(lineage: &str) -> String {
    match lineage.rsplit_once('/') {
        None => "program".into(),
        Some((parent, last)) => {
            let (fork, branch) = last.split_once('.').unwrap_or((last, "?"));
            let depth = parent.matches('/').count();
            let nested = if depth > 0 {
                format!(" (in {parent})")
            } else {
                String::new()
            };
            format!("fork {fork} · branch {branch}{nested}")
        }
    }
}

/// The page.
pub fn render(report: &Report) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let r = &report.record;
    let title = format!("{} · run {}", r.program, r.id);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        escape(&title)
    );
    header(&mut h, report);
    h.push_str("<main>\n");
    timeline(&mut h, report);
    sources(&mut h, report);
    h.push_str("</main>\n");
    details(&mut h, report);
    let _ = write!(h, "<script>\n{SCRIPT}</script>\n</body>\n</html>\n");
    h
}

fn header(h: &mut String, report: &Report) {
    let r = &report.record;
    let sessions = report.sessions().count();
    let failed = report.sessions().filter(|e| e.state() == "failed").count();
    let pending = report
        .entries
        .iter()
        .filter(|e| e.state() == "pending")
        .count();
    let ms: u64 = report.sessions().filter_map(|e| e.ms).sum();
    let _ = write!(
        h,
        "<header>\n<h1>{} <span class=\"status s-{}\">{}</span></h1>\n<p class=\"meta\">run <code>{}</code> · started {} · driver {} · origin <code>{}</code></p>\n<dl class=\"figures\">",
        escape(&r.program),
        r.status.as_str(),
        r.status.as_str(),
        escape(&r.id),
        escape(&r.started),
        escape(r.driver.name()),
        escape(&r.origin.display().to_string()),
    );
    let mut figure = |name: &str, value: String| {
        let _ = write!(h, "<div><dt>{name}</dt><dd>{}</dd></div>", escape(&value));
    };
    figure("sessions", sessions.to_string());
    figure("failed", failed.to_string());
    figure("requests", report.entries.len().to_string());
    if pending > 0 {
        figure("waiting", pending.to_string());
    }
    figure("fibers", report.lanes.len().to_string());
    figure("session time", human_duration(Duration::from_millis(ms)));
    let mut first: Vec<u64> = report
        .entries
        .iter()
        .filter_map(|e| e.first_token_ms)
        .collect();
    if !first.is_empty() {
        first.sort_unstable();
        figure(
            "first token (median)",
            human_duration(Duration::from_millis(first[first.len() / 2])),
        );
    }
    match report.tokens() {
        Some(t) => {
            figure("tokens in", grouped(t.input_tokens()));
            if t.cache_read_tokens > 0 {
                figure("read from the cache", grouped(t.cache_read_tokens));
            }
            if t.cache_write_tokens > 0 {
                figure("written to the cache", grouped(t.cache_write_tokens));
            }
            figure("tokens out", grouped(t.output_tokens));
            if let Some(c) = t.cost {
                figure("cost", format!("${c:.4}"));
            }
            if t.from_memo + t.asked > 0 {
                figure(
                    "answers from the memo",
                    format!("{} ({} asked)", t.from_memo, t.asked),
                );
            }
        }
        None => figure("tokens", "not reported".into()),
    }
    h.push_str("</dl>\n");
    if let Some(e) = &r.error {
        let _ = writeln!(h, "<p class=\"run-error\">{}</p>", escape(&e.message));
    }
    if let Some(outputs) = &r.outputs {
        h.push_str("<details class=\"outputs\"><summary>outputs</summary><dl>");
        for (k, v) in outputs {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = write!(
                h,
                "<dt>{}</dt><dd><pre>{}</pre></dd>",
                escape(k),
                escape(&text)
            );
        }
        h.push_str("</dl></details>\n");
    }
    h.push_str(
        "<nav class=\"filters\">show <button data-filter=\"all\" class=\"on\">everything</button>\
         <button data-filter=\"session\">sessions</button>\
         <button data-filter=\"failed\">failures</button> \
         <span id=\"shown\"></span></nav>\n</header>\n",
    );
}

fn timeline(h: &mut String, report: &Report) {
    let _ = write!(
        h,
        "<section id=\"timeline\" aria-label=\"timeline\">\n<div class=\"grid\" style=\"grid-template-columns: repeat({}, minmax(12rem, 1fr))\">\n",
        report.lanes.len().max(1)
    );
    for (i, lane) in report.lanes.iter().enumerate() {
        let _ = writeln!(
            h,
            "<div class=\"lane-head\" style=\"grid-column: {}; grid-row: 1\" title=\"fiber {}\">{}<small>{}</small></div>",
            i + 1,
            escape(lane),
            escape(&lane_title(lane)),
            escape(lane)
        );
    }
    for e in &report.entries {
        card(h, e);
    }
    h.push_str("</div>\n</section>\n");
}

fn card(h: &mut String, e: &Entry) {
    let req = &e.exchange.request;
    let kind = req.kind().as_str();
    let (who, text) = match &req.ask {
        Ask::Session(s) => (
            s.agent.clone().unwrap_or_else(|| "session".into()),
            s.label.clone().unwrap_or_else(|| s.prompt.clone()),
        ),
        Ask::Evaluate(x) => ("condition".into(), x.condition.clone()),
        Ask::Choose(x) => ("choice".into(), x.criteria.clone()),
        Ask::Input(x) => ("input".into(), x.name.clone()),
        Ask::Convert(x) => ("convert".into(), x.text.clone()),
        Ask::Turn(_) | Ask::Tool(_) | Ask::Permission(_) => (kind.into(), String::new()),
    };
    let _ = writeln!(
        h,
        "<a class=\"card k-{kind} st-{}\" href=\"#{}\" data-kind=\"{kind}\" data-state=\"{}\" data-line=\"{}\" style=\"grid-column: {}; grid-row: {}\">\
         <span class=\"top\"><b>{}</b> <code>{}</code> <span class=\"line\">line {}</span></span>\
         <span class=\"text\">{}</span><span class=\"facts\">{}</span></a>",
        e.state(),
        escape(&request_anchor(e)),
        e.state(),
        escape(&line_anchor(req.site.module, req.site.line)),
        e.lane + 1,
        e.row + 2,
        escape(&who),
        escape(&req.id.to_string()),
        req.site.line,
        escape(&short(&text, 80)),
        escape(&facts(e)),
    );
}

/// What a request or turn spent, in a few words: its tokens in (the cache's part apart) and
/// out, or that the memo answered it.
fn spent(u: &Usage) -> String {
    if u.from_memo > 0 && u.tokens() == 0 {
        return "from the memo".into();
    }
    let mut input = grouped(u.input_tokens());
    if u.cache_read_tokens + u.cache_write_tokens > 0 {
        input.push_str(&format!(
            " ({} cached, {} written to the cache)",
            grouped(u.cache_read_tokens),
            grouped(u.cache_write_tokens)
        ));
    }
    format!("{input} in / {} out", grouped(u.output_tokens))
}

/// A request's figures in one line: iteration, latency, turns, tool calls, tokens, state.
fn facts(e: &Entry) -> String {
    let mut f: Vec<String> = Vec::new();
    if e.visit > 1 {
        f.push(format!("visit {}", e.visit));
    }
    if let Some(ms) = e.ms {
        f.push(human_duration(Duration::from_millis(ms)));
    }
    if let Some(ms) = e.first_token_ms {
        f.push(format!(
            "first token {}",
            human_duration(Duration::from_millis(ms))
        ));
    }
    let steps = &e.exchange.steps;
    let calls = steps
        .iter()
        .filter(|s| matches!(s.id.step, Step::Call { .. }))
        .count();
    if calls > 0 {
        f.push(format!("{calls} tool call(s)"));
    }
    let retries = e.failed_turns().len();
    if retries > 0 {
        f.push(format!("{retries} failed turn(s)"));
    }
    if let Some(t) = e.tokens {
        f.push(spent(&t));
    }
    match e.state() {
        "failed" => f.push("failed".into()),
        "pending" => f.push("waiting".into()),
        _ => {}
    }
    f.join(" · ")
}

fn sources(h: &mut String, report: &Report) {
    h.push_str("<section id=\"source\" aria-label=\"source\">\n");
    for (m, src) in report.sources.iter().enumerate() {
        let title = if src.import_path.is_empty() {
            format!("{}.prose", src.name)
        } else {
            format!("{} ({})", src.name, src.import_path)
        };
        let _ = write!(h, "<h2>{}</h2>\n<pre class=\"code\">", escape(&title));
        let m = m as u32;
        for (i, text) in src.text.lines().enumerate() {
            let n = i as u32 + 1;
            let asked = report
                .entries
                .iter()
                .filter(|e| {
                    e.exchange.request.site.module == m && e.exchange.request.site.line == n
                })
                .count();
            let badge = if asked > 0 {
                format!("<span class=\"badge\">{asked}</span>")
            } else {
                String::new()
            };
            let anchor = line_anchor(m, n);
            let _ = write!(
                h,
                "<span class=\"src{}\" id=\"{anchor}\"><a class=\"ln\" href=\"#{anchor}\">{n}</a>{}{badge}\n</span>",
                if asked > 0 { " asked" } else { "" },
                escape(text),
            );
        }
        h.push_str("</pre>\n");
    }
    h.push_str("</section>\n");
}

fn details(h: &mut String, report: &Report) {
    h.push_str("<section id=\"requests\" aria-label=\"requests\">\n<h2>Requests</h2>\n");
    for e in &report.entries {
        request(h, e);
    }
    h.push_str("</section>\n");
}

fn pre(h: &mut String, label: &str, text: &str) {
    let _ = write!(h, "<h4>{}</h4><pre>{}</pre>", escape(label), escape(text));
}

fn context(h: &mut String, items: &[Labelled]) {
    if items.is_empty() {
        return;
    }
    h.push_str("<h4>context</h4><dl class=\"context\">");
    for c in items {
        let _ = write!(
            h,
            "<dt>{}</dt><dd><pre>{}</pre></dd>",
            escape(&c.label),
            escape(&c.value)
        );
    }
    h.push_str("</dl>");
}

fn request(h: &mut String, e: &Entry) {
    let req = &e.exchange.request;
    let kind = req.kind().as_str();
    let _ = write!(
        h,
        "<article class=\"request k-{kind} st-{}\" id=\"{}\" data-kind=\"{kind}\" data-state=\"{}\" data-line=\"{}\">\
         <h3><span class=\"kind\">{kind}</span> <code>{}</code> <a href=\"#{}\">{}</a> <span class=\"state\">{}</span></h3>",
        e.state(),
        escape(&request_anchor(e)),
        e.state(),
        escape(&line_anchor(req.site.module, req.site.line)),
        escape(&req.id.to_string()),
        escape(&line_anchor(req.site.module, req.site.line)),
        escape(&req.site.to_string()),
        e.state(),
    );
    let figures = facts(e);
    if !figures.is_empty() {
        let _ = write!(h, "<p class=\"facts\">{}</p>", escape(&figures));
    }
    match &req.ask {
        Ask::Session(s) => {
            let mut who = Vec::new();
            if let Some(a) = &s.agent {
                who.push(format!("agent {a}"));
            }
            if let Some(m) = &s.model {
                who.push(format!("model {m}"));
            }
            if s.retry > 0 {
                who.push(format!("retry {}", s.retry));
            }
            if !who.is_empty() {
                let _ = write!(h, "<p class=\"who\">{}</p>", escape(&who.join(" · ")));
            }
            if let Some(sys) = &s.system {
                let _ = write!(
                    h,
                    "<details><summary>system prompt</summary><pre>{}</pre></details>",
                    escape(sys)
                );
            }
            pre(h, "prompt", &s.prompt);
            context(h, &s.context);
            if let Some(m) = &s.memory {
                pre(h, "memory", m);
            }
            steps(h, &e.exchange.steps);
        }
        Ask::Evaluate(x) => {
            pre(h, "condition", &x.condition);
            context(h, &x.context);
        }
        Ask::Choose(x) => {
            pre(h, "criteria", &x.criteria);
            h.push_str("<h4>options</h4><ol class=\"options\">");
            for o in &x.options {
                let _ = write!(h, "<li>{}</li>", escape(o));
            }
            h.push_str("</ol>");
            context(h, &x.context);
        }
        Ask::Input(x) => pre(h, &format!("input {}", x.name), &x.question),
        Ask::Convert(x) => pre(
            h,
            &format!(
                "convert to {}",
                prose_machine::protocol::shape_name::name(x.shape)
            ),
            &x.text,
        ),
        Ask::Turn(_) | Ask::Tool(_) | Ask::Permission(_) => {}
    }
    reply(h, e);
    h.push_str("</article>\n");
}

/// An agent loop's steps: each turn's text and tool calls, each call's output, each
/// permission answer.
fn steps(h: &mut String, steps: &[Reply]) {
    if steps.is_empty() {
        return;
    }
    h.push_str("<h4>agent loop</h4><ol class=\"steps\">");
    for s in steps {
        let id = escape(&s.id.to_string());
        match &s.outcome {
            Ok(Answer::Turn(t)) => {
                let _ = write!(h, "<li class=\"turn\"><code>{id}</code> model turn");
                if let Some(u) = s.usage {
                    let _ = write!(h, " <span class=\"tokens\">{}</span>", escape(&spent(&u)));
                }
                if !t.text.is_empty() {
                    let _ = write!(h, "<pre>{}</pre>", escape(&t.text));
                }
                for c in &t.tool_calls {
                    let _ = write!(
                        h,
                        "<div class=\"call\">→ <b>{}</b> <code>{}</code></div>",
                        escape(&c.name),
                        escape(&c.arguments.to_string())
                    );
                }
                h.push_str("</li>");
            }
            Ok(Answer::Tool(out)) => {
                let _ = write!(
                    h,
                    "<li class=\"tool{}\"><code>{id}</code> tool output{}<pre>{}</pre></li>",
                    if out.is_error { " error" } else { "" },
                    if out.is_error { " (error)" } else { "" },
                    escape(&out.content)
                );
            }
            Ok(Answer::Permission(p)) => {
                let _ = write!(
                    h,
                    "<li class=\"permission\"><code>{id}</code> permission: {}</li>",
                    // The word the journal and the stdio protocol use for it.
                    escape(
                        serde_json::to_value(p)
                            .ok()
                            .as_ref()
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or_default()
                    )
                );
            }
            Ok(other) => {
                let _ = write!(
                    h,
                    "<li><code>{id}</code> {}</li>",
                    escape(other.kind().as_str())
                );
            }
            Err(f) => {
                let _ = write!(
                    h,
                    "<li class=\"error\"><code>{id}</code> failed: {}</li>",
                    escape(&f.0)
                );
            }
        }
    }
    h.push_str("</ol>");
}

fn reply(h: &mut String, e: &Entry) {
    let Some(r) = &e.exchange.reply else {
        h.push_str("<p class=\"waiting\">no answer yet</p>");
        return;
    };
    match &r.outcome {
        Err(f) => {
            let _ = write!(
                h,
                "<h4>error</h4><pre class=\"error\">{}</pre>",
                escape(&f.0)
            );
        }
        Ok(Answer::Session(a)) => {
            pre(h, "answer", &a.text);
            if let Some(m) = &a.memory {
                pre(h, "memory after", m);
            }
        }
        Ok(Answer::Evaluate(b)) => pre(h, "verdict", if *b { "true" } else { "false" }),
        Ok(Answer::Choose(i)) => {
            let label = match &e.exchange.request.ask {
                Ask::Choose(c) => c.options.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            };
            pre(h, "chosen", &format!("{}. {label}", i + 1));
        }
        Ok(Answer::Input(v)) | Ok(Answer::Convert(v)) => pre(h, "value", &v.display()),
        Ok(other) => pre(h, "answer", other.kind().as_str()),
    }
}
