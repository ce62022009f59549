//! Job ids inside Redis (layout 4): a job id that is a hyphenated UUID — every id this engine
//! makes (`new_job_id`) — is stored in keys, set members and script arguments as the base64url
//! text of its 16 bytes, 22 characters instead of 36; this is most of what a queued job costs
//! beyond its hash's fixed overhead (its key and its ready-list entry). Any other id (written
//! by hand into an old namespace) is stored as it is. The public id stays the UUID text: the
//! backend converts at its boundary ([`stored`] going in, [`public`] coming out), and
//! `migrate4.lua` renames the keys and members of a layout-3 namespace with the same rule.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Length of a stored UUID id.
const SHORT: usize = 22;

/// The form of job id `id` inside Redis: the 22-character base64url text of a hyphenated UUID's
/// bytes, else `id` unchanged. See [`public`] for the way back.
///
/// `stored("01937c3e-…")` → `"AZN8Pg…"`; `stored("job-a")` → `"job-a"`.
pub fn stored(id: &str) -> Cow<'_, str> {
    match hyphenated_uuid(id) {
        Some(u) => Cow::Owned(URL_SAFE_NO_PAD.encode(u.as_bytes())),
        None => Cow::Borrowed(id),
    }
}

/// The public job id of a stored id `s`: the hyphenated lowercase UUID of a 22-character
/// base64url text of 16 bytes, else `s` unchanged.
pub fn public(s: &str) -> String {
    if s.len() == SHORT
        && let Ok(bytes) = URL_SAFE_NO_PAD.decode(s)
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
            assert!(s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{s}");
            assert_eq!(public(&s), id);
        }
        let upper = "01937C3E-AAAA-7BBB-8CCC-DDDDDDDDDDDD";
        assert_eq!(public(&stored(upper)), upper.to_lowercase(), "any case, one job");
        for other in ["job-a", "v2-queued", "", "01937c3eaaaa7bbb8cccdddddddddddd", "{01937c3e-aaaa-7bbb-8ccc-dddddddddddd}"] {
            assert_eq!(stored(other), other, "{other}");
            assert_eq!(public(other), other);
        }
        // The Lua rule of migrate4.lua (short_id) gives the same text: checked against the
        // script in tests/redis_backend (layouts.rs).
        assert_eq!(stored("00000000-0000-0000-0000-000000000000"), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(stored("ffffffff-ffff-ffff-ffff-ffffffffffff"), "_____________________w");
    }
}
