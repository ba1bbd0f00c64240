//! The memo: model answers kept across runs (`--memo`, `memo = true` in `prose.toml`), so
//! that a request asked before is answered without a call and a run's cost follows what
//! changed.
//!
//! A model request is keyed ([`MemoKey`]) by a hash of everything it sends that bears on the
//! answer, as its driver says ([`crate::driver::Driver::memo_identity`]): the provider, the
//! model, the system prompt, the conversation, the tools and the sampling, never a key or a
//! header. The answer (a turn's tool calls included) is kept under that key, in an entry
//! that carries its key and a checksum ([`encode`], [`decode`]): an entry cut short, changed
//! on disk or filed under another key reads as a miss, never as a wrong answer. Where
//! entries are kept is the store's ([`MemoStore`]): files under `.prose/memo/` beside the
//! file store's runs, a table in the SQLite and Postgres stores. [`Memoised`] puts a memo in
//! front of a driver.

mod driver;

pub use driver::Memoised;

use futures_util::future::BoxFuture;
use prose_machine::protocol::{Answer, Kind};
use sha2::{Digest, Sha256};
use std::fmt;

/// The key of a model request in the memo: SHA-256 of what identifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoKey([u8; 32]);

/// The version of the memo's keys and entries: a change to either makes every older entry
/// a miss.
const VERSION: u32 = 1;

impl MemoKey {
    /// The key of a request identified by `identity` (what its driver says of it).
    pub fn of(identity: &serde_json::Value) -> MemoKey {
        let mut h = Sha256::new();
        h.update(format!("prose-memo {VERSION}\n"));
        h.update(identity.to_string());
        MemoKey(h.finalize().into())
    }

    /// The key as 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        self.to_string()
    }

    /// A key from its 64 hex digits.
    pub fn parse(hex: &str) -> Option<MemoKey> {
        if hex.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(MemoKey(bytes))
    }
}

impl fmt::Display for MemoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// How much a memo holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoSize {
    /// Entries (answers kept).
    pub entries: u64,
    /// Bytes they take.
    pub bytes: u64,
}

/// Where a memo's entries are kept: a store's. Entries are opaque bytes here ([`encode`]
/// makes them, [`decode`] checks them); a store only keeps them by key.
pub trait MemoStore: Send + Sync {
    /// Where the memo is, for people (a directory, a database's table).
    fn place(&self) -> String;

    /// The entry kept under `key`, if any.
    fn get<'a>(&'a self, key: &'a MemoKey) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>>;

    /// Keeps `entry` under `key` (replacing what was there).
    fn put<'a>(&'a self, key: &'a MemoKey, entry: Vec<u8>) -> BoxFuture<'a, Result<(), String>>;

    /// How much the memo holds.
    fn size(&self) -> BoxFuture<'_, Result<MemoSize, String>>;

    /// Removes every entry; returns how much there was.
    fn clear(&self) -> BoxFuture<'_, Result<MemoSize, String>>;
}

/// The first word of every entry.
const MAGIC: &str = "prose-memo";

/// The entry keeping `answer` under `key`: a header line (`prose-memo 1 <sha256 of the
/// rest>`), then one JSON line with the key, the answer's kind and the answer.
pub fn encode(key: &MemoKey, answer: &Answer) -> Result<Vec<u8>, String> {
    let content = answer.to_content().map_err(|e| e.to_string())?;
    let body = serde_json::json!({
        "key": key.hex(),
        "kind": answer.kind().as_str(),
        "answer": content,
    })
    .to_string();
    let sum = crate::program::sha256_hex(body.as_bytes());
    Ok(format!("{MAGIC} {VERSION} {sum}\n{body}").into_bytes())
}

/// The answer of kind `kind` an entry read under `key` holds, or why it cannot be used
/// (then it is a miss).
pub fn decode(entry: &[u8], key: &MemoKey, kind: Kind) -> Result<Answer, String> {
    let text = std::str::from_utf8(entry).map_err(|_| "it is not text".to_string())?;
    let (header, body) = text
        .split_once('\n')
        .ok_or_else(|| "it has no header line".to_string())?;
    let mut words = header.split(' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some(MAGIC), Some(v), Some(sum), None) => {
            if v != VERSION.to_string() {
                return Err(format!("it is of version {v}, not {VERSION}"));
            }
            if crate::program::sha256_hex(body.as_bytes()) != sum {
                return Err("its checksum does not match what it holds".into());
            }
        }
        _ => return Err("its header is not a memo entry's".into()),
    }
    let json: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("it is not JSON: {e}"))?;
    if json["key"].as_str() != Some(key.hex().as_str()) {
        return Err("it was written for another request".into());
    }
    if json["kind"].as_str() != Some(kind.as_str()) {
        return Err(format!(
            "it holds a `{}` answer, not a `{kind}` one",
            json["kind"].as_str().unwrap_or("?")
        ));
    }
    Answer::from_content(kind, json["answer"].clone())
        .map_err(|e| format!("its answer does not read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prose_machine::protocol::{Stop, ToolCall, TurnAnswer};
    use serde_json::json;

    fn turn() -> Answer {
        Answer::Turn(TurnAnswer {
            text: "Reading it.".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "a.md"}),
            }],
            stop: Stop::ToolUse,
            repeated: None,
        })
    }

    #[test]
    fn keys_follow_every_byte_of_the_identity() {
        let a = MemoKey::of(&json!({"model": "m", "messages": ["hi"]}));
        assert_eq!(a, MemoKey::of(&json!({"model": "m", "messages": ["hi"]})));
        assert_ne!(a, MemoKey::of(&json!({"model": "n", "messages": ["hi"]})));
        assert_ne!(a, MemoKey::of(&json!({"model": "m", "messages": ["hi "]})));
        assert_eq!(a.hex().len(), 64);
        assert_eq!(MemoKey::parse(&a.hex()), Some(a));
        assert_eq!(MemoKey::parse("zz"), None);
        assert_eq!(MemoKey::parse(&"g".repeat(64)), None);
    }

    #[test]
    fn an_entry_reads_back_its_answer_tool_calls_included() {
        let key = MemoKey::of(&json!("q"));
        let entry = encode(&key, &turn()).expect("encodes");
        assert_eq!(decode(&entry, &key, Kind::Turn), Ok(turn()));
        let verdict = encode(&key, &Answer::Evaluate(true)).expect("encodes");
        assert_eq!(
            decode(&verdict, &key, Kind::Evaluate),
            Ok(Answer::Evaluate(true))
        );
    }

    #[test]
    fn a_damaged_or_misfiled_entry_is_refused_with_a_reason() {
        let key = MemoKey::of(&json!("q"));
        let entry = encode(&key, &turn()).expect("encodes");
        let other = MemoKey::of(&json!("another question"));
        let mut flipped = entry.clone();
        let at = flipped.len() - 5;
        flipped[at] ^= 0x01;
        let cases: Vec<(Vec<u8>, MemoKey, Kind, &str)> = vec![
            (
                entry[..entry.len() - 3].to_vec(),
                key,
                Kind::Turn,
                "checksum",
            ),
            (flipped, key, Kind::Turn, "checksum"),
            (Vec::new(), key, Kind::Turn, "header"),
            (b"garbage\n{}".to_vec(), key, Kind::Turn, "header"),
            (vec![0xff, 0xfe], key, Kind::Turn, "text"),
            (entry.clone(), other, Kind::Turn, "another request"),
            (entry.clone(), key, Kind::Choose, "not a `choose`"),
        ];
        for (bytes, k, kind, why) in cases {
            let e = decode(&bytes, &k, kind).expect_err(why);
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
