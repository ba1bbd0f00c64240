//! Schedules: runs started on time. A schedule names an uploaded artifact, its inputs and
//! a cron expression (five fields, or six with seconds first; UTC); the server starts a run
//! of it each time the expression comes due. Schedules are kept in `schedules.json` in the
//! server's directory, written whole (aside, then renamed) at every change, so they outlive
//! restarts.
//!
//! A schedule's next time is moved on before its run is started: a crash in between loses
//! that one run rather than starting it twice. Times missed while no server ran start one
//! run at the next start, not one per time missed.

use chrono::{DateTime, SecondsFormat, Utc};
use croner::Cron;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::str::FromStr;
use utoipa::ToSchema;

/// A schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Schedule {
    /// Its id.
    pub id: String,
    /// When runs start: cron's five fields (minute hour day month weekday), or six with
    /// seconds first, in UTC.
    pub cron: String,
    /// The SHA-256 of the artifact run.
    pub artifact: String,
    /// The inputs of each run.
    #[schema(value_type = Object)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The URL each run it starts posts to as it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// When the next run starts (UTC, RFC 3339).
    pub next: String,
    /// The run it started last.
    pub last_run: Option<String>,
    /// Why the last run could not start.
    pub last_error: Option<String>,
}

/// The cron expression `text`, read; an error says why not.
pub fn parse(text: &str) -> Result<Cron, String> {
    // croner also reads a seventh field (years) and `@daily`-style names; what this API
    // documents, and so takes, is five fields or six.
    let fields = text.split_whitespace().count();
    if !(5..=6).contains(&fields) {
        return Err(format!(
            "cron expression {text:?}: {fields} field(s); give five (minute hour day month weekday) or six (seconds first)"
        ));
    }
    Cron::from_str(text.trim()).map_err(|e| format!("cron expression {text:?}: {e}"))
}

/// The time after `now` that `cron` next comes due.
pub fn next_after(cron: &Cron, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    cron.find_next_occurrence(&now, false)
        .map_err(|e| format!("cron expression {:?}: {e}", cron.pattern.to_string()))
}

/// The last time schedules can write (a schedule that cannot come due again waits for it).
fn never() -> DateTime<Utc> {
    use chrono::TimeZone;
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A time as schedules write it.
pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The schedules of a server, and where they are kept.
pub struct Schedules {
    path: PathBuf,
    all: Vec<Schedule>,
}

impl Schedules {
    /// The schedules kept at `path` (none when it does not exist yet).
    pub fn load(path: PathBuf) -> Result<Schedules, String> {
        let all = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Ok(Schedules { path, all })
    }

    /// Every schedule, oldest first.
    pub fn all(&self) -> &[Schedule] {
        &self.all
    }

    /// The schedule `id`.
    pub fn get(&self, id: &str) -> Option<&Schedule> {
        self.all.iter().find(|s| s.id == id)
    }

    /// Writes them all, durably.
    fn save(&self) -> Result<(), String> {
        let io = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let text = serde_json::to_vec_pretty(&self.all).map_err(|e| e.to_string())?;
        let tmp = self.path.with_extension("json.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(&text).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)
    }

    /// Adds a schedule starting runs of `artifact` with `inputs` (their ends posted to
    /// `webhook`, if given) when `cron` comes due (already read by [`parse`]); returns it.
    pub fn add(
        &mut self,
        cron: &str,
        artifact: String,
        inputs: serde_json::Map<String, serde_json::Value>,
        webhook: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Schedule, String> {
        let next = next_after(&parse(cron)?, now)?;
        let mut h = Sha256::new();
        h.update(cron.as_bytes());
        h.update(artifact.as_bytes());
        h.update(now.timestamp_nanos_opt().unwrap_or(0).to_le_bytes());
        h.update(self.all.len().to_le_bytes());
        let id: String = h.finalize()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let schedule = Schedule {
            id: format!("sch-{id}"),
            cron: cron.trim().to_string(),
            artifact,
            inputs,
            webhook,
            next: stamp(next),
            last_run: None,
            last_error: None,
        };
        self.all.push(schedule.clone());
        self.save()?;
        Ok(schedule)
    }

    /// Removes schedule `id`; whether there was one.
    pub fn remove(&mut self, id: &str) -> Result<bool, String> {
        let before = self.all.len();
        self.all.retain(|s| s.id != id);
        if self.all.len() == before {
            return Ok(false);
        }
        self.save()?;
        Ok(true)
    }

    /// The schedules due at `now`, each moved on to its next time after `now` (and kept so)
    /// before it is returned.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> Result<Vec<Schedule>, String> {
        let mut due = Vec::new();
        for s in &mut self.all {
            let when = DateTime::parse_from_rfc3339(&s.next)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(now);
            if when > now {
                continue;
            }
            due.push(s.clone());
            match parse(&s.cron).and_then(|c| next_after(&c, now)) {
                Ok(next) => s.next = stamp(next),
                Err(e) => {
                    // It cannot come due again: said, and left at the end of time.
                    s.last_error = Some(e);
                    s.next = stamp(never());
                }
            }
        }
        if !due.is_empty() {
            self.save()?;
        }
        Ok(due)
    }

    /// Notes how schedule `id`'s run went: started as `run`, or not, and why.
    pub fn started(&mut self, id: &str, run: Result<String, String>) -> Result<(), String> {
        let Some(s) = self.all.iter_mut().find(|s| s.id == id) else {
            return Ok(());
        };
        match run {
            Ok(run) => {
                s.last_run = Some(run);
                s.last_error = None;
            }
            Err(e) => s.last_error = Some(e),
        }
        self.save()
    }

    /// When the soonest schedule comes due.
    pub fn soonest(&self) -> Option<DateTime<Utc>> {
        self.all
            .iter()
            .filter_map(|s| DateTime::parse_from_rfc3339(&s.next).ok())
            .map(|t| t.with_timezone(&Utc))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn schedules_come_due_move_on_and_are_kept() {
        let dir = std::env::temp_dir().join(format!("prose-schedules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("schedules.json");
        let t0 = Utc
            .with_ymd_and_hms(2025, 1, 1, 12, 0, 30)
            .single()
            .expect("time");
        let mut s = Schedules::load(path.clone()).expect("load");
        let a = s
            .add(
                "*/5 * * * *",
                "abc".into(),
                serde_json::Map::new(),
                None,
                t0,
            )
            .expect("add");
        assert_eq!(a.next, "2025-01-01T12:05:00.000Z");
        assert!(s
            .add("61 * * * *", "abc".into(), serde_json::Map::new(), None, t0)
            .is_err());
        assert!(s.take_due(t0).expect("due").is_empty());
        // Missed three times: one run, and the next time after now.
        let late = Utc
            .with_ymd_and_hms(2025, 1, 1, 12, 17, 0)
            .single()
            .expect("time");
        let due = s.take_due(late).expect("due");
        assert_eq!(due.len(), 1);
        s.started(&a.id, Ok("run-1".into())).expect("started");
        let again = Schedules::load(path).expect("load");
        assert_eq!(again.all().len(), 1);
        assert_eq!(again.all()[0].next, "2025-01-01T12:20:00.000Z");
        assert_eq!(again.all()[0].last_run.as_deref(), Some("run-1"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
