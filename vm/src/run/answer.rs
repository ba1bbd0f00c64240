//! Answering a waiting run from outside (`prosevm answer`, the server's API and page).
//!
//! - A mid-program input no one could give when the run asked for it: the value joins the
//!   run's inputs and the input leaves its waiting list, in its record, under the run's
//!   hold; the input is answered at once when the resumed program asks for it again.
//! - A tool call that waits for a person's approval ([`prose_runtime::approvals`]): the
//!   answer (yes, always or no) is journaled under the call's approval step and the call
//!   leaves the record's approvals, under the run's hold; the resumed session makes the
//!   call, or tells the model it was refused, without asking the model again.
//!
//! Once nothing is left that needs someone, a resume goes on from the journal.

use super::RunError;
use prose_machine::protocol::{Answer, PromptAnswer, Reply};
use prose_machine::value::Value;
use prose_runtime::approvals::{approval_step, ApprovalId, WaitingApproval};
use prose_runtime::record::{RunRecord, RunStatus};
use prose_store::{JournalCheck, Store, StoreError, Taken, TakenRun};

/// What an answer left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The run's id.
    pub id: String,
    /// The inputs it still waits for, by name.
    pub still_waiting: Vec<String>,
    /// The approvals it still waits for (whose time has not run out).
    pub approvals: Vec<ApprovalId>,
}

impl Answered {
    /// What run `id`, whose record is now `record`, still waits for.
    fn of(id: String, record: &RunRecord) -> Answered {
        let now = prose_runtime::clock::now();
        let mut still_waiting: Vec<String> =
            record.waiting.iter().map(|w| w.name.clone()).collect();
        still_waiting.dedup();
        Answered {
            id,
            still_waiting,
            approvals: record
                .approvals
                .iter()
                .filter(|a| !a.lapsed(now))
                .map(|a| a.id.clone())
                .collect(),
        }
    }

    /// Whether nothing it waits for needs someone any more: it can go on.
    pub fn can_go_on(&self) -> bool {
        self.still_waiting.is_empty() && self.approvals.is_empty()
    }
}

/// Gives run `id` of `store`, which waits for input `name`, the value `value`. Refused when
/// the run does not wait for that input (naming those it waits for), or another process
/// holds it.
pub async fn answer(
    store: &dyn Store,
    id: &str,
    name: &str,
    value: Value,
) -> Result<Answered, RunError> {
    // Looked at first, without taking it: a run that does not wait is left untouched.
    let (id, record) = store.record(id).await?;
    waits_for(&id, &record, name)?;
    let taken = match store.take(&id, JournalCheck::Strict).await? {
        Taken::Finished(record) => {
            return Err(RunError::Setup(format!("run {} has finished", record.id)))
        }
        Taken::Held(taken) => taken,
    };
    let mut record = taken.record;
    if let Err(e) = waits_for(&id, &record, name) {
        // Answered meanwhile: its record is written back as it stands, which lets it go
        // (a record that does not say `running` ends a hold in every store).
        taken.held.write_record(&record).await?;
        return Err(e);
    }
    record.inputs.insert(name.to_string(), value);
    record.waiting.retain(|w| w.name != name);
    taken.held.write_record(&record).await?;
    Ok(Answered::of(id, &record))
}

/// Gives run `id` of `store`, which waits for approval `approval`, the person's `answer`:
/// journaled as the answer to its tool call, which leaves the record's approvals. Refused
/// when the run does not wait for that approval (naming those it waits for), when its time
/// ran out (the call is refused as the run goes on), or another process holds the run.
pub async fn approve(
    store: &dyn Store,
    id: &str,
    approval: &ApprovalId,
    answer: PromptAnswer,
) -> Result<Answered, RunError> {
    // Looked at first, without taking it: a run that does not wait is left untouched.
    let (id, record) = store.record(id).await?;
    awaits(&id, &record, approval)?;
    let TakenRun {
        mut held,
        mut record,
        journal,
        ..
    } = match store.take(&id, JournalCheck::Strict).await? {
        Taken::Finished(record) => {
            return Err(RunError::Setup(format!("run {} has finished", record.id)))
        }
        Taken::Held(taken) => *taken,
    };
    let waiting = match awaits(&id, &record, approval) {
        Ok(w) => w.clone(),
        Err(e) => {
            // Answered meanwhile: its record is written back as it stands, which lets it go.
            held.write_record(&record).await?;
            return Err(e);
        }
    };
    let journaled = async {
        let step = approval_step(&waiting.call).ok_or_else(|| {
            StoreError::Invalid(format!(
                "run {id}: approval {approval} names {}, which is not a tool call",
                waiting.call
            ))
        })?;
        match journal.iter().find(|r| r.id == step) {
            // Journaled by an answer whose record was not written after it: the record
            // follows the journal.
            Some(Reply {
                outcome: Ok(Answer::Permission(given)),
                ..
            }) if *given == answer => Ok(()),
            Some(_) => Err(StoreError::Invalid(format!(
                "run {id}: approval {approval} was answered otherwise already"
            ))),
            None => {
                let sink = |e: prose_runtime::runner::journal::SinkError| {
                    StoreError::Invalid(format!("run {id}: its journal: {e}"))
                };
                let mut sink_to = held.journal()?;
                sink_to
                    .append(&Reply::answer(step, Answer::Permission(answer)))
                    .map_err(sink)?;
                record.journal = sink_to.close().await.map_err(sink)?;
                Ok(())
            }
        }
    };
    if let Err(e) = journaled.await {
        // Given back as it was.
        let _ = held.release().await;
        return Err(e.into());
    }
    record.approvals.retain(|a| a.id != *approval);
    held.write_record(&record).await?;
    Ok(Answered::of(id, &record))
}

/// The approval `approval` run `id`, whose record is `record`, waits for; if it waits for
/// none such, or its time ran out, why.
fn awaits<'a>(
    id: &str,
    record: &'a RunRecord,
    approval: &ApprovalId,
) -> Result<&'a WaitingApproval, RunError> {
    if record.status != RunStatus::Waiting {
        return Err(RunError::Setup(format!(
            "run {id} waits for no approval (it is {})",
            record.status.as_str()
        )));
    }
    let Some(waiting) = record.approval(approval) else {
        let ids: Vec<String> = record
            .approvals
            .iter()
            .map(|a| format!("{}", a.id))
            .collect();
        return Err(RunError::Setup(match ids.is_empty() {
            true => format!("run {id} waits for no approval"),
            false => format!(
                "run {id} does not wait for approval {approval}; it waits for {}",
                ids.join(", ")
            ),
        }));
    };
    if waiting.lapsed(prose_runtime::clock::now()) {
        return Err(RunError::Setup(format!(
            "approval {approval} of run {id} lapsed at {}: no one answered in time, so the call is refused as the run goes on",
            waiting.expires.as_deref().unwrap_or("?"),
        )));
    }
    Ok(waiting)
}

/// Whether run `id`, whose record is `record`, waits for input `name`; if not, why.
fn waits_for(id: &str, record: &RunRecord, name: &str) -> Result<(), RunError> {
    if record.status != RunStatus::Waiting {
        return Err(RunError::Setup(format!(
            "run {id} waits for no input (it is {})",
            record.status.as_str()
        )));
    }
    if record.waiting.iter().any(|w| w.name == name) {
        return Ok(());
    }
    let names: Vec<String> = record
        .waiting
        .iter()
        .map(|w| format!("`{}`", w.name))
        .collect();
    if names.is_empty() {
        let ids: Vec<&str> = record.approvals.iter().map(|a| a.id.as_str()).collect();
        return Err(RunError::Setup(format!(
            "run {id} waits for no input; it waits for approval {} (--approve ID or --deny ID)",
            ids.join(", ")
        )));
    }
    Err(RunError::Setup(format!(
        "run {id} does not wait for `{name}`; it waits for {}",
        names.join(", ")
    )))
}
