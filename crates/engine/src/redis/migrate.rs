//! Rewrites a namespace written by an older build into layout 4 (see "The job hash" in
//! `redis.rs`), once, when a backend connects, in two stages:
//!
//! - **Layouts 1 and 2 → 3.** Job hashes in layout 1 or 2 (each with a ~250-byte `spec` JSON
//!   field and long field names, so Redis stored every one of them in its large hashtable
//!   encoding) are rewritten into layout 3, which stores every field.
//! - **Layout 3 → 4** (`migrate4.lua`): the ready and done sorted sets become lists, after the
//!   retention backfill of a namespace written before retention is finished. Job hashes stay as
//!   they are: layout 4 only leaves out fields at their defaults, and reads a stored one the same.
//!
//! The namespace's `layout` key is [`LAYOUT`] once both are done (set at once for a new
//! namespace, by `epoch.lua`). Until it is `3`, [`RedisBackend::connect`] walks the `jobs`
//! index by creation time from the cursor `layout:cursor`, [`BATCH`] jobs a call: it reads each
//! hash, rebuilds it in Rust (the spec JSON is parsed by serde, the same code that wrote it) and
//! `migrate.lua` swaps it in atomically unless the hash changed meanwhile. Several processes
//! connecting at once share the walk (each batch is atomic; a hash already in layout 3 is
//! skipped). Processes of an older build must be stopped before the upgrade: they cannot read
//! layout 3.

use std::collections::HashMap;

use std::time::Duration;

use tokio::time::Instant;

use super::{RETRY_BUDGET, RedisBackend, decode, transient};
use crate::error::EngineError;

/// The layout this build writes (the namespace's `layout` key once it is fully in it).
pub(super) const LAYOUT: &str = "4";
/// Jobs read and rewritten, or set members moved, per script call.
const BATCH: usize = 500;
/// How often one batch is read again when hashes changed between the read and the rewrite.
const MAX_REREADS: usize = 10;

/// Old field name → layout-3 name, for the fields copied as they are (when present).
const RENAMED: [(&str, &str); 20] = [
    ("queue", "q"),
    ("state", "s"),
    ("attempts", "a"),
    ("max_attempts", "m"),
    ("token", "t"),
    ("seq", "n"),
    ("heartbeat_ms", "hb"),
    ("stale_after", "sa"),
    ("idempotent", "i"),
    ("created_at", "c"),
    ("updated_at", "u"),
    ("not_before", "nb"),
    ("idem_key", "k"),
    ("cancel_requested", "cr"),
    ("recovery_available", "ra"),
    ("owner_worker", "ow"),
    ("owner_host", "oh"),
    ("owner_pid", "op"),
    ("acquired_at", "la"),
    ("heartbeat_at", "hh"),
];

/// The layout-3 fields of an old-layout hash `h` of job `id` (`None` when `h` is not in an
/// old layout: already rewritten, or gone).
///
/// Errors: [`EngineError::Corrupt`] when its spec does not parse.
fn rewrite(
    id: &str,
    h: &HashMap<String, String>,
) -> Result<Option<Vec<(&'static str, String)>>, EngineError> {
    if !h.contains_key("state") {
        return Ok(None);
    }
    let spec = decode::old_spec(id, h)?;
    let parts = super::spec::encode(&spec)?;
    let mut out: Vec<(&'static str, String)> = RENAMED
        .iter()
        .filter_map(|(old, new)| h.get(*old).map(|v| (*new, v.clone())))
        .collect();
    for (old, new) in [("closed_token", "ct"), ("closed_by", "cb")] {
        if let Some(v) = h.get(old) {
            out.push((new, v.clone()));
        }
    }
    let layout_2 = h.get("layout").is_some_and(|l| l == "2");
    // Layout 2 stores `error` as '' or '=' + text; layout 1 as the text, absent = none.
    let error = match (layout_2, h.get("error")) {
        (true, Some(e)) => e.clone(),
        (false, Some(e)) => format!("={e}"),
        (_, None) => String::new(),
    };
    // Stored compactly (redis/outcome_json.rs) so that a quiet run's outcome stays short.
    let outcome = match h.get("outcome").filter(|o| !o.is_empty()) {
        Some(raw) => super::outcome_json::encode(id, &super::outcome_json::decode(id, raw)?)?,
        None => String::new(),
    };
    out.extend([
        ("w", spec.workflow.clone()),
        ("g", spec.stage.clone()),
        ("kd", spec.kind.clone()),
        ("p", parts.payload),
        ("to", spec.timeout_ms.to_string()),
        ("o", outcome),
        ("e", error),
        // Layout 1 kept every closed attempt in the history list: none is in the hash.
        ("r", h.get("attempt_result").cloned().unwrap_or_default()),
    ]);
    if !parts.extra.is_empty() {
        out.push(("x", parts.extra));
    }
    Ok(Some(out))
}

impl RedisBackend {
    /// Rewrites a namespace of an older layout into layout 4 (see the module doc); returns the
    /// number of job hashes rewritten from layouts 1 and 2 by this call. A no-op (one `GET`)
    /// once the namespace is in layout 4.
    ///
    /// Errors: [`EngineError::Backend`] when Redis fails; [`EngineError::Corrupt`] for an old
    /// hash whose spec does not parse (nothing of its batch is written).
    pub(super) async fn migrate_layout(&self) -> Result<u64, EngineError> {
        let layout_key = format!("{}layout", self.prefix);
        let cursor_key = format!("{}layout:cursor", self.prefix);
        let mut rewritten = 0;
        let mut rereads = 0;
        loop {
            let mut pipe = ::redis::pipe();
            pipe.cmd("GET").arg(&layout_key).cmd("GET").arg(&cursor_key);
            let (layout, cursor): (Option<String>, Option<String>) =
                with_retry!(self, "read the namespace layout", |c| pipe
                    .query_async(&mut c))?;
            match layout.as_deref() {
                Some(LAYOUT) => return Ok(rewritten),
                Some("3") => {
                    self.migrate_layout_4().await?;
                    return Ok(rewritten);
                }
                _ => {}
            }
            let from = cursor.unwrap_or_else(|| "-inf".to_owned());
            let mut cmd = ::redis::cmd("ZRANGEBYSCORE");
            cmd.arg(format!("{}jobs", self.prefix))
                .arg(&from)
                .arg("+inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(BATCH);
            let rows: Vec<(String, f64)> =
                with_retry!(self, "read the job index", |c| cmd.query_async(&mut c))?;
            let mut pipe = ::redis::pipe();
            for (id, _) in &rows {
                pipe.cmd("HGETALL").arg(format!("{}job:{id}", self.prefix));
            }
            let hashes: Vec<HashMap<String, String>> = if rows.is_empty() {
                Vec::new()
            } else {
                with_retry!(self, "read jobs to rewrite", |c| pipe.query_async(&mut c))?
            };
            let next = match (rows.first(), rows.last()) {
                _ if rows.len() < BATCH => "done".to_owned(),
                (Some((_, first)), Some((_, last))) => {
                    // A whole batch of one creation time cannot move an inclusive cursor.
                    let last = if last == first { last + 1.0 } else { *last };
                    format!("{last}")
                }
                _ => "done".to_owned(),
            };
            let mut inv = self.scripts.migrate.prepare_invoke();
            let mut n = 0;
            let mut args: Vec<String> = Vec::new();
            for ((id, _), h) in rows.iter().zip(&hashes) {
                let Some(fields) = rewrite(id, h)? else {
                    continue;
                };
                n += 1;
                args.push(id.clone());
                args.push(h.get("state").cloned().unwrap_or_default());
                args.push(h.get("updated_at").cloned().unwrap_or_default());
                args.push(fields.len().to_string());
                for (name, v) in fields {
                    args.push(name.to_owned());
                    args.push(v);
                }
            }
            inv.arg(&self.prefix).arg(&next).arg(n).arg(&args);
            let missed: u64 = if n == 0 && next != "done" {
                // Nothing to rewrite in this batch: only move the cursor.
                let mut set = ::redis::cmd("SET");
                set.arg(&cursor_key).arg(&next);
                let () = with_retry!(self, "move the layout cursor", |c| set.query_async(&mut c))?;
                0
            } else {
                with_retry!(self, "rewrite jobs into layout 3", |c| inv
                    .invoke_async(&mut c))?
            };
            rewritten += n as u64 - missed;
            if missed > 0 && rereads < MAX_REREADS {
                // A hash changed between the read and the rewrite: read the batch again (the
                // script moved the cursor, so put it back).
                rereads += 1;
                let mut set = ::redis::cmd("SET");
                set.arg(&cursor_key).arg(&from);
                let mut del = ::redis::cmd("DEL");
                del.arg(&layout_key);
                let mut pipe = ::redis::pipe();
                pipe.add_command(set).ignore().add_command(del).ignore();
                let () = with_retry!(self, "move the layout cursor back", |c| pipe
                    .query_async(&mut c))?;
            }
        }
    }
}

impl RedisBackend {
    /// Layout 3 → 4: runs `migrate4.lua` until it reports `done`.
    ///
    /// Errors: [`EngineError::Backend`] when Redis fails (the steps done so far stay done).
    async fn migrate_layout_4(&self) -> Result<(), EngineError> {
        let mut steps = 0u64;
        loop {
            let mut inv = self.scripts.migrate4.prepare_invoke();
            inv.arg(&self.prefix).arg(BATCH);
            let step: String = with_retry!(self, "rewrite the namespace into layout 4", |c| inv
                .invoke_async(&mut c))?;
            if step == "done" {
                if steps > 0 {
                    tracing::info!(steps, prefix = %self.prefix, "rewrote the namespace into layout 4");
                }
                return Ok(());
            }
            steps += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_1_and_2_hashes_are_rewritten_with_their_error_and_closed_attempt() {
        let spec = serde_json::to_string(&crate::job::JobSpec::new("noop", serde_json::json!({})))
            .unwrap();
        let base = |extra: &[(&str, &str)]| {
            let mut h: HashMap<String, String> = [
                ("state", "dead"),
                ("spec", spec.as_str()),
                ("token", "1"),
                ("id", "j"),
            ]
            .into_iter()
            .chain(extra.iter().copied())
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
            h.retain(|_, v| !v.is_empty());
            h
        };
        let get = |f: &[(&'static str, String)], name: &str| {
            f.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())
        };
        let v1 = rewrite("j", &base(&[("error", "boom")])).unwrap().unwrap();
        assert_eq!(
            (get(&v1, "e"), get(&v1, "r"), get(&v1, "o")),
            (
                Some("=boom".into()),
                Some(String::new()),
                Some(String::new())
            )
        );
        assert_eq!(
            (get(&v1, "s"), get(&v1, "t"), get(&v1, "kd")),
            (Some("dead".into()), Some("1".into()), Some("noop".into()))
        );
        assert_eq!(get(&v1, "id"), None, "the copy of the key's id is dropped");
        let v2 = rewrite(
            "j",
            &base(&[("layout", "2"), ("error", ""), ("attempt_result", "failed")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (get(&v2, "e"), get(&v2, "r")),
            (Some(String::new()), Some("failed".into()))
        );
        let new: HashMap<String, String> = [("s".to_owned(), "dead".to_owned())].into();
        assert!(
            rewrite("j", &new).unwrap().is_none(),
            "a layout-3 hash is left alone"
        );
    }
}
