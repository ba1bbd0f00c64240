//! `prosevm report`: one self-contained HTML page about a run. Everything comes from the
//! store keeping it: the requests, rebuilt with their replies and agent-loop steps by
//! replaying the journal ([`crate::run::transcript`]), tokens from the journal, and the
//! program's source from the artifact; latency from the views' `usage.jsonl`, where the run
//! was driven on this machine. The page needs no network: its style and
//! script are inline.
//!
//! [`Report::of`] gathers a run; [`html::render`] writes the page. The timeline puts each
//! fiber in a lane of its own (the program's in the first, each parallel branch beside its
//! parent), a request per card, in the order the run asked them.

pub mod html;
mod lanes;

use crate::run::transcript::{exchanges, Exchange};
use prose_machine::protocol::{Kind, RequestId, Step, Usage};
use prose_runtime::program::Program;
use prose_runtime::record::RunRecord;
use prose_store::journal::in_order;
use prose_store::StoredRun;
use std::collections::HashMap;
use std::path::Path;

/// A program of the run: the one run (module 0) or one it imports.
#[derive(Clone, Debug)]
pub struct Source {
    /// Its name.
    pub name: String,
    /// How it was imported (empty for the program run).
    pub import_path: String,
    /// Its text.
    pub text: String,
}

/// One request of the run, with what it cost.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The request, its reply and its agent-loop steps.
    pub exchange: Exchange,
    /// Milliseconds it took over all attempts, when this run's driver served it.
    pub ms: Option<u64>,
    /// Milliseconds to its first streamed token, when it streamed.
    pub first_token_ms: Option<u64>,
    /// Tokens it used, when the provider reported them.
    pub tokens: Option<Usage>,
    /// How many times this fiber had asked at this site, this one included (a loop's
    /// iteration, 1 outside loops).
    pub visit: u32,
    /// The timeline lane (an index into [`Report::lanes`]).
    pub lane: usize,
    /// The timeline row.
    pub row: usize,
}

impl Entry {
    /// How the request stands: `answered`, `failed` or `pending`.
    pub fn state(&self) -> &'static str {
        match self.exchange.reply.as_ref().map(|r| r.outcome.is_ok()) {
            Some(true) => "answered",
            Some(false) => "failed",
            None => "pending",
        }
    }

    /// The errors of failed model turns in its agent loop: attempts its `retry` made again
    /// (or the failure that ended it).
    pub fn failed_turns(&self) -> Vec<(&RequestId, &str)> {
        self.exchange
            .steps
            .iter()
            .filter(|s| matches!(s.id.step, Step::Turn(_)))
            .filter_map(|s| s.outcome.as_ref().err().map(|f| (&s.id, f.0.as_str())))
            .collect()
    }
}

/// Everything the page shows about a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The run record.
    pub record: RunRecord,
    /// The programs, by module index.
    pub sources: Vec<Source>,
    /// Every request, in the order the run asked them.
    pub entries: Vec<Entry>,
    /// The fibers that asked something, in lane order (lineages such as `0`, `0/1.2`).
    pub lanes: Vec<String>,
}

impl Report {
    /// Gathers `run` as a store keeps it (its record, artifact and journal), with the
    /// latencies its views in `views` recorded, where it was driven on this machine.
    pub fn of(run: StoredRun, views: &Path) -> Result<Report, String> {
        let StoredRun {
            record,
            artifact,
            journal,
            ..
        } = run;
        let program =
            Program::from_bytes(artifact, record.origin.clone()).map_err(|e| e.to_string())?;
        let all = exchanges(&record, &program.artifact, in_order(journal))?;
        let latency = read_usage(&views.join("usage.jsonl"));
        let sources = program
            .artifact
            .modules
            .iter()
            .map(|m| Source {
                name: m.name.clone(),
                import_path: m.import_path.clone(),
                text: m.source.clone(),
            })
            .collect();
        Ok(Report::assemble(record, sources, all, &latency))
    }

    /// A report of `exchanges`, with `usage` (by request, as `usage.jsonl` has it).
    pub fn assemble(
        record: RunRecord,
        sources: Vec<Source>,
        exchanges: Vec<Exchange>,
        usage: &HashMap<RequestId, Served>,
    ) -> Report {
        let placed = lanes::place(exchanges.iter().map(|x| x.request.id.lineage.as_str()));
        let mut visits: HashMap<(String, u32, u32), u32> = HashMap::new();
        let entries = exchanges
            .into_iter()
            .zip(placed.rows)
            .map(|(exchange, (lane, row))| {
                let r = &exchange.request;
                let visit = visits
                    .entry((r.id.lineage.to_string(), r.site.module, r.site.line))
                    .or_insert(0);
                *visit += 1;
                let served = usage.get(&r.id);
                let tokens = exchange
                    .reply
                    .as_ref()
                    .and_then(|x| x.usage)
                    .or_else(|| served.and_then(|s| s.tokens));
                Entry {
                    ms: served.map(|s| s.ms),
                    first_token_ms: served.and_then(|s| s.first_token_ms),
                    tokens,
                    visit: *visit,
                    lane,
                    row,
                    exchange,
                }
            })
            .collect();
        Report {
            record,
            sources,
            entries,
            lanes: placed.lanes,
        }
    }

    /// The sessions of the run.
    pub fn sessions(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(|e| e.exchange.request.kind() == Kind::Session)
    }

    /// Tokens over the whole run, when any were reported.
    pub fn tokens(&self) -> Option<Usage> {
        self.entries
            .iter()
            .filter_map(|e| e.tokens)
            .fold(None, |acc, u| {
                let mut t = acc.unwrap_or_default();
                t += u;
                Some(t)
            })
    }
}

/// What `usage.jsonl` says of one request a driver served.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Served {
    /// Milliseconds over all attempts.
    pub ms: u64,
    /// Milliseconds to the first streamed token, when it streamed.
    pub first_token_ms: Option<u64>,
    /// Tokens (cached input apart) and cost, when the provider reported them, and the
    /// memo's part.
    pub tokens: Option<Usage>,
}

/// `usage.jsonl` by request id (lines that do not read are skipped; a resumed run may serve
/// a request again, and the last line wins).
pub fn read_usage(path: &std::path::Path) -> HashMap<RequestId, Served> {
    #[derive(serde::Deserialize)]
    struct Line {
        id: RequestId,
        ms: u64,
        #[serde(default)]
        first_token_ms: Option<u64>,
        #[serde(flatten)]
        used: Option<Usage>,
    }
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .map(|l| {
            (
                l.id,
                Served {
                    ms: l.ms,
                    first_token_ms: l.first_token_ms,
                    tokens: l.used,
                },
            )
        })
        .collect()
}
