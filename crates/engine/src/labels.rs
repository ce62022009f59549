//! Worker labels and job label requirements (issue 20 item 3): routing where it is wanted.
//!
//! A worker advertises labels: `--label os=linux --label gpu` plus capabilities it detects
//! ([`detect`]: `os=…`, `arch=…`, `tool:<name>` for tools found on `PATH`). A job may require
//! labels (`JobSpec::requires`; a stage's `requires` in `workflows/<family>.toml`, `jobs submit
//! --require`): a requirement `k=v` needs that exact label, a bare `k` any label `k` or `k=…`.
//!
//! Routing is by queue name, so neither backend's lease changes: a job requiring labels is
//! enqueued on the route `<queue>@<sorted requirements>` ([`route`]); the backend keeps the set
//! of routes seen ([`crate::backend::QueueRoutes::routes`]), and a worker leases from its queues plus
//! every route of them its labels satisfy ([`routes_for`]), refreshed every few seconds. Each
//! worker records its labels in the transfer area under `workers/<worker id>` ([`labels_key`]),
//! so a waiting command and `jobs show` can say when no live worker can take a job.

/// Separator between a queue and its requirements in a route name.
pub const ROUTE_SEPARATOR: char = '@';

/// Tools whose presence on `PATH` a worker advertises as `tool:<name>`.
pub const DETECTED_TOOLS: &[&str] = &[
    "git", "bwrap", "podman", "docker", "claude", "codex", "opencode", "cargo", "go", "node",
    "npm", "python3",
];

/// Sorted, deduplicated, trimmed, without empties.
pub fn normalize(labels: &[String]) -> Vec<String> {
    let mut out: Vec<String> = labels
        .iter()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The queue a job requiring `requires` is enqueued on: `queue` itself when it requires nothing,
/// else `queue@req1,req2` (sorted).
pub fn route(queue: &str, requires: &[String]) -> String {
    let requires = normalize(requires);
    if requires.is_empty() {
        queue.to_owned()
    } else {
        format!("{queue}{ROUTE_SEPARATOR}{}", requires.join(","))
    }
}

/// (queue, requirements) of a route name; a plain queue requires nothing.
pub fn parse_route(name: &str) -> (&str, Vec<String>) {
    match name.split_once(ROUTE_SEPARATOR) {
        Some((queue, reqs)) => (queue, reqs.split(',').map(str::to_owned).collect()),
        None => (name, Vec::new()),
    }
}

/// Whether `labels` meet every requirement (see the module docs).
pub fn satisfies(labels: &[String], requires: &[String]) -> bool {
    requires.iter().all(|req| {
        let req = req.trim();
        labels.iter().any(|l| {
            let l = l.trim();
            l == req || (!req.contains('=') && l.split_once('=').is_some_and(|(k, _)| k == req))
        })
    })
}

/// The requirements of `requires` that `labels` do not meet.
pub fn missing(labels: &[String], requires: &[String]) -> Vec<String> {
    requires
        .iter()
        .filter(|r| !satisfies(labels, std::slice::from_ref(r)))
        .cloned()
        .collect()
}

/// Of `routes` (route names the backend has seen), those of `queues` whose requirements
/// `labels` satisfy.
pub fn routes_for(queues: &[String], labels: &[String], routes: &[String]) -> Vec<String> {
    routes
        .iter()
        .filter(|r| {
            let (queue, requires) = parse_route(r);
            !requires.is_empty()
                && queues.iter().any(|q| q == queue)
                && satisfies(labels, &requires)
        })
        .cloned()
        .collect()
}

/// What this machine offers: `os=<os>`, `arch=<arch>` and `tool:<name>` for each of
/// [`DETECTED_TOOLS`] found on `PATH`.
pub fn detect() -> Vec<String> {
    let mut labels = vec![
        format!("os={}", std::env::consts::OS),
        format!("arch={}", std::env::consts::ARCH),
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in DETECTED_TOOLS {
        if std::env::split_paths(&path).any(|dir| is_executable(&dir.join(tool))) {
            labels.push(format!("tool:{tool}"));
        }
    }
    labels
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Transfer-area record key of a worker's labels (JSON array).
pub fn labels_key(worker_id: &str) -> String {
    format!("workers/{worker_id}")
}

/// A worker holding an active presence lock, with the labels its `workers/<id>` record holds
/// (none without a record; `None` when the record cannot be read or decoded: what it offers is
/// unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveWorker {
    /// The worker id (`name-<suffix>`).
    pub id: String,
    /// Its labels, or `None` when its record is missing or unreadable.
    pub labels: Option<Vec<String>>,
}

impl LiveWorker {
    /// Whether this worker can take a job requiring `requires`: its labels satisfy them, or
    /// they are unknown (a worker whose record cannot be read is given the benefit of the doubt).
    pub fn may_take(&self, requires: &[String]) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|labels| satisfies(labels, requires))
    }
}

/// The live workers of `backend` (holding an active presence lock `worker:<id>`) with their
/// labels; empty when the backend has no transfer area to hold labels records.
///
/// # Errors
/// The queue's.
pub async fn live_workers(
    backend: &dyn crate::QueueBackend,
) -> Result<Vec<LiveWorker>, crate::EngineError> {
    let Some(area) = backend.transfer_area() else {
        return Ok(Vec::new());
    };
    let now = backend.now_ms().await?;
    let mut live = Vec::new();
    for lease in backend.leases().await? {
        let Some(id) = lease.name.strip_prefix(crate::worker::PRESENCE_LOCK_PREFIX) else {
            continue;
        };
        if lease.kind != crate::LeaseKind::Lock || lease.status(now) != crate::LeaseStatus::Active {
            continue;
        }
        // No record: a worker that advertises nothing (the apalis adapter's); unreadable: unknown.
        let labels = match area.get_record(&labels_key(id)).await {
            Ok(Some(bytes)) => serde_json::from_slice::<Vec<String>>(&bytes).ok(),
            Ok(None) => Some(Vec::new()),
            Err(_) => None,
        };
        live.push(LiveWorker {
            id: id.to_owned(),
            labels,
        });
    }
    Ok(live)
}

/// Of `requires`, the requirements no worker of `live` meets on its own (labels nobody offers);
/// empty when each is offered by some worker (then no single one offers them all, or one does).
pub fn offered_by_none(live: &[LiveWorker], requires: &[String]) -> Vec<String> {
    requires
        .iter()
        .filter(|r| !live.iter().any(|w| w.may_take(std::slice::from_ref(r))))
        .cloned()
        .collect()
}

/// `id [label, …]` of each live worker, or `none is live`, for notes and failure reasons.
pub fn describe_live(live: &[LiveWorker]) -> String {
    if live.is_empty() {
        return "none is live".to_owned();
    }
    let each: Vec<String> = live
        .iter()
        .map(|w| match &w.labels {
            Some(labels) => format!("{} [{}]", w.id, labels.join(", ")),
            None => format!("{} [labels unknown]", w.id),
        })
        .collect();
    format!("live: {}", each.join("; "))
}

/// The `skillforge worker --label …` flags that offer `requires`.
pub fn label_flags(requires: &[String]) -> String {
    requires
        .iter()
        .map(|r| format!("--label {r}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why no live worker can take `job` (queued, requiring labels), or `None` when one can or when
/// it cannot be known: live = holding an active presence lock; each one's labels from its
/// `workers/<id>` record ([`live_workers`]). The text names the requirements, the live workers'
/// labels and what to start (used by `jobs show` and the waiting commands).
///
/// # Errors
/// The queue's.
pub async fn unmet_note(
    backend: &dyn crate::QueueBackend,
    job: &crate::Job,
) -> Result<Option<String>, crate::EngineError> {
    if job.state != crate::JobState::Queued
        || job.spec.requires.is_empty()
        || backend.transfer_area().is_none()
    {
        return Ok(None);
    }
    let live = live_workers(backend).await?;
    if live.iter().any(|w| w.may_take(&job.spec.requires)) {
        return Ok(None);
    }
    Ok(Some(format!(
        "no live worker can take job {}: it requires {} ({}); it waits until one starts (`skillforge worker {}`)",
        job.id,
        job.spec.requires.join(", "),
        describe_live(&live),
        label_flags(&job.spec.requires)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn requirements_match_exact_labels_or_bare_keys() {
        let labels = v(&["os=linux", "gpu", "tool:git"]);
        assert!(satisfies(&labels, &v(&["os=linux", "gpu"])));
        assert!(
            satisfies(&labels, &v(&["os"])),
            "a bare key matches any value"
        );
        assert!(!satisfies(&labels, &v(&["os=macos"])));
        assert!(!satisfies(&labels, &v(&["tool:podman"])));
        assert_eq!(
            missing(&labels, &v(&["gpu", "tpu", "os=macos"])),
            v(&["tpu", "os=macos"])
        );
        assert!(satisfies(&[], &[]));
    }

    #[test]
    fn routes_are_canonical_and_only_satisfiable_ones_are_leased() {
        assert_eq!(route("default", &[]), "default");
        assert_eq!(
            route("default", &v(&["gpu", "os=linux", "gpu"])),
            "default@gpu,os=linux"
        );
        assert_eq!(
            parse_route("default@gpu,os=linux"),
            ("default", v(&["gpu", "os=linux"]))
        );
        let routes = v(&[
            "default@gpu",
            "default@os=linux",
            "verify@gpu",
            "default@tpu",
        ]);
        assert_eq!(
            routes_for(&v(&["default"]), &v(&["gpu", "os=linux"]), &routes),
            v(&["default@gpu", "default@os=linux"])
        );
    }
}
