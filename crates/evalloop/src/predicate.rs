//! The one `never_used_its_skill` predicate, shared by the judge (which invalidates the pair) and
//! the aggregate (which counts silent arms per side), so the two cannot drift apart (E-54).

/// True when the arm was given at least one skill and the transcript records skill calls, none of
/// them to a skill it was given. A runner that records no skill calls (`loaded = None`, Codex)
/// is never counted: that zero is unknowable (seed: skill-eval-loop, "An incumbent the model
/// never reaches for is a result").
pub fn never_used_its_skill(installed: &[String], loaded: Option<&[String]>) -> bool {
    match loaded {
        None => false,
        Some(loaded) => !installed.is_empty() && !installed.iter().any(|s| loaded.contains(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    // E-54
    #[test]
    fn e54_one_predicate_unknown_is_never_counted() {
        let check = |installed: &[&str], loaded: Option<&[&str]>, want: bool| {
            let loaded = loaded.map(v);
            assert_eq!(
                never_used_its_skill(&v(installed), loaded.as_deref()),
                want,
                "{installed:?} {loaded:?}"
            );
        };
        check(&["s"], Some(&[]), true);
        check(&["s"], Some(&["other"]), true);
        check(&["s"], Some(&["s"]), false);
        check(&["s"], None, false);
        check(&[], Some(&[]), false);
    }
}
