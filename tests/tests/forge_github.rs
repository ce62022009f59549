//! The GitHub forge (octocrab) against the fake GitHub API: rate limits, pagination, a deleted
//! comment, an edited comment, conditional pull listing, statuses and check runs.

use serde_json::json;
use skillforge_forge::github::{GitHub, GitHubConfig};
use skillforge_forge::{Conditional, Forge, RepoRef};
use skillforge_tests::fake_github::FakeGitHub;

/// octocrab's client spawns its buffer task, so it is built inside the test's runtime.
fn client(fake: &FakeGitHub, rt: &tokio::runtime::Runtime) -> GitHub {
    let _guard = rt.enter();
    let config = GitHubConfig {
        api_url: fake.url.clone(),
        token: Some(fake.token().to_owned()),
        ..GitHubConfig::resolve(None, None)
    };
    GitHub::new(&config).unwrap()
}

fn repo() -> RepoRef {
    RepoRef::parse("acme/reviews").unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn secondary_rate_limit_with_retry_after_then_success() {
    let fake = FakeGitHub::start("tok-1");
    fake.state().rate_limit_next = 1;
    let rt = rt();
    let issue = rt
        .block_on(client(&fake, &rt).create_issue(&repo(), "Review r1", "body"))
        .unwrap();
    assert_eq!(issue.number, 1);
    let s = fake.state();
    // One refused POST, one accepted: the issue exists once.
    assert_eq!(s.count("POST", "/repos/acme/reviews/issues"), 2);
    assert_eq!(s.issues["acme/reviews"].len(), 1);
    assert!(
        s.requests.iter().all(|(_, _, authorized)| *authorized),
        "every request carries the token"
    );
}

#[test]
fn comments_follow_link_pagination() {
    let fake = FakeGitHub::start("tok");
    let number = {
        let mut s = fake.state();
        let n = s.add_issue("acme/reviews", "r", "b");
        for i in 0..5 {
            s.add_comment("acme/reviews", n, "ann", &format!("comment {i}"));
        }
        n
    };
    let rt = rt();
    let comments = rt
        .block_on(client(&fake, &rt).list_comments(&repo(), number))
        .unwrap();
    assert_eq!(
        comments.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(),
        [
            "comment 0",
            "comment 1",
            "comment 2",
            "comment 3",
            "comment 4"
        ]
    );
    assert_eq!(comments[0].user.as_ref().unwrap().login, "ann");
    assert!(
        comments[0]
            .html_url
            .starts_with("https://github.com/acme/reviews/issues/1#issuecomment-")
    );
    // Page size 2 on the fake: three pages.
    assert_eq!(
        fake.state().count(
            "GET",
            &format!("/repos/acme/reviews/issues/{number}/comments")
        ),
        3
    );
}

#[test]
fn deleted_comment_is_none_and_edited_comment_shows_new_body() {
    let fake = FakeGitHub::start("tok");
    let (gone, edited) = {
        let mut s = fake.state();
        let n = s.add_issue("acme/reviews", "r", "b");
        let gone = s.add_comment("acme/reviews", n, "ann", "item-001: a");
        let edited = s.add_comment("acme/reviews", n, "bob", "item-001: a");
        s.delete_comment(gone);
        s.edit_comment(edited, "item-001: b - changed my mind");
        (gone, edited)
    };
    let rt = rt();
    let gh = client(&fake, &rt);
    assert_eq!(rt.block_on(gh.get_comment(&repo(), gone)).unwrap(), None);
    let c = rt
        .block_on(gh.get_comment(&repo(), edited))
        .unwrap()
        .unwrap();
    assert_eq!(c.body, "item-001: b - changed my mind");
    assert!(c.updated_at > c.created_at);
    // A 404 of a whole issue is an error naming the path.
    let err = rt.block_on(gh.list_comments(&repo(), 99)).unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");
    assert!(
        err.to_string()
            .contains("/repos/acme/reviews/issues/99/comments")
    );
}

#[test]
fn closed_pulls_are_conditional_on_etag_and_ci_is_read_at_head() {
    let fake = FakeGitHub::start("tok");
    {
        let mut s = fake.state();
        s.pulls.entry("acme/reviews".into()).or_default().insert(
            12,
            json!({"number": 12, "state": "closed", "html_url": "https://github.com/acme/reviews/pull/12", "body": null,
                   "merged_at": "2026-12-01T10:00:00Z", "merge_commit_sha": "m12", "head": {"sha": "h12", "ref": "feature"},
                   "updated_at": "2026-12-01T10:00:00Z"}),
        );
        s.statuses.insert(
            "acme/reviews@h12".into(),
            vec![json!({"context": "ci/test", "state": "success", "description": null})],
        );
        s.check_runs.insert(
            "acme/reviews@h12".into(),
            vec![json!({"name": "build", "status": "completed", "conclusion": "success"})],
        );
    }
    let rt = rt();
    let gh = client(&fake, &rt);
    let Conditional::Modified { value, etag } =
        rt.block_on(gh.list_recent_pulls(&repo(), None)).unwrap()
    else {
        panic!("first poll is modified")
    };
    assert_eq!(value[0].merge_commit_sha.as_deref(), Some("m12"));
    assert_eq!(value[0].body, "");
    let etag = etag.expect("an ETag");
    assert_eq!(
        rt.block_on(gh.list_recent_pulls(&repo(), Some(&etag)))
            .unwrap(),
        Conditional::NotModified
    );
    assert_eq!(
        rt.block_on(gh.commit_statuses(&repo(), "h12")).unwrap()[0].state,
        "success"
    );
    assert_eq!(
        rt.block_on(gh.check_runs(&repo(), "h12")).unwrap()[0]
            .conclusion
            .as_deref(),
        Some("success")
    );
}
