//! Static bounds: the least and most model requests a program can make, and what they may
//! cost, before it runs (`prosec cost`).
//!
//! The analysis walks the [resolved program](crate::resolved) (and, at each invocation, the
//! programs it imports, and at each `do`, the block's body) and counts three measures:
//!
//! - **sessions**: each `session` or `resume:` is one session, and up to `1 + retry`
//!   attempts in the most;
//! - **judgments**: each `**discretion**` condition the model decides and each `choice`,
//!   one request each (a corrective re-ask, made only when a reply cannot be read, is not
//!   counted; neither are the rare conversions of a model's text into a list or number);
//! - **cost**: each session priced by its model (its own `model:`, else its agent's, else
//!   the default), each judgment by the default model, at an assumed number of tokens in
//!   and out per request ([`Pricing`]). With prompt caching on (the default; always on an
//!   OpenAI-compatible server, which caches by itself), an assumed part of each request's
//!   input is the prefix a provider caches (tool schemas, the agent's system prompt): in
//!   the least it is read from the cache, in the most written to it, each at its price.
//!
//! Each measure is a range `min ..= max` of [symbolic counts](Poly): constants, and symbols
//! for what is only known when the program runs (`len(topics)` for the length of an input
//! list, `rounds` for an input number). `repeat n` multiplies its body by `n`;
//! `loop ... (max: n)` runs its body `n` times (a plain loop) or `0` to `n` times (`until`
//! / `while`, whose condition is judged before each iteration); a loop without `max:` is
//! unbounded. `for`, `map`, `filter` and `pmap` run their body once per element (a
//! `filter`'s result has from none to all of them). `if`/`elif`/`else` and `choice` take
//! the least and most of their paths (conditions counted up to the branch taken); `try`
//! with `catch` may run its body and its handler; `parallel` sums its branches, except
//! that `first` and `any` may finish after the fewest. Blocks are inlined with what is
//! known of their arguments; a block that calls itself is unbounded.
//!
//! The least is for a run that finishes (a run that fails may stop sooner); the most counts
//! every retry. Where two symbolic counts cannot be ordered (`3` against `2*len(x)`), the
//! most takes the larger coefficient of each term and the least the smaller: sound, and a
//! [`Note`] says where.

pub mod poly;
mod report;
pub mod settings;

pub use poly::Poly;

use crate::compile::Compilation;
use crate::resolved::{self as r, BlockId, ExprKind, StmtKind, Strategy, VarId};
use crate::span::Span;
use prose_settings::cache::PromptCache;
use prose_settings::models::{Models, Provider};
use prose_settings::prices::{self, Price, Tokens};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Sessions, judgments, cost.
const MEASURES: usize = 3;
const SESSIONS: usize = 0;
const JUDGMENTS: usize = 1;
const COST: usize = 2;

/// Block calls inlined at most, in all (a program whose blocks call each other many
/// times over is counted as unbounded rather than analysed for ever).
const MAX_INLINED: usize = 10_000;

/// How requests are priced: the price table, what each model alias is sent as, and the
/// tokens assumed per request.
#[derive(Clone, Debug)]
pub struct Pricing {
    /// Prices over the built-in table (`[prices]` of `prose.toml`).
    pub prices: BTreeMap<String, Price>,
    /// The model ids the aliases, and sessions naming no model (and judgments), are sent
    /// as: resolved as the drivers resolve them.
    pub models: Models,
    /// Tokens assumed read per request.
    pub tokens_in: u64,
    /// Tokens assumed written per request.
    pub tokens_out: u64,
    /// Of the tokens read per request, those assumed to be the prefix a provider caches
    /// (the tool schemas and the agent's system prompt, which repeat).
    pub tokens_cached: u64,
    /// How the provider caches that prefix: for as long as `prompt_cache` says (which
    /// prices its writes), or not at all (`off` on the `anthropic` driver).
    pub cache: Option<PromptCache>,
    /// The most tokens a reply may use (what a run's budget reserves for each request;
    /// reported beside the assumption).
    pub max_output_tokens: u32,
}

/// Tokens assumed read per request unless told otherwise: a prompt with some context.
pub const DEFAULT_TOKENS_IN: u64 = 2_000;
/// Tokens assumed written per request unless told otherwise.
pub const DEFAULT_TOKENS_OUT: u64 = 1_000;
/// Of the tokens read per request, those assumed to be a cached prefix unless told
/// otherwise: the built-in tools' schemas and the VM's word on them come to some 600
/// tokens, and an agent's prompt often to as many again.
pub const DEFAULT_TOKENS_CACHED: u64 = 1_500;

impl Default for Pricing {
    /// The built-in prices, the `anthropic` driver's models, and the default tokens.
    fn default() -> Pricing {
        Pricing {
            prices: BTreeMap::new(),
            models: Models::defaults(Provider::Anthropic),
            tokens_in: DEFAULT_TOKENS_IN,
            tokens_out: DEFAULT_TOKENS_OUT,
            tokens_cached: DEFAULT_TOKENS_CACHED,
            cache: Some(PromptCache::default()),
            max_output_tokens: prices::MAX_OUTPUT_TOKENS,
        }
    }
}

impl Pricing {
    /// The model id a `model:` (or none) is sent as.
    pub fn resolve(&self, model: Option<&str>) -> String {
        self.models.resolve(model).to_string()
    }

    /// The price of a model id.
    pub fn price(&self, model: &str) -> Option<Price> {
        prices::price(&self.prices, model)
    }

    /// Of the tokens read per request, those assumed to be read from (or written to) the
    /// provider's cache: none when it caches nothing.
    pub fn cached_in(&self) -> u64 {
        match self.cache {
            Some(_) => self.tokens_cached.min(self.tokens_in),
            None => 0,
        }
    }

    /// What one request at `price` is assumed to cost, least and most: its cached prefix
    /// read from the provider's cache, and written to it.
    pub fn request_cost(&self, price: Price) -> (f64, f64) {
        let cached = self.cached_in();
        let ttl = self.cache.unwrap_or_default();
        let tokens = Tokens {
            input: self.tokens_in - cached,
            output: self.tokens_out,
            ..Tokens::default()
        };
        let read = price.cost_of(
            Tokens {
                cache_read: cached,
                ..tokens
            },
            ttl,
        );
        let written = price.cost_of(
            Tokens {
                cache_write: cached,
                ..tokens
            },
            ttl,
        );
        (read.min(written), read.max(written))
    }
}

/// The most of a measure: a count, or none at all.
#[derive(Clone, Debug, PartialEq)]
pub enum Count {
    /// At most this.
    Finite(Poly),
    /// No bound (a loop without `max:`, recursion).
    Unbounded,
}

impl Count {
    fn zero() -> Count {
        Count::Finite(Poly::zero())
    }

    fn is_zero(&self) -> bool {
        matches!(self, Count::Finite(p) if p.is_zero())
    }

    fn add(&self, o: &Count) -> Count {
        match (self, o) {
            (Count::Finite(a), Count::Finite(b)) => Count::Finite(a.add(b)),
            _ => Count::Unbounded,
        }
    }

    fn mul(&self, o: &Count) -> Count {
        match (self, o) {
            (Count::Finite(a), Count::Finite(b)) => Count::Finite(a.mul(b)),
            _ if self.is_zero() || o.is_zero() => Count::zero(),
            _ => Count::Unbounded,
        }
    }

    /// The larger, and whether exactly so.
    fn max(&self, o: &Count) -> (Count, bool) {
        match (self, o) {
            (Count::Finite(a), Count::Finite(b)) => {
                let (m, exact) = a.max(b);
                (Count::Finite(m), exact)
            }
            _ => (Count::Unbounded, true),
        }
    }

    /// Written with `coefficient` formatting the coefficients, or `unbounded`.
    pub fn render(&self, coefficient: impl Fn(f64) -> String) -> String {
        match self {
            Count::Finite(p) => p.render(coefficient),
            Count::Unbounded => "unbounded".into(),
        }
    }
}

/// A measure's range.
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    /// The least.
    pub min: Poly,
    /// The most.
    pub max: Count,
}

impl Range {
    /// `min to max`, or the count alone when both are the same.
    pub fn render(&self, coefficient: impl Fn(f64) -> String + Copy) -> String {
        let lo = self.min.render(coefficient);
        match &self.max {
            Count::Finite(p) if *p == self.min => lo,
            max => format!("{lo} to {}", max.render(coefficient)),
        }
    }
}

/// Something the reader of a bound should know: where a count comes from, where it is
/// unbounded, where it is conservative.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Note {
    /// The file.
    pub file: String,
    /// The 1-based line.
    pub line: u32,
    /// What it says.
    pub message: String,
}

/// A model the program's requests go to, and its price if known.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelUse {
    /// The model id.
    pub model: String,
    /// Its price (none: not in the table; its requests are not priced).
    pub price: Option<Price>,
}

/// The bounds of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounds {
    /// Sessions (attempts, retries included in the most).
    pub sessions: Range,
    /// Conditions and choices the model decides.
    pub judgments: Range,
    /// US dollars, for sessions and judgments with a known price.
    pub cost: Range,
    /// Where counts come from, are unbounded or conservative, by file and line.
    pub notes: Vec<Note>,
    /// The models requested, by id.
    pub models: Vec<ModelUse>,
    /// The sessions of each loop and fan-out of the program itself, in source order.
    pub constructs: Vec<Construct>,
}

/// A loop, fan-out or `parallel` block of the measured program and the sessions it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Construct {
    /// The construct, in the program's file.
    pub span: Span,
    /// Its sessions, every iteration or branch together.
    pub sessions: Range,
}

impl Bounds {
    /// The symbols the bounds are written in, sorted.
    pub fn symbols(&self) -> Vec<String> {
        let mut all = BTreeSet::new();
        for range in [&self.sessions, &self.judgments, &self.cost] {
            all.extend(range.min.symbols().cloned());
            if let Count::Finite(p) = &range.max {
                all.extend(p.symbols().cloned());
            }
        }
        all.into_iter().collect()
    }
}

/// The bounds of module `root` of `c`, which must have compiled without errors (and
/// without `check_only`, so that its resolved program is kept).
pub fn bounds(c: &Compilation, root: usize, pricing: &Pricing) -> Bounds {
    let mut a = Analyzer {
        c,
        pricing,
        module: root,
        prefix: String::new(),
        env: HashMap::new(),
        args: HashMap::new(),
        writes: HashMap::new(),
        stack: Vec::new(),
        inlined: 0,
        root,
        constructs: BTreeMap::new(),
        notes: BTreeSet::new(),
        models: BTreeMap::new(),
    };
    let b = a.program(root, String::new(), HashMap::new());
    let [s, j, k] = b.ranges();
    Bounds {
        sessions: s,
        judgments: j,
        cost: k,
        notes: a.notes.into_iter().collect(),
        constructs: a
            .constructs
            .into_iter()
            .map(|((start, end), sessions)| Construct {
                span: Span { start, end },
                sessions,
            })
            .collect(),
        models: a
            .models
            .into_iter()
            .map(|(model, price)| ModelUse { model, price })
            .collect(),
    }
}

/// The three measures' least and most.
#[derive(Clone, Debug, PartialEq)]
struct Bound {
    lo: [Poly; MEASURES],
    hi: [Count; MEASURES],
}

impl Bound {
    fn zero() -> Bound {
        Bound {
            lo: std::array::from_fn(|_| Poly::zero()),
            hi: std::array::from_fn(|_| Count::zero()),
        }
    }

    /// One request of measure `m` costing from `least` to `most`.
    fn one(m: usize, (least, most): (f64, f64)) -> Bound {
        let mut b = Bound::zero();
        b.lo[m] = Poly::constant(1.0);
        b.hi[m] = Count::Finite(Poly::constant(1.0));
        b.lo[COST] = Poly::constant(least);
        b.hi[COST] = Count::Finite(Poly::constant(most));
        b
    }

    fn unbounded() -> Bound {
        Bound {
            lo: std::array::from_fn(|_| Poly::zero()),
            hi: std::array::from_fn(|_| Count::Unbounded),
        }
    }

    fn is_zero(&self) -> bool {
        self.hi.iter().all(Count::is_zero)
    }

    fn then(&self, o: &Bound) -> Bound {
        Bound {
            lo: std::array::from_fn(|i| self.lo[i].add(&o.lo[i])),
            hi: std::array::from_fn(|i| self.hi[i].add(&o.hi[i])),
        }
    }

    /// Run `lo ..= hi` times.
    fn times(&self, lo: &Poly, hi: &Count) -> Bound {
        Bound {
            lo: std::array::from_fn(|i| self.lo[i].mul(lo)),
            hi: std::array::from_fn(|i| self.hi[i].mul(hi)),
        }
    }

    /// One or the other; `false` if either end had to be approximated.
    fn or(&self, o: &Bound) -> (Bound, bool) {
        let mut exact = true;
        let lo = std::array::from_fn(|i| {
            let (p, e) = self.lo[i].min(&o.lo[i]);
            exact &= e;
            p
        });
        let hi = std::array::from_fn(|i| {
            let (p, e) = self.hi[i].max(&o.hi[i]);
            exact &= e;
            p
        });
        (Bound { lo, hi }, exact)
    }

    fn ranges(self) -> [Range; MEASURES] {
        let [l0, l1, l2] = self.lo;
        let [h0, h1, h2] = self.hi;
        [
            Range { min: l0, max: h0 },
            Range { min: l1, max: h1 },
            Range { min: l2, max: h2 },
        ]
    }
}

/// What is known of a value statically: as a number, and as a list's length.
#[derive(Clone, Debug, Default)]
struct Facts {
    int: Option<Size>,
    len: Option<Size>,
}

/// A count known to lie in `lo ..= hi`.
#[derive(Clone, Debug, PartialEq)]
struct Size {
    lo: Poly,
    hi: Poly,
}

impl Size {
    fn exact(p: Poly) -> Size {
        Size {
            lo: p.clone(),
            hi: p,
        }
    }
}

struct Analyzer<'a> {
    c: &'a Compilation,
    pricing: &'a Pricing,
    /// The module being walked.
    module: usize,
    /// Prepended to its symbols (`alias.` inside an imported program).
    prefix: String,
    /// What is known of its variables.
    env: HashMap<VarId, Facts>,
    /// What is known of its parameters, by input name (from an invocation's arguments).
    args: HashMap<String, Facts>,
    /// How many times each of its variables is assigned (facts are kept only for those
    /// assigned once).
    writes: HashMap<VarId, u32>,
    /// Blocks being inlined, by module.
    stack: Vec<(usize, BlockId)>,
    inlined: usize,
    /// The program measured, whose loops and fan-outs are recorded in `constructs`.
    root: usize,
    constructs: BTreeMap<(u32, u32), Range>,
    notes: BTreeSet<Note>,
    models: BTreeMap<String, Option<Price>>,
}

impl<'a> Analyzer<'a> {
    fn program(&mut self, module: usize, prefix: String, args: HashMap<String, Facts>) -> Bound {
        let saved = (
            std::mem::replace(&mut self.module, module),
            std::mem::replace(&mut self.prefix, prefix),
            std::mem::take(&mut self.env),
            std::mem::replace(&mut self.args, args),
            std::mem::take(&mut self.writes),
        );
        let prog = &self.c.modules[module].analysis.program;
        let mut writes = HashMap::new();
        count_writes(&prog.body, &mut writes);
        for b in prog.blocks.values() {
            count_writes(&b.body, &mut writes);
        }
        self.writes = writes;
        let b = self.stmts(&prog.body);
        (self.module, self.prefix, self.env, self.args, self.writes) = saved;
        b
    }

    fn program_ref(&self) -> &'a r::Program {
        let c: &'a Compilation = self.c;
        &c.modules[self.module].analysis.program
    }

    fn note(&mut self, span: Span, message: String) {
        let src = self.c.sources.get(self.c.modules[self.module].file);
        let line = src.line_col(span.start as usize).line;
        self.notes.insert(Note {
            file: src.path.clone(),
            line,
            message,
        });
    }

    /// The source of `span` on one line, shortened.
    fn text(&self, span: Span) -> String {
        let src = &self.c.sources.get(self.c.modules[self.module].file).text;
        let raw = src
            .get(span.start as usize..span.end as usize)
            .unwrap_or("");
        let first = raw.lines().next().unwrap_or("").trim();
        let first = first.strip_suffix(':').unwrap_or(first).trim_end();
        let words: Vec<&str> = first.split_whitespace().collect();
        let one = words.join(" ");
        if one.chars().count() > 48 {
            let cut: String = one.chars().take(47).collect();
            format!("{cut}…")
        } else {
            one
        }
    }

    /// A symbol for something known only at run time.
    fn symbol(&self, name: &str) -> Poly {
        Poly::symbol(format!("{}{name}", self.prefix))
    }

    /// What an expression's value is known to be.
    fn facts(&self, e: &r::Expr) -> Facts {
        match &e.kind {
            ExprKind::Lit(r::Literal::Int(n)) => Facts {
                int: Some(Size::exact(Poly::constant((*n).max(0) as f64))),
                len: None,
            },
            ExprKind::List(items) => Facts {
                int: None,
                len: Some(Size::exact(Poly::constant(items.len() as f64))),
            },
            ExprKind::Var(v) => self.env.get(v).cloned().unwrap_or_default(),
            ExprKind::Pipeline(src, stages) => {
                let mut len = Some(self.len(src));
                for s in stages {
                    len = match (&s.op, len) {
                        (r::StageOp::Map { .. } | r::StageOp::Pmap { .. }, l) => l,
                        (r::StageOp::Filter { .. }, Some(l)) => Some(Size {
                            lo: Poly::zero(),
                            hi: l.hi,
                        }),
                        _ => None,
                    };
                }
                Facts { int: None, len }
            }
            _ => Facts::default(),
        }
    }

    /// The name a value goes by in a symbol: the variable's, else its source.
    fn name_of(&self, e: &r::Expr) -> String {
        match &e.kind {
            ExprKind::Var(v) => match &self.program_ref().vars[*v].name {
                Some(n) => n.clone(),
                None => self.text(e.span),
            },
            _ => self.text(e.span),
        }
    }

    /// What a parameter is known to be from its argument: in symbols of the caller where
    /// nothing more is known.
    fn arg(&self, e: &r::Expr) -> Facts {
        Facts {
            int: Some(self.int(e)),
            len: Some(self.len(e)),
        }
    }

    /// The length of a list-valued expression.
    fn len(&self, e: &r::Expr) -> Size {
        self.facts(e)
            .len
            .unwrap_or_else(|| Size::exact(self.symbol(&format!("len({})", self.name_of(e)))))
    }

    /// The value of a number-valued expression.
    fn int(&self, e: &r::Expr) -> Size {
        self.facts(e)
            .int
            .unwrap_or_else(|| Size::exact(self.symbol(&self.name_of(e))))
    }

    fn stmts(&mut self, body: &[r::Stmt]) -> Bound {
        body.iter()
            .fold(Bound::zero(), |acc, s| acc.then(&self.stmt(s)))
    }

    fn stmt(&mut self, s: &r::Stmt) -> Bound {
        match &s.kind {
            StmtKind::Nop | StmtKind::Throw(None) | StmtKind::Rethrow(_) => Bound::zero(),
            StmtKind::Input { var, input, source } => {
                if matches!(source, r::InputSource::Parameter) {
                    let name = &self.program_ref().inputs[*input].name;
                    if let Some(f) = self.args.get(name).cloned() {
                        self.env.insert(*var, f);
                    }
                }
                Bound::zero()
            }
            StmtKind::Output { value, var, .. } => {
                let b = self.expr(value);
                if let Some(v) = var {
                    self.learn(*v, value);
                }
                b
            }
            StmtKind::Bind { target, value } => {
                let b = self.expr(value);
                if let r::BindTarget::Var(v) = target {
                    self.learn(*v, value);
                }
                b
            }
            StmtKind::Append { item, .. } | StmtKind::Throw(Some(item)) => self.expr(item),
            StmtKind::Assert { cond, message } => {
                let b = self.expr(cond);
                match message {
                    Some(m) => b.then(&self.expr(m)),
                    None => b,
                }
            }
            StmtKind::Expr(e) => self.expr(e),
        }
    }

    /// Remembers what `value` is known to be as the value of `var`, if `var` is assigned
    /// only here.
    fn learn(&mut self, var: VarId, value: &r::Expr) {
        if self.writes.get(&var).copied().unwrap_or(0) <= 1 {
            let f = self.facts(value);
            if f.int.is_some() || f.len.is_some() {
                self.env.insert(var, f);
            }
        }
    }

    fn exprs<'e>(&mut self, es: impl IntoIterator<Item = &'e r::Expr>) -> Bound {
        es.into_iter()
            .fold(Bound::zero(), |acc, e| acc.then(&self.expr(e)))
    }

    fn expr(&mut self, e: &r::Expr) -> Bound {
        match &e.kind {
            ExprKind::Var(_) | ExprKind::Lit(_) | ExprKind::Str(_) => Bound::zero(),
            ExprKind::Discretion(_) => self.judgment(),
            ExprKind::List(items) | ExprKind::Arrow(items) => self.exprs(items),
            ExprKind::Record(entries) => self.exprs(entries.iter().map(|(_, v)| v)),
            ExprKind::Member(x, _) | ExprKind::Not(x) | ExprKind::Neg(x) => self.expr(x),
            ExprKind::Index(a, b) => self.exprs([&**a, &**b]),
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(a);
                let b = self.expr(b);
                if matches!(op, r::BinOp::And | r::BinOp::Or) {
                    // The right side may be skipped.
                    a.then(&b.times(&Poly::zero(), &Count::Finite(Poly::constant(1.0))))
                } else {
                    a.then(&b)
                }
            }
            ExprKind::Invoke(inv) => self.invoke(inv),
            ExprKind::Session(s) => self.session(s),
            ExprKind::Call(call) => self.call(call, e.span),
            ExprKind::Do(body) => self.stmts(body),
            ExprKind::Pipeline(src, stages) => self.pipeline(src, stages),
            ExprKind::Parallel(p) => {
                let b = self.parallel(p, e.span);
                self.construct(e.span, &b)
            }
            ExprKind::For(f) => {
                let b = self.for_loop(f, e.span);
                self.construct(e.span, &b)
            }
            ExprKind::Repeat(rep) => {
                let head = self.expr(&rep.count);
                let n = self.int(&rep.count);
                let body = self.stmts(&rep.body);
                let b = self.iterate(e.span, &body, n.lo, Count::Finite(n.hi));
                head.then(&self.construct(e.span, &b))
            }
            ExprKind::Loop(l) => {
                let b = self.loop_expr(l, e.span);
                self.construct(e.span, &b)
            }
            ExprKind::Try(t) => {
                let body = self.stmts(&t.body);
                let mut b = match &t.catch {
                    Some((_, handler)) => {
                        let handler = self.stmts(handler);
                        // It fails (after any part of the body) and is handled, or not.
                        let (either, _) = body.or(&handler);
                        Bound {
                            lo: either.lo,
                            hi: body.then(&handler).hi,
                        }
                    }
                    None => body,
                };
                if let Some(f) = &t.finally {
                    b = b.then(&self.stmts(f));
                }
                b
            }
            ExprKind::If(i) => {
                let mut paths = Vec::new();
                let mut conds = Bound::zero();
                for (cond, body) in &i.branches {
                    conds = conds.then(&self.expr(cond));
                    paths.push(conds.then(&self.stmts(body)));
                }
                let last = match &i.else_body {
                    Some(body) => conds.then(&self.stmts(body)),
                    None => conds,
                };
                paths.push(last);
                self.any_of(e.span, paths)
            }
            ExprKind::Choice(c) => {
                if c.options.is_empty() {
                    return Bound::zero();
                }
                let paths = c.options.iter().map(|(_, b)| self.stmts(b)).collect();
                let options = self.any_of(e.span, paths);
                self.judgment().then(&options)
            }
        }
    }

    /// The least and most of the paths one of which runs.
    fn any_of(&mut self, span: Span, paths: Vec<Bound>) -> Bound {
        let mut it = paths.into_iter();
        let Some(first) = it.next() else {
            return Bound::zero();
        };
        let mut exact = true;
        let b = it.fold(first, |acc, p| {
            let (b, e) = acc.or(&p);
            exact &= e;
            b
        });
        if !exact {
            let head = self.text(span);
            self.note(
                span,
                format!("`{head}`: the branches' counts cannot be ordered; the least takes the smaller and the most the larger of each term (conservative)"),
            );
        }
        b
    }

    fn judgment(&mut self) -> Bound {
        let model = self.pricing.resolve(None);
        Bound::one(JUDGMENTS, self.per_request(&model))
    }

    /// What one request to `model` is assumed to cost, least and most (nothing if it has
    /// no price).
    fn per_request(&mut self, model: &str) -> (f64, f64) {
        let price = self.pricing.price(model);
        self.models.insert(model.to_string(), price);
        price.map_or((0.0, 0.0), |p| self.pricing.request_cost(p))
    }

    fn session(&mut self, s: &r::Session) -> Bound {
        let ctx = self.exprs(s.context.iter().filter_map(|(_, v)| match v {
            r::ContextValue::Expr(e) => Some(e),
            r::ContextValue::Agent(_) => None,
        }));
        let agent_model = s
            .agent
            .and_then(|a| self.program_ref().agents[a].model.clone());
        let model = self
            .pricing
            .resolve(s.model.clone().or(agent_model).as_deref());
        let one = Bound::one(SESSIONS, self.per_request(&model));
        let attempts = Count::Finite(Poly::constant(1.0 + f64::from(s.retry)));
        ctx.then(&one.times(&Poly::constant(1.0), &attempts))
    }

    /// `body` run `lo ..= hi` times, with a note saying so when the body asks anything.
    /// Records the sessions of a loop or fan-out of the measured program (the first time
    /// it is met, for a block's called more than once) and returns its bound.
    fn construct(&mut self, span: Span, b: &Bound) -> Bound {
        if self.module == self.root {
            self.constructs
                .entry((span.start, span.end))
                .or_insert_with(|| b.clone().ranges()[0].clone());
        }
        b.clone()
    }

    fn iterate(&mut self, span: Span, body: &Bound, lo: Poly, hi: Count) -> Bound {
        if !body.is_zero() {
            let head = self.text(span);
            let times = Range {
                min: lo.clone(),
                max: hi.clone(),
            }
            .render(poly::count);
            let [s, j, _] = body.clone().ranges();
            let mut each = format!("{} session(s)", s.render(poly::count));
            if !j.max.is_zero() {
                each.push_str(&format!(", {} judgment(s)", j.render(poly::count)));
            }
            let message = if hi == Count::Unbounded {
                format!("`{head}`: unbounded (no `max:`), each time {each}")
            } else {
                format!("`{head}`: {times} time(s), each {each}")
            };
            self.note(span, message);
        }
        body.times(&lo, &hi)
    }

    fn for_loop(&mut self, f: &r::For, span: Span) -> Bound {
        let head = self.expr(&f.iter);
        let n = self.len(&f.iter);
        let body = self.stmts(&f.body);
        let lo = match f.parallel {
            Some((join, _)) => self.fewest(span, &body, join, n.lo),
            None => n.lo,
        };
        head.then(&self.iterate(span, &body, lo, Count::Finite(n.hi)))
    }

    /// How many of `n` branches a join waits for at least: one for `first`, its count for
    /// `any`, all of them otherwise.
    fn fewest(&mut self, span: Span, body: &Bound, join: r::Join, n: Poly) -> Poly {
        let wanted = match join.strategy {
            Strategy::All => return n,
            Strategy::First => 1.0,
            Strategy::Any => f64::from(join.count),
        };
        if !body.is_zero() {
            let head = self.text(span);
            self.note(
                span,
                format!("`{head}`: the least counts only the branches `{}` waits for (the others may be cancelled before they ask)", join.strategy.name()),
            );
        }
        n.min(&Poly::constant(wanted)).0
    }

    fn loop_expr(&mut self, l: &r::Loop, span: Span) -> Bound {
        let max = l.max.as_ref().map(|m| (self.expr(m), self.int(m)));
        let cond = l.cond.as_ref().map(|c| self.expr(c));
        let body = self.stmts(&l.body);
        let (setup, n) = match max {
            Some((b, n)) => (b, Some(n)),
            None => (Bound::zero(), None),
        };
        let hi = n
            .as_ref()
            .map_or(Count::Unbounded, |n| Count::Finite(n.hi.clone()));
        let iterations = match cond {
            // A plain loop runs to its max.
            None => {
                let lo = n.map_or(Poly::zero(), |n| n.lo);
                self.iterate(span, &body, lo, hi)
            }
            // The condition is judged before each iteration (once at least, unless the max
            // is zero); the body runs for none to all of them.
            Some(cond) => {
                let lo = n.map_or(Poly::constant(1.0), |n| n.lo.min(&Poly::constant(1.0)).0);
                let each = cond.then(&body);
                let some = self.iterate(span, &each, Poly::zero(), hi);
                Bound {
                    lo: std::array::from_fn(|i| cond.lo[i].mul(&lo)),
                    hi: some.hi,
                }
            }
        };
        setup.then(&iterations)
    }

    fn pipeline(&mut self, src: &r::Expr, stages: &[r::Stage]) -> Bound {
        let mut b = self.expr(src);
        let mut len = self.len(src);
        for s in stages {
            let body = self.stmts(&s.body);
            b = b.then(&self.iterate(s.span, &body, len.lo.clone(), Count::Finite(len.hi.clone())));
            len = match s.op {
                r::StageOp::Map { .. } | r::StageOp::Pmap { .. } => len,
                r::StageOp::Filter { .. } => Size {
                    lo: Poly::zero(),
                    hi: len.hi,
                },
                // A reduction is one value: what follows is a symbol of its own.
                r::StageOp::Reduce { .. } => {
                    Size::exact(self.symbol(&format!("len({})", self.text(s.span))))
                }
            };
        }
        b
    }

    fn parallel(&mut self, p: &r::Parallel, span: Span) -> Bound {
        let branches: Vec<Bound> = p.branches.iter().map(|b| self.stmt(&b.stmt)).collect();
        let all = branches.iter().fold(Bound::zero(), |acc, b| acc.then(b));
        let wanted = match p.join.strategy {
            Strategy::All => return all,
            Strategy::First => 1,
            Strategy::Any => p.join.count as usize,
        };
        if wanted >= branches.len() {
            return all;
        }
        if !all.is_zero() {
            let head = self.text(span);
            self.note(
                span,
                format!("`{head}`: the least counts only the {wanted} branch(es) `{}` waits for (the others may be cancelled before they ask)", p.join.strategy.name()),
            );
        }
        // At least the `wanted` cheapest branches: exactly when every count is a constant,
        // else `wanted` times a lower bound of each.
        let lo = std::array::from_fn(|i| {
            let consts: Option<Vec<f64>> = branches.iter().map(|b| b.lo[i].as_constant()).collect();
            match consts {
                Some(mut cs) => {
                    cs.sort_by(f64::total_cmp);
                    Poly::constant(cs.iter().take(wanted).sum())
                }
                None => branches
                    .iter()
                    .skip(1)
                    .fold(branches[0].lo[i].clone(), |acc, b| acc.min(&b.lo[i]).0)
                    .scale(wanted as f64),
            }
        });
        Bound { lo, hi: all.hi }
    }

    fn call(&mut self, call: &r::Call, span: Span) -> Bound {
        let args = self.exprs(call.args.iter().flatten());
        let key = (self.module, call.block);
        let block = &self.program_ref().blocks[call.block];
        let head = self.text(span);
        if self.stack.contains(&key) {
            self.note(span, format!("`{head}`: the block calls itself: unbounded"));
            return args.then(&Bound::unbounded());
        }
        self.inlined += 1;
        if self.inlined > MAX_INLINED {
            self.note(
                span,
                format!("`{head}`: too many block calls to follow: unbounded"),
            );
            return args.then(&Bound::unbounded());
        }
        let params: Vec<(VarId, Facts)> = block
            .params
            .iter()
            .zip(&call.args)
            .filter_map(|(p, a)| Some((*p, self.arg(a.as_ref()?))))
            .collect();
        let saved = self.env.clone();
        for (p, f) in params {
            self.env.insert(p, f);
        }
        self.stack.push(key);
        let body = self.stmts(&block.body);
        self.stack.pop();
        self.env = saved;
        args.then(&body)
    }

    fn invoke(&mut self, inv: &r::Invoke) -> Bound {
        let args = self.exprs(inv.args.iter().flatten());
        let import = &self.program_ref().imports[inv.import];
        let Some(&module) = self.c.modules[self.module].imports.get(&import.path) else {
            let head = self.text(inv.callee);
            self.note(
                inv.callee,
                format!("`{head}`: the program is not loaded: unbounded"),
            );
            return args.then(&Bound::unbounded());
        };
        let given: HashMap<String, Facts> = import
            .params
            .iter()
            .zip(&inv.args)
            .filter_map(|(name, a)| Some((name.clone(), self.arg(a.as_ref()?))))
            .collect();
        let prefix = format!("{}{}.", self.prefix, import.alias);
        args.then(&self.program(module, prefix, given))
    }
}

/// Counts the assignments of each variable in `body`.
fn count_writes(body: &[r::Stmt], out: &mut HashMap<VarId, u32>) {
    fn stmt(s: &r::Stmt, out: &mut HashMap<VarId, u32>) {
        match &s.kind {
            StmtKind::Bind { target, value } => {
                match target {
                    r::BindTarget::Var(v) => *out.entry(*v).or_default() += 1,
                    r::BindTarget::Destructure(vs) => {
                        for (_, v) in vs {
                            *out.entry(*v).or_default() += 1;
                        }
                    }
                }
                expr(value, out);
            }
            StmtKind::Append { var, item, .. } => {
                *out.entry(*var).or_default() += 2;
                expr(item, out);
            }
            StmtKind::Output { value, var, .. } => {
                if let Some(v) = var {
                    *out.entry(*v).or_default() += 1;
                }
                expr(value, out);
            }
            StmtKind::Throw(Some(e)) | StmtKind::Expr(e) => expr(e, out),
            StmtKind::Assert { cond, message } => {
                expr(cond, out);
                if let Some(m) = message {
                    expr(m, out);
                }
            }
            StmtKind::Nop
            | StmtKind::Input { .. }
            | StmtKind::Throw(None)
            | StmtKind::Rethrow(_) => {}
        }
    }
    fn expr(e: &r::Expr, out: &mut HashMap<VarId, u32>) {
        let body = |b: &[r::Stmt], out: &mut HashMap<VarId, u32>| count_writes(b, out);
        match &e.kind {
            ExprKind::Var(_) | ExprKind::Lit(_) | ExprKind::Str(_) | ExprKind::Discretion(_) => {}
            ExprKind::List(xs) | ExprKind::Arrow(xs) => xs.iter().for_each(|x| expr(x, out)),
            ExprKind::Record(xs) => xs.iter().for_each(|(_, x)| expr(x, out)),
            ExprKind::Member(x, _) | ExprKind::Not(x) | ExprKind::Neg(x) => expr(x, out),
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
                expr(a, out);
                expr(b, out);
            }
            ExprKind::Invoke(i) => i.args.iter().flatten().for_each(|x| expr(x, out)),
            ExprKind::Session(s) => {
                for (_, c) in &s.context {
                    if let r::ContextValue::Expr(x) = c {
                        expr(x, out);
                    }
                }
            }
            ExprKind::Call(c) => {
                c.args.iter().flatten().for_each(|x| expr(x, out));
                for (_, v) in c.outputs.iter().chain(&c.exports) {
                    *out.entry(*v).or_default() += 1;
                }
            }
            ExprKind::Do(b) => body(b, out),
            ExprKind::Pipeline(src, stages) => {
                expr(src, out);
                stages.iter().for_each(|s| body(&s.body, out));
            }
            ExprKind::Parallel(p) => {
                for b in &p.branches {
                    if let Some((_, v)) = &b.result {
                        *out.entry(*v).or_default() += 1;
                    }
                    stmt(&b.stmt, out);
                }
            }
            ExprKind::For(f) => {
                expr(&f.iter, out);
                body(&f.body, out);
            }
            ExprKind::Repeat(rep) => {
                expr(&rep.count, out);
                body(&rep.body, out);
            }
            ExprKind::Loop(l) => {
                l.cond.iter().chain(&l.max).for_each(|x| expr(x, out));
                body(&l.body, out);
            }
            ExprKind::Try(t) => {
                body(&t.body, out);
                if let Some((_, h)) = &t.catch {
                    body(h, out);
                }
                if let Some(f) = &t.finally {
                    body(f, out);
                }
            }
            ExprKind::If(i) => {
                for (c, b) in &i.branches {
                    expr(c, out);
                    body(b, out);
                }
                if let Some(b) = &i.else_body {
                    body(b, out);
                }
            }
            ExprKind::Choice(c) => c.options.iter().for_each(|(_, b)| body(b, out)),
        }
    }
    for s in body {
        stmt(s, out);
    }
}

#[cfg(test)]
mod tests;
