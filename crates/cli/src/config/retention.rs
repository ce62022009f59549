//! `[queue] keep_succeeded` / `keep_failed`: how long finished jobs are kept (issue 19; the
//! engine's `retention` module prunes the rest).

use anyhow::anyhow;
use serde::Deserialize;
use skillforge_engine::retention::{Keep, Retention, parse_age};

/// One retention setting as written in `config.toml`: an age (`"7d"`), a count (`10000`), both
/// (`{ age = "7d", count = 10000 }`: whichever prunes more), or `"forever"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum KeepSetting {
    /// A count of the newest jobs kept.
    Count(u64),
    /// An age (`"7d"`, `"36h"`, …) or `"forever"`.
    Age(String),
    /// Both bounds.
    Both {
        /// The age bound.
        age: Option<String>,
        /// The count bound.
        count: Option<u64>,
    },
}

impl KeepSetting {
    /// The engine's [`Keep`]; `key` names the setting in errors.
    ///
    /// # Errors
    /// An age that does not parse, naming `[queue] {key}`.
    pub fn to_keep(&self, key: &str) -> anyhow::Result<Keep> {
        let age = |text: &str| parse_age(text).map_err(|e| anyhow!("[queue] {key}: {e}"));
        Ok(match self {
            KeepSetting::Count(n) => Keep {
                age: None,
                count: Some(*n),
            },
            KeepSetting::Age(text) if text == "forever" => Keep::default(),
            KeepSetting::Age(text) => Keep::age(age(text)?),
            KeepSetting::Both { age: a, count } => {
                if a.is_none() && count.is_none() {
                    return Err(anyhow!(
                        "[queue] {key}: give `age`, `count` or both (or \"forever\")"
                    ));
                }
                Keep {
                    age: a.as_deref().map(age).transpose()?,
                    count: *count,
                }
            }
        })
    }
}

/// The retention of `[queue]`: each unset key takes the engine's default (succeeded 7 days;
/// failed, dead and cancelled 30 days).
///
/// # Errors
/// A setting that does not parse, naming its key.
pub fn retention(
    succeeded: Option<&KeepSetting>,
    failed: Option<&KeepSetting>,
) -> anyhow::Result<Retention> {
    let defaults = Retention::default();
    Ok(Retention {
        succeeded: succeeded
            .map(|k| k.to_keep("keep_succeeded"))
            .transpose()?
            .unwrap_or(defaults.succeeded),
        failed: failed
            .map(|k| k.to_keep("keep_failed"))
            .transpose()?
            .unwrap_or(defaults.failed),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[derive(Deserialize)]
    struct Q {
        keep: KeepSetting,
    }

    fn keep(toml_value: &str) -> anyhow::Result<Keep> {
        let q: Q = toml::from_str(&format!("keep = {toml_value}"))?;
        q.keep.to_keep("keep_succeeded")
    }

    #[test]
    fn ages_counts_both_and_forever() {
        assert_eq!(
            keep("\"7d\"").unwrap(),
            Keep::age(Duration::from_secs(604_800))
        );
        assert_eq!(
            keep("10000").unwrap(),
            Keep {
                age: None,
                count: Some(10_000)
            }
        );
        assert_eq!(
            keep("{ age = \"1h\", count = 5 }").unwrap(),
            Keep {
                age: Some(Duration::from_secs(3600)),
                count: Some(5)
            }
        );
        assert!(keep("\"forever\"").unwrap().is_forever());
        let bad = keep("\"7 days\"").unwrap_err().to_string();
        assert!(
            bad.contains("[queue] keep_succeeded") && bad.contains("7 days"),
            "{bad}"
        );
        assert!(keep("{}").unwrap_err().to_string().contains("age"));
    }

    #[test]
    fn unset_keys_take_the_documented_defaults() {
        assert_eq!(retention(None, None).unwrap(), Retention::default());
    }
}
