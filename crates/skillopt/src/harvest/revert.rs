//! Revert detection: a merged PR whose body is GitHub's Revert-button line `Reverts owner/repo#NN`
//! or `Reverts #NN` names the PR it reverts (seed: SkillOpt, "Automatic trace-harvested feedback"
//! › Outcome → score (Reverted); S-22, S-23).

/// The PR number a merged PR of `repo` (`owner/repo`) reverts, from its `body`: the first line
/// that reads `Reverts #NN` or `Reverts owner/repo#NN` (case-insensitive repo match, surrounding
/// whitespace ignored). A cross-repository reference, a malformed number or no such line gives
/// `None` — never an error (S-23: a malformed body never fails the poll).
pub fn reverted_pr(body: &str, repo: &str) -> Option<i64> {
    body.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("Reverts ")?.trim();
        let (target, number) = rest.split_once('#')?;
        let same_repo = target.is_empty() || target.eq_ignore_ascii_case(repo);
        let number = number.trim();
        let is_number = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        (same_repo && is_number)
            .then(|| number.parse::<i64>().ok())
            .flatten()
            .filter(|n| *n > 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s23_revert_bodies() {
        let check = |body: &str, want: Option<i64>| {
            assert_eq!(reverted_pr(body, "acme/app"), want, "{body:?}")
        };
        check("Reverts #12", Some(12));
        check("Reverts acme/app#12", Some(12));
        check("Reverts ACME/App#7\n\nbecause it broke main", Some(7));
        check("This reverts a thing.\nReverts #40", Some(40));
        check("Reverts other/repo#12", None);
        check("Reverts #12abc", None);
        check("Reverts #", None);
        check("Reverts #0", None);
        check("reverts #12", None);
        check("", None);
        check("Fixes #12", None);
    }
}
