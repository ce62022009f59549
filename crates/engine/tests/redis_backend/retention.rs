//! Retention on Redis (issue 19): the shared scenarios, plus what pruning leaves in the
//! namespace (only the tombstone and the idempotency entry, until the tombstone expires).

use super::*;

#[tokio::test]
async fn retention_by_age() {
    let server = RedisServer::start();
    scenarios::retention::retention_by_age(&backend(&server).await).await;
}

#[tokio::test]
async fn retention_by_count() {
    let server = RedisServer::start();
    scenarios::retention::retention_by_count(&backend(&server).await).await;
}

#[tokio::test]
async fn pruning_never_removes_an_unapplied_result() {
    let server = RedisServer::start();
    scenarios::retention::pruning_never_removes_an_unapplied_result(&backend(&server).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_races_ingestion_and_retries_without_losing_a_result() {
    let server = RedisServer::start();
    scenarios::retention::pruning_races_ingestion_and_retries_without_losing_a_result(
        &backend(&server).await,
    )
    .await;
}

#[tokio::test]
async fn idempotency_key_outlives_its_job_by_the_retention() {
    let server = RedisServer::start();
    scenarios::retention::idempotency_key_outlives_its_job_by_the_retention(
        &backend(&server).await,
    )
    .await;
}

/// A pruned job leaves no key behind but its tombstone (and its idempotency entry): its hash,
/// its history list and its index entries go; an expired tombstone takes the rest.
#[tokio::test]
async fn a_pruned_job_leaves_only_its_tombstone_in_the_namespace() {
    use skillforge_engine::retention::{Bound, PruneRule, RetainClass, prune_pass};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("keys");
    let mut keyed = spec("keys");
    keyed.idempotency_key = Some("k1".into());
    let id = b.enqueue(&keyed).await.unwrap().job_id;
    let l = b.lease("keys", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(
        &id,
        l[0].fencing_token,
        &finish(JobState::Queued, 0, "failed"),
    )
    .await
    .unwrap();
    let l = b.lease("keys", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(
        &id,
        l[0].fencing_token,
        &finish(JobState::Dead, 0, "failed"),
    )
    .await
    .unwrap();
    assert_eq!(
        server.cli(&[
            "EXISTS",
            &format!(
                "sftest:job:{}:history",
                skillforge_engine::redis::id::stored(&id)
            )
        ]),
        "1",
        "a superseded attempt"
    );
    assert!(b.ack_result(&id, l[0].fencing_token).await.unwrap());
    assert_eq!(
        server.cli(&["LLEN", "sftest:done:failed"]),
        "1",
        "the ack makes it prunable"
    );
    let all = Bound {
        before_ms: Some(b.now_ms().await.unwrap() + 1_000),
        keep_newest: None,
    };
    let rule = PruneRule {
        class: RetainClass::Failed,
        jobs: all,
        tombstones: Bound::default(),
    };
    assert_eq!(prune_pass(&b, &[rule], 10).await.unwrap().jobs, 1);
    assert_eq!(
        server.cli(&["KEYS", "sftest:job:*"]),
        "",
        "no job hash or history left"
    );
    for (key, n) in [
        ("sftest:jobs", "0"),
        ("sftest:state:dead", "0"),
        ("sftest:pruned:failed", "1"),
    ] {
        assert_eq!(server.cli(&["ZCARD", key]), n, "{key}");
    }
    assert_eq!(server.cli(&["LLEN", "sftest:done:failed"]), "0");
    assert_eq!(server.cli(&["HLEN", "sftest:pruned"]), "1");
    assert_eq!(
        server.cli(&["HGET", "sftest:idem", "k1"]),
        skillforge_engine::redis::id::stored(&id),
        "the key stays with the tombstone"
    );

    let tombs = PruneRule {
        class: RetainClass::Failed,
        jobs: Bound::default(),
        tombstones: all,
    };
    assert_eq!(prune_pass(&b, &[tombs], 10).await.unwrap().tombstones, 1);
    for key in ["sftest:pruned", "sftest:idem"] {
        assert_eq!(server.cli(&["HLEN", key]), "0", "{key}");
    }
    assert_eq!(server.cli(&["ZCARD", "sftest:pruned:failed"]), "0");
}

/// A namespace written by a build before retention: its acknowledged jobs are in no `done:*` set.
/// The rewrite into layout 4 at connect files them first (walking `jobs` from the oldest, 500
/// entries a call), then turns the done sets into lists; prune removes them; a job whose result
/// is pending is not filed.
#[tokio::test]
async fn jobs_acknowledged_before_retention_are_backfilled_and_pruned() {
    use skillforge_engine::retention::{Bound, PruneRule, RetainClass, prune_pass};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("old");
    let mut ids = Vec::new();
    for i in 0..1_200 {
        let id = b.enqueue(&spec("old")).await.unwrap().job_id;
        let l = b.lease("old", &w, 1, Duration::ZERO).await.unwrap();
        b.finish(
            &id,
            l[0].fencing_token,
            &finish(JobState::Succeeded, 0, "passed"),
        )
        .await
        .unwrap();
        if i != 7 {
            assert!(b.ack_result(&id, l[0].fencing_token).await.unwrap());
        }
        ids.push(id);
    }
    // What an older build left: every job in the `jobs` index (by creation time), no `done:*`
    // entries, no backfill cursor.
    let index = "for _, key in ipairs({'sftest:done:succeeded', 'sftest:results'}) do \
        for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do \
          redis.call('ZADD', 'sftest:jobs', redis.call('HGET', 'sftest:job:' .. id, 'c'), id) end end \
        return redis.call('ZCARD', 'sftest:jobs')";
    let index = index.replace("ZRANGE', key", "LRANGE', key").replace(
        "for _, id in ipairs(redis.call('LRANGE', key, 0, -1)) do",
        "local ids = (key == 'sftest:results') and redis.call('ZRANGE', key, 0, -1) or redis.call('LRANGE', key, 0, -1) \
         for _, id in ipairs(ids) do",
    );
    assert_eq!(server.cli(&["EVAL", &index, "0"]), "1200");
    server.cli(&["DEL", "sftest:done:succeeded", "sftest:done:backfill"]);
    server.cli(&["SET", "sftest:layout", "3"]);
    drop(b);
    let b = backend(&server).await;
    assert_eq!(server.cli(&["GET", "sftest:done:backfill"]), "done");
    assert_eq!(server.cli(&["GET", "sftest:layout"]), "4");
    assert_eq!(
        server.cli(&["LLEN", "sftest:done:succeeded"]),
        "1199",
        "every acknowledged job filed once"
    );
    let all = Bound {
        before_ms: Some(b.now_ms().await.unwrap() + 1_000),
        keep_newest: None,
    };
    let rule = PruneRule {
        class: RetainClass::Succeeded,
        jobs: all,
        tombstones: Bound::default(),
    };
    assert_eq!(b.prune_count(&rule).await.unwrap().0, 1199);
    assert_eq!(prune_pass(&b, &[rule], 400).await.unwrap().jobs, 1199);
    assert!(
        b.get(&ids[7]).await.unwrap().is_some(),
        "the pending one stays"
    );
    assert_eq!(server.cli(&["ZCARD", "sftest:jobs"]), "1");
}

#[tokio::test]
async fn metrics_counters_move_with_every_transition() {
    let server = RedisServer::start();
    scenarios::metrics::counters_move_with_every_transition(&backend(&server).await).await;
}

/// A namespace whose jobs were written before the `/metrics` counters existed (or that lost its
/// counters) gets its depth counted from the jobs at the next open, once, exactly.
#[tokio::test]
async fn metrics_depth_of_an_older_namespace_is_counted_at_open() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = WorkerIdentity::new("older");
    for _ in 0..3 {
        b.enqueue(&spec("old")).await.unwrap();
    }
    b.lease("old", &w, 1, Duration::ZERO).await.unwrap();
    // As an older build left it: no counters at all.
    server.cli(&["DEL", "sftest:metrics"]);
    assert!(b.metrics().await.unwrap().unwrap().rows.is_empty());
    drop(b);
    let depth = |m: &skillforge_engine::metrics::MetricsSnapshot, state: &str| {
        m.rows
            .iter()
            .filter(|r| r.name == "depth" && r.queue == "old" && r.outcome == state)
            .map(|r| r.value)
            .sum::<i64>()
    };
    let reopened = backend(&server).await;
    let m = reopened.metrics().await.unwrap().unwrap();
    assert_eq!((depth(&m, "queued"), depth(&m, "running")), (2, 1), "{m:?}");
    // Counted once: a second open adds nothing.
    let again = backend(&server).await;
    let m = again.metrics().await.unwrap().unwrap();
    assert_eq!((depth(&m, "queued"), depth(&m, "running")), (2, 1), "{m:?}");
}
