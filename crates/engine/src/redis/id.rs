//! Job ids inside Redis (layout 4): a job id that is a hyphenated UUID — every id this engine
//! makes (`new_job_id`) — is stored in keys, set members and script arguments as the base64
//! text of its 16 bytes in an order-keeping alphabet ([`SORTED`]: the 64 URL-safe characters in
//! ASCII order), 22 characters instead of 36. Like the hex text of a UUIDv7, stored ids sort in
//! byte order, so a sorted set's members of one score (jobs pruned in one call, created in one
//! ms) still come out oldest first. This is most of what a queued job costs
//! beyond its hash's fixed overhead (its key and its ready-list entry). Any other id (written
//! by hand into an old namespace) is stored as it is. The public id stays the UUID text: the
//! backend converts at its boundary ([`stored`] going in, [`public`] coming out), and
//! `migrate4.lua` renames the keys and members of a layout-3 namespace with the same rule.

use std::borrow::Cow;

use base64::Engine as _;
use base64::alphabet::Alphabet;
use base64::engine::{GeneralPurpose, general_purpose::NO_PAD};

/// The base64 alphabet of stored ids: base64url's characters in ASCII order, so that the text
/// sorts as the bytes do (`migrate4.lua` has the same table).
pub const SORTED: &str = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

const ENGINE: GeneralPurpose = match Alphabet::new(SORTED) {
    Ok(a) => GeneralPurpose::new(&a, NO_PAD),
    Err(_) => panic!("the stored-id alphabet is 64 distinct characters"),
};

/// Length of a stored UUID id.
const SHORT: usize = 22;

/// The form of job id `id` inside Redis: the 22-character [`SORTED`]-alphabet base64 text of a
/// hyphenated UUID's bytes, else `id` unchanged. See [`public`] for the way back.
///
/// `stored("01937c3e-…")` → `"AZN8Pg…"`; `stored("job-a")` → `"job-a"`.
pub fn stored(id: &str) -> Cow<'_, str> {
    match hyphenated_uuid(id) {
        Some(u) => Cow::Owned(ENGINE.encode(u.as_bytes())),
        None => Cow::Borrowed(id),
    }
}

/// The public job id of a stored id `s`: the hyphenated lowercase UUID of a 22-character
/// [`SORTED`]-alphabet text of 16 bytes, else `s` unchanged.
pub fn public(s: &str) -> String {
    if s.len() == SHORT
        && let Ok(bytes) = ENGINE.decode(s)
        && let Ok(u) = uuid::Uuid::from_slice(&bytes)
    {
        return u.hyphenated().to_string();
    }
    s.to_owned()
}

/// `id` as a UUID when it is one in the hyphenated form (36 characters; the form
/// `migrate4.lua` recognizes), any case.
fn hyphenated_uuid(id: &str) -> Option<uuid::Uuid> {
    let b = id.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    uuid::Uuid::try_parse(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_stored_in_22_characters_and_come_back_and_other_ids_stay() {
        for _ in 0..100 {
            let id = crate::job::new_job_id();
            let s = stored(&id);
            assert_eq!(s.len(), 22, "{s}");
            assert!(
                s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
                "{s}"
            );
            assert_eq!(public(&s), id);
        }
        let upper = "01937C3E-AAAA-7BBB-8CCC-DDDDDDDDDDDD";
        assert_eq!(
            public(&stored(upper)),
            upper.to_lowercase(),
            "any case, one job"
        );
        for other in [
            "job-a",
            "v2-queued",
            "",
            "01937c3eaaaa7bbb8cccdddddddddddd",
            "{01937c3e-aaaa-7bbb-8ccc-dddddddddddd}",
        ] {
            assert_eq!(stored(other), other, "{other}");
            assert_eq!(public(other), other);
        }
        // The Lua rule of migrate4.lua (short_id) gives the same text: checked against the
        // script in tests/redis_backend (layouts.rs).
        assert_eq!(
            stored("00000000-0000-0000-0000-000000000000"),
            "----------------------"
        );
        assert_eq!(
            stored("ffffffff-ffff-ffff-ffff-ffffffffffff"),
            "zzzzzzzzzzzzzzzzzzzzzk"
        );
    }

    #[test]
    fn stored_ids_sort_as_their_uuids() {
        let mut ids: Vec<String> = (0..2000)
            .map(|_| uuid::Uuid::new_v4().to_string())
            .collect();
        ids.extend((0..200).map(|_| crate::job::new_job_id()));
        let mut by_text = ids.clone();
        by_text.sort();
        let mut by_stored = ids.clone();
        by_stored.sort_by_key(|id| stored(id).into_owned());
        assert_eq!(
            by_text, by_stored,
            "stored ids order as the hex text (the bytes) does"
        );
    }
}
