//! The README's first-day quickstarts run as written (issue 35 "Done when"): a new user with a
//! `SKILL.md` and nothing else, `skillforge` on PATH and an empty home directory, runs `doctor`,
//! then the shell blocks under "Your skill, your home", "Evaluate a skill" and "Train a template"
//! verbatim, in that order, in one working directory. Every command must end 0 or 4 ("waiting for
//! you", docs/jobs.md); the eval block adopts its skill and the train block ends with the user's
//! own skill trained into a pending candidate.

use std::path::{Path, PathBuf};
use std::process::Command;

use skillforge_tests::{bin, write};

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap()
}

/// The first ```sh block after the line `heading`.
fn sh_block(doc: &str, heading: &str) -> String {
    let from = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has no heading `{heading}`"));
    let rest = &doc[from..];
    let start = rest
        .find("```sh\n")
        .unwrap_or_else(|| panic!("no ```sh block after `{heading}`"))
        + "```sh\n".len();
    let end = rest[start..].find("\n```").unwrap();
    rest[start..=start + end].to_owned()
}

/// A user's machine: `HOME` (empty but for a git identity), a working directory, and a PATH
/// whose `skillforge` is the built binary.
struct User {
    dir: tempfile::TempDir,
}

impl User {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("home/.gitconfig"),
            "[user]\n\tname = New User\n\temail = new.user@example.com\n",
        );
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let bin_dir = dir.path().join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        std::os::unix::fs::symlink(bin(), bin_dir.join("skillforge")).unwrap();
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Runs `script` with bash in the working directory; each command must end 0 or 4, else
    /// the run stops naming it. Returns (exit code, stdout, stderr).
    fn bash(&self, script: &str) -> (i32, String, String) {
        // A DEBUG trap sees the previous command's status: 0 and 4 go on, anything else stops.
        let checked = format!(
            "trap 'rc=$?; case $rc in 0|4) ;; *) echo \"README command failed (exit $rc) before: $BASH_COMMAND\" >&2; exit 97;; esac' DEBUG\n{script}\ntrue\n"
        );
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(checked)
            .current_dir(self.path("work"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("LANG", "C.UTF-8")
            .output()
            .expect("run bash");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn a_new_user_follows_the_readme_from_init_to_an_adopted_and_a_trained_skill() {
    let doc = readme();
    let user = User::new();
    // The team's own skill: Agent Skills frontmatter and a body, nothing skillforge-specific.
    write(
        &user.path("work/path/to/my-skill/SKILL.md"),
        "---\nname: my-skill\ndescription: Write change summaries a reviewer can act on\n---\n\
         # My skill\n\nName the user-visible effect first, then the files touched.\n",
    );
    let skill_before = std::fs::read(user.path("work/path/to/my-skill/SKILL.md")).unwrap();

    let (code, out, err) = user.bash(&sh_block(&doc, "### Your skill, your home"));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("my-skill") && user.path("home/.skillforge/config.toml").is_file(),
        "{out}\n{err}"
    );
    let (code, out, err) = user.bash("skillforge doctor");
    assert_eq!(code, 0, "doctor on the test machine:\n{out}\n{err}");

    let (code, out, err) = user.bash(&sh_block(&doc, "### Evaluate a skill"));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("ADOPT `tldr`"), "{out}\n{err}");
    assert!(
        user.path("work/adopted/tldr/SKILL.md").is_file(),
        "the adoption is installed where --install-root says:\n{out}\n{err}"
    );

    let (code, out, err) = user.bash(&sh_block(&doc, "### Train a template"));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("candidate   my-skill@v2 (pending"),
        "the user's skill trained into a pending candidate:\n{out}\n{err}"
    );
    assert_eq!(
        std::fs::read(user.path("work/path/to/my-skill/SKILL.md")).unwrap(),
        skill_before,
        "the user's own file is never rewritten"
    );

    // Promoting says how to write the new version back into the user's file; doing so makes the
    // file and the current version one again.
    let (code, out, err) = user.bash("skillforge candidate promote my-skill@v2");
    assert_eq!(code, 0, "{out}\n{err}");
    let file = std::fs::canonicalize(user.path("work/path/to/my-skill/SKILL.md")).unwrap();
    let write_back = format!(
        "skillforge template show my-skill --content > {}",
        file.display()
    );
    assert!(out.contains(&write_back), "{out}\n{err}");
    let (code, out, err) = user.bash(&format!(
        "{write_back}\nskillforge template add path/to/my-skill"
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("my-skill unchanged"), "{out}\n{err}");
}
