//! A driver with a memo in front: a model request whose key the memo holds is answered from
//! it without a call; any other is asked, and its answer kept. Requests the driver does not
//! identify (everything but the chat drivers' model requests) pass straight through.

use super::{decode, encode, MemoKey, MemoStore};
use crate::driver::{Driver, Live, Served};
use prose_machine::protocol::{Reply, Request, Usage};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A driver, with a memo in front of it when there is one.
pub struct Memoised<D> {
    inner: D,
    memo: Option<Memo>,
}

/// A memo in use.
struct Memo {
    store: Arc<dyn MemoStore>,
    /// Cleared when a write failed: the run goes on without keeping answers.
    writable: AtomicBool,
    /// Set when a read failed (said once: every later one would fail the same way).
    unreadable: AtomicBool,
}

impl<D: Driver> Memoised<D> {
    /// `inner`, answering from `memo` (if any) before it asks.
    pub fn new(inner: D, memo: Option<Arc<dyn MemoStore>>) -> Memoised<D> {
        Memoised {
            inner,
            memo: memo.map(|store| Memo {
                store,
                writable: AtomicBool::new(true),
                unreadable: AtomicBool::new(false),
            }),
        }
    }

    /// The driver behind the memo.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Whether a memo is in use.
    pub fn memoising(&self) -> bool {
        self.memo.is_some()
    }
}

impl Memo {
    /// The answer kept for `req` under `key`, if one can be used; a kept entry that cannot
    /// is said to `live` as a warning (and is a miss), and so is the first read that fails.
    async fn recall(&self, req: &Request, key: &MemoKey, live: &Live) -> Option<Served> {
        let entry = match self.store.get(key).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return None,
            Err(e) => {
                if !self.unreadable.swap(true, Ordering::Relaxed) {
                    live.warn(&format!(
                        "cannot read the memo at {} ({e}); asking the model instead",
                        self.store.place()
                    ));
                }
                return None;
            }
        };
        match decode(&entry, key, req.kind()) {
            Ok(answer) => Some(Served {
                outcome: Ok(answer),
                usage: Some(Usage {
                    from_memo: 1,
                    ..Usage::default()
                }),
            }),
            Err(why) => {
                live.warn(&format!(
                    "the memo's entry {key} is unusable: {why}; asking the model instead"
                ));
                None
            }
        }
    }

    /// Keeps the answer of `served` under `key`. The first write that fails is said to
    /// `live`, and the memo is written no more.
    async fn keep(&self, key: &MemoKey, served: &Served, live: &Live) {
        let Ok(answer) = &served.outcome else {
            return;
        };
        if !self.writable.load(Ordering::Relaxed) {
            return;
        }
        let written = match encode(key, answer) {
            Ok(entry) => self.store.put(key, entry).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            if self.writable.swap(false, Ordering::Relaxed) {
                live.warn(&format!(
                    "cannot write the memo at {} ({e}); the run goes on without keeping its answers",
                    self.store.place()
                ));
            }
        }
    }
}

impl<D: Driver> Driver for Memoised<D> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn answer(&self, req: &Request, live: &Live) -> Served {
        let (Some(memo), Some(identity)) = (&self.memo, self.inner.memo_identity(req)) else {
            return self.inner.answer(req, live).await;
        };
        let key = MemoKey::of(&identity);
        if let Some(served) = memo.recall(req, &key, live).await {
            return served;
        }
        let mut served = self.inner.answer(req, live).await;
        memo.keep(&key, &served, live).await;
        *served.usage.get_or_insert_with(Usage::default) += Usage {
            asked: 1,
            ..Usage::default()
        };
        served
    }

    fn answer_now(&self, req: &Request) -> Option<Served> {
        self.inner.answer_now(req)
    }

    fn observe(&self, req: &Request, reply: &Reply) {
        self.inner.observe(req, reply)
    }

    fn side_effect_free(&self) -> bool {
        self.inner.side_effect_free()
    }

    async fn check_models(&self, models: &[Option<String>]) -> Result<(), String> {
        self.inner.check_models(models).await
    }

    fn worst_case(&self, req: &Request) -> Option<Usage> {
        self.inner.worst_case(req)
    }

    fn memo_identity(&self, req: &Request) -> Option<serde_json::Value> {
        self.inner.memo_identity(req)
    }

    fn hosts_people(&self) -> bool {
        self.inner.hosts_people()
    }

    fn runs_turns(&self) -> bool {
        self.inner.runs_turns()
    }

    async fn structured_turns(&self) -> bool {
        self.inner.structured_turns().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memo::MemoSize;
    use futures_util::future::BoxFuture;
    use prose_machine::protocol::{Answer, Ask, EvaluateAsk, Failure, Lineage, RequestId, Site};
    use std::collections::HashMap;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// A driver that identifies evaluations by their condition and answers each with the
    /// number of requests asked so far being odd; counts what it was asked.
    #[derive(Default)]
    struct Counting {
        asked: AtomicUsize,
    }

    impl Driver for Counting {
        fn name(&self) -> &str {
            "counting"
        }

        async fn answer(&self, _req: &Request, _live: &Live) -> Served {
            let n = self.asked.fetch_add(1, Ordering::SeqCst);
            Served {
                outcome: Ok(Answer::Evaluate(n.is_multiple_of(2))),
                usage: Some(Usage::plain(10, 1)),
            }
        }

        fn memo_identity(&self, req: &Request) -> Option<serde_json::Value> {
            match &req.ask {
                Ask::Evaluate(e) => Some(serde_json::json!(e.condition)),
                _ => None,
            }
        }
    }

    /// A memo in memory, which can be told to fail its writes.
    #[derive(Default)]
    struct Kept {
        entries: Mutex<HashMap<MemoKey, Vec<u8>>>,
        refuse_writes: bool,
    }

    impl MemoStore for Kept {
        fn place(&self) -> String {
            "memory".into()
        }

        fn get<'a>(&'a self, key: &'a MemoKey) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>> {
            let found = self.entries.lock().expect("entries").get(key).cloned();
            Box::pin(async move { Ok(found) })
        }

        fn put<'a>(
            &'a self,
            key: &'a MemoKey,
            entry: Vec<u8>,
        ) -> BoxFuture<'a, Result<(), String>> {
            Box::pin(async move {
                if self.refuse_writes {
                    return Err("read-only".into());
                }
                self.entries.lock().expect("entries").insert(*key, entry);
                Ok(())
            })
        }

        fn size(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
            Box::pin(async { Ok(MemoSize::default()) })
        }

        fn clear(&self) -> BoxFuture<'_, Result<MemoSize, String>> {
            Box::pin(async { Ok(MemoSize::default()) })
        }
    }

    fn evaluate(condition: &str) -> Request {
        Request {
            id: RequestId::new(Lineage::root(), 0),
            site: Site {
                module: 0,
                line: 1,
                program: "p".into(),
            },
            ask: Ask::Evaluate(EvaluateAsk {
                condition: condition.into(),
                context: Vec::new(),
            }),
        }
    }

    fn warnings() -> (Live, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let live = Live::to(move |p| {
            if let crate::driver::live::Piece::Warning(w) = p {
                log.lock().expect("log").push(w.to_string());
            }
        });
        (live, seen)
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn a_request_asked_before_is_answered_from_the_memo_and_others_are_asked() {
        let kept = Arc::new(Kept::default());
        let d = Memoised::new(
            Counting::default(),
            Some(kept.clone() as Arc<dyn MemoStore>),
        );
        let (live, warned) = warnings();
        let first = run(d.answer(&evaluate("done"), &live));
        assert_eq!(first.outcome, Ok(Answer::Evaluate(true)));
        assert_eq!(first.usage.map(|u| (u.asked, u.from_memo)), Some((1, 0)));
        // Asked again: the memo answers, with no tokens spent.
        let again = run(d.answer(&evaluate("done"), &live));
        assert_eq!(again.outcome, Ok(Answer::Evaluate(true)));
        assert_eq!(
            again.usage,
            Some(Usage {
                from_memo: 1,
                ..Usage::default()
            })
        );
        // Another question is asked (and the counting driver now says false).
        let other = run(d.answer(&evaluate("not yet"), &live));
        assert_eq!(other.outcome, Ok(Answer::Evaluate(false)));
        assert_eq!(d.inner().asked.load(Ordering::SeqCst), 2);
        assert!(warned.lock().expect("log").is_empty());
        // Without a memo, every request is asked and nothing is counted as asked.
        let plain = Memoised::new(Counting::default(), None);
        let served = run(plain.answer(&evaluate("done"), &live));
        assert_eq!(served.usage, Some(Usage::plain(10, 1)));
    }

    #[test]
    fn a_damaged_entry_is_a_miss_with_a_warning_and_a_failed_write_is_said_once() {
        let kept = Arc::new(Kept::default());
        let d = Memoised::new(
            Counting::default(),
            Some(kept.clone() as Arc<dyn MemoStore>),
        );
        let (live, warned) = warnings();
        run(d.answer(&evaluate("done"), &live));
        for entry in kept.entries.lock().expect("entries").values_mut() {
            let at = entry.len() - 3;
            entry[at] ^= 0x20;
        }
        let again = run(d.answer(&evaluate("done"), &live));
        assert_eq!(again.usage.map(|u| u.asked), Some(1), "asked again");
        assert_eq!(
            again.outcome,
            Ok(Answer::Evaluate(false)),
            "the model's answer"
        );
        let w = warned.lock().expect("log").clone();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("checksum"), "{w:?}");

        let refusing = Arc::new(Kept {
            refuse_writes: true,
            ..Kept::default()
        });
        let d = Memoised::new(Counting::default(), Some(refusing as Arc<dyn MemoStore>));
        let (live, warned) = warnings();
        for c in ["a", "b", "c"] {
            let s = run(d.answer(&evaluate(c), &live));
            assert!(s.outcome.is_ok(), "the run goes on");
        }
        let w = warned.lock().expect("log").clone();
        assert_eq!(w.len(), 1, "said once: {w:?}");
        assert!(
            w[0].contains("cannot write the memo at memory (read-only)"),
            "{w:?}"
        );
    }

    #[test]
    fn failures_are_not_kept() {
        struct Failing;
        impl Driver for Failing {
            fn name(&self) -> &str {
                "failing"
            }
            async fn answer(&self, _req: &Request, _live: &Live) -> Served {
                Served::from(Err::<Answer, _>(Failure("busy".into())))
            }
            fn memo_identity(&self, _req: &Request) -> Option<serde_json::Value> {
                Some(serde_json::json!("same"))
            }
        }
        let kept = Arc::new(Kept::default());
        let d = Memoised::new(Failing, Some(kept.clone() as Arc<dyn MemoStore>));
        run(d.answer(&evaluate("x"), &Live::off()));
        assert!(kept.entries.lock().expect("entries").is_empty());
    }
}
