//! Scenarios shared by both backends' tests for what a waiting CLI sees (issue 13 items 7, 8): a
//! worker told to stop does not sit out an idle lease's wait, a waiter on job changes wakes on
//! a finish (its own process's, and another process's through the queue alone), and a running
//! job's live output is stored fenced, capped, in order and trimmed.

use std::sync::Arc;
use std::time::Duration;

use skillforge_engine::output::{NewOutput, OUTPUT_CAP_CHUNKS, OUTPUT_TAIL_CHUNKS, OutputStream};
use skillforge_engine::{JobState, QueueBackend, WorkerIdentity};
use tokio_util::sync::CancellationToken;

use super::{finish, spec};

/// Far longer than any test may take: a wait that is not cut short fails the deadline below.
const LONG: Duration = Duration::from_secs(3600);
/// How long the tests give a wake-up to arrive before failing (a deadline, not a timing claim).
const DEADLINE: Duration = Duration::from_secs(30);

/// `lease_or_stop` on an empty queue with an hour to wait answers, empty, once `stop` fires;
/// a job enqueued afterwards stays queued (the cut wait leased nothing), and a stop that fired
/// before the call still leases what is due (only the wait is cut).
pub(crate) async fn lease_or_stop_ends_an_idle_wait_when_stopped(b: Arc<dyn QueueBackend>) {
    let w = WorkerIdentity::new("stopping");
    let stop = CancellationToken::new();
    let waiting = tokio::spawn({
        let (b, w, stop) = (b.clone(), w.clone(), stop.clone());
        async move { b.lease_or_stop("idle", &w, 4, LONG, &stop).await }
    });
    // Let the call reach its wait (it cannot answer earlier: the queue is empty for an hour).
    tokio::task::yield_now().await;
    stop.cancel();
    let leased = tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("the idle lease's wait ends when its stop fires")
        .unwrap()
        .unwrap();
    assert!(leased.is_empty());
    let queued = b.enqueue(&spec("idle")).await.unwrap();
    assert_eq!(
        b.get(&queued.job_id).await.unwrap().unwrap().state,
        JobState::Queued
    );

    let again = b.lease_or_stop("idle", &w, 4, LONG, &stop).await.unwrap();
    assert_eq!(
        again.len(),
        1,
        "a due job is leased even with the stop already fired"
    );
    assert_eq!(again[0].job.id, queued.job_id);
}

/// `changed_since` with an hour to wait returns once a job of this process finishes, and at
/// once when the change happened between `change_seq` and the call.
pub(crate) async fn changed_since_wakes_on_a_finish(b: Arc<dyn QueueBackend>) {
    let w = WorkerIdentity::new("finisher");
    let job = b.enqueue(&spec("changes")).await.unwrap();
    let leased = b.lease("changes", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 1);
    let seen = b.change_seq();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.changed_since(seen, LONG).await }
    });
    tokio::task::yield_now().await;
    b.finish(
        &job.job_id,
        leased[0].fencing_token,
        &finish(JobState::Succeeded),
    )
    .await
    .unwrap();
    tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("a finish wakes the change waiter")
        .unwrap();

    // A change already made since `seen` answers without waiting.
    let seen = b.change_seq();
    let other = b.enqueue(&spec("changes")).await.unwrap();
    let leased = b.lease("changes", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(
        &other.job_id,
        leased[0].fencing_token,
        &finish(JobState::Succeeded),
    )
    .await
    .unwrap();
    tokio::time::timeout(DEADLINE, b.changed_since(seen, LONG))
        .await
        .expect("a change made before the call is not missed");
}

/// The CLI waiter's loop on `waiting` (read `change_seq`, then the job; done when it is finished;
/// else `changed_since` with an hour to wait): says on `ready` each time it is about to wait,
/// and returns the finished job.
async fn wait_like_the_cli(
    waiting: Arc<dyn QueueBackend>,
    id: String,
    ready: tokio::sync::mpsc::UnboundedSender<()>,
) -> skillforge_engine::Job {
    loop {
        let seen = waiting.change_seq();
        let job = waiting
            .get(&id)
            .await
            .unwrap()
            .expect("the waited job exists");
        if job.state.is_terminal() {
            return job;
        }
        let _ = ready.send(());
        waiting.changed_since(seen, LONG).await;
    }
}

/// A waiter on one backend connection is woken by a finish made through another, which shares
/// nothing with it but the queue (as another process: its own connections and wake-ups), twice
/// in a row: the first finish lands while the waiter's cross-process listener may still be
/// starting, the second while it is established. Each waiter waits with an hour to spare, so
/// only a wake-up brings it back before the deadline (issue 13 item 7: `jobs submit --wait`
/// and `verify` against a worker process).
pub(crate) async fn a_waiter_wakes_on_another_processs_finish(
    waiting: Arc<dyn QueueBackend>,
    other: Arc<dyn QueueBackend>,
) {
    let w = WorkerIdentity::new("elsewhere");
    for round in ["while the listener starts", "with the listener established"] {
        let job = other.enqueue(&spec("cross")).await.unwrap();
        let leased = other.lease("cross", &w, 1, Duration::ZERO).await.unwrap();
        assert_eq!(leased.len(), 1);
        let (ready, mut is_waiting) = tokio::sync::mpsc::unbounded_channel();
        let waiter = tokio::spawn(wait_like_the_cli(
            waiting.clone(),
            job.job_id.clone(),
            ready,
        ));
        tokio::time::timeout(DEADLINE, is_waiting.recv())
            .await
            .unwrap_or_else(|_| panic!("{round}: the waiter reads the running job and waits"));
        other
            .finish(
                &job.job_id,
                leased[0].fencing_token,
                &finish(JobState::Succeeded),
            )
            .await
            .unwrap();
        let done = tokio::time::timeout(DEADLINE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{round}: another process's finish wakes the waiter"))
            .unwrap();
        assert_eq!(done.state, JobState::Succeeded, "{round}");
    }
}

fn out(stream: OutputStream, data: &str) -> NewOutput {
    NewOutput {
        stream,
        data: data.as_bytes().to_vec(),
    }
}

/// Live output: appended in order under the running lease only (another token, or a job that is
/// not running, writes nothing), read from a cursor, capped at `OUTPUT_CAP_CHUNKS` while running
/// (the oldest dropped), trimmed to the last `OUTPUT_TAIL_CHUNKS` when the job ended; an unknown
/// job reads as empty.
pub(crate) async fn live_output_is_fenced_ordered_capped_and_trimmed(b: &dyn QueueBackend) {
    let w = WorkerIdentity::new("writer");
    let job = b.enqueue(&spec("out")).await.unwrap();
    assert!(
        !b.append_output(&job.job_id, 1, &[out(OutputStream::Stdout, "early")])
            .await
            .unwrap(),
        "a queued job takes no output"
    );
    let leased = b.lease("out", &w, 1, Duration::ZERO).await.unwrap();
    let token = leased[0].fencing_token;
    let two = [
        out(OutputStream::Stdout, "line 1\n"),
        out(OutputStream::Stderr, "warn\n"),
    ];
    assert!(b.append_output(&job.job_id, token, &two).await.unwrap());
    assert!(
        !b.append_output(
            &job.job_id,
            token + 1,
            &[out(OutputStream::Stdout, "zombie")]
        )
        .await
        .unwrap()
    );
    let read = b.read_output(&job.job_id, None, 100).await.unwrap();
    assert_eq!(
        read.iter()
            .map(|c| (c.stream, c.data.as_slice(), c.fencing_token))
            .collect::<Vec<_>>(),
        vec![
            (OutputStream::Stdout, b"line 1\n".as_slice(), token),
            (OutputStream::Stderr, b"warn\n".as_slice(), token)
        ]
    );
    let after_first = b
        .read_output(&job.job_id, Some(&read[0].cursor), 100)
        .await
        .unwrap();
    assert_eq!(after_first.len(), 1);
    assert_eq!(after_first[0].data, b"warn\n");
    assert!(
        b.read_output(&job.job_id, Some(&read[1].cursor), 100)
            .await
            .unwrap()
            .is_empty()
    );

    let many: Vec<NewOutput> = (0..OUTPUT_CAP_CHUNKS + 10)
        .map(|i| out(OutputStream::Stdout, &format!("{i}\n")))
        .collect();
    assert!(b.append_output(&job.job_id, token, &many).await.unwrap());
    let kept = b
        .read_output(&job.job_id, None, 10 * OUTPUT_CAP_CHUNKS)
        .await
        .unwrap();
    assert_eq!(kept.len(), OUTPUT_CAP_CHUNKS, "a running job keeps the cap");
    assert_eq!(
        kept.last().unwrap().data,
        format!("{}\n", OUTPUT_CAP_CHUNKS + 9).into_bytes()
    );
    // 2 + cap + 10 appended: the first two and chunks 0..=9 were dropped.
    assert_eq!(kept[0].data, b"10\n", "the oldest chunks went first");

    b.finish(&job.job_id, token, &finish(JobState::Succeeded))
        .await
        .unwrap();
    assert!(
        !b.append_output(&job.job_id, token, &[out(OutputStream::Stdout, "late")])
            .await
            .unwrap(),
        "a finished job takes no output"
    );
    b.trim_output(&job.job_id).await.unwrap();
    let tail = b
        .read_output(&job.job_id, None, 10 * OUTPUT_CAP_CHUNKS)
        .await
        .unwrap();
    assert_eq!(tail.len(), OUTPUT_TAIL_CHUNKS);
    assert_eq!(
        tail.last().unwrap().data,
        format!("{}\n", OUTPUT_CAP_CHUNKS + 9).into_bytes()
    );
    assert!(
        b.read_output("no-such-job", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}
