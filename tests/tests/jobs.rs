//! `skillforge jobs show|logs|cancel|retry ID` with a prefix of a job id through the built binary:
//! a unique prefix of at least 8 characters stands for its job; an ambiguous one lists the ids
//! that start with it; a shorter one, or one no id starts with, says what to give instead.

use skillforge_tests::Home;

/// How many leading characters `a` and `b` share.
fn common(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

fn refused(home: &Home, args: &[&str]) -> String {
    let out = home.run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

#[test]
fn a_unique_id_prefix_finds_its_job_and_an_ambiguous_one_lists_the_ids() {
    let home = Home::embedded();
    // Three ids made within a few seconds: time-ordered ids, so at least two of them share their
    // first 8 characters (those change once every ~65 s).
    let ids: Vec<String> = (0..3).map(|_| home.submit(&[], &["true"])).collect();
    let (a, b) = [(0, 1), (1, 2), (0, 2)]
        .into_iter()
        .map(|(i, j)| (&ids[i], &ids[j]))
        .find(|(a, b)| common(a, b) >= 8)
        .expect("two ids sharing 8 characters");
    let shared = &a[..common(a, b)];
    let stderr = refused(&home, &["jobs", "show", shared]);
    assert!(
        stderr.contains(&format!("job id prefix `{shared}` is ambiguous"))
            && stderr.contains(a.as_str())
            && stderr.contains(b.as_str()),
        "{stderr}"
    );
    // A prefix one character longer than any other id shares is unique: every command takes it.
    let longest_shared = ids
        .iter()
        .filter(|o| *o != a)
        .map(|o| common(a, o))
        .max()
        .unwrap();
    let prefix = &a[..(longest_shared + 1).max(8)];
    assert_eq!(home.job(prefix)["id"].as_str(), Some(a.as_str()));
    let out = home.run(&["jobs", "logs", prefix]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = home.run(&["jobs", "cancel", prefix]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        home.job(a)["state"],
        "cancelled",
        "the prefix's job was cancelled"
    );
    assert_ne!(home.job(b)["state"], "cancelled", "no other job");
    // Too short, or matching nothing: said, with what to give.
    let stderr = refused(&home, &["jobs", "show", &a[..6]]);
    assert!(stderr.contains("at least 8 characters"), "{stderr}");
    let stderr = refused(&home, &["jobs", "show", "ffffffff"]);
    assert!(
        stderr.contains("no job `ffffffff`") && stderr.contains("jobs list"),
        "{stderr}"
    );
}
