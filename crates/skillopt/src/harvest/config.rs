//! The harvester's switches, read from `[skillopt]` (seed: SkillOpt, "Automatic trace-harvested
//! feedback (Mode A, off by default)" › Enabling, and each leg's section; S-13, S-26).
//!
//! Every switch defaults to off/empty. The CLI builds a [`HarvestConfig`] from its config file;
//! when [`HarvestConfig::is_enabled`] is false no harvester is constructed at all (S-13). The
//! legs' budgets are stage data ([`super::stages`]), carried here so every leg builder sees them.

/// `[skillopt]` keys the harvester reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarvestConfig {
    /// `auto_trace_enabled` (default false): Mode A on.
    pub auto_trace_enabled: bool,
    /// `revert_detection_enabled`: unset = on whenever the harvester is on; `false` keeps the
    /// harvester but turns the corrective revert overwrites off (S-23).
    pub revert_detection_enabled: Option<bool>,
    /// `cross_family_review_enabled` (default false).
    pub cross_family_review_enabled: bool,
    /// `deterministic_checkers_enabled` (default false).
    pub deterministic_checkers_enabled: bool,
    /// `deterministic_checkers`: comma list of dimensions; unset = `diff_size` only.
    pub deterministic_checkers: Option<String>,
    /// `hard_verifiers_enabled` (default false).
    pub hard_verifiers_enabled: bool,
    /// `hard_verifier_commands`: one `sh -c` line each, run in order (default empty).
    pub hard_verifier_commands: Vec<String>,
    /// `hard_verifier_image` (ours): run the hard verifier's commands in containers from this
    /// image instead of under bwrap; unset = no container.
    pub hard_verifier_image: Option<String>,
    /// `review_runtimes` (ours): agent runtimes that may review, in preference order. Unset = the
    /// shipped model runtimes (claude, codex, opencode) whose program is found on this host's PATH.
    pub review_runtimes: Option<Vec<String>>,
    /// The legs' stages (`workflows/harvest.toml` with `<home>/harvest.toml`; default the shipped file).
    pub stages: super::stages::HarvestStages,
}

impl HarvestConfig {
    /// Whether a harvester exists at all (`auto_trace_enabled = true`).
    pub fn is_enabled(&self) -> bool {
        self.auto_trace_enabled
    }

    /// Whether a merged `Reverts …` PR flips the original row (S-23): harvester on and
    /// `revert_detection_enabled` not set to false.
    pub fn revert_detection(&self) -> bool {
        self.is_enabled() && self.revert_detection_enabled != Some(false)
    }

    /// The hard-verifier commands when the leg is on: harvester on, `hard_verifiers_enabled`, and
    /// at least one non-blank command line (S-26); else `None`.
    pub fn hard_verifier_commands(&self) -> Option<Vec<String>> {
        let commands: Vec<String> = self
            .hard_verifier_commands
            .iter()
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect();
        (self.is_enabled() && self.hard_verifiers_enabled && !commands.is_empty())
            .then_some(commands)
    }

    /// Whether the checker leg is on (harvester on and `deterministic_checkers_enabled`).
    pub fn checkers_leg(&self) -> bool {
        self.is_enabled() && self.deterministic_checkers_enabled
    }

    /// Whether the review leg is on (harvester on and `cross_family_review_enabled`).
    pub fn review_leg(&self) -> bool {
        self.is_enabled() && self.cross_family_review_enabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s26_every_leg_needs_the_harvester_and_its_own_switch() {
        let mut config = HarvestConfig {
            cross_family_review_enabled: true,
            deterministic_checkers_enabled: true,
            hard_verifiers_enabled: true,
            hard_verifier_commands: vec!["true".into()],
            ..HarvestConfig::default()
        };
        assert!(
            !config.review_leg()
                && !config.checkers_leg()
                && config.hard_verifier_commands().is_none()
        );
        assert!(!config.revert_detection());
        config.auto_trace_enabled = true;
        assert!(config.review_leg() && config.checkers_leg());
        assert_eq!(
            config.hard_verifier_commands(),
            Some(vec!["true".to_owned()])
        );
        config.hard_verifier_commands = vec!["  ".into()];
        assert!(
            config.hard_verifier_commands().is_none(),
            "no command line ⇒ no hard leg"
        );
    }

    #[test]
    fn s23_revert_detection_unset_is_on_false_is_off() {
        let mut config = HarvestConfig {
            auto_trace_enabled: true,
            ..HarvestConfig::default()
        };
        assert!(config.revert_detection());
        config.revert_detection_enabled = Some(false);
        assert!(!config.revert_detection());
        config.revert_detection_enabled = Some(true);
        assert!(config.revert_detection());
    }
}
