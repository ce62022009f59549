//! The Lua scripts of the Redis backend, one per state transition, each run atomically by Redis.
//!
//! Every script is the layout's constants (the field defaults of `defaults.rs` and the layout
//! number), then `common.lua` (key helpers, server clock, state index upkeep), then its own body;
//! `ARGV[1]` is always the key prefix `{namespace}:`.

use std::sync::LazyLock;

use ::redis::Script;

const COMMON: &str = include_str!("common.lua");
/// `finish_one`, `lease_one` and friends: the finish and lease transitions as functions.
const TRANSITIONS: &str = include_str!("transitions.lua");

/// All scripts, compiled once per backend (their SHA1 is what `EVALSHA` sends; a server that
/// lost its script cache, e.g. after a restart, gets the source again transparently).
pub(super) struct Scripts {
    pub(super) enqueue: Script,
    pub(super) lease: Script,
    pub(super) heartbeat: Script,
    pub(super) finish_batch: Script,
    pub(super) release: Script,
    pub(super) expired: Script,
    pub(super) reap: Script,
    pub(super) cancel: Script,
    pub(super) fail_queued: Script,
    pub(super) retry: Script,
    pub(super) rerun: Script,
    pub(super) lock_acquire: Script,
    pub(super) lock_renew: Script,
    pub(super) lock_release: Script,
    pub(super) reap_locks: Script,
    pub(super) leases: Script,
    pub(super) ack: Script,
    pub(super) epoch: Script,
    pub(super) prune: Script,
    pub(super) migrate: Script,
    pub(super) migrate4: Script,
    pub(super) pick: Script,
    pub(super) metrics: Script,
    pub(super) metrics_seed: Script,
    pub(super) counts: Script,
}

/// The layout constants and `common.lua`, the start of every script.
static PRELUDE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}local LAYOUT = '{}'\n{COMMON}",
        super::defaults::lua_prelude(),
        super::migrate::LAYOUT
    )
});

pub(super) fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{}\n{body}", *PRELUDE))
}

fn with_transitions(body: &str) -> Script {
    Script::new(&format!("{}\n{TRANSITIONS}\n{body}", *PRELUDE))
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            enqueue: with_prelude(include_str!("enqueue.lua")),
            lease: with_transitions(include_str!("lease.lua")),
            heartbeat: with_prelude(include_str!("heartbeat.lua")),
            finish_batch: with_transitions(include_str!("finish_batch.lua")),
            release: with_prelude(include_str!("release.lua")),
            expired: with_prelude(include_str!("expired.lua")),
            reap: with_prelude(include_str!("reap.lua")),
            cancel: with_prelude(include_str!("cancel.lua")),
            fail_queued: with_prelude(include_str!("fail_queued.lua")),
            retry: with_prelude(include_str!("retry.lua")),
            rerun: with_prelude(include_str!("rerun.lua")),
            lock_acquire: with_prelude(include_str!("lock_acquire.lua")),
            lock_renew: with_prelude(include_str!("lock_renew.lua")),
            lock_release: with_prelude(include_str!("lock_release.lua")),
            reap_locks: with_prelude(include_str!("reap_locks.lua")),
            leases: with_prelude(include_str!("leases.lua")),
            ack: with_prelude(include_str!("ack.lua")),
            epoch: with_prelude(include_str!("epoch.lua")),
            prune: with_prelude(include_str!("prune.lua")),
            migrate: with_prelude(include_str!("migrate.lua")),
            migrate4: with_prelude(include_str!("migrate4.lua")),
            pick: with_prelude(include_str!("pick.lua")),
            metrics: with_prelude(include_str!("metrics.lua")),
            metrics_seed: with_prelude(include_str!("metrics_seed.lua")),
            counts: with_prelude(include_str!("counts.lua")),
        }
    }
}
