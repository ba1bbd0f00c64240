//! The `Store` trait's contract, held against each store in this process: a run created
//! with a journal already in it reads back as written; one process holds it at a time; a
//! hold given back can be taken again; its journal can be rewritten and its program
//! replaced (what an edited program's resume does); a finished run is not taken; pruning
//! removes it with its journal; a failed run is listed with why, and what it used.

use super::{kinds, support, Kind};
use prose_machine::protocol::{Answer, Lineage, Reply, RequestId, SessionAnswer, Usage};
use prose_runtime::driver::settings::DriverSettings;
use prose_runtime::program::Program;
use prose_runtime::record::{ExecOptions, RunFailure, RunRecord, RunStatus};
use prose_store::{JournalCheck, Locator, PruneRule, Pruned, Store, StoreError, Taken};
use std::collections::BTreeMap;
use std::path::Path;

/// `src` compiled.
fn program(src: &str, dir: &Path) -> Program {
    let file = dir.join("prog.prose");
    std::fs::write(&file, src).expect("source");
    let mut c = prosec::compile::Compilation::new(Default::default());
    let root = c.add_file(&file).expect("reads");
    assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("builds");
    Program::from_bytes(bytes, file).expect("verifies")
}

fn answer(seq: u32, text: &str) -> Reply {
    Reply::answer(
        RequestId::new(Lineage::root(), seq),
        Answer::Session(SessionAnswer::text(text)),
    )
}

fn open(rt: &tokio::runtime::Runtime, kind: &Kind, dir: &Path) -> Box<dyn Store> {
    let locator = Locator::parse(&kind.store).expect("a store");
    rt.block_on(locator.open(Some(&dir.join("views")), 2))
        .unwrap_or_else(|e| panic!("{}: {e}", kind.name))
}

#[test]
fn a_run_is_held_once_read_as_written_rewritten_and_pruned_in_every_store() {
    let dir = support::scratch("store-contract");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for kind in kinds("contract", &dir) {
        let name = kind.name;
        let store = open(&rt, &kind, &dir);
        assert_eq!(store.kind(), name);
        let p = program("output r = session \"Hi\"\n", &dir);
        let mut record = RunRecord::new(
            &p,
            BTreeMap::new(),
            DriverSettings::Mock(Default::default()),
            ExecOptions::default(),
            dir.clone(),
        );
        // Created with another run's prefix in its journal, then appended to.
        let seeded = vec![answer(0, "seeded")];
        let mut held = rt
            .block_on(store.create(&mut record, &p, &seeded))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let id = record.id.clone();
        assert!(!id.is_empty() && !record.started.is_empty(), "{name}");
        assert_eq!(held.id(), id);
        let mut journal = held.journal().expect("journal");
        journal.append(&answer(1, "appended")).expect("append");
        assert_eq!(journal.unsynced(), 1);
        rt.block_on(journal.sync()).expect("sync");
        record.journal = rt.block_on(journal.close()).expect("close");
        assert_eq!(record.journal.records, 2, "{name}");
        rt.block_on(held.write_record(&record)).expect("record");
        let stored = rt.block_on(store.read(&id)).expect("read");
        assert_eq!(stored.id, id);
        assert_eq!(stored.record, record, "{name}");
        assert_eq!(stored.artifact, p.bytes, "{name}");
        assert_eq!(
            stored.journal,
            vec![answer(0, "seeded"), answer(1, "appended")],
            "{name}"
        );
        // Held by this process: another take is refused, saying who holds it.
        let refused = match rt.block_on(store.take(&id, JournalCheck::Strict)) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{name}: a held run was taken again"),
        };
        assert!(refused.contains("being run by"), "{name}: {refused}");
        // Given back, it is taken again, as it was.
        rt.block_on(held.release()).expect("release");
        drop(held);
        let Taken::Held(taken) = rt
            .block_on(store.take(&id, JournalCheck::Strict))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        else {
            panic!("{name}: a running run is not finished");
        };
        let mut taken = *taken;
        assert_eq!(taken.journal.len(), 2, "{name}");
        assert_eq!(taken.record.id, id);
        // An edited program's resume: the journal keeps what still holds, and the program
        // is replaced.
        let kept = [&seeded[0]];
        let seal = rt
            .block_on(taken.held.rewrite_journal(&kept))
            .expect("rewrite");
        assert_eq!(seal.records, 1, "{name}");
        let edited = program("output r = session \"Hello\"\n", &dir);
        rt.block_on(taken.held.replace_program(&edited))
            .expect("program");
        let mut record = taken.record.clone();
        record.journal = seal;
        record.artifact_sha256 = edited.sha256();
        record.status = RunStatus::Finished;
        rt.block_on(taken.held.write_record(&record))
            .expect("record");
        let stored = rt.block_on(store.read(&id)).expect("read");
        assert_eq!(stored.journal, vec![answer(0, "seeded")], "{name}");
        assert_eq!(stored.artifact, edited.bytes, "{name}");
        drop(taken);
        // Finished: nothing to take.
        match rt.block_on(store.take(&id, JournalCheck::Strict)) {
            Ok(Taken::Finished(r)) => assert_eq!(r.status, RunStatus::Finished),
            Ok(Taken::Held(_)) => panic!("{name}: a finished run was taken"),
            Err(e) => panic!("{name}: {e}"),
        }
        // Given back. (Another test of this process starting a child at that moment holds a
        // copy of the lock's descriptor until the child's exec closes it: look again.)
        let started = std::time::Instant::now();
        let row = loop {
            let rows = rt.block_on(store.list()).expect("list");
            let row = rows.into_iter().find(|r| r.id == id).expect("listed");
            // A child's exec closes the copy at once; a minute is for a machine under load.
            if !row.live || started.elapsed() > std::time::Duration::from_secs(60) {
                break row;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(
            (row.status_text(), row.answered, row.live),
            ("finished", 1, false),
            "{name} (a hold was waited for up to a minute to go)"
        );
        // Pruned with its journal.
        let rule = PruneRule {
            statuses: vec![RunStatus::Finished],
            ..PruneRule::default()
        };
        let done = rt.block_on(store.prune(&rule)).expect("prune");
        assert!(
            matches!(&done[..], [Pruned::Removed(r)] if r.id == id),
            "{name}: {done:?}"
        );
        assert!(
            matches!(rt.block_on(store.read(&id)), Err(StoreError::NoRun(_))),
            "{name}: a pruned run is gone"
        );

        // A failed run is listed with why, and with what it used.
        let mut failed = RunRecord::new(
            &p,
            BTreeMap::new(),
            DriverSettings::Mock(Default::default()),
            ExecOptions::default(),
            dir.clone(),
        );
        let held = rt
            .block_on(store.create(&mut failed, &p, &[]))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        failed.status = RunStatus::Failed;
        failed.usage = Some(Usage {
            input_tokens: 120,
            output_tokens: 7,
            cost: Some(0.25),
            ..Usage::default()
        });
        failed.error = Some(RunFailure {
            code: "E210".into(),
            message: "the provider is down".into(),
            request: None,
        });
        rt.block_on(held.write_record(&failed)).expect("record");
        let rows = rt.block_on(store.list()).expect("list");
        let row = rows
            .into_iter()
            .find(|r| r.id == failed.id)
            .expect("listed");
        assert_eq!(
            (row.status_text(), row.error.as_deref(), row.usage),
            ("failed", Some("the provider is down"), failed.usage),
            "{name}"
        );
    }
}

#[test]
fn the_memo_keeps_entries_by_key_and_clears_in_every_store() {
    use prose_runtime::memo::{decode, encode, MemoKey, MemoSize};
    let dir = support::scratch("store-memo");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for kind in kinds("memo", &dir) {
        let name = kind.name;
        let store = open(&rt, &kind, &dir);
        let memo = store.memo();
        assert_eq!(rt.block_on(memo.size()), Ok(MemoSize::default()), "{name}");
        let key = MemoKey::of(&serde_json::json!({"request": name}));
        assert_eq!(rt.block_on(memo.get(&key)), Ok(None), "{name}");
        let answer = Answer::Session(SessionAnswer::text("kept"));
        let entry = encode(&key, &answer).expect("encodes");
        rt.block_on(memo.put(&key, entry.clone()))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Written twice (two runs asking at once): one entry, the last one.
        rt.block_on(memo.put(&key, entry.clone())).expect("again");
        let got = rt.block_on(memo.get(&key)).expect("reads").expect("kept");
        assert_eq!(got, entry, "{name}");
        assert_eq!(
            decode(&got, &key, prose_machine::protocol::Kind::Session),
            Ok(answer),
            "{name}"
        );
        // Another store handle on the same place sees it (another process would).
        let again = open(&rt, &kind, &dir);
        let size = rt.block_on(again.memo().size()).expect("size");
        assert_eq!(
            size,
            MemoSize {
                entries: 1,
                bytes: entry.len() as u64
            },
            "{name}"
        );
        assert_eq!(rt.block_on(memo.clear()), Ok(size), "{name}");
        assert_eq!(rt.block_on(memo.get(&key)), Ok(None), "{name}");
        assert_eq!(rt.block_on(memo.size()), Ok(MemoSize::default()), "{name}");
    }
}

#[test]
fn webhooks_keep_hooks_and_deliveries_across_handles_and_go_with_their_run_in_every_store() {
    use prose_store::webhooks::{Delivery, DeliveryState, Hook};
    let dir = support::scratch("store-webhooks");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for kind in kinds("webhooks", &dir) {
        let name = kind.name;
        let store = open(&rt, &kind, &dir);
        let p = program("output r = session \"Hi\"\n", &dir);
        let mut record = RunRecord::new(
            &p,
            BTreeMap::new(),
            DriverSettings::Mock(Default::default()),
            ExecOptions::default(),
            dir.clone(),
        );
        let held = rt
            .block_on(store.create(&mut record, &p, &[]))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let id = record.id.clone();
        let hooks = store.webhooks();
        assert_eq!(rt.block_on(hooks.hook(&id)).expect("hook"), None, "{name}");
        let hook = Hook {
            url: "https://hooks.example/prose".into(),
            owner: "/srv/a".into(),
        };
        rt.block_on(hooks.put_hook(&id, &hook))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let delivery = Delivery {
            id: format!("dlv_{}", "ab".repeat(16)),
            run: id.clone(),
            owner: hook.owner.clone(),
            url: hook.url.clone(),
            event: "run.finished".into(),
            payload: serde_json::json!({"run": {"id": id}}),
            created: "2025-01-01T00:00:00.000Z".into(),
            state: DeliveryState::Pending,
            attempts: 0,
            next_attempt: "2025-01-01T00:00:00.000Z".into(),
            last_error: None,
            done: None,
        };
        assert!(rt.block_on(hooks.add(&delivery)).expect("add"), "{name}");
        // Added again (the same end noticed twice): kept once, as it was.
        let mut again = delivery.clone();
        again.payload = serde_json::json!({"other": true});
        assert!(!rt.block_on(hooks.add(&again)).expect("add"), "{name}");
        // Another handle on the same place (a server started again) finds both.
        let reopened = open(&rt, &kind, &dir);
        let other = reopened.webhooks();
        assert_eq!(
            rt.block_on(other.hook(&id)).expect("hook"),
            Some(hook.clone()),
            "{name}"
        );
        assert_eq!(
            rt.block_on(other.unsettled("/srv/a")).expect("unsettled"),
            vec![(id.clone(), hook.clone())],
            "{name}"
        );
        assert!(rt
            .block_on(other.unsettled("/srv/b"))
            .expect("unsettled")
            .is_empty());
        assert_eq!(
            rt.block_on(other.pending("/srv/a")).expect("pending"),
            vec![delivery.clone()],
            "{name}"
        );
        assert!(rt
            .block_on(other.pending("/srv/b"))
            .expect("pending")
            .is_empty());
        // A try, then its outcome.
        let mut tried = delivery.clone();
        tried.attempts = 1;
        tried.last_error = Some("the receiver answered 500".into());
        rt.block_on(other.update(&tried)).expect("update");
        tried.state = DeliveryState::Delivered;
        tried.done = Some("2025-01-01T00:00:02.000Z".into());
        rt.block_on(other.update(&tried)).expect("update");
        assert!(rt
            .block_on(hooks.pending("/srv/a"))
            .expect("pending")
            .is_empty());
        assert_eq!(
            rt.block_on(hooks.of_run(&id)).expect("of run"),
            vec![tried.clone()],
            "{name}"
        );
        rt.block_on(hooks.settle(&id)).expect("settle");
        assert!(rt
            .block_on(hooks.unsettled("/srv/a"))
            .expect("unsettled")
            .is_empty());
        // A delivery that is not one is refused before it is written.
        let mut bad = delivery.clone();
        bad.id = "../../etc/passwd".into();
        assert!(rt.block_on(hooks.add(&bad)).is_err(), "{name}");
        // Pruned, the run takes its hook and deliveries with it.
        record.status = RunStatus::Finished;
        rt.block_on(held.write_record(&record)).expect("record");
        drop(held);
        let rule = PruneRule {
            statuses: vec![RunStatus::Finished],
            ..PruneRule::default()
        };
        let started = std::time::Instant::now();
        loop {
            let done = rt.block_on(store.prune(&rule)).expect("prune");
            if done
                .iter()
                .any(|p| matches!(p, Pruned::Removed(r) if r.id == id))
            {
                break;
            }
            // A child of another test may hold a copy of the run's lock for a moment.
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "{name}: not pruned: {done:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(rt
            .block_on(store.webhooks().pending("/srv/a"))
            .expect("pending")
            .is_empty());
        assert!(rt
            .block_on(store.webhooks().unsettled("/srv/a"))
            .expect("unsettled")
            .is_empty());
        if name != "file" {
            // The rows went with the run (the file store's went with its directory).
            assert!(rt
                .block_on(store.webhooks().of_run(&id))
                .expect("of run")
                .is_empty());
        }
    }
}
