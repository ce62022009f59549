//! Templates, candidate import and candidate review through the built binary (seed "Candidate
//! Package", "Human Feedback Trial Happy Path"; facts §2; S-51, S-86..S-91, S-93).
//!
//! Every import refusal of facts §2 has its own test that also asserts the store is unchanged:
//! `template list`, `template show @latest`, `candidate list` (all `--json`) and the files of the
//! blob store are compared before and after.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use skillforge_tests::Home;
use tempfile::TempDir;

const BODY: &str = "Plan the task.\n";

fn metadata(id: &str, name: &str) -> Value {
    json!({
        "id": id, "name": name, "description": "Plans work", "kind": "agent-template", "version": 1,
        "capabilities": ["ask"], "runtime_compatibility": ["codex"], "tags": ["planning"],
        "inputs": ["task"], "outputs": ["plan"],
    })
}

fn template_text(id: &str, name: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nname: {name}\ndescription: Plans work\nkind: agent-template\nversion: 1\ncapabilities: [ask]\nruntime_compatibility: [codex]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n{body}"
    )
}

fn sha256(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x");
    std::fs::write(&f, bytes).unwrap();
    let out = Command::new("sha256sum")
        .arg(&f)
        .output()
        .expect("sha256sum (coreutils) is installed");
    format!(
        "sha256:{}",
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
    )
}

/// A home with `planner` installed (v1 current) and a work dir for packages and artifacts.
struct Fixture {
    home: Home,
    work: TempDir,
}

impl Fixture {
    fn new() -> Self {
        let f = Self {
            home: Home::embedded(),
            work: tempfile::tempdir().unwrap(),
        };
        let file = f.write(
            "planner.md",
            template_text("planner", "Planner", BODY).as_bytes(),
        );
        let added = f.home.json(&["template", "add", file.to_str().unwrap()]);
        assert_eq!(added["version_id"], "planner@v1");
        f
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.work.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn artifacts(&self) -> PathBuf {
        self.work.path().join("artifacts")
    }

    /// Writes `artifacts/NAME` and returns its manifest entry (id `id`, path `NAME`).
    fn artifact(&self, id: &str, name: &str, bytes: &[u8]) -> Value {
        self.write(&format!("artifacts/{name}"), bytes);
        json!({"id": id, "path": name, "hash": sha256(bytes), "media_type": "text/x-diff", "driver": "local",
               "size_bytes": bytes.len()})
    }

    /// `skillforge import --file candidate.json ARGS...` with `package` written first.
    fn import(&self, package: &Value, extra: &[&str]) -> Output {
        let file = self.write(
            "candidate.json",
            serde_json::to_vec_pretty(package).unwrap().as_slice(),
        );
        let mut args = vec!["import", "--file", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.home.run(&args)
    }

    fn import_ok(&self, package: &Value, extra: &[&str]) -> Value {
        let file = self.write(
            "candidate.json",
            serde_json::to_vec_pretty(package).unwrap().as_slice(),
        );
        let mut args = vec!["import", "--file", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.home.json(&args)
    }

    /// What a refused import must leave unchanged.
    fn snapshot(&self) -> String {
        let mut blobs = Vec::new();
        collect_files(&self.home.path().join("blobs"), &mut blobs);
        blobs.sort();
        format!(
            "templates {}\nlatest {}\ncandidates {}\nblobs {blobs:?}",
            self.home.json(&["template", "list"]),
            self.home.json(&["template", "show", "planner@latest"]),
            self.home
                .json(&["candidate", "list", "--template", "planner"]),
        )
    }

    /// Imports `package`, asserts exit `code`, stderr containing `needle`, and no change to the store.
    fn assert_refused(&self, package: &Value, extra: &[&str], code: i32, needle: &str) {
        let before = self.snapshot();
        let out = self.import(package, extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "import should be refused with {code}; stderr:\n{stderr}"
        );
        assert!(
            stderr.contains(needle),
            "stderr should contain {needle:?}:\n{stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "a refused import prints no version id"
        );
        assert_eq!(self.snapshot(), before, "a refused import writes nothing");
    }
}

fn collect_files(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(&p, out);
        } else {
            out.push(p.display().to_string());
        }
    }
}

/// A valid package for `planner` whose candidate body is `body`.
fn package(body: &str) -> Value {
    json!({
        "kind": "gitmoot-skillopt-candidate-package",
        "contract_version": 1,
        "template_id": "planner",
        "candidate": {"content": template_text("planner", "Planner", body), "metadata": metadata("planner", "Planner")},
        "eval_report": {"promotable": true, "baseline_score": 0.5},
        "summary": {"score": 0.8, "preference_summary": "candidate preferred 3/4"},
    })
}

/// [`package`] with one artifact `d1` (`diff.patch`) that the summary names as its diff.
fn package_with_artifact(f: &Fixture) -> Value {
    let mut p = package("Plan the task in numbered steps.\n");
    p["artifacts"] = json!([f.artifact(
        "d1",
        "diff.patch",
        b"-Plan the task.\n+Plan the task in numbered steps.\n"
    )]);
    p["summary"]["diff_artifact_id"] = json!("d1");
    p
}

fn art_dir(f: &Fixture) -> String {
    f.artifacts().to_str().unwrap().to_owned()
}

// ---------------------------------------------------------------------------------------------
// template add | list | show

#[test]
fn template_add_list_show_and_versions() {
    let f = Fixture::new();
    let list = f.home.json(&["template", "list"]);
    assert_eq!(list[0]["id"], "planner");
    assert_eq!(list[0]["current_version_id"], "planner@v1");
    assert_eq!(list[0]["versions"].as_array().unwrap().len(), 1);

    let shown = f.home.json(&["template", "show", "planner"]);
    assert_eq!(shown["version_id"], "planner@v1");
    assert_eq!(shown["version_state"], "current");
    assert_eq!(shown["metadata"], metadata("planner", "Planner"));
    let content = template_text("planner", "Planner", BODY);
    assert_eq!(shown["content"], content.as_str());
    assert_eq!(shown["content_hash"], sha256(content.as_bytes()).as_str());

    // identical content: no new version
    let file = f.work.path().join("planner.md");
    let again = f.home.json(&["template", "add", file.to_str().unwrap()]);
    assert_eq!(again["created"], false);
    assert_eq!(
        f.home.json(&["template", "list"])[0]["versions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // new content: next version, current; previous superseded
    let file = f.write(
        "planner2.md",
        template_text("planner", "Planner", "Plan carefully.\n").as_bytes(),
    );
    let added = f.home.json(&[
        "template",
        "add",
        file.to_str().unwrap(),
        "--repo",
        "owner/repo",
    ]);
    assert_eq!(added["version_id"], "planner@v2");
    let v2 = f.home.json(&["template", "show", "planner"]);
    assert_eq!(
        (v2["version_id"].as_str(), v2["source_repo"].as_str()),
        (Some("planner@v2"), Some("owner/repo"))
    );
    assert_eq!(
        f.home.json(&["template", "show", "planner@v1"])["version_state"],
        "superseded"
    );

    // human output names the version, as an aligned table under a header
    let out = f.home.run(&["template", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("planner@v2"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("TEMPLATE"), "{text}");
    assert_eq!(
        lines[0].find("CURRENT"),
        lines[1].find("planner@"),
        "aligned:\n{text}"
    );
}

// Issue 38 item 7: a template may declare OpenCode, a runtime skillforge runs.
#[test]
fn template_add_accepts_opencode_in_runtime_compatibility() {
    let f = Fixture::new();
    let text = template_text("coder", "Coder", BODY).replace(
        "runtime_compatibility: [codex]",
        "runtime_compatibility: [opencode, claude]",
    );
    let file = f.write("coder.md", text.as_bytes());
    let added = f.home.json(&["template", "add", file.to_str().unwrap()]);
    assert_eq!(added["version_id"], "coder@v1", "{added}");
    let shown = f.home.json(&["template", "show", "coder"]);
    assert_eq!(
        shown["metadata"]["runtime_compatibility"],
        json!(["opencode", "claude"])
    );
}

#[test]
fn template_add_refuses_invalid_frontmatter_and_show_refuses_unknown_references() {
    let f = Fixture::new();
    let bad = f.write("bad.md", template_text("Bad_Id", "Bad", BODY).as_bytes());
    let out = f.home.run(&["template", "add", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.md"),
        "the error names the file"
    );
    let no_fm = f.write("nofm.md", b"just text\n");
    assert_eq!(
        f.home
            .run(&["template", "add", no_fm.to_str().unwrap()])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        f.home.json(&["template", "list"]).as_array().unwrap().len(),
        1
    );

    for reference in ["ghost", "planner@v9", "planner@3", "planner@vx"] {
        let out = f.home.run(&["template", "show", reference]);
        assert_eq!(out.status.code(), Some(2), "template show {reference}");
    }
}

// ---------------------------------------------------------------------------------------------
// valid import, promote, reject

#[test]
fn s51_valid_import_is_pending_until_promoted() {
    let f = Fixture::new();
    let before = f.snapshot();
    let imported = f.import_ok(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    assert_ne!(
        f.snapshot(),
        before,
        "the snapshot the refusal tests compare sees an import"
    );
    assert_eq!(imported["version_id"], "planner@v2");
    assert_eq!(imported["state"], "pending");
    assert_eq!(imported["base_version_id"], "planner@v1");

    // S-51: importing never promotes
    assert_eq!(
        f.home.json(&["template", "show", "planner"])["version_id"],
        "planner@v1"
    );
    let list = f.home.json(&["candidate", "list", "--template", "planner"]);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["state"], "pending");
    assert_eq!(list[0]["source_repo"], "gitmoot-skillopt");
    assert_eq!(list[0]["source_ref"], "candidate");

    // verified blob in the content-addressed store, 0600
    let hash = imported["artifacts"][0]["hash"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let blob = f
        .home
        .path()
        .join("blobs/sha256")
        .join(&hash[..2])
        .join(&hash);
    assert_eq!(
        std::fs::read(&blob).unwrap(),
        b"-Plan the task.\n+Plan the task in numbered steps.\n"
    );
    assert_eq!(
        std::fs::metadata(&blob).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // show: state, source, hash, base, score, preference summary, eval report, diff
    let shown = f.home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(shown["base_version_id"], "planner@v1");
    assert_eq!(shown["score"], 0.8);
    assert_eq!(shown["preference_summary"], "candidate preferred 3/4");
    assert_eq!(
        shown["eval_report"],
        json!({"promotable": true, "baseline_score": 0.5})
    );
    assert_eq!(shown["diff_artifact_id"], "d1");
    let diff = shown["diff"].as_str().unwrap();
    assert!(
        diff.contains("--- a/planner@v1\n+++ b/planner@v2\n"),
        "{diff}"
    );
    assert!(
        diff.contains("\n-Plan the task.\n+Plan the task in numbered steps.\n"),
        "{diff}"
    );
    let human = String::from_utf8_lossy(&f.home.run(&["candidate", "show", "planner@v2"]).stdout)
        .into_owned();
    for needle in [
        "pending",
        "candidate package",
        "planner@v1",
        "0.8",
        "candidate preferred 3/4",
        "+Plan the task in numbered steps.",
    ] {
        assert!(
            human.contains(needle),
            "show should print {needle:?}:\n{human}"
        );
    }

    let promoted = f.home.json(&["candidate", "promote", "planner@v2"]);
    assert_eq!(promoted["superseded"], "planner@v1");
    let current = f.home.json(&["template", "show", "planner"]);
    assert_eq!(
        (
            current["version_id"].as_str(),
            current["version_state"].as_str()
        ),
        (Some("planner@v2"), Some("current"))
    );
    assert_eq!(
        f.home.json(&["template", "show", "planner@v1"])["version_state"],
        "superseded"
    );
    assert_eq!(
        f.home.json(&["template", "list"])[0]["current_version_id"],
        "planner@v2"
    );

    // a decided candidate cannot be promoted or rejected again
    assert_eq!(
        f.home
            .run(&["candidate", "promote", "planner@v2"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        f.home
            .run(&["candidate", "reject", "planner@v2", "--reason", "late"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn s93_reject_records_reason_and_latest_skips_rejected() {
    let f = Fixture::new();
    f.import_ok(&package("Plan in steps.\n"), &[]);
    f.import_ok(&package("Plan broadly.\n"), &[]);
    assert_eq!(
        f.home.json(&["template", "show", "planner@latest"])["version_id"],
        "planner@v3"
    );

    let out = f
        .home
        .run(&["candidate", "reject", "planner@v3", "--reason", "  "]);
    assert_eq!(out.status.code(), Some(2), "a reject needs a reason");

    let rejected = f.home.json(&[
        "candidate",
        "reject",
        "planner@v3",
        "--reason",
        "Too broad for the current workflow",
    ]);
    assert_eq!(rejected["state"], "rejected");
    let shown = f.home.json(&["candidate", "show", "planner@v3"]);
    assert_eq!(shown["state"], "rejected");
    assert_eq!(shown["review_state"], "rejected");
    assert_eq!(
        shown["decision_reason"],
        "Too broad for the current workflow"
    );
    assert!(shown["decided_at"].is_string());

    assert_eq!(
        f.home.json(&["template", "show", "planner@latest"])["version_id"],
        "planner@v2",
        "@latest skips v3"
    );
    assert_eq!(
        f.home.json(&["template", "show", "planner"])["version_id"],
        "planner@v1",
        "reject changes no current"
    );
    assert_eq!(
        f.home
            .run(&["candidate", "promote", "planner@v3"])
            .status
            .code(),
        Some(2),
        "rejected stays rejected"
    );
    assert_eq!(
        f.home
            .run(&["candidate", "show", "planner@v1"])
            .status
            .code(),
        Some(2),
        "v1 is not a candidate"
    );
}

#[test]
fn candidate_list_refuses_unknown_template() {
    let f = Fixture::new();
    let out = f.home.run(&["candidate", "list", "--template", "ghost"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ghost"));
}

// ---------------------------------------------------------------------------------------------
// no-candidate gate (S-88, S-89): exit 1, nothing written

#[test]
fn s88_summary_metadata_not_promotable_is_no_candidate() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["summary"]["metadata"] = json!({"promotable": false, "no_candidate_reason": "no gain"});
    // The two fields disagree: the refusal names the one that said no and what the other said.
    f.assert_refused(&p, &[], 1, "optimizer produced no candidate: no gain (from summary.metadata; eval_report says promotable: true)");
    p.as_object_mut().unwrap().remove("eval_report");
    f.assert_refused(
        &p,
        &[],
        1,
        "optimizer produced no candidate: no gain (from summary.metadata)",
    );
}

#[test]
fn s88_eval_report_not_promotable_is_no_candidate() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["eval_report"] = json!({"promotable": false, "no_candidate_reason": "holdout regressed"});
    f.assert_refused(
        &p,
        &[],
        1,
        "optimizer produced no candidate: holdout regressed (from eval_report)",
    );
}

#[test]
fn s88_not_promotable_without_reason_still_imports() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["summary"]["metadata"] = json!({"promotable": false});
    assert_eq!(
        f.import_ok(&p, &[])["state"],
        "pending",
        "the gate needs a no_candidate_reason"
    );
}

#[test]
fn s89_unchanged_content_is_no_candidate() {
    let f = Fixture::new();
    f.assert_refused(
        &package(BODY),
        &[],
        1,
        "optimizer produced no candidate: candidate content is unchanged",
    );
}

// ---------------------------------------------------------------------------------------------
// header and template checks (S-86, S-87): exit 2, nothing written

#[test]
fn s86_wrong_kind_is_refused() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["kind"] = json!("gitmoot-skillopt-training-package");
    f.assert_refused(&p, &[], 2, "candidate package kind must be");
}

#[test]
fn s86_contract_version_2_is_refused() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["contract_version"] = json!(2);
    f.assert_refused(&p, &[], 2, "contract_version must be 1");
}

#[test]
fn s86_unknown_template_is_refused() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["template_id"] = json!("ghost");
    f.assert_refused(&p, &[], 2, "agent template ghost is not installed");
}

#[test]
fn s86_invalid_template_id_is_refused() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["template_id"] = json!("Bad_Id");
    f.assert_refused(&p, &[], 2, "invalid agent template id");
}

#[test]
fn candidate_content_without_frontmatter_is_refused() {
    let f = Fixture::new();
    let mut p = package("x");
    p["candidate"]["content"] = json!("no frontmatter here\n");
    f.assert_refused(
        &p,
        &[],
        2,
        "validate candidate template: template must start with YAML frontmatter",
    );
}

#[test]
fn candidate_content_empty_is_refused() {
    let f = Fixture::new();
    let mut p = package("x");
    p["candidate"]["content"] = json!("");
    f.assert_refused(
        &p,
        &[],
        2,
        "validate candidate template: template content is empty",
    );
}

#[test]
fn candidate_content_with_empty_body_is_refused() {
    let f = Fixture::new();
    f.assert_refused(
        &package("\n"),
        &[],
        2,
        "validate candidate template: template body is empty",
    );
}

#[test]
fn candidate_frontmatter_with_invalid_metadata_is_refused() {
    let f = Fixture::new();
    let mut p = package("x");
    let content = template_text("planner", "Planner", "Plan.\n")
        .replace("capabilities: [ask]", "capabilities: [fly]");
    p["candidate"]["content"] = json!(content);
    f.assert_refused(&p, &[], 2, "validate candidate template:");
}

#[test]
fn candidate_frontmatter_id_must_match_template_id() {
    let f = Fixture::new();
    let mut p = package("x");
    p["candidate"]["content"] = json!(template_text("other", "Planner", "Plan.\n"));
    f.assert_refused(
        &p,
        &[],
        2,
        "candidate template id \"other\" does not match package template_id \"planner\"",
    );
}

#[test]
fn s87_metadata_must_match_frontmatter() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["candidate"]["metadata"] = metadata("planner", "planner2");
    f.assert_refused(
        &p,
        &[],
        2,
        "candidate metadata does not match candidate template frontmatter",
    );
}

#[test]
fn base_version_not_found_is_refused() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["base_version_id"] = json!("planner@v7");
    f.assert_refused(&p, &[], 2, "load base version \"planner@v7\"");
}

#[test]
fn base_version_of_another_template_is_refused() {
    let f = Fixture::new();
    let other = f.write(
        "reviewer.md",
        template_text("reviewer", "Reviewer", BODY).as_bytes(),
    );
    f.home.json(&["template", "add", other.to_str().unwrap()]);
    let mut p = package("Plan in steps.\n");
    p["base_version_id"] = json!("reviewer@v1");
    f.assert_refused(
        &p,
        &[],
        2,
        "base version \"reviewer@v1\" belongs to template \"reviewer\", want \"planner\"",
    );
}

#[test]
fn pinned_base_version_is_recorded() {
    let f = Fixture::new();
    let file = f.write(
        "planner2.md",
        template_text("planner", "Planner", "Plan carefully.\n").as_bytes(),
    );
    f.home.json(&["template", "add", file.to_str().unwrap()]);
    let mut p = package("Plan in steps.\n");
    p["base_version_id"] = json!("planner@v1");
    let imported = f.import_ok(&p, &[]);
    assert_eq!(
        imported["base_version_id"], "planner@v1",
        "the pinned base, not the current v2"
    );
}

#[test]
fn malformed_package_json_is_refused() {
    let f = Fixture::new();
    let file = f.write("candidate.json", b"{\"kind\": ");
    let before = f.snapshot();
    let out = f.home.run(&["import", "--file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("parse candidate package"));
    assert_eq!(f.snapshot(), before);
}

// ---------------------------------------------------------------------------------------------
// artifacts (S-90, S-91): exit 2, nothing written, no blob

#[test]
fn s90_artifacts_require_artifact_dir() {
    let f = Fixture::new();
    f.assert_refused(
        &package_with_artifact(&f),
        &[],
        2,
        "candidate artifacts require --artifact-dir",
    );
}

#[test]
fn s91_absolute_path_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["path"] = json!("/etc/passwd");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "\"/etc/passwd\" must be a relative path inside artifact-dir",
    );
}

#[test]
fn s91_path_traversal_is_refused() {
    let f = Fixture::new();
    f.write("outside.patch", b"secret");
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["path"] = json!("../outside.patch");
    p["artifacts"][0]["hash"] = json!(sha256(b"secret"));
    p["artifacts"][0]["size_bytes"] = json!(6);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "must be a relative path inside artifact-dir",
    );
}

#[test]
fn s91_symlink_resolving_outside_is_refused() {
    let f = Fixture::new();
    let outside = f.write("outside.patch", b"secret");
    let mut p = package_with_artifact(&f);
    std::os::unix::fs::symlink(&outside, f.artifacts().join("link.patch")).unwrap();
    p["artifacts"][0]["path"] = json!("link.patch");
    p["artifacts"][0]["hash"] = json!(sha256(b"secret"));
    p["artifacts"][0]["size_bytes"] = json!(6);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "\"link.patch\" resolves outside artifact-dir",
    );
}

#[test]
fn s91_missing_file_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["path"] = json!("missing.md");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\": read \"missing.md\"",
    );
}

#[test]
fn s91_hash_mismatch_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["hash"] = json!(sha256(b"something else"));
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" hash is sha256:",
    );
}

#[test]
fn size_mismatch_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["size_bytes"] = json!(3);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" size_bytes is 3, want",
    );
}

#[test]
fn s91_duplicate_artifact_id_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    let second = f.artifact("d1", "other.patch", b"other");
    p["artifacts"].as_array_mut().unwrap().push(second);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" is duplicated",
    );
}

#[test]
fn s91_invalid_diff_artifact_id_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["summary"]["diff_artifact_id"] = json!("nope");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "load summary diff artifact \"nope\"",
    );
}

#[test]
fn diff_artifact_id_without_artifacts_must_exist_in_store() {
    let f = Fixture::new();
    let mut p = package("Plan in steps.\n");
    p["summary"]["diff_artifact_id"] = json!("nope");
    f.assert_refused(&p, &[], 2, "load summary diff artifact \"nope\"");
}

#[test]
fn artifact_id_required_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["id"] = json!("  ");
    p["summary"]["diff_artifact_id"] = json!("");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact 1 id is required",
    );
}

#[test]
fn artifact_media_type_required_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["media_type"] = json!("");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" media_type is required",
    );
}

#[test]
fn artifact_driver_required_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["driver"] = json!("");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" driver is required",
    );
}

#[test]
fn artifact_negative_size_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["size_bytes"] = json!(-1);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" size_bytes cannot be negative",
    );
}

#[test]
fn artifact_malformed_hash_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["hash"] = json!("sha256:abc");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "artifact hash must be 64 hex characters",
    );
}

#[test]
fn artifact_path_required_is_refused() {
    let f = Fixture::new();
    let mut p = package_with_artifact(&f);
    p["artifacts"][0]["path"] = json!("");
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" path is required",
    );
}

#[test]
fn artifact_id_already_in_store_is_refused() {
    let f = Fixture::new();
    f.import_ok(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    let mut p = package("Plan in two steps.\n");
    p["artifacts"] = json!([f.artifact("d1", "again.patch", b"again")]);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" already exists",
    );
}

#[test]
fn reimporting_the_same_package_reports_the_earlier_version() {
    let f = Fixture::new();
    let first = f.import_ok(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    assert_eq!(
        (first["version_id"].as_str(), first["created"].as_bool()),
        (Some("planner@v2"), Some(true))
    );
    let before = f.snapshot();
    let again = f.import_ok(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    assert_eq!(
        (again["version_id"].as_str(), again["created"].as_bool()),
        (Some("planner@v2"), Some(false)),
        "{again}"
    );
    let out = f.import(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "planner@v2");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already imported as planner@v2"));
    assert_eq!(f.snapshot(), before, "a re-import writes nothing");
    assert_eq!(
        f.home.json(&["template", "show", "planner@latest"])["version_id"],
        "planner@v2"
    );

    // Another package with the same artifact and content hash but new content is someone else's id.
    let mut other = package("Plan the task in three steps.\n");
    other["artifacts"] = package_with_artifact(&f)["artifacts"].clone();
    f.assert_refused(
        &other,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "candidate artifact \"d1\" already exists and belongs to another candidate",
    );
}

#[test]
fn artifact_id_reused_for_other_content_names_both_hashes() {
    let f = Fixture::new();
    f.import_ok(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    let mut p = package_with_artifact(&f);
    p["artifacts"] = json!([f.artifact("d1", "again.patch", b"again")]);
    f.assert_refused(
        &p,
        &["--artifact-dir", &art_dir(&f)],
        2,
        "already exists with hash sha256:",
    );
}

#[test]
fn diff_artifact_id_may_name_a_stored_artifact() {
    let f = Fixture::new();
    f.import_ok(
        &package_with_artifact(&f),
        &["--artifact-dir", &art_dir(&f)],
    );
    let mut p = package("Plan in two steps.\n");
    p["summary"]["diff_artifact_id"] = json!("d1");
    assert_eq!(f.import_ok(&p, &[])["version_id"], "planner@v3");
}

// ---------------------------------------------------------------------------------------------
// S-92: candidate show never exposes the hidden A/B mapping of an active blind review

#[test]
fn s92_candidate_show_hides_active_blind_assignments() {
    let f = Fixture::new();
    let baseline = f.write("baseline.md", b"baseline output\n");
    let candidate = f.write("candidate.md", b"candidate output\n");
    f.home.json(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "owner/repo",
        "--run",
        "run-1",
    ]);
    f.home.json(&[
        "review",
        "item",
        "add",
        "--run",
        "run-1",
        "--item",
        "item-001",
        "--title",
        "README task",
        "--baseline",
        baseline.to_str().unwrap(),
        "--candidate",
        candidate.to_str().unwrap(),
    ]);
    let packet = f.work.path().join("packet");
    let out = f.home.run(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        "run-1",
        "--output",
        packet.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let assignments: Value = serde_json::from_slice(
        &std::fs::read(packet.join(".assignments.json")).expect("hidden assignments"),
    )
    .unwrap();
    let mut hidden: Vec<String> = Vec::new();
    for item in assignments["items"].as_array().expect("assignment items") {
        for (key, value) in item.as_object().unwrap() {
            if key != "item_id" {
                hidden.push(value.as_str().unwrap().to_owned());
            }
        }
    }
    assert!(!hidden.is_empty(), "the packet hides a mapping");

    f.import_ok(&package("Plan in steps.\n"), &[]);
    let human = String::from_utf8_lossy(&f.home.run(&["candidate", "show", "planner@v2"]).stdout)
        .into_owned();
    let json = f
        .home
        .json(&["candidate", "show", "planner@v2"])
        .to_string();
    let list = f
        .home
        .json(&["candidate", "list", "--template", "planner"])
        .to_string();
    for output in [&human, &json, &list] {
        assert!(!output.contains("assignments"), "{output}");
        for value in &hidden {
            assert!(
                !output.contains(value.as_str()),
                "candidate output reveals `{value}`:\n{output}"
            );
        }
    }
}
