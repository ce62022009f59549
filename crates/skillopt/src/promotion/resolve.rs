//! The one function that decides which template version a job runs (seed: SkillOpt,
//! "Promotion policy + notifications" › auto_promote_canary (#484); S-60; resolutions 7).
//!
//! Every job builder that takes "the current template" — `ask`, `train start`, train's
//! `--start-next`, `review create` — resolves through [`version_for_job`]: a bare `ID` is the
//! current version, or the template's canary for its sampled fraction of draws
//! ([`super::canary::route`]); an explicit `ID@vN` or `ID@latest` is that version, never rerouted.

use rand::Rng;
use skillforge_store::StoreError;
use skillforge_store::promotion::canary_of;
use skillforge_store::templates::{
    VersionRef, VersionRow, VersionSelector, current_version, get_version, resolve,
};
use sqlx::SqlitePool;

use super::canary::route;

/// The version a job runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The version.
    pub version: VersionRow,
    /// Whether the canary was drawn (a bare `ID` routed to it).
    pub canary: bool,
}

/// A uniform draw in [0,1) for [`version_for_job`].
pub fn draw() -> f64 {
    rand::rng().random()
}

/// The version a job of `reference` runs, given the uniform draw `u` in [0,1) (S-60): for a
/// bare `ID`, the canary when one exists and `u` is below its sample, else the current version;
/// an explicit selector is resolved as written. `None` when there is no such version (a bare
/// `ID` with no current version).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn version_for_job(
    db: &SqlitePool,
    reference: &VersionRef,
    u: f64,
) -> Result<Option<Resolved>, StoreError> {
    if reference.selector != VersionSelector::Current {
        return Ok(resolve(db, reference).await?.map(|version| Resolved {
            version,
            canary: false,
        }));
    }
    let Some(current) = current_version(db, &reference.template_id).await? else {
        return Ok(None);
    };
    let Some(canary) = canary_of(db, &reference.template_id).await? else {
        return Ok(Some(Resolved {
            version: current,
            canary: false,
        }));
    };
    if route(
        &current.id,
        Some((canary.id.as_str(), canary.canary_sample)),
        u,
    ) == current.id
    {
        return Ok(Some(Resolved {
            version: current,
            canary: false,
        }));
    }
    // The canary vanished between the two reads: the champion serves.
    Ok(Some(match get_version(db, &canary.id).await? {
        Some(version) => Resolved {
            version,
            canary: true,
        },
        None => Resolved {
            version: current,
            canary: false,
        },
    }))
}
