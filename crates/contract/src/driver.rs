//! Artifact drivers (`ArtifactRef.driver`, facts §1) and what the external optimizer's data loader
//! (`gitmoot-skillopt`'s `GitmootDataLoader`, the path of every real run; its `--dry-run` never
//! reads blobs) refuses in a package the contract validator accepts.
//!
//! The loader reads an artifact only through a driver it knows: the text drivers `text`,
//! `markdown`, `text/markdown` (media type `text/*` or `application/markdown`) and the preview
//! driver `vue-vite` (media type `application/json`, a bundle `{"files": [{path, content}]}`).
//! Anything else fails the run with `ArtifactError: artifact driver not supported yet: <driver>`.
//! The Go implementation writes `text`. It also refuses an item id that is not one filesystem
//! path segment (`/`, `\`, `.`, `..` or blank), since it names output directories after items.

use std::fmt;

use crate::training::TrainingPackage;

/// Driver of plain-text artifacts; what the Go implementation writes for every artifact.
pub const TEXT_DRIVER: &str = "text";
/// Driver of Markdown artifacts.
pub const MARKDOWN_DRIVER: &str = "markdown";
/// Drivers the loader reads as text.
pub const LOADER_TEXT_DRIVERS: [&str; 3] = ["text", "markdown", "text/markdown"];
/// Drivers the loader reads as preview bundles (media type `application/json`).
pub const LOADER_PREVIEW_DRIVERS: [&str; 1] = ["vue-vite"];
/// Drivers older skillforge builds stored for their own artifacts; the export maps them to
/// [`driver_for_media_type`], so a home written before the change exports loadable packages
/// without a store migration.
pub const LEGACY_DRIVERS: [&str; 2] = ["local", "skillforge-distill"];

/// The driver skillforge stores for an artifact of `media_type` (case and parameters ignored):
/// `markdown` for `text/markdown`, `text/x-markdown` and `application/markdown`; `text` for
/// everything else, as the Go implementation writes. A media type the loader cannot read
/// (images, `application/json` that is no preview bundle, …) is not made readable by any driver;
/// [`loader_warnings`] names such artifacts.
pub fn driver_for_media_type(media_type: &str) -> &'static str {
    match essence(media_type).as_str() {
        "text/markdown" | "text/x-markdown" | "application/markdown" => MARKDOWN_DRIVER,
        _ => TEXT_DRIVER,
    }
}

/// The driver an export writes for a stored artifact: a [`LEGACY_DRIVERS`] value becomes
/// [`driver_for_media_type`]; any other driver (one an optimizer wrote into a candidate package,
/// e.g. `gitmoot-skillopt`) is kept as stored.
pub fn export_driver(stored: &str, media_type: &str) -> String {
    if stored.trim().is_empty()
        || LEGACY_DRIVERS.contains(&stored.trim().to_ascii_lowercase().as_str())
    {
        driver_for_media_type(media_type).to_owned()
    } else {
        stored.to_owned()
    }
}

/// Whether the loader accepts item id `id` as one filesystem path segment.
pub fn is_loader_safe_item_id(id: &str) -> bool {
    let value = id.trim();
    !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '\\'])
}

/// Why the loader would refuse an artifact by its manifest entry alone (`None` = readable).
pub fn loader_artifact_refusal(driver: &str, media_type: &str) -> Option<String> {
    let driver_key = driver.trim().to_ascii_lowercase();
    let media = media_type.trim().to_ascii_lowercase();
    if LOADER_TEXT_DRIVERS.contains(&driver_key.as_str()) {
        let readable =
            media.is_empty() || media.starts_with("text/") || media == "application/markdown";
        return (!readable).then(|| format!("artifact media type not supported yet: {media_type}"));
    }
    if LOADER_PREVIEW_DRIVERS.contains(&driver_key.as_str()) {
        return (media != "application/json")
            .then(|| format!("preview artifact media type not supported yet: {media_type}"));
    }
    Some(format!("artifact driver not supported yet: {driver}"))
}

/// Something in a package the external optimizer's data loader refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoaderWarning {
    /// An item id that is not one filesystem path segment.
    UnsafeItemId(String),
    /// An artifact the loader cannot read; `reason` is the loader's own message.
    Artifact {
        /// Artifact id.
        id: String,
        /// The loader's message.
        reason: String,
    },
    /// Explicit `metadata.split` values that do not fill train, val and test, or an unknown one.
    Splits(String),
}

impl fmt::Display for LoaderWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoaderWarning::UnsafeItemId(id) => {
                write!(
                    f,
                    "item id {id:?} is not safe for filesystem output (the optimizer refuses `/`, `\\`, `.`, `..`)"
                )
            }
            LoaderWarning::Artifact { id, reason } => write!(f, "artifact {id:?}: {reason}"),
            LoaderWarning::Splits(reason) => f.write_str(reason),
        }
    }
}

/// What the optimizer's data loader refuses in `package` that [`crate::validate_training_package`]
/// lets through: unsafe item ids (in item order), then artifacts referenced by an item whose
/// driver or media type it cannot read (in manifest order), then explicit `metadata.split` values
/// that are unknown or leave train, val or test empty. Empty = the loader reads it (blob presence,
/// hashes and sizes are checked against the blob store, not here).
pub fn loader_warnings(package: &TrainingPackage) -> Vec<LoaderWarning> {
    let mut warnings: Vec<LoaderWarning> = package
        .items
        .iter()
        .filter(|item| !is_loader_safe_item_id(&item.id))
        .map(|item| LoaderWarning::UnsafeItemId(item.id.clone()))
        .collect();
    let referenced: Vec<&str> = package
        .items
        .iter()
        .flat_map(|item| item.artifact_ids())
        .collect();
    for artifact in package
        .artifacts
        .iter()
        .filter(|a| referenced.contains(&a.id.as_str()))
    {
        if let Some(reason) = loader_artifact_refusal(&artifact.driver, &artifact.media_type) {
            warnings.push(LoaderWarning::Artifact {
                id: artifact.id.clone(),
                reason,
            });
        }
    }
    warnings.extend(split_warning(package).map(LoaderWarning::Splits));
    warnings
}

/// The loader's split rule: once any item names a `metadata.split`, every value must be one it
/// knows (train; val, selection, valid_seen; test, valid_unseen; blank = train) and each of train,
/// val and test must get an item. Without explicit splits it plans its own holdout.
fn split_warning(package: &TrainingPackage) -> Option<String> {
    let splits: Vec<String> = package
        .items
        .iter()
        .map(|item| {
            let split = item
                .metadata
                .as_ref()
                .and_then(|m| m.get("split"))
                .and_then(|s| s.as_str())
                .unwrap_or("");
            split.trim().to_owned()
        })
        .collect();
    if splits.iter().all(String::is_empty) {
        return None;
    }
    let mut filled = [false; 3];
    for split in &splits {
        let index = match split.as_str() {
            "" | "train" => 0,
            "val" | "selection" | "valid_seen" => 1,
            "test" | "valid_unseen" => 2,
            other => return Some(format!("metadata.split {other:?} is not supported")),
        };
        filled[index] = true;
    }
    (!filled.iter().all(|f| *f))
        .then(|| "metadata.split must provide non-empty train, val, and test splits".to_owned())
}

/// `type/subtype` of a media type, lowercased, parameters dropped.
fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::{ArtifactRef, EvalItem};

    #[test]
    fn stored_driver_is_derived_from_the_media_type_and_the_loader_reads_it() {
        let table = [
            ("text/markdown", "markdown"),
            ("Text/Markdown; charset=utf-8", "markdown"),
            ("application/markdown", "markdown"),
            ("text/plain", "text"),
            ("text/x-diff", "text"),
            ("text/html", "text"),
            ("application/json", "text"),
            ("image/png", "text"),
        ];
        for (media_type, want) in table {
            assert_eq!(driver_for_media_type(media_type), want, "{media_type}");
        }
        for media_type in [
            "text/markdown",
            "application/markdown",
            "text/plain",
            "text/x-diff",
        ] {
            assert_eq!(
                loader_artifact_refusal(driver_for_media_type(media_type), media_type),
                None,
                "{media_type}"
            );
        }
    }

    #[test]
    fn legacy_drivers_export_as_derived_and_foreign_drivers_are_kept() {
        assert_eq!(export_driver("local", "text/markdown"), "markdown");
        assert_eq!(export_driver("LOCAL", "text/plain"), "text");
        assert_eq!(export_driver("skillforge-distill", "text/x-diff"), "text");
        assert_eq!(export_driver("", "text/plain"), "text");
        assert_eq!(
            export_driver("gitmoot-skillopt", "text/x-diff"),
            "gitmoot-skillopt"
        );
        assert_eq!(export_driver("vue-vite", "application/json"), "vue-vite");
    }

    #[test]
    fn the_loader_refuses_unknown_drivers_and_unreadable_media_types_with_its_own_words() {
        assert_eq!(
            loader_artifact_refusal("local", "text/plain").unwrap(),
            "artifact driver not supported yet: local"
        );
        assert_eq!(
            loader_artifact_refusal("text", "image/png").unwrap(),
            "artifact media type not supported yet: image/png"
        );
        assert_eq!(
            loader_artifact_refusal("vue-vite", "text/html").unwrap(),
            "preview artifact media type not supported yet: text/html"
        );
        assert_eq!(
            loader_artifact_refusal("vue-vite", "application/json"),
            None
        );
        assert_eq!(loader_artifact_refusal(" Markdown ", "text/markdown"), None);
    }

    #[test]
    fn explicit_splits_must_fill_train_val_and_test() {
        let with_splits = |splits: &[&str]| {
            let mut package = crate::training::tests::minimal_package();
            package.items = splits
                .iter()
                .enumerate()
                .map(|(i, s)| EvalItem {
                    id: format!("i{i}"),
                    metadata: (!s.is_empty()).then(|| serde_json::json!({"split": s})),
                    ..Default::default()
                })
                .collect();
            loader_warnings(&package)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert!(
            with_splits(&["", ""]).is_empty(),
            "no explicit split: the loader plans a holdout"
        );
        assert!(with_splits(&["train", "selection", "valid_unseen"]).is_empty());
        assert!(
            with_splits(&["", "val", "test"]).is_empty(),
            "blank is train"
        );
        assert_eq!(
            with_splits(&["train", "train"]),
            ["metadata.split must provide non-empty train, val, and test splits"]
        );
        assert_eq!(
            with_splits(&["train", "dev", "test"]),
            ["metadata.split \"dev\" is not supported"]
        );
    }

    #[test]
    fn item_ids_the_loader_refuses() {
        for id in ["checker#owner/repo#7", "a\\b", ".", "..", " ", ""] {
            assert!(!is_loader_safe_item_id(id), "{id:?}");
        }
        for id in ["hero-001", "c-0123456789ab", "owner.repo#7", "review#x"] {
            assert!(is_loader_safe_item_id(id), "{id:?}");
        }
    }

    #[test]
    fn warnings_name_unsafe_items_and_unreadable_referenced_artifacts_only() {
        let mut package = crate::training::tests::minimal_package();
        package.items = vec![
            EvalItem {
                id: "checker#o/r#3".into(),
                ..Default::default()
            },
            EvalItem {
                id: "ok".into(),
                baseline_artifact_id: "png".into(),
                candidate_artifact_id: "md".into(),
                ..Default::default()
            },
        ];
        let artifact = |id: &str, media_type: &str, driver: &str| ArtifactRef {
            id: id.into(),
            hash: format!("sha256:{}", "0".repeat(64)),
            media_type: media_type.into(),
            size_bytes: 1,
            driver: driver.into(),
        };
        package.artifacts = vec![
            artifact("md", "text/markdown", "markdown"),
            artifact("png", "image/png", "text"),
            artifact("unused", "x/y", "local"),
        ];
        let warnings: Vec<String> = loader_warnings(&package)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            warnings,
            [
                "item id \"checker#o/r#3\" is not safe for filesystem output (the optimizer refuses `/`, `\\`, `.`, `..`)",
                "artifact \"png\": artifact media type not supported yet: image/png",
            ]
        );
    }
}
