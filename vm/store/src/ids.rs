//! New runs' ids: the UTC date and time they started and six random characters
//! (`20251122-081456-k3x9qa`), so ids sort by start time in every store.

use prose_runtime::clock::{now, timestamp};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new run id, and its start time (ISO 8601).
pub fn new_run_id() -> (String, String) {
    let (date, time, iso) = timestamp(now());
    (format!("{date}-{time}-{}", random6()), iso)
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
