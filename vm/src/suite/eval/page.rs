//! An eval as one HTML page, in the run report's style: the figures of each model (every
//! score's mean and spread, the pass rate, cost, times), then each row's tries with their
//! inputs, outputs and scores with reasons. Everything is escaped, nothing loads from
//! elsewhere, so the page opens anywhere, offline.

use super::record::{EvalRecord, RowResult, Summary};
use crate::report::html::{escape, STYLE};
use std::fmt::Write;

/// Extra style for the eval's tables.
const EVAL_STYLE: &str = "table.eval { border-collapse: collapse; background: var(--card); margin: .4rem 0 1rem; }
table.eval th, table.eval td { border: 1px solid var(--line); padding: .3rem .5rem; text-align: left; vertical-align: top; }
table.eval td.n { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: var(--ok); font-weight: 600; } .fail { color: var(--failed); font-weight: 600; }
.reason { color: var(--muted); font-size: .8rem; display: block; }
section.variant { padding: 0 1.5rem 1rem; }
";

/// Dollars, as the page shows them.
fn dollars(c: f64) -> String {
    format!("${c:.4}")
}

/// Milliseconds as seconds, or a dash.
fn ms(v: Option<u64>) -> String {
    v.map_or("–".into(), |m| format!("{:.2} s", m as f64 / 1000.0))
}

/// The page.
pub fn render(record: &EvalRecord) -> String {
    let mut h = String::with_capacity(32 * 1024);
    let title = format!("{} · eval {}", record.program, record.id);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}{EVAL_STYLE}</style>\n</head>\n<body>\n<header>\n\
         <h1>{}</h1>\n<p class=\"meta\">{} rows × {} tries of <code>{}</code> over <code>{}</code>; {}; started {}{}</p>\n</header>\n",
        escape(&title),
        escape(&title),
        record.rows,
        record.tries,
        escape(&record.program),
        escape(&record.dataset.display().to_string()),
        escape(&record.driver),
        escape(&record.started),
        match &record.finished {
            Some(f) => format!(", ended {}", escape(f)),
            None => ", not ended".into(),
        }
    );
    for v in &record.variants {
        let s = v.summary(&record.scores);
        let model = v.model.as_deref().unwrap_or("the driver's model");
        let _ = writeln!(
            h,
            "<section class=\"variant\" data-model=\"{}\">\n<h2>{}</h2>",
            escape(model),
            escape(model)
        );
        figures(&mut h, &s);
        rows(&mut h, &record.scores, &v.results);
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn figures(h: &mut String, s: &Summary) {
    let _ = writeln!(
        h,
        "<dl class=\"figures\">\
         <div><dt>pass rate</dt><dd id=\"pass-rate\">{:.0}%</dd></div>\
         <div><dt>passed</dt><dd>{} / {}</dd></div>\
         <div><dt>cost</dt><dd>{}</dd></div>\
         <div><dt>judges' cost</dt><dd>{}</dd></div>\
         <div><dt>first token p50</dt><dd>{}</dd></div>\
         <div><dt>latency p50 / p95</dt><dd>{} / {}</dd></div>\
         <div><dt>run time</dt><dd>{:.1} s</dd></div></dl>",
        s.pass_rate() * 100.0,
        s.passed,
        s.scored,
        dollars(s.cost),
        dollars(s.judge_cost),
        ms(s.first_token_p50),
        ms(s.latency_p50),
        ms(s.latency_p95),
        s.seconds
    );
    h.push_str(
        "<table class=\"eval scores\"><tr><th>score</th><th>mean</th><th>spread</th></tr>\n",
    );
    for (name, mean, spread) in &s.scores {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{mean:.3}</td><td class=\"n\">{spread:.3}</td></tr>",
            escape(name)
        );
    }
    h.push_str("</table>\n");
}

fn rows(h: &mut String, names: &[String], results: &[RowResult]) {
    h.push_str("<table class=\"eval rows\"><tr><th>row</th><th>try</th><th>status</th><th>passed</th><th>inputs</th><th>outputs</th>");
    for n in names {
        let _ = write!(h, "<th>{}</th>", escape(n));
    }
    h.push_str("<th>cost</th><th>time</th><th>run</th></tr>\n");
    for r in results {
        let json = |m: &serde_json::Map<String, serde_json::Value>| {
            escape(&serde_json::to_string_pretty(m).unwrap_or_default())
        };
        let _ = write!(
            h,
            "<tr class=\"row\"><td>{}</td><td class=\"n\">{}</td><td><span class=\"status s-{}\">{}</span></td><td class=\"{}\">{}</td><td><pre>{}</pre></td><td><pre>{}</pre></td>",
            escape(&r.name),
            r.try_index + 1,
            escape(&r.status),
            escape(&r.status),
            if r.passed { "pass" } else { "fail" },
            if !r.scored { "–" } else if r.passed { "yes" } else { "no" },
            json(&r.inputs),
            json(&r.outputs),
        );
        for n in names {
            match r.scores.iter().find(|s| &s.name == n) {
                Some(s) => {
                    let _ = write!(
                        h,
                        "<td class=\"n\">{:.2}{}</td>",
                        s.value,
                        s.reason
                            .as_deref()
                            .filter(|r| !r.is_empty())
                            .map(|r| format!("<span class=\"reason\">{}</span>", escape(r)))
                            .unwrap_or_default()
                    );
                }
                None => h.push_str("<td></td>"),
            }
        }
        let _ = writeln!(
            h,
            "<td class=\"n\">{}</td><td class=\"n\">{:.1} s</td><td><code>{}</code></td></tr>",
            r.cost.map(dollars).unwrap_or_else(|| "–".into()),
            r.seconds,
            escape(r.run.as_deref().unwrap_or("–"))
        );
    }
    h.push_str("</table>\n");
}
