//! Stage definitions as data: the `[stages.NAME]` tables of any family's `workflows/<family>.toml`
//! (embedded in the binary), with the per-home overrides of `<home>/<family>.toml` (DESIGN §2
//! "workflows/", §9).
//!
//! Both files are parsed strictly: an unknown key is an error naming the key and the file. Every
//! stage the family declares ([`StageSource::stage_names`]) must be in the shipped file, with
//! exactly one of `runner` (a durable job on a worker) or `handler` (a control-plane step), positive
//! times and attempts, and `stale_after_secs > heartbeat_secs`. An override may change times,
//! attempts and `idempotent`, never `runner` or `handler`. Tables other than `[stages]` belong to
//! the family ([`Sections`], e.g. train's `[backends.NAME]`); a family without any refuses them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Why a workflow file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StagesError {
    /// Not TOML, an unknown key, or a wrong type (the message comes from the parser and names the key).
    #[error("invalid workflow file `{file}`: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A semantic check failed.
    #[error("invalid workflow file `{file}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The override file could not be read.
    #[error("read workflow file `{file}`: {message}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        message: String,
    },
}

/// One stage: how it runs and how long its leases live.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageDef {
    /// `JobSpec::workflow` of the stage's jobs (the family's workflow; set at load).
    #[serde(skip)]
    pub workflow: String,
    /// The stage's name, also `JobSpec::stage` of its jobs (set at load).
    #[serde(skip)]
    pub name: String,
    /// Runner kind of a durable job (`agent`, `process`, `sandbox`, `checker`), when the stage is a job.
    #[serde(default)]
    pub runner: Option<String>,
    /// Control-plane step name, when the stage runs inside the family's command.
    #[serde(default)]
    pub handler: Option<String>,
    /// Wall-clock budget of one run, seconds (the runner's own budget, e.g. the payload's `timeout_secs`).
    pub timeout_secs: u64,
    /// Extra wall-clock the job gets beyond `timeout_secs` for its runner's setup and cleanup
    /// (a sandbox clone), seconds; the job's timeout is `timeout_secs + setup_secs`. Default 0.
    #[serde(default)]
    pub setup_secs: u64,
    /// Heartbeat period of a running attempt's lease, seconds.
    pub heartbeat_secs: u64,
    /// A lease with no heartbeat for this long is stale, seconds.
    pub stale_after_secs: u64,
    /// Attempts in total (≥ 1).
    pub attempts: u32,
    /// Whether a stale attempt may be re-run (false ⇒ `stale` with recovery available).
    pub idempotent: bool,
    /// Whether a run that completed without passing is retried (false: its failing result is the
    /// answer, e.g. a verifier's fail verdict, a judge's unreadable reply). Default true.
    #[serde(default = "default_true")]
    pub retry_failed_runs: bool,
    /// status_phase values the stage reports (facts §3).
    #[serde(default)]
    pub status_phases: Vec<String>,
    /// Labels a worker must advertise to run this stage's jobs (`os=linux`, `gpu`,
    /// `tool:podman`; see `skillforge_engine::labels`). Default: none (any worker). An override
    /// file replaces the list.
    #[serde(default)]
    pub requires: Vec<String>,
}

fn default_true() -> bool {
    true
}

impl StageDef {
    /// `timeout_secs` as a duration (the run's budget).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
}

/// Field-wise override of a stage in `<home>/<family>.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct StageOverride {
    timeout_secs: Option<u64>,
    setup_secs: Option<u64>,
    heartbeat_secs: Option<u64>,
    stale_after_secs: Option<u64>,
    attempts: Option<u32>,
    idempotent: Option<bool>,
    retry_failed_runs: Option<bool>,
    requires: Option<Vec<String>>,
}

/// A family's tables besides `[stages]` (train: `[backends.NAME]`). Deserialized strictly from
/// what is left of the file, so an unknown table is refused by the family's own type.
pub trait Sections: DeserializeOwned + Default + Clone + PartialEq + std::fmt::Debug {
    /// The same tables as an override file gives them.
    type Override: DeserializeOwned + Default;

    /// Applies an override's tables.
    fn apply(&mut self, o: Self::Override);

    /// Checks the tables after loading or overriding.
    ///
    /// # Errors
    /// What is wrong, without the file name (the caller adds it).
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// No tables besides `[stages]`: any other table is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSections {}

impl Sections for NoSections {
    type Override = NoSections;

    fn apply(&mut self, _: NoSections) {}
}

/// Where one family's stage definitions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSource {
    /// The family's file stem: `workflows/<family>.toml`, overrides in `<home>/<family>.toml`.
    pub family: &'static str,
    /// `JobSpec::workflow` of the family's jobs.
    pub workflow: &'static str,
    /// The shipped file's text (`include_str!`).
    pub shipped: &'static str,
    /// Every stage, in workflow order; the shipped file declares exactly these.
    pub stage_names: &'static [&'static str],
}

/// A family's resolved stages and its own tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowDef<S = NoSections> {
    /// The source it was loaded from.
    pub source: StageSource,
    /// Stage name → definition.
    pub stages: BTreeMap<String, StageDef>,
    /// The family's own tables.
    pub sections: S,
}

fn split_stages(text: &str, file: &str) -> Result<(toml::Table, toml::Table), StagesError> {
    let parse = |message: String| StagesError::Parse {
        file: file.to_owned(),
        message,
    };
    let mut table: toml::Table = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
    let stages = match table.remove("stages") {
        None => toml::Table::new(),
        Some(toml::Value::Table(t)) => t,
        Some(other) => {
            return Err(parse(format!(
                "`stages` must be a table of stages, not a {}",
                other.type_str()
            )));
        }
    };
    Ok((stages, table))
}

fn from_table<T: DeserializeOwned>(
    table: toml::Table,
    file: &str,
    what: &str,
) -> Result<T, StagesError> {
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| StagesError::Parse {
            file: file.to_owned(),
            message: format!("{what}: {}", e.message()),
        })
}

impl StageSource {
    /// `workflows/<family>.toml`, as error messages name the shipped file.
    pub fn shipped_file(&self) -> String {
        format!("workflows/{}.toml", self.family)
    }

    /// `<home>/<family>.toml`.
    pub fn override_path(&self, home: &Path) -> PathBuf {
        home.join(format!("{}.toml", self.family))
    }

    /// The shipped definition.
    ///
    /// # Errors
    /// [`StagesError`] when the embedded file is invalid (a build defect; each family's unit test guards it).
    pub fn shipped<S: Sections>(&self) -> Result<WorkflowDef<S>, StagesError> {
        self.parse(self.shipped, &self.shipped_file())
    }

    /// The shipped definition with `<home>/<family>.toml` applied when it exists.
    ///
    /// # Errors
    /// As [`Self::parse`] and [`WorkflowDef::apply_override`]; [`StagesError::Read`] when the
    /// override exists but cannot be read.
    pub fn for_home<S: Sections>(&self, home: &Path) -> Result<WorkflowDef<S>, StagesError> {
        let mut def = self.shipped()?;
        let path = self.override_path(home);
        match std::fs::read_to_string(&path) {
            Ok(text) => def.apply_override(&text, &path.display().to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StagesError::Read {
                    file: path.display().to_string(),
                    message: e.to_string(),
                });
            }
        }
        Ok(def)
    }

    /// Parses a full definition (the shipped file's shape) and validates it.
    ///
    /// # Errors
    /// [`StagesError::Parse`] for bad TOML or an unknown key; [`StagesError::Invalid`] for a
    /// missing or unknown stage, a stage with neither or both of runner/handler, a zero time or
    /// attempt count, or `stale_after_secs <= heartbeat_secs`.
    pub fn parse<S: Sections>(
        &self,
        text: &str,
        file: &str,
    ) -> Result<WorkflowDef<S>, StagesError> {
        let (stage_tables, rest) = split_stages(text, file)?;
        let mut stages = BTreeMap::new();
        for (name, value) in stage_tables {
            let table = match value {
                toml::Value::Table(t) => t,
                other => {
                    return Err(StagesError::Parse {
                        file: file.to_owned(),
                        message: format!(
                            "stage `{name}` must be a table, not a {}",
                            other.type_str()
                        ),
                    });
                }
            };
            let mut stage: StageDef = from_table(table, file, &format!("stage `{name}`"))?;
            stage.workflow = self.workflow.to_owned();
            stage.name = name.clone();
            stages.insert(name, stage);
        }
        let sections: S = from_table(rest, file, "top level")?;
        let def = WorkflowDef {
            source: *self,
            stages,
            sections,
        };
        def.validate(file)?;
        Ok(def)
    }
}

impl<S: Sections> WorkflowDef<S> {
    /// Applies an override file: `[stages.NAME]` fields replace the shipped ones (runner and
    /// handler cannot change), the family's tables are applied by [`Sections::apply`].
    ///
    /// # Errors
    /// [`StagesError::Parse`] for bad TOML or an unknown key; [`StagesError::Invalid`] for an
    /// unknown stage or a result that fails validation.
    pub fn apply_override(&mut self, text: &str, file: &str) -> Result<(), StagesError> {
        let (stage_tables, rest) = split_stages(text, file)?;
        for (name, value) in stage_tables {
            let o: StageOverride = match value {
                toml::Value::Table(t) => from_table(t, file, &format!("stage `{name}`"))?,
                other => {
                    return Err(StagesError::Parse {
                        file: file.to_owned(),
                        message: format!(
                            "stage `{name}` must be a table, not a {}",
                            other.type_str()
                        ),
                    });
                }
            };
            let known = self.source.stage_names.join(", ");
            let stage = self
                .stages
                .get_mut(&name)
                .ok_or_else(|| StagesError::Invalid {
                    file: file.to_owned(),
                    message: format!("unknown stage `{name}` (expected one of {known})"),
                })?;
            let set = |field: &mut u64, v: Option<u64>| {
                if let Some(v) = v {
                    *field = v;
                }
            };
            set(&mut stage.timeout_secs, o.timeout_secs);
            set(&mut stage.setup_secs, o.setup_secs);
            set(&mut stage.heartbeat_secs, o.heartbeat_secs);
            set(&mut stage.stale_after_secs, o.stale_after_secs);
            if let Some(v) = o.attempts {
                stage.attempts = v;
            }
            if let Some(v) = o.idempotent {
                stage.idempotent = v;
            }
            if let Some(v) = o.requires {
                stage.requires = v;
            }
            if let Some(v) = o.retry_failed_runs {
                stage.retry_failed_runs = v;
            }
        }
        let sections: S::Override = from_table(rest, file, "top level")?;
        self.sections.apply(sections);
        self.validate(file)
    }

    fn validate(&self, file: &str) -> Result<(), StagesError> {
        let invalid = |message: String| StagesError::Invalid {
            file: file.to_owned(),
            message,
        };
        let names = self.source.stage_names;
        for name in names {
            if !self.stages.contains_key(*name) {
                return Err(invalid(format!("stage `{name}` is missing")));
            }
        }
        for (name, stage) in &self.stages {
            if !names.contains(&name.as_str()) {
                return Err(invalid(format!(
                    "unknown stage `{name}` (expected one of {})",
                    names.join(", ")
                )));
            }
            if stage.runner.is_some() == stage.handler.is_some() {
                return Err(invalid(format!(
                    "stage `{name}` needs exactly one of `runner` and `handler`"
                )));
            }
            if stage.timeout_secs == 0 || stage.heartbeat_secs == 0 || stage.attempts == 0 {
                return Err(invalid(format!(
                    "stage `{name}`: timeout_secs, heartbeat_secs and attempts must be at least 1"
                )));
            }
            if stage.stale_after_secs <= stage.heartbeat_secs {
                return Err(invalid(format!(
                    "stage `{name}`: stale_after_secs must be longer than heartbeat_secs"
                )));
            }
        }
        self.sections.validate().map_err(invalid)
    }

    /// The stage `name` (one of [`StageSource::stage_names`]; validated at load, so always present).
    ///
    /// # Panics
    /// When `name` is not a stage of the family (a programming error).
    pub fn stage(&self, name: &str) -> &StageDef {
        self.stages.get(name).unwrap_or_else(|| {
            panic!(
                "{} stage `{name}` is declared by validation",
                self.source.family
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[stages.run]\nrunner = \"process\"\ntimeout_secs = 5\nheartbeat_secs = 1\nstale_after_secs = 3\nattempts = 2\nidempotent = true\n";
    const SOURCE: StageSource = StageSource {
        family: "probe",
        workflow: "probe",
        shipped: TEXT,
        stage_names: &["run"],
    };

    #[test]
    fn loads_with_workflow_and_name_and_defaults() {
        let def: WorkflowDef = SOURCE.shipped().unwrap();
        let stage = def.stage("run");
        assert_eq!(
            (
                stage.workflow.as_str(),
                stage.name.as_str(),
                stage.setup_secs,
                stage.retry_failed_runs
            ),
            ("probe", "run", 0, true)
        );
    }

    #[test]
    fn refusals_name_the_key_and_the_file() {
        let check = |text: &str, want: &[&str]| {
            let err = SOURCE
                .parse::<NoSections>(text, "x/probe.toml")
                .expect_err(text)
                .to_string();
            for w in want {
                assert!(err.contains(w), "{err:?} should contain {w:?}");
            }
        };
        check(
            &TEXT.replace("attempts = 2", "attempts = 2\nretries = 1"),
            &["x/probe.toml", "retries"],
        );
        check(
            &format!("{TEXT}[backends.x]\ncommand = [\"a\"]\n"),
            &["x/probe.toml", "backends"],
        );
        check(
            &TEXT.replace("runner = \"process\"\n", ""),
            &["run", "runner"],
        );
        check(
            &TEXT.replace("stale_after_secs = 3", "stale_after_secs = 1"),
            &["stale_after_secs"],
        );
        check("[stages]\n", &["stage `run` is missing"]);
    }

    #[test]
    fn home_override_changes_times_only() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("probe.toml"),
            "[stages.run]\ntimeout_secs = 9\nsetup_secs = 4\n",
        )
        .unwrap();
        let def: WorkflowDef = SOURCE.for_home(home.path()).unwrap();
        assert_eq!(
            (def.stage("run").timeout_secs, def.stage("run").setup_secs),
            (9, 4)
        );
        std::fs::write(
            home.path().join("probe.toml"),
            "[stages.run]\nrunner = \"agent\"\n",
        )
        .unwrap();
        let err = SOURCE
            .for_home::<NoSections>(home.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("probe.toml") && err.contains("runner"),
            "{err}"
        );
        std::fs::write(
            home.path().join("probe.toml"),
            "[stages.other]\ntimeout_secs = 1\n",
        )
        .unwrap();
        assert!(
            SOURCE
                .for_home::<NoSections>(home.path())
                .unwrap_err()
                .to_string()
                .contains("unknown stage `other`")
        );
    }
}
