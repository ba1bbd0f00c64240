//! Answering a waiting run: a mid-program input no one could give when the run asked for it
//! is given from outside (`prosevm answer`, the server's `POST /v1/runs/{id}/input`). The
//! value joins the run's inputs and the input leaves its waiting list, in its record, under
//! the run's hold; once nothing is left waiting, a resume goes on from its journal, and the
//! input is answered at once when the program asks for it again.

use super::RunError;
use prose_machine::value::Value;
use prose_runtime::record::{RunRecord, RunStatus};
use prose_store::{JournalCheck, Store, Taken};

/// What an answer left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The run's id.
    pub id: String,
    /// The inputs it still waits for, by name (none: it can go on).
    pub still_waiting: Vec<String>,
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
    let mut still_waiting: Vec<String> = record.waiting.iter().map(|w| w.name.clone()).collect();
    still_waiting.dedup();
    Ok(Answered { id, still_waiting })
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
    Err(RunError::Setup(format!(
        "run {id} does not wait for `{name}`; it waits for {}",
        names.join(", ")
    )))
}
