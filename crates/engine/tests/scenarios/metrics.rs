//! The queue's `/metrics` counters (issue 36 item 2) move with every kind of transition, on both
//! backends: enqueue, lease, a pass, a retry, a death, a fenced finish, a cancel, an ack and a
//! prune, each read back from one `metrics()` call.

use std::time::Duration;

use skillforge_engine::metrics::{MetricRow, MetricsSnapshot};
use skillforge_engine::retention::{Bound, PruneRule, RetainClass};
use skillforge_engine::{CancelReply, FinishReply, JobState, QueueBackend, WorkerIdentity};

use super::{finish, spec};

/// The sum of the rows of `name` on queue `q` that match `outcome` (any when `None`), or of the
/// histogram rows' counts.
fn sum(m: &MetricsSnapshot, name: &str, q: &str, outcome: Option<&str>) -> i64 {
    m.rows
        .iter()
        .filter(|r: &&MetricRow| {
            r.name == name && r.queue == q && outcome.is_none_or(|o| r.outcome == o)
        })
        .map(|r| r.value)
        .sum()
}

pub(crate) async fn counters_move_with_every_transition(b: &dyn QueueBackend) {
    let q = "metered";
    let snapshot = || async {
        b.metrics()
            .await
            .unwrap()
            .expect("the backend keeps metrics")
    };
    let before = snapshot().await;
    assert_eq!(sum(&before, "enqueued", q, None), 0);
    let mut s = spec(q);
    s.workflow = "wf".into();
    s.stage = "st".into();
    let w = WorkerIdentity::new("metrics");
    let a = b.enqueue(&s).await.unwrap().job_id;
    let bb = b.enqueue(&s).await.unwrap().job_id;
    let c = b.enqueue(&s).await.unwrap().job_id;
    let m = snapshot().await;
    assert_eq!(sum(&m, "enqueued", q, None), 3);
    assert_eq!(sum(&m, "depth", q, Some("queued")), 3);
    let enq = m
        .rows
        .iter()
        .find(|r| r.name == "enqueued" && r.queue == q)
        .unwrap();
    assert_eq!(
        (enq.workflow.as_str(), enq.stage.as_str()),
        ("wf", "st"),
        "split by workflow and stage"
    );

    // a passes; b fails once (retry), then dies; c is fenced once, then cancelled.
    let la = b.lease(q, &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(la.job.id, a);
    assert_eq!(sum(&snapshot().await, "depth", q, Some("running")), 1);
    b.finish(&a, la.fencing_token, &finish(JobState::Succeeded))
        .await
        .unwrap();
    let lb = b.lease(q, &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(
        b.finish(&bb, lb.fencing_token, &finish(JobState::Queued))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Queued)
    );
    let lc = b.lease(q, &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(lc.job.id, c);
    let fenced = b
        .finish(&c, lc.fencing_token + 7, &finish(JobState::Succeeded))
        .await
        .unwrap();
    assert!(matches!(fenced, FinishReply::Fenced { .. }), "{fenced:?}");
    let lb2 = b.lease(q, &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(lb2.job.id, bb);
    b.finish(&bb, lb2.fencing_token, &finish(JobState::Dead))
        .await
        .unwrap();
    assert_eq!(b.cancel(&c).await.unwrap(), CancelReply::Requested);
    b.finish(&c, lc.fencing_token, &finish(JobState::Queued))
        .await
        .unwrap();

    let m = snapshot().await;
    assert_eq!(sum(&m, "started", q, None), 4, "{m:?}");
    assert_eq!(sum(&m, "finished", q, Some("succeeded")), 1);
    assert_eq!(sum(&m, "finished", q, Some("dead")), 1);
    assert_eq!(
        sum(&m, "finished", q, Some("cancelled")),
        1,
        "a cancel request wins over the retry"
    );
    assert_eq!(sum(&m, "retries", q, None), 1);
    let fenced_total: i64 = m
        .rows
        .iter()
        .filter(|r| r.name == "fencing_rejections")
        .map(|r| r.value)
        .sum();
    assert_eq!(
        fenced_total
            - before
                .rows
                .iter()
                .filter(|r| r.name == "fencing_rejections")
                .map(|r| r.value)
                .sum::<i64>(),
        1
    );
    assert_eq!(
        sum(&m, "wait_ms", q, None),
        4,
        "one wait per attempt started"
    );
    assert_eq!(sum(&m, "run_ms", q, None), 4, "one run per attempt ended");
    assert!(
        m.rows
            .iter()
            .filter(|r| r.name == "run_ms")
            .all(|r| r.le_ms == -1 || skillforge_engine::metrics::BUCKETS_MS.contains(&r.le_ms))
    );
    for (state, n) in [
        ("queued", 0),
        ("running", 0),
        ("succeeded", 1),
        ("dead", 1),
        ("cancelled", 1),
    ] {
        assert_eq!(
            sum(&m, "depth", q, Some(state)),
            n,
            "depth of {state}: {m:?}"
        );
    }
    assert!(
        m.oldest_pending_result_ms.is_some(),
        "three results wait to be applied"
    );

    // Acknowledged and pruned: the succeeded job leaves the depth.
    for (id, token) in [(&a, la.fencing_token), (&bb, lb2.fencing_token)] {
        assert!(b.ack_result(id, token).await.unwrap());
    }
    let now = b.now_ms().await.unwrap();
    let rule = PruneRule {
        class: RetainClass::Succeeded,
        jobs: Bound {
            before_ms: Some(now + 60_000),
            keep_newest: None,
        },
        tombstones: Bound::default(),
    };
    assert_eq!(b.prune(&rule, 100).await.unwrap().jobs, 1);
    let m = snapshot().await;
    assert_eq!(sum(&m, "depth", q, Some("succeeded")), 0, "{m:?}");
    assert_eq!(sum(&m, "depth", q, Some("dead")), 1);
}
