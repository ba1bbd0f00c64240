//! How `prosec cost` writes [`Bounds`]: lines for people, or one JSON document.

use super::poly::{count, dollars};
use super::{Bounds, Count, Poly, Pricing, Range};
use serde_json::{json, Value};
use std::fmt::Write;

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A price per million tokens: `$3`, `$0.15`.
fn per_mtok(p: f64) -> String {
    if (p - p.round()).abs() < 1e-9 {
        format!("${}", p.round() as i64)
    } else {
        format!("${p}")
    }
}

impl Bounds {
    /// The bounds as text: the sessions' and judgments' ranges with the lines they come
    /// from, then the cost range with the models, prices and token assumption behind it.
    pub fn render_text(&self, pricing: &Pricing) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "sessions: {}", self.sessions.render(count));
        let _ = writeln!(
            out,
            "judgments: {} (conditions and choices the model decides)",
            self.judgments.render(count)
        );
        for n in &self.notes {
            let _ = writeln!(out, "  {}:{}: {}", n.file, n.line, n.message);
        }
        let models: Vec<String> = self
            .models
            .iter()
            .map(|m| match (m.price, pricing.cache) {
                (Some(p), Some(ttl)) if pricing.cached_in() > 0 => format!(
                    "{} at {}/{} per Mtok (cached: {} read, {} written)",
                    m.model,
                    per_mtok(p.input),
                    per_mtok(p.output),
                    per_mtok(p.cache_read_price()),
                    per_mtok(p.cache_write_price(ttl))
                ),
                (Some(p), _) => format!(
                    "{} at {}/{} per Mtok",
                    m.model,
                    per_mtok(p.input),
                    per_mtok(p.output)
                ),
                (None, _) => format!("{} (no price: not counted)", m.model),
            })
            .collect();
        let _ = writeln!(out, "cost: {}", self.cost.render(dollars));
        if !models.is_empty() {
            let _ = writeln!(out, "  priced: {}", models.join(", "));
        }
        let cached = match pricing.cached_in() {
            0 => String::new(),
            n => format!(
                " ({} of them a prefix the provider caches: read from its cache in the least, written to it in the most)",
                grouped(n)
            ),
        };
        let _ = writeln!(
            out,
            "  assumed per request: {} tokens in{cached}, {} out (--tokens-in, --tokens-cached, --tokens-out); a session makes a request per model turn, and a reply may use up to {} tokens out (what a run's budget reserves)",
            grouped(pricing.tokens_in),
            grouped(pricing.tokens_out),
            grouped(u64::from(pricing.max_output_tokens))
        );
        let symbols = self.symbols();
        if !symbols.is_empty() {
            let _ = writeln!(
                out,
                "  symbols are counts known when the program runs: {}",
                symbols.join(", ")
            );
        }
        out
    }

    /// The bounds as JSON: each range's `min` and `max` (`null` when unbounded) as terms
    /// `{coefficient, symbols}` and as text, with the notes, models and assumptions.
    pub fn to_json(&self, pricing: &Pricing) -> Value {
        fn poly(p: &Poly) -> Value {
            Value::Array(
                p.terms()
                    .map(|(m, c)| json!({"coefficient": c, "symbols": m}))
                    .collect(),
            )
        }
        fn range(r: &Range, coefficient: fn(f64) -> String) -> Value {
            json!({
                "min": poly(&r.min),
                "max": match &r.max {
                    Count::Finite(p) => poly(p),
                    Count::Unbounded => Value::Null,
                },
                "unbounded": r.max == Count::Unbounded,
                "text": r.render(coefficient),
            })
        }
        json!({
            "sessions": range(&self.sessions, count),
            "judgments": range(&self.judgments, count),
            "cost_usd": range(&self.cost, dollars),
            "symbols": self.symbols(),
            "notes": self.notes.iter().map(|n| json!({
                "file": n.file, "line": n.line, "message": n.message,
            })).collect::<Vec<_>>(),
            "models": self.models.iter().map(|m| json!({
                "model": m.model,
                "price": m.price.map(|p| json!({
                    "input": p.input,
                    "output": p.output,
                    "cache_read": p.cache_read_price(),
                    "cache_write": p.cache_write_price(pricing.cache.unwrap_or_default()),
                })),
            })).collect::<Vec<_>>(),
            "assumptions": {
                "tokens_in_per_request": pricing.tokens_in,
                "tokens_cached_per_request": pricing.cached_in(),
                "prompt_cache": pricing.cache.map_or("off", |c| c.as_str()),
                "tokens_out_per_request": pricing.tokens_out,
                "default_model": pricing.models.default,
                "max_output_tokens": pricing.max_output_tokens,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_and_prices_short() {
        assert_eq!(grouped(2000), "2,000");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(per_mtok(3.0), "$3");
        assert_eq!(per_mtok(0.15), "$0.15");
    }
}
