//! `prosevm memo`: how much the memo beside a store's runs holds (the model answers kept
//! under `--memo`), and `--clear` to empty it.

use super::{fail, open_store, runtime};
use prose_runtime::observe::grouped;
use prosec::console::Exit;
use std::path::Path;
use std::process::ExitCode;

/// Shows the memo of the store `store` names (else the file store under `state_dir`), as
/// JSON with `json`; empties it first with `clear`, saying what it held.
pub fn memo(store: Option<&str>, state_dir: Option<&Path>, clear: bool, json: bool) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store = match open_store(&rt, store, state_dir, 1) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let memo = store.memo();
    let size = if clear {
        rt.block_on(memo.clear())
    } else {
        rt.block_on(memo.size())
    };
    let size = match size {
        Ok(s) => s,
        Err(e) => return fail(format!("the memo at {}: {e}", memo.place()), Exit::Unusable),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "place": memo.place(),
                "entries": size.entries,
                "bytes": size.bytes,
                "cleared": clear,
            })
        );
    } else {
        let held = format!(
            "{} answer(s), {} bytes",
            grouped(size.entries),
            grouped(size.bytes)
        );
        if clear {
            println!("cleared the memo at {}: it held {held}", memo.place());
        } else {
            println!("the memo at {}: {held}", memo.place());
        }
    }
    ExitCode::SUCCESS
}
