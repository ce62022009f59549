//! The job-hash fields layout 4 leaves out while they hold their default (see "The job hash" in
//! `redis.rs`): one table, rendered into every script's prelude ([`lua_prelude`]) and applied by
//! the decoder ([`fill`]), so the scripts and the Rust side cannot disagree on what an absent
//! field means.
//!
//! The values are **frozen**: a stored hash means them forever, so they must never change, even
//! if `JobSpec`'s defaults do (a job whose value differs from the frozen one simply stores it).

use std::collections::HashMap;

/// Field → the value an absent field holds. Spec fields: `q` queue, `w` workflow, `g` stage,
/// `p` payload JSON, `m` max attempts, `to` timeout ms, `hb` heartbeat ms, `sa` stale after ms,
/// `i` idempotent; state fields: `s` state, `a` attempts, `t` fencing token, `cr` cancel
/// requested, `ra` recovery available, `o` outcome ('' = none), `e` error ('' = none), `r` the
/// terminal attempt's result label ('' = none), `cb` the call that closed token `ct`, `sr` / `sd`
/// the job's stale entries in its ready list / its done list (see `common.lua`).
pub(super) const DEFAULTS: [(&str, &str); 20] = [
    ("q", "default"),
    ("w", "adhoc"),
    ("g", "run"),
    ("p", "{}"),
    ("m", "3"),
    ("to", "3600000"),
    ("hb", "2000"),
    ("sa", "15000"),
    ("i", "1"),
    ("s", "queued"),
    ("a", "0"),
    ("t", "0"),
    ("cr", "0"),
    ("ra", "0"),
    ("o", ""),
    ("e", ""),
    ("r", ""),
    ("cb", "finish"),
    ("sr", "0"),
    ("sd", "0"),
];

/// Field → the field whose value an absent field holds: updated at and not before default to
/// the creation time, the last heartbeat to the lease's start, the closed token to the current
/// one. A relative default's source always has a value (stored, or a static default).
pub(super) const RELATIVE: [(&str, &str); 4] = [("u", "c"), ("nb", "c"), ("hh", "la"), ("ct", "t")];

/// The static default of field `name`, if it has one.
pub(super) fn default_of(name: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

/// The field every job hash stores (its creation time): absent = no such job.
pub(super) const PRESENT: &str = "c";

/// The Lua tables `DEFAULTS` and `RELATIVE` of [`DEFAULTS`] and [`RELATIVE`], for the scripts'
/// prelude (`scripts.rs`).
pub(super) fn lua_prelude() -> String {
    let table = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| {
                debug_assert!(
                    v.chars()
                        .all(|c| c.is_ascii_graphic() && c != '\'' && c != '\\')
                );
                format!("{k} = '{v}'")
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "local DEFAULTS = {{ {} }}\nlocal RELATIVE = {{ {} }}\nlocal PRESENT = '{PRESENT}'\n",
        table(&DEFAULTS),
        table(&RELATIVE)
    )
}

/// Fills the absent fields of a job hash `h` (an `HGETALL`; left empty when empty: no such job)
/// with their defaults, static ones first, then relative ones.
pub(super) fn fill(h: &mut HashMap<String, String>) {
    if h.is_empty() {
        return;
    }
    for (k, v) in DEFAULTS {
        h.entry(k.to_owned()).or_insert_with(|| v.to_owned());
    }
    for (k, src) in RELATIVE {
        if !h.contains_key(k)
            && let Some(v) = h.get(src).cloned()
        {
            h.insert(k.to_owned(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;

    #[test]
    fn the_frozen_spec_defaults_are_todays_jobspec_defaults() {
        // Not a correctness condition (a differing value is stored), but a memory one: a default
        // spec must store none of its spec fields.
        let d = JobSpec::new("noop", serde_json::json!({}));
        let get = |k: &str| {
            DEFAULTS
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
                .unwrap()
        };
        assert_eq!(get("q"), d.queue);
        assert_eq!(get("w"), d.workflow);
        assert_eq!(get("g"), d.stage);
        assert_eq!(get("p"), serde_json::to_string(&d.payload).unwrap());
        assert_eq!(get("m"), d.max_attempts.to_string());
        assert_eq!(get("to"), d.timeout_ms.to_string());
        assert_eq!(get("hb"), d.heartbeat_ms.to_string());
        assert_eq!(get("sa"), d.stale_after_ms.to_string());
        assert_eq!(get("i"), u8::from(d.idempotent).to_string());
    }

    #[test]
    fn fill_restores_static_then_relative_defaults_and_leaves_a_missing_job_empty() {
        let mut h: HashMap<String, String> = [("c", "10"), ("la", "20"), ("t", "3")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        fill(&mut h);
        assert_eq!(
            (h["s"].as_str(), h["u"].as_str(), h["nb"].as_str()),
            ("queued", "10", "10")
        );
        assert_eq!(
            (h["hh"].as_str(), h["ct"].as_str(), h["cb"].as_str()),
            ("20", "3", "finish")
        );
        let mut fresh: HashMap<String, String> = [("c".to_owned(), "1".to_owned())].into();
        fill(&mut fresh);
        assert_eq!(
            fresh["ct"], "0",
            "a relative default whose source is itself at its default"
        );
        assert!(!fresh.contains_key("hh"), "no lease: no heartbeat");
        let mut none = HashMap::new();
        fill(&mut none);
        assert!(none.is_empty());
        let lua = lua_prelude();
        assert!(
            lua.contains("cb = 'finish'") && lua.contains("hh = 'la'"),
            "{lua}"
        );
    }
}
