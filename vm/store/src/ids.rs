//! New runs' ids: the UTC date and time they started and six random characters
//! (`20251122-081456-k3x9qa`), so ids sort by start time in every store.

use prose_runtime::clock::{now, timestamp};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new run id, and its start time (ISO 8601).
pub fn new_run_id() -> (String, String) {
    let (date, time, iso) = timestamp(now());
    (format!("{date}-{time}-{}", random6()), iso)
}

/// Whether `id` has the form every store gives a run (`20251122-081456-k3x9qa`: the start's
/// date and time, then six lowercase letters or digits). An id read back from a store is
/// used to name files (a run's views, its agents' memory): one of another form, written
/// into a shared database or a SQLite file someone sent, could name a path anywhere.
pub fn is_run_id(id: &str) -> bool {
    let digits = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = id.split('-').collect();
    matches!(parts.as_slice(), [date, time, tail]
        if digits(date, 8) && digits(time, 6) && tail.len() == 6
            && tail.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// `id` when it is a run id ([`is_run_id`]), else the error saying it is not.
pub fn checked(id: &str) -> Result<&str, crate::StoreError> {
    if is_run_id(id) {
        Ok(id)
    } else {
        Err(crate::StoreError::Invalid(format!(
            "{:?} is not a run id (a store holding it was written by something else)",
            id.chars().take(80).collect::<String>()
        )))
    }
}

/// `record` read from a store under the id `id`: refused unless `id` is a run id and the
/// record is that run's, so that no record names another run's files.
pub fn checked_record(
    id: &str,
    record: prose_runtime::record::RunRecord,
) -> Result<prose_runtime::record::RunRecord, crate::StoreError> {
    checked(id)?;
    if record.id != id {
        return Err(crate::StoreError::Invalid(format!(
            "run {id}: its record says it is run {:?}",
            record.id.chars().take(80).collect::<String>()
        )));
    }
    Ok(record)
}

/// Six random lowercase alphanumerics (from the process's hash randomness).
pub fn random6() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    let mut n = h.finish();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| {
            let c = alphabet[(n % 36) as usize] as char;
            n /= 36;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_form_stores_give_is_a_run_id() {
        assert!(is_run_id(&new_run_id().0));
        for bad in [
            "../../x/PWNED",
            "/etc/passwd",
            "20251122-081456-k3x9q",
            "20251122-081456-k3x9qa/..",
            "20251122-081456-K3X9QA",
            "20251122-081456-k3x9q.",
            "",
        ] {
            assert!(!is_run_id(bad), "{bad}");
            assert!(checked(bad).is_err());
        }
    }

    #[test]
    fn random_ids_have_six_characters() {
        let r = random6();
        assert_eq!(r.len(), 6);
        assert!(r
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
        let (id, started) = new_run_id();
        assert_eq!(id.len(), "20251122-081456-k3x9qa".len());
        assert!(started.ends_with('Z'));
    }
}
