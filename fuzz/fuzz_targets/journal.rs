//! Feeds arbitrary bytes to the journal reader as a run's journal: it must read them or
//! refuse them with an error, never panic or hang. What it reads must pass or fail the
//! checks a resume makes without panicking, and its replies, written again through the
//! journal writer, must read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prose_store::journal::{self, Contents, Journal};

fuzz_target!(|data: &[u8]| {
    let seed = journal::seed("fuzz");
    let Ok(contents) = journal::parse(data, seed) else {
        return;
    };
    let _ = contents.check_repeats();
    let _ = contents.check_seal(&journal::Seal {
        records: 2,
        crc: seed,
    });
    let dir = std::env::temp_dir().join(format!("prose-fuzz-journal-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("journal.log");
    let _ = std::fs::remove_file(&path);
    let mut j = Journal::open(&path, &Contents::empty(seed)).expect("opens");
    for r in &contents.records {
        j.append(r).expect("appends");
    }
    // The same replies (their JSON may be written differently, so the chain may differ).
    let seal = j.close().expect("closes");
    assert_eq!(seal.records, contents.records.len() as u64);
    let again = journal::read(&path, seed).expect("reads back");
    assert_eq!(again.records, contents.records);
});
