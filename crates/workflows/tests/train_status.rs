//! The typed `train status` ([`SessionStatus`]) serializes to the same bytes as the hand-built
//! JSON it replaces (`status_legacy`), on a real store and queue, at every phase a session passes
//! without a worker: request confirmed, items ready, options being generated, a leased job.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use skillforge_engine::sqlite::SqliteBackend;
use skillforge_engine::{EngineError, Enqueued, Job, JobSpec, QueueBackend, WorkerIdentity};
use skillforge_store::Store;
use skillforge_store::templates::{NewVersion, VersionState, begin_write, insert_version};
use skillforge_workflows::stage::StageJobs;
use skillforge_workflows::train::control::{ContinueRequest, StartRequest, continue_session, start};
use skillforge_workflows::train::items::parse_items;
use skillforge_workflows::train::status::session_status;
use skillforge_workflows::train::status_legacy::session_status_json;
use skillforge_workflows::train::{Reporter, TrainEnv, TrainWorkflow};

/// The stage port over the queue, for steps that only submit (`--no-wait`).
struct SubmitOnly(Arc<dyn QueueBackend>);

#[async_trait::async_trait]
impl StageJobs for SubmitOnly {
    async fn submit(&self, spec: &JobSpec) -> Result<Enqueued, EngineError> {
        self.0.enqueue(spec).await
    }
    async fn get(&self, id: &str) -> Result<Option<Job>, EngineError> {
        self.0.get(id).await
    }
    async fn wait(&self, _: &[String], what: &str) -> Result<Vec<Job>, EngineError> {
        Err(EngineError::Config(format!("this test does not wait ({what})")))
    }
}

struct Quiet;
impl Reporter for Quiet {
    fn step(&self, _: &str) {}
}

/// Drops the clock-derived fields (`elapsed`, `heartbeat_age_ms`) everywhere.
fn without_clock(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, _| k != "elapsed" && k != "heartbeat_age_ms");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// Old, new, old: the new bytes equal one of the old ones (the clock may tick between calls).
async fn check_same_bytes(env: &TrainEnv<'_>, session: &str, what: &str, has_clock_ms: bool) {
    for verbose in [false, true] {
        let before = serde_json::to_string_pretty(&session_status_json(env, session, verbose).await.unwrap()).unwrap();
        let typed = serde_json::to_string_pretty(&session_status(env, session, verbose).await.unwrap()).unwrap();
        let after = serde_json::to_string_pretty(&session_status_json(env, session, verbose).await.unwrap()).unwrap();
        if has_clock_ms {
            // Millisecond ages differ between any two calls: every other byte, and the key order, must not.
            let parse = |s: &str| without_clock(serde_json::from_str::<Value>(s).unwrap());
            assert_eq!(serde_json::to_string_pretty(&parse(&typed)).unwrap(), serde_json::to_string_pretty(&parse(&before)).unwrap(), "{what} verbose={verbose}");
            let keys = |s: &str| s.lines().map(|l| l.split(':').next().unwrap_or("").to_owned()).collect::<Vec<_>>();
            assert_eq!(keys(&typed), keys(&before), "{what} verbose={verbose}: the same keys in the same order");
        } else {
            assert!(typed == before || typed == after, "{what} verbose={verbose}:\n{typed}\n--- legacy ---\n{before}");
        }
    }
}

#[tokio::test]
async fn the_typed_status_serializes_to_the_legacy_bytes() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let queue: Arc<dyn QueueBackend> = Arc::new(SqliteBackend::open(&home.path().join("queue.db")).await.unwrap());
    let content = "---\nid: planner\nname: Planner\n---\n# Plan\n";
    let mut tx = begin_write(&store).await.unwrap();
    insert_version(
        &mut tx,
        &NewVersion {
            template_id: "planner",
            state: VersionState::Current,
            name: "Planner",
            description: "plans",
            metadata_json: "{}",
            content,
            content_hash: "sha256:00",
            source_repo: "local",
            source_ref: "",
            source_path: "planner.md",
            resolved_commit: "00",
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let workflow = TrainWorkflow::shipped().unwrap();
    let jobs = SubmitOnly(queue.clone());
    let env = TrainEnv {
        store: &store,
        queue: &queue,
        home: home.path(),
        workflow: &workflow,
        skillforge_bin: "skillforge".into(),
        jobs: &jobs,
        reporter: &Quiet,
    };
    let items = parse_items("items:\n  - id: a\n    title: First\n    input: one\n  - id: b\n    input: two\n", "items.yml").unwrap();
    let request = |session: &str, workspace: Option<String>| StartRequest {
        session_id: Some(session.into()),
        template: "planner".into(),
        repo: "acme/app".into(),
        workspace_repo: workspace,
        request: "plan better".into(),
        items: items.clone(),
        runtime: "scripted".into(),
        model: None,
        mode: None,
        options: Some(2),
        task_kind: String::new(),
    };
    start(&env, &request("no-ws", None)).await.unwrap();
    check_same_bytes(&env, "no-ws", "request_confirmed without a workspace", false).await;
    start(&env, &request("ts-1", Some(workspace.path().display().to_string()))).await.unwrap();
    check_same_bytes(&env, "ts-1", "items_ready", false).await;
    let no_wait = ContinueRequest { wait: false, ..ContinueRequest::default() };
    continue_session(&env, "ts-1", &no_wait).await.unwrap();
    check_same_bytes(&env, "ts-1", "options being generated (queued jobs)", false).await;
    let leased = queue.lease("default", &WorkerIdentity::new("status-test"), 1, Duration::from_secs(5)).await.unwrap();
    assert_eq!(leased.len(), 1, "one generation job leased");
    check_same_bytes(&env, "ts-1", "a generation job running under a lease", true).await;
}
