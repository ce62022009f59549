//! Strict training-package validation with the external (Python) optimizer's rules
//! (facts §1 "Python consumer extra rules"), so skillforge refuses to export what the optimizer
//! would reject or crash on.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::hash::{content_hash, normalize_hash};
use crate::training::{CONTRACT_VERSION, TRAINING_PACKAGE_KIND, TrainingPackage};

/// A rule of the external optimizer that a package breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageValidationError {
    /// Not JSON, or not the package shape.
    #[error("decode training package: {0}")]
    Decode(String),
    /// `items`, `artifacts` or `feedback_events` missing or `null` (the optimizer crashes).
    #[error("training package {0} must be an array")]
    NotArray(&'static str),
    /// Wrong kind.
    #[error("training package kind must be \"gitmoot-skillopt-training-package\", got {0:?}")]
    Kind(String),
    /// Wrong contract version.
    #[error("training package contract_version must be 1, got {0}")]
    ContractVersion(i64),
    /// `template.content_hash` is not sha256 of `template.content`.
    #[error("template content_hash {declared} does not match content (want {actual})")]
    ContentHash {
        /// Declared.
        declared: String,
        /// Computed.
        actual: String,
    },
    /// A required string is empty.
    #[error("{0} is required")]
    Required(&'static str),
    /// `eval_run.template_id` ≠ `template.id`.
    #[error("eval_run template_id {run:?} does not match template id {template:?}")]
    RunTemplate {
        /// In eval_run.
        run: String,
        /// In template.
        template: String,
    },
    /// `eval_run.template_version_id` ≠ `template.version_id`.
    #[error("eval_run template_version_id {run:?} does not match template version_id {template:?}")]
    RunTemplateVersion {
        /// In eval_run.
        run: String,
        /// In template.
        template: String,
    },
    /// Two artifacts share an id.
    #[error("artifact id {0:?} is duplicated")]
    DuplicateArtifact(String),
    /// Two items share an id.
    #[error("item id {0:?} is duplicated")]
    DuplicateItem(String),
    /// Two options of an item share a label.
    #[error("item {item:?} option label {label:?} is duplicated")]
    DuplicateOption {
        /// Item id.
        item: String,
        /// Label.
        label: String,
    },
    /// An item references an artifact not in `artifacts`.
    #[error("item {item:?} references artifact {artifact:?} missing from artifacts")]
    MissingArtifact {
        /// Item id.
        item: String,
        /// Artifact id.
        artifact: String,
    },
    /// A (ranked) feedback event names another run.
    #[error("{what} for item {item:?} has run_id {run:?}, want {want:?}")]
    EventRun {
        /// feedback event / ranked feedback event.
        what: &'static str,
        /// Item id.
        item: String,
        /// Its run id.
        run: String,
        /// eval_run.id.
        want: String,
    },
    /// A (ranked) feedback event names an unknown item.
    #[error("{what} item {item:?} is not in items")]
    EventItem {
        /// feedback event / ranked feedback event.
        what: &'static str,
        /// Item id.
        item: String,
    },
    /// A ranked label is not an option of its item.
    #[error("ranked feedback event {event:?} label {label:?} is not an option of item {item:?}")]
    RankedLabel {
        /// Event id.
        event: String,
        /// Item id.
        item: String,
        /// Label.
        label: String,
    },
    /// A ranked label appears twice.
    #[error("ranked feedback event {event:?} ranks {label:?} twice")]
    RankedDuplicate {
        /// Event id.
        event: String,
        /// Label.
        label: String,
    },
    /// The winner is not in the ranking.
    #[error("ranked feedback event {event:?} winner {winner:?} is not in its ranking")]
    WinnerNotRanked {
        /// Event id.
        event: String,
        /// Winner.
        winner: String,
    },
}

/// Reads a training package from any producer and validates it ([`validate_training_package`]).
/// Unlike [`validate_training_package_json`] (the Python optimizer's view, which crashes on
/// `null`), lists Go writes as `null` (`items`, `artifacts`, `feedback_events`, `ranking`, …) and
/// omitted `omitempty` fields read as empty: this is how skillforge's own optimizer reads input.
///
/// # Errors
/// [`PackageValidationError::Decode`] when the text is not the package shape, else the first
/// broken rule.
pub fn read_training_package(text: &str) -> Result<TrainingPackage, PackageValidationError> {
    let package: TrainingPackage =
        serde_json::from_str(text).map_err(|e| PackageValidationError::Decode(e.to_string()))?;
    validate_training_package(&package)?;
    Ok(package)
}

/// Parses JSON text and validates it: first that `items`, `artifacts` and `feedback_events` are
/// arrays (never `null`), then [`validate_training_package`].
///
/// # Errors
/// The first broken rule.
pub fn validate_training_package_json(
    text: &str,
) -> Result<TrainingPackage, PackageValidationError> {
    crate::limits::check_json(text)
        .map_err(|e| PackageValidationError::Decode(format!("the package {e}")))?;
    let raw: Value =
        serde_json::from_str(text).map_err(|e| PackageValidationError::Decode(e.to_string()))?;
    for key in ["items", "artifacts", "feedback_events"] {
        if !raw.get(key).is_some_and(Value::is_array) {
            return Err(PackageValidationError::NotArray(key));
        }
    }
    let package: TrainingPackage =
        serde_json::from_value(raw).map_err(|e| PackageValidationError::Decode(e.to_string()))?;
    validate_training_package(&package)?;
    Ok(package)
}

/// Applies the optimizer's rules in this order: kind and contract_version; content_hash =
/// sha256(content); version_state and eval_run.state non-empty; eval_run.template_id =
/// template.id; eval_run.template_version_id (if set) = template.version_id; unique artifact ids,
/// item ids and per-item option labels; every item artifact id in `artifacts`; feedback and ranked
/// events name this run and a known item; ranked labels unique and among the item's options;
/// winner in the ranking.
///
/// # Errors
/// The first broken rule.
pub fn validate_training_package(package: &TrainingPackage) -> Result<(), PackageValidationError> {
    use PackageValidationError as E;
    if package.kind != TRAINING_PACKAGE_KIND {
        return Err(E::Kind(package.kind.clone()));
    }
    if package.contract_version != CONTRACT_VERSION {
        return Err(E::ContractVersion(package.contract_version));
    }
    let template = &package.template;
    let actual = content_hash(&template.content);
    if normalize_hash(&template.content_hash).ok().as_deref() != Some(actual.as_str()) {
        return Err(E::ContentHash {
            declared: template.content_hash.clone(),
            actual,
        });
    }
    if template.version_state.trim().is_empty() {
        return Err(E::Required("template version_state"));
    }
    let run = &package.eval_run;
    if run.state.trim().is_empty() {
        return Err(E::Required("eval_run state"));
    }
    if run.template_id != template.id {
        return Err(E::RunTemplate {
            run: run.template_id.clone(),
            template: template.id.clone(),
        });
    }
    if !run.template_version_id.is_empty() && run.template_version_id != template.version_id {
        return Err(E::RunTemplateVersion {
            run: run.template_version_id.clone(),
            template: template.version_id.clone(),
        });
    }
    let mut artifact_ids = BTreeSet::new();
    for artifact in &package.artifacts {
        if !artifact_ids.insert(artifact.id.as_str()) {
            return Err(E::DuplicateArtifact(artifact.id.clone()));
        }
    }
    let mut options_by_item: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for item in &package.items {
        let mut labels = BTreeSet::new();
        for option in &item.options {
            if !labels.insert(option.label.as_str()) {
                return Err(E::DuplicateOption {
                    item: item.id.clone(),
                    label: option.label.clone(),
                });
            }
        }
        if options_by_item.insert(item.id.as_str(), labels).is_some() {
            return Err(E::DuplicateItem(item.id.clone()));
        }
        if let Some(missing) = item
            .artifact_ids()
            .into_iter()
            .find(|id| !artifact_ids.contains(id))
        {
            return Err(E::MissingArtifact {
                item: item.id.clone(),
                artifact: missing.to_owned(),
            });
        }
    }
    let check_event = |what: &'static str, run_id: &str, item_id: &str| {
        if run_id != run.id {
            return Err(E::EventRun {
                what,
                item: item_id.to_owned(),
                run: run_id.to_owned(),
                want: run.id.clone(),
            });
        }
        options_by_item.get(item_id).ok_or_else(|| E::EventItem {
            what,
            item: item_id.to_owned(),
        })
    };
    for event in &package.feedback_events {
        check_event("feedback event", &event.run_id, &event.item_id)?;
    }
    for event in &package.ranked_feedback_events {
        let options = check_event("ranked feedback event", &event.run_id, &event.item_id)?;
        let mut seen = BTreeSet::new();
        for label in &event.ranking {
            if !options.contains(label.as_str()) {
                return Err(E::RankedLabel {
                    event: event.id.clone(),
                    item: event.item_id.clone(),
                    label: label.clone(),
                });
            }
            if !seen.insert(label.as_str()) {
                return Err(E::RankedDuplicate {
                    event: event.id.clone(),
                    label: label.clone(),
                });
            }
        }
        if !event.winner.is_empty() && !seen.contains(event.winner.as_str()) {
            return Err(E::WinnerNotRanked {
                event: event.id.clone(),
                winner: event.winner.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gojson::serialize_package;
    use crate::training::tests::ranked_package;
    use crate::training::{ArtifactRef, FeedbackEvent};

    type Mutation = fn(&mut TrainingPackage);

    #[test]
    fn strict_validator_refusals() {
        let table: &[(&str, Mutation, &str)] = &[
            (
                "kind",
                |p| p.kind = "x".into(),
                "training package kind must be",
            ),
            (
                "version",
                |p| p.contract_version = 2,
                "contract_version must be 1, got 2",
            ),
            (
                "content hash",
                |p| p.template.content.push('x'),
                "template content_hash",
            ),
            (
                "version state",
                |p| p.template.version_state.clear(),
                "template version_state is required",
            ),
            (
                "run state",
                |p| p.eval_run.state.clear(),
                "eval_run state is required",
            ),
            (
                "run template",
                |p| p.eval_run.template_id = "other".into(),
                "eval_run template_id \"other\"",
            ),
            (
                "run version",
                |p| p.eval_run.template_version_id = "planner@v9".into(),
                "template_version_id \"planner@v9\"",
            ),
            (
                "duplicate artifact",
                |p| {
                    let dup = p.artifacts[0].clone();
                    p.artifacts.push(dup);
                },
                "artifact id \"art-a\" is duplicated",
            ),
            (
                "duplicate item",
                |p| {
                    let dup = p.items[0].clone();
                    p.items.push(dup);
                },
                "item id \"item-1\" is duplicated",
            ),
            (
                "duplicate option",
                |p| {
                    let dup = p.items[0].options[0].clone();
                    p.items[0].options.push(dup);
                },
                "option label \"a\" is duplicated",
            ),
            (
                "missing artifact",
                |p| p.items[0].diff_artifact_id = "nope".into(),
                "references artifact \"nope\"",
            ),
            (
                "feedback run",
                |p| {
                    p.feedback_events.push(FeedbackEvent {
                        run_id: "r2".into(),
                        item_id: "item-1".into(),
                        ..Default::default()
                    })
                },
                "feedback event for item \"item-1\" has run_id \"r2\"",
            ),
            (
                "feedback item",
                |p| {
                    p.feedback_events.push(FeedbackEvent {
                        run_id: "run-1".into(),
                        item_id: "zz".into(),
                        ..Default::default()
                    })
                },
                "feedback event item \"zz\" is not in items",
            ),
            (
                "ranked label",
                |p| p.ranked_feedback_events[0].ranking[0] = "e".into(),
                "label \"e\" is not an option",
            ),
            (
                "ranked duplicate",
                |p| p.ranked_feedback_events[0].ranking[1] = "c".into(),
                "ranks \"c\" twice",
            ),
            (
                "winner",
                |p| p.ranked_feedback_events[0].winner = "z".into(),
                "winner \"z\" is not in its ranking",
            ),
        ];
        for (name, mutate, want) in table {
            let mut pkg = ranked_package();
            mutate(&mut pkg);
            let err = validate_training_package(&pkg).expect_err(name).to_string();
            assert!(err.contains(want), "{name}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn null_or_missing_arrays_are_refused() {
        let text = serialize_package(&ranked_package()).unwrap();
        let mut value: Value = serde_json::from_str(&text).unwrap();
        value["items"] = Value::Null;
        let err = validate_training_package_json(&value.to_string()).unwrap_err();
        assert_eq!(err, PackageValidationError::NotArray("items"));
        value.as_object_mut().unwrap().remove("items");
        assert_eq!(
            validate_training_package_json(&value.to_string()).unwrap_err(),
            PackageValidationError::NotArray("items")
        );
    }

    #[test]
    fn prefixless_uppercase_content_hash_is_accepted() {
        let mut pkg = ranked_package();
        pkg.template.content_hash = pkg
            .template
            .content_hash
            .trim_start_matches("sha256:")
            .to_uppercase();
        validate_training_package(&pkg).unwrap();
        pkg.artifacts.push(ArtifactRef {
            id: "extra".into(),
            ..Default::default()
        });
        validate_training_package(&pkg).unwrap();
    }
}
