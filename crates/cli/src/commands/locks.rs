//! `skillforge locks`: every active job lease and named lock with owner, heartbeat age and status.

use serde_json::json;

use crate::context::Context;
use crate::exit::{CliResult, OK};
use crate::output::{age, print_json, rfc3339_ms};

/// Prints the lease table (or JSON array).
pub async fn run(ctx: &Context) -> CliResult {
    let backend = ctx.queue().await?;
    let now = backend.now_ms().await?;
    let mut leases = backend.leases().await?;
    leases.sort_by(|a, b| (a.kind as u8, &a.name).cmp(&(b.kind as u8, &b.name)));
    if ctx.json {
        let rows: Vec<_> = leases
            .iter()
            .map(|l| {
                json!({
                    "kind": l.kind,
                    "name": l.name,
                    "status": l.status(now),
                    "owner_worker": l.lease.owner_worker,
                    "owner_host": l.lease.owner_host,
                    "owner_pid": l.lease.owner_pid,
                    "fencing_token": l.lease.fencing_token,
                    "acquired_at": rfc3339_ms(l.lease.acquired_at_ms),
                    "heartbeat_at": rfc3339_ms(l.lease.heartbeat_at_ms),
                    "heartbeat_age_ms": now - l.lease.heartbeat_at_ms,
                    "stale_after_ms": l.stale_after_ms,
                })
            })
            .collect();
        print_json(&rows);
        return Ok(OK);
    }
    if leases.is_empty() {
        println!("no active leases or locks");
        return Ok(OK);
    }
    println!(
        "{:<5} {:<44} {:<26} {:<28} {:>6} {:>9}",
        "KIND", "NAME", "STATUS", "OWNER", "TOKEN", "HB AGE"
    );
    for l in &leases {
        let status = serde_json::to_value(l.status(now))
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let kind = serde_json::to_value(l.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        println!(
            "{:<5} {:<44} {:<26} {:<28} {:>6} {:>9}",
            kind,
            l.name,
            status,
            format!(
                "{}@{}:{}",
                l.lease.owner_worker, l.lease.owner_host, l.lease.owner_pid
            ),
            l.lease.fencing_token,
            age(now - l.lease.heartbeat_at_ms)
        );
    }
    Ok(OK)
}
