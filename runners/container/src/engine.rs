//! The engine connection: which Docker-API engine to talk to, a negotiated client per address,
//! what the engine is, and the image a run uses (inspected, pulled when missing).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bollard::Docker;
use bollard::models::ContainerSummary;
use bollard::query_parameters::{CreateImageOptionsBuilder, ListContainersOptionsBuilder};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::error::ContainerError;
use crate::payload::PullPolicy;

/// Sockets tried, in order, when neither the payload, `DOCKER_HOST` nor the configuration names
/// an engine: Docker's, then rootful podman's.
const DEFAULT_SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/podman/podman.sock"];

/// How long one engine request may take before the engine counts as unreachable, seconds.
const REQUEST_TIMEOUT_SECS: u64 = 120;

/// How many times a container listing is asked while the engine reports a container in a state
/// the Docker API does not have (podman's transient `stopped`).
const LIST_ATTEMPTS: u32 = 12;
/// The pause before the second listing; it doubles before each further one.
const LIST_RETRY_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two listings.
const LIST_RETRY_MAX_PAUSE: Duration = Duration::from_millis(500);

static CONFIGURED_HOST: OnceLock<String> = OnceLock::new();
static CLIENTS: OnceLock<Mutex<HashMap<String, Engine>>> = OnceLock::new();

/// Sets the engine address of `[runners.container] host` for this process (first call wins).
/// Used when neither the payload nor `DOCKER_HOST` names one.
pub fn set_configured_host(host: &str) {
    let _ = CONFIGURED_HOST.set(host.to_owned());
}

/// The engine address a run uses: `explicit` (the payload's `host`), else `DOCKER_HOST`, else
/// `[runners.container] host`, else the first of `/var/run/docker.sock` and
/// `/run/podman/podman.sock` that exists (`unix:///var/run/docker.sock` when none does).
pub fn resolve_host(explicit: Option<&str>) -> String {
    if let Some(host) = explicit.filter(|h| !h.trim().is_empty()) {
        return host.to_owned();
    }
    if let Some(host) = std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
    {
        return host;
    }
    if let Some(host) = CONFIGURED_HOST.get() {
        return host.clone();
    }
    let socket = DEFAULT_SOCKETS
        .iter()
        .find(|path| Path::new(path).exists())
        .unwrap_or(&DEFAULT_SOCKETS[0]);
    format!("unix://{socket}")
}

/// True when some engine is named or a default socket exists, i.e. it is worth asking one.
pub fn engine_configured() -> bool {
    std::env::var_os("DOCKER_HOST").is_some()
        || CONFIGURED_HOST.get().is_some()
        || DEFAULT_SOCKETS.iter().any(|p| Path::new(p).exists())
}

/// The engine a run used, as reported in the outcome's `detail.engine`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// The address, e.g. `unix:///run/podman/podman.sock`.
    pub host: String,
    /// The engine's own name: `Podman Engine`, `Engine` (Docker), or `unknown`.
    pub name: String,
    /// The engine's version, e.g. `4.3.1`.
    pub version: String,
    /// The API version both sides speak, e.g. `1.41`.
    pub api_version: String,
}

/// A connected, version-negotiated client and what it is connected to.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The client.
    pub docker: Docker,
    /// What the engine is.
    pub info: EngineInfo,
}

impl Engine {
    /// The engine at `host`, connected once per process and address and then reused.
    ///
    /// # Errors
    /// [`ContainerError::EngineUnreachable`] when the address is invalid or nothing answers
    /// `/version` there.
    pub async fn connect(host: &str) -> Result<Engine, ContainerError> {
        let clients = CLIENTS.get_or_init(Default::default);
        if let Some(engine) = lock(clients).get(host) {
            return Ok(engine.clone());
        }
        let unreachable = |message: String| ContainerError::EngineUnreachable {
            host: host.to_owned(),
            message,
        };
        let docker = connect_to(host).map_err(|e| unreachable(e.to_string()))?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let version = docker
            .version()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let name = version
            .components
            .as_ref()
            .and_then(|c| c.first())
            .map_or_else(|| "unknown".to_owned(), |c| c.name.clone());
        let info = EngineInfo {
            host: host.to_owned(),
            name,
            version: version.version.unwrap_or_default(),
            api_version: docker.client_version().to_string(),
        };
        tracing::debug!(?info, "container engine connected");
        let engine = Engine { docker, info };
        lock(clients).insert(host.to_owned(), engine.clone());
        Ok(engine)
    }

    /// The containers (`all`: also those not running) whose labels match every `label` filter
    /// (`key` or `key=value`).
    ///
    /// Podman (4.3 here; until podman#28359 was fixed) lists a container that has exited but is
    /// not yet cleaned up as `stopped`, a state the Docker API does not have, and the whole
    /// listing then fails to parse (bollard#701). The state lasts until podman's cleanup, so the
    /// listing is asked again, [`LIST_ATTEMPTS`] times with a doubling pause (about 3 s in all).
    ///
    /// # Errors
    /// [`ContainerError::Engine`] when the engine refuses the listing, or still reports an
    /// unknown state after the last attempt.
    pub async fn list_containers(
        &self,
        all: bool,
        labels: &[String],
    ) -> Result<Vec<ContainerSummary>, ContainerError> {
        let filters = HashMap::from([("label", labels.to_vec())]);
        let mut pause = LIST_RETRY_PAUSE;
        let mut attempt = 1;
        loop {
            let options = ListContainersOptionsBuilder::new()
                .all(all)
                .filters(&filters)
                .build();
            match self.docker.list_containers(Some(options)).await {
                Ok(listed) => return Ok(listed),
                Err(bollard::errors::Error::JsonDataError { message, .. })
                    if attempt < LIST_ATTEMPTS && message.contains("unknown variant") =>
                {
                    tracing::debug!(attempt, %message, "a container is in a transient state; listing again");
                }
                Err(error) => return Err(self.error("list containers", error)),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LIST_RETRY_MAX_PAUSE);
            attempt += 1;
        }
    }

    /// An engine failure during `action`.
    pub(crate) fn error(
        &self,
        action: impl Into<String>,
        error: bollard::errors::Error,
    ) -> ContainerError {
        ContainerError::Engine {
            host: self.info.host.clone(),
            action: action.into(),
            message: error.to_string(),
        }
    }

    /// The image `reference` as the engine has it, pulled first when missing and `pull` allows.
    /// `Ok(Err(reason))` when the image is not there (and could not be pulled): the run is not
    /// runnable, which is the job's problem, not the worker's.
    ///
    /// # Errors
    /// [`ContainerError::Engine`] when the engine fails for another reason than a missing image.
    pub async fn image(
        &self,
        reference: &str,
        pull: PullPolicy,
    ) -> Result<Result<ImageInfo, String>, ContainerError> {
        match self.inspect_image(reference).await? {
            Some(image) => return Ok(Ok(image)),
            None if pull == PullPolicy::Never => {
                return Ok(Err(format!("image `{reference}` not found (pull: never)")));
            }
            None => {}
        }
        let options = CreateImageOptionsBuilder::new()
            .from_image(reference)
            .build();
        let mut progress = self.docker.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            if let Err(error) = step {
                return Ok(Err(format!(
                    "image `{reference}` not found and pulling it failed: {error}"
                )));
            }
        }
        Ok(self
            .inspect_image(reference)
            .await?
            .ok_or_else(|| format!("image `{reference}` not found after pulling it")))
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, ContainerError> {
        match self.docker.inspect_image(reference).await {
            Ok(image) => Ok(Some(ImageInfo {
                reference: reference.to_owned(),
                digest: image.id.unwrap_or_default(),
                repo_digests: image.repo_digests.unwrap_or_default(),
            })),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(error) => Err(self.error(format!("inspect image `{reference}`"), error)),
        }
    }
}

/// The image a run used, as reported in the outcome's `detail.image`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// The reference asked for.
    pub reference: String,
    /// The image id: the sha256 digest of its configuration, `sha256:<64 hex>`.
    pub digest: String,
    /// Registry digests (`name@sha256:…`); empty for an image built or imported locally.
    pub repo_digests: Vec<String>,
}

fn connect_to(host: &str) -> Result<Docker, bollard::errors::Error> {
    if let Some(path) = host.strip_prefix("unix://") {
        return Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION);
    }
    if host.starts_with("tcp://") || host.starts_with("http://") {
        return Docker::connect_with_http(host, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION);
    }
    if host.starts_with('/') {
        return Docker::connect_with_unix(host, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION);
    }
    Docker::connect_with_host(host)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
