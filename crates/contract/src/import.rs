//! Candidate import validation: every check of facts §2 in its order, as a pure function over
//! the parsed [`CandidatePackage`], the files under `--artifact-dir`, and the store state the
//! caller loads into [`ImportState`] (seed "Candidate Package"; S-86..S-91).
//!
//! Nothing here writes. A caller stores the returned [`VerifiedCandidate`] (blobs, then a
//! `pending` version, then the review row) and never promotes (S-51).

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::candidate::{CANDIDATE_PACKAGE_KIND, CandidateArtifactRef, CandidatePackage};
use crate::gojson::to_go_json_compact;
use crate::hash::{HashError, content_hash, normalize_hash};
use crate::template::{
    Metadata, TemplateError, normalize_metadata, parse_template, validate_template_id,
};
use crate::training::CONTRACT_VERSION;

/// A stored template version as import needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BaseVersion {
    /// Version id `<template>@v<N>`.
    pub id: String,
    /// Owning template id.
    pub template_id: String,
    /// `sha256:<hex>` as stored.
    pub content_hash: String,
    /// Full content.
    pub content: String,
}

/// An installed template and its current version, if any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstalledTemplate {
    /// Template id.
    pub id: String,
    /// The version in state `current`.
    pub current_version: Option<BaseVersion>,
}

/// Store state the checks read. Load it for the ids [`ImportState::needed`] lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImportState {
    /// The package's `template_id` if installed.
    pub template: Option<InstalledTemplate>,
    /// The version named by `base_version_id`, if the package names one and it exists
    /// (whatever template it belongs to).
    pub pinned_base: Option<BaseVersion>,
    /// Which of [`ImportNeeds::artifact_ids`] already exist in the eval artifact table.
    pub existing_artifact_ids: BTreeSet<String>,
}

/// What to load into [`ImportState`] for a package.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImportNeeds {
    /// Template to look up (trimmed `template_id`).
    pub template_id: String,
    /// Version to look up, when the package pins one.
    pub base_version_id: Option<String>,
    /// Ids to test for existence: the package's artifact ids and `summary.diff_artifact_id`.
    pub artifact_ids: BTreeSet<String>,
}

impl ImportState {
    /// The lookups the caller must do before [`validate_candidate_import`].
    pub fn needed(package: &CandidatePackage) -> ImportNeeds {
        let base = package.base_version_id.trim();
        let mut artifact_ids: BTreeSet<String> = package
            .artifacts
            .iter()
            .map(|a| a.id.trim().to_owned())
            .filter(|id| !id.is_empty())
            .collect();
        let diff = package.summary.diff_artifact_id.trim();
        if !diff.is_empty() {
            artifact_ids.insert(diff.to_owned());
        }
        ImportNeeds {
            template_id: package.template_id.trim().to_owned(),
            base_version_id: (!base.is_empty()).then(|| base.to_owned()),
            artifact_ids,
        }
    }
}

/// Where candidate artifacts come from and whether they can be stored.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions<'a> {
    /// `--artifact-dir`; required when the package lists artifacts (S-90).
    pub artifact_dir: Option<&'a Path>,
    /// Whether a blob store is configured (facts §2 check 2).
    pub has_blob_store: bool,
}

/// One artifact whose file was read and checked; `bytes` are exactly what was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedArtifact {
    /// Artifact id.
    pub id: String,
    /// Canonical path of the file read.
    pub path: PathBuf,
    /// `sha256:<hex>` of `bytes`.
    pub hash: String,
    /// MIME type (trimmed).
    pub media_type: String,
    /// Driver (trimmed).
    pub driver: String,
    /// `bytes.len()`.
    pub size_bytes: i64,
    /// File content.
    pub bytes: Vec<u8>,
}

/// Everything a caller needs to write the pending version and its review row.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedCandidate {
    /// Template id.
    pub template_id: String,
    /// Resolved base version (pinned, else the template's current version).
    pub base_version_id: String,
    /// Normalised candidate metadata (equal to the frontmatter).
    pub metadata: Metadata,
    /// Candidate content, unchanged.
    pub content: String,
    /// `sha256:<hex>` of `content`.
    pub content_hash: String,
    /// Verified artifacts in package order.
    pub artifacts: Vec<VerifiedArtifact>,
    /// `summary.diff_artifact_id` (trimmed, may be empty).
    pub diff_artifact_id: String,
    /// `summary.score`.
    pub score: Option<f64>,
    /// `summary.preference_summary`.
    pub preference_summary: String,
    /// Compact JSON of `eval_report`, empty when absent.
    pub eval_report_json: String,
    /// Compact JSON of `summary.metadata`, empty when absent.
    pub summary_metadata_json: String,
}

/// Why a candidate import is refused. Indices are 1-based. [`ImportError::NoCandidate`] is the
/// "optimizer produced no candidate" outcome (S-88, S-89); callers may report it differently.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    /// Artifacts listed but no `--artifact-dir` (S-90).
    #[error("candidate artifacts require --artifact-dir")]
    ArtifactDirRequired,
    /// The artifact dir cannot be resolved.
    #[error("resolve artifact-dir {path:?}: {message}")]
    ArtifactDirUnreadable {
        /// The dir as given.
        path: PathBuf,
        /// OS error text.
        message: String,
    },
    /// Artifact at 1-based `index` has no id.
    #[error("candidate artifact {index} id is required")]
    ArtifactIdRequired {
        /// 1-based position in `artifacts`.
        index: usize,
    },
    /// Two artifacts share an id (S-91).
    #[error("candidate artifact {0:?} is duplicated")]
    ArtifactDuplicated(String),
    /// `media_type` empty.
    #[error("candidate artifact {0:?} media_type is required")]
    ArtifactMediaTypeRequired(String),
    /// `driver` empty.
    #[error("candidate artifact {0:?} driver is required")]
    ArtifactDriverRequired(String),
    /// `size_bytes` < 0.
    #[error("candidate artifact {0:?} size_bytes cannot be negative")]
    ArtifactNegativeSize(String),
    /// `hash` malformed.
    #[error("candidate artifact {id:?}: {source}")]
    ArtifactHash {
        /// Artifact id.
        id: String,
        /// What is wrong with it.
        source: HashError,
    },
    /// `path` empty.
    #[error("candidate artifact {0:?} path is required")]
    ArtifactPathRequired(String),
    /// Absolute path or one that climbs out with `..` (S-91).
    #[error("candidate artifact {id:?} path {path:?} must be a relative path inside artifact-dir")]
    ArtifactPathNotLocal {
        /// Artifact id.
        id: String,
        /// Declared path.
        path: String,
    },
    /// The path resolves (through symlinks) outside the artifact dir.
    #[error("candidate artifact {id:?} path {path:?} resolves outside artifact-dir")]
    ArtifactEscapes {
        /// Artifact id.
        id: String,
        /// Declared path.
        path: String,
    },
    /// The file cannot be resolved or read (missing file, S-91).
    #[error("candidate artifact {id:?}: read {path:?}: {message}")]
    ArtifactRead {
        /// Artifact id.
        id: String,
        /// Declared path.
        path: String,
        /// OS error text.
        message: String,
    },
    /// Declared size differs from the file's.
    #[error("candidate artifact {id:?} size_bytes is {declared}, want {actual}")]
    ArtifactSize {
        /// Artifact id.
        id: String,
        /// Declared `size_bytes`.
        declared: i64,
        /// File size.
        actual: i64,
    },
    /// Declared hash differs from the file's (S-91).
    #[error("candidate artifact {id:?} hash is {declared}, want {actual}")]
    ArtifactHashMismatch {
        /// Artifact id.
        id: String,
        /// Declared hash, normalised.
        declared: String,
        /// File hash.
        actual: String,
    },
    /// Artifacts listed but no blob store configured.
    #[error("artifact blob store is required")]
    BlobStoreRequired,
    /// Wrong `kind` (S-86).
    #[error("candidate package kind must be \"gitmoot-skillopt-candidate-package\", got {0:?}")]
    Kind(String),
    /// Wrong `contract_version` (S-86).
    #[error("candidate package contract_version must be 1, got {0}")]
    ContractVersion(i64),
    /// `template_id` missing or malformed.
    #[error(transparent)]
    TemplateId(TemplateError),
    /// `template_id` not installed (S-86).
    #[error("agent template {0} is not installed")]
    TemplateNotInstalled(String),
    /// `candidate.content` is not a valid template.
    #[error("validate candidate template: {0}")]
    CandidateTemplate(TemplateError),
    /// Frontmatter id differs from `template_id`.
    #[error("candidate template id {candidate:?} does not match package template_id {package:?}")]
    CandidateIdMismatch {
        /// Frontmatter id.
        candidate: String,
        /// Package `template_id`.
        package: String,
    },
    /// `candidate.metadata` differs from the frontmatter (S-87).
    #[error("candidate metadata does not match candidate template frontmatter")]
    MetadataMismatch,
    /// `base_version_id` not in the store.
    #[error("load base version {0:?}: not found")]
    BaseVersionNotFound(String),
    /// No pinned base and the template has no current version.
    #[error("agent template {0} has no current version")]
    NoCurrentVersion(String),
    /// The pinned base belongs to another template.
    #[error("base version {id:?} belongs to template {template:?}, want {want:?}")]
    BaseVersionOtherTemplate {
        /// Base version id.
        id: String,
        /// Its template.
        template: String,
        /// Package template.
        want: String,
    },
    /// `summary.diff_artifact_id` is neither a package artifact nor stored (S-91).
    #[error("load summary diff artifact {0:?}: not found")]
    DiffArtifactNotFound(String),
    /// A package artifact id is already in the store.
    #[error("candidate artifact {0:?} already exists")]
    ArtifactExists(String),
    /// The no-candidate gate (S-88, S-89). The message names the field the reason came from,
    /// since `eval_report` and `summary.metadata` can disagree (one promotable, the other not).
    #[error(
        "optimizer produced no candidate: {reason} (from {field}{note}){}",
        hint_suffix(hint)
    )]
    NoCandidate {
        /// `no_candidate_reason`, or that the content is unchanged.
        reason: String,
        /// Where the reason came from: `eval_report`, `summary.metadata` or `candidate.content`.
        field: &'static str,
        /// What the other field said when it disagreed (`; eval_report says promotable: true`), or empty.
        note: String,
        /// The optimizer's `no_candidate_hint` (what to fill in to get a candidate), or empty.
        hint: String,
    },
}

impl ImportError {
    /// Whether this is the "optimizer produced no candidate" outcome rather than a bad package.
    pub fn is_no_candidate(&self) -> bool {
        matches!(self, ImportError::NoCandidate { .. })
    }
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!(" ({hint})")
    }
}

/// Reason text when the candidate content equals the base (S-89).
pub const UNCHANGED_CONTENT_REASON: &str = "candidate content is unchanged from the base version";

/// Validates a candidate package for import, in the order of facts §2:
/// 1. artifacts (only if listed): `--artifact-dir`, then per artifact id, duplicate, media_type,
///    driver, size sign, hash form, path present/local, symlink escape, read, size, hash;
/// 2. blob store present; 3. kind, contract_version, template id, installed, content parses,
///    frontmatter id = template_id, metadata = frontmatter, base version, diff artifact;
/// 4. artifact ids new to the store; 5. the no-candidate gate.
///
/// Reads only files under `options.artifact_dir`.
///
/// # Errors
/// The first failing check as an [`ImportError`].
pub fn validate_candidate_import(
    package: &CandidatePackage,
    options: ImportOptions<'_>,
    state: &ImportState,
) -> Result<VerifiedCandidate, ImportError> {
    let artifacts = if package.artifacts.is_empty() {
        Vec::new()
    } else {
        let dir = options
            .artifact_dir
            .ok_or(ImportError::ArtifactDirRequired)?;
        verify_artifacts(&package.artifacts, dir)?
    };
    if !artifacts.is_empty() && !options.has_blob_store {
        return Err(ImportError::BlobStoreRequired);
    }

    if package.kind.trim() != CANDIDATE_PACKAGE_KIND {
        return Err(ImportError::Kind(package.kind.clone()));
    }
    if package.contract_version != CONTRACT_VERSION {
        return Err(ImportError::ContractVersion(package.contract_version));
    }
    let template_id = package.template_id.trim();
    validate_template_id(template_id).map_err(ImportError::TemplateId)?;
    let installed = state
        .template
        .as_ref()
        .filter(|t| t.id == template_id)
        .ok_or_else(|| ImportError::TemplateNotInstalled(template_id.to_owned()))?;
    let parsed =
        parse_template(&package.candidate.content).map_err(ImportError::CandidateTemplate)?;
    if parsed.metadata.id != template_id {
        return Err(ImportError::CandidateIdMismatch {
            candidate: parsed.metadata.id,
            package: template_id.to_owned(),
        });
    }
    if normalize_metadata(&package.candidate.metadata) != parsed.metadata {
        return Err(ImportError::MetadataMismatch);
    }
    let base = resolve_base(package, installed, state)?;
    let diff_artifact_id = package.summary.diff_artifact_id.trim();
    if !diff_artifact_id.is_empty()
        && !artifacts.iter().any(|a| a.id == diff_artifact_id)
        && !state.existing_artifact_ids.contains(diff_artifact_id)
    {
        return Err(ImportError::DiffArtifactNotFound(
            diff_artifact_id.to_owned(),
        ));
    }

    if let Some(taken) = artifacts
        .iter()
        .find(|a| state.existing_artifact_ids.contains(&a.id))
    {
        return Err(ImportError::ArtifactExists(taken.id.clone()));
    }

    if let Some(NoCandidateGate {
        reason,
        field,
        note,
    }) = no_candidate_reason(package, base)
    {
        return Err(ImportError::NoCandidate {
            reason,
            field,
            note,
            hint: no_candidate_hint(package),
        });
    }

    Ok(VerifiedCandidate {
        template_id: template_id.to_owned(),
        base_version_id: base.id.clone(),
        metadata: parsed.metadata,
        content: package.candidate.content.clone(),
        content_hash: content_hash(&package.candidate.content),
        artifacts,
        diff_artifact_id: diff_artifact_id.to_owned(),
        score: package.summary.score,
        preference_summary: package.summary.preference_summary.clone(),
        eval_report_json: compact_or_empty(package.eval_report.as_ref()),
        summary_metadata_json: compact_or_empty(package.summary.metadata.as_ref()),
    })
}

fn compact_or_empty(value: Option<&Value>) -> String {
    value
        .and_then(|v| to_go_json_compact(v).ok())
        .unwrap_or_default()
}

fn resolve_base<'s>(
    package: &CandidatePackage,
    installed: &'s InstalledTemplate,
    state: &'s ImportState,
) -> Result<&'s BaseVersion, ImportError> {
    let pinned = package.base_version_id.trim();
    if pinned.is_empty() {
        return installed
            .current_version
            .as_ref()
            .ok_or_else(|| ImportError::NoCurrentVersion(installed.id.clone()));
    }
    let base = state
        .pinned_base
        .as_ref()
        .filter(|b| b.id == pinned)
        .ok_or_else(|| ImportError::BaseVersionNotFound(pinned.to_owned()))?;
    if base.template_id != installed.id {
        return Err(ImportError::BaseVersionOtherTemplate {
            id: base.id.clone(),
            template: base.template_id.clone(),
            want: installed.id.clone(),
        });
    }
    Ok(base)
}

/// Why the no-candidate gate closed, and which field said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoCandidateGate {
    /// The `no_candidate_reason`, or [`UNCHANGED_CONTENT_REASON`].
    pub reason: String,
    /// `eval_report`, `summary.metadata` or `candidate.content`.
    pub field: &'static str,
    /// `; eval_report says promotable: true` when the reason came from `summary.metadata` while
    /// `eval_report` called the candidate promotable; else empty.
    pub note: String,
}

/// The no-candidate gate (S-88, S-89): `eval_report`, then `summary.metadata`, as an object with
/// `promotable` not `true` and a non-empty `no_candidate_reason` → that reason; else the content
/// hash equal to the base's stored hash or to the hash of its content →
/// [`UNCHANGED_CONTENT_REASON`]. `None` means there is a candidate.
pub fn no_candidate_reason(
    package: &CandidatePackage,
    base: &BaseVersion,
) -> Option<NoCandidateGate> {
    let promotable = |source: Option<&Value>| {
        source
            .and_then(|v| v.get("promotable"))
            .and_then(Value::as_bool)
            == Some(true)
    };
    let sources = [
        ("eval_report", package.eval_report.as_ref()),
        ("summary.metadata", package.summary.metadata.as_ref()),
    ];
    for (field, source) in sources {
        let Some(Value::Object(map)) = source else {
            continue;
        };
        let reason = map
            .get("no_candidate_reason")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("");
        if !promotable(source) && !reason.is_empty() {
            let note = if field == "summary.metadata" && promotable(package.eval_report.as_ref()) {
                "; eval_report says promotable: true".to_owned()
            } else {
                String::new()
            };
            return Some(NoCandidateGate {
                reason: reason.to_owned(),
                field,
                note,
            });
        }
    }
    let candidate_hash = content_hash(&package.candidate.content);
    let stored = normalize_hash(&base.content_hash).ok();
    if stored.as_deref() == Some(candidate_hash.as_str())
        || content_hash(&base.content) == candidate_hash
    {
        return Some(NoCandidateGate {
            reason: UNCHANGED_CONTENT_REASON.to_owned(),
            field: "candidate.content",
            note: String::new(),
        });
    }
    None
}

/// The optimizer's `no_candidate_hint` (a skillforge addition: which feedback fields to fill),
/// read from `eval_report`, then `summary.metadata`; empty when neither carries one.
pub fn no_candidate_hint(package: &CandidatePackage) -> String {
    [
        package.eval_report.as_ref(),
        package.summary.metadata.as_ref(),
    ]
    .into_iter()
    .flatten()
    .find_map(|v| {
        v.get("no_candidate_hint")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|h| !h.is_empty())
    })
    .unwrap_or("")
    .to_owned()
}

/// Go's `filepath.IsLocal` on Unix: non-empty, not absolute, and `..` never climbs above the start.
pub fn is_local_path(path: &str) -> bool {
    if path.is_empty() || path.starts_with('/') {
        return false;
    }
    let mut depth: i64 = 0;
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

fn verify_artifacts(
    refs: &[CandidateArtifactRef],
    dir: &Path,
) -> Result<Vec<VerifiedArtifact>, ImportError> {
    let mut seen = HashSet::new();
    let mut verified = Vec::with_capacity(refs.len());
    let mut root: Option<PathBuf> = None;
    for (idx, artifact) in refs.iter().enumerate() {
        let id = artifact.id.trim();
        if id.is_empty() {
            return Err(ImportError::ArtifactIdRequired { index: idx + 1 });
        }
        if !seen.insert(id.to_owned()) {
            return Err(ImportError::ArtifactDuplicated(id.to_owned()));
        }
        let media_type = artifact.media_type.trim();
        if media_type.is_empty() {
            return Err(ImportError::ArtifactMediaTypeRequired(id.to_owned()));
        }
        let driver = artifact.driver.trim();
        if driver.is_empty() {
            return Err(ImportError::ArtifactDriverRequired(id.to_owned()));
        }
        if artifact.size_bytes.is_some_and(|s| s < 0) {
            return Err(ImportError::ArtifactNegativeSize(id.to_owned()));
        }
        let declared_hash =
            normalize_hash(&artifact.hash).map_err(|source| ImportError::ArtifactHash {
                id: id.to_owned(),
                source,
            })?;
        let path = artifact.path.trim();
        if path.is_empty() {
            return Err(ImportError::ArtifactPathRequired(id.to_owned()));
        }
        if !is_local_path(path) {
            return Err(ImportError::ArtifactPathNotLocal {
                id: id.to_owned(),
                path: path.to_owned(),
            });
        }
        let root = match &root {
            Some(root) => root.clone(),
            None => {
                let resolved =
                    fs::canonicalize(dir).map_err(|e| ImportError::ArtifactDirUnreadable {
                        path: dir.to_owned(),
                        message: e.to_string(),
                    })?;
                root = Some(resolved.clone());
                resolved
            }
        };
        let read_err = |e: std::io::Error| ImportError::ArtifactRead {
            id: id.to_owned(),
            path: path.to_owned(),
            message: e.to_string(),
        };
        let resolved = fs::canonicalize(root.join(path)).map_err(read_err)?;
        if !resolved.starts_with(&root) {
            return Err(ImportError::ArtifactEscapes {
                id: id.to_owned(),
                path: path.to_owned(),
            });
        }
        let bytes = fs::read(&resolved).map_err(read_err)?;
        let actual_size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        if let Some(declared) = artifact.size_bytes
            && declared != actual_size
        {
            return Err(ImportError::ArtifactSize {
                id: id.to_owned(),
                declared,
                actual: actual_size,
            });
        }
        let actual_hash = content_hash(&bytes);
        if actual_hash != declared_hash {
            return Err(ImportError::ArtifactHashMismatch {
                id: id.to_owned(),
                declared: declared_hash,
                actual: actual_hash,
            });
        }
        verified.push(VerifiedArtifact {
            id: id.to_owned(),
            path: resolved,
            hash: actual_hash,
            media_type: media_type.to_owned(),
            driver: driver.to_owned(),
            size_bytes: actual_size,
            bytes,
        });
    }
    Ok(verified)
}

#[cfg(test)]
mod tests;
