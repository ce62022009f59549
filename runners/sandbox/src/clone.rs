//! The git side of a sandbox: open the live repository (never searching parent directories),
//! resolve the rev to a commit, and make an independent local clone checked out at that commit.
//!
//! The clone is what `git clone --local` gives (seed: SkillOpt, "Deterministic hard-verifier
//! tier"; S-36): the live repository's objects, and a git directory of its own (config, refs,
//! HEAD, index; no `alternates` pointing back at the live repository, no remote naming it).
//! It is made in one of two ways:
//!
//! * **Written directly** ([`clone_direct`], the usual way): the git directory is written in
//!   one pass — `HEAD` detached at the commit, one `config`, one `packed-refs` holding the live
//!   repository's `HEAD` branch and its tags (the refs a `git clone` keeps once its remote is
//!   deleted) — the live repository's pack files are hard-linked (copied across filesystems)
//!   as git does, and its *loose* objects are written into one new pack of the clone's own
//!   (libgit2's pack builder) instead of being hard-linked one by one. So no loose object file
//!   is shared with the live repository: a command that rewrites an object file of its clone
//!   cannot reach the live one, which a hard link would let it do. A 50-file repository of loose
//!   objects gives a git directory of ~10 entries instead of ~170 (git's template, ~110 object
//!   files and directories, reflogs, `FETCH_HEAD`), which is most of the time a verify spends
//!   on the clone, and on its removal (bench/README.md, "The CLI's wait").
//! * **By libgit2's local clone** (`CloneLocal::Local`, objects hard-linked, then the remote
//!   deleted), when the live repository has something the direct way does not reproduce: an
//!   `alternates` file, a `shallow` file, a repository format above 0 (extensions), more than
//!   [`MAX_LOOSE_TO_PACK`] loose objects, or when the direct way fails for any reason (e.g. the
//!   live repository is repacked meanwhile): the partial clone is removed and made again this way.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use git2::build::{CheckoutBuilder, CloneLocal, RepoBuilder};
use git2::{Oid, Repository, RepositoryOpenFlags};

use crate::error::{SandboxError, worker_host};

/// Above this many loose objects in the live repository the clone hard-links them as `git
/// clone --local` does rather than packing them (packing costs CPU per object; linking a file
/// per object costs file-system work per object; past this the pack's delta search dominates).
pub(crate) const MAX_LOOSE_TO_PACK: usize = 20_000;

/// The live repository, opened and with the rev resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedRev {
    /// The git directory holding the objects (the common dir for a linked worktree): the
    /// clone's source.
    pub(crate) clone_source: PathBuf,
    /// The commit, 40 hex digits.
    pub(crate) commit: String,
}

/// How a clone was made (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CloneWay {
    /// Git directory written directly, loose objects packed into the clone's own pack.
    Direct,
    /// libgit2's local clone, with the reason the direct way was not taken.
    Libgit2 { reason: String },
}

/// Opens `repo` (a work-tree root, a `.git` dir or a bare repo; parents are not searched) and
/// resolves `rev` to a commit.
pub(crate) fn resolve_rev(repo: &Path, rev: &str) -> Result<ResolvedRev, SandboxError> {
    if !repo.exists() {
        return Err(SandboxError::RepoMissing {
            path: repo.to_owned(),
            host: worker_host(),
        });
    }
    let live = open_live(repo)?;
    let commit = live
        .revparse_single(rev)
        .and_then(|object| object.peel_to_commit())
        .map_err(|e| SandboxError::RevNotFound {
            rev: rev.to_owned(),
            path: repo.to_owned(),
            message: e.message().to_owned(),
        })?;
    Ok(ResolvedRev {
        clone_source: live.commondir().to_owned(),
        commit: commit.id().to_string(),
    })
}

fn open_live(repo: &Path) -> Result<Repository, SandboxError> {
    Repository::open_ext(
        repo,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&str>(),
    )
    .map_err(|e| SandboxError::NotARepo {
        path: repo.to_owned(),
        host: worker_host(),
        message: e.message().to_owned(),
    })
}

/// Clones `resolved.clone_source` into `dest` (which must not exist) and checks out
/// `resolved.commit` with a detached HEAD, the direct way when it can (module docs); `repo`
/// only names the repository in errors. Returns the way taken.
///
/// # Errors
/// [`SandboxError::Provision`] naming `dest` and `repo` when libgit2's clone or checkout fails
/// (a failure of the direct way is not an error: it falls back).
pub(crate) fn clone_at(
    repo: &Path,
    resolved: &ResolvedRev,
    dest: &Path,
) -> Result<CloneWay, SandboxError> {
    clone_with_limit(repo, resolved, dest, MAX_LOOSE_TO_PACK)
}

/// [`clone_at`] with `max_loose` in place of [`MAX_LOOSE_TO_PACK`].
fn clone_with_limit(
    repo: &Path,
    resolved: &ResolvedRev,
    dest: &Path,
    max_loose: usize,
) -> Result<CloneWay, SandboxError> {
    let reason = match clone_direct(resolved, dest, max_loose) {
        Ok(()) => return Ok(CloneWay::Direct),
        Err(Fallback::Unsupported(reason)) => reason,
        Err(Fallback::Failed(reason)) => {
            tracing::debug!(runner = "sandbox", %reason, dest = %dest.display(), "direct clone failed; cloning with libgit2");
            if let Err(error) = fs::remove_dir_all(dest)
                && error.kind() != io::ErrorKind::NotFound
            {
                return Err(SandboxError::Provision {
                    path: dest.to_owned(),
                    repo: repo.to_owned(),
                    message: format!("remove the failed direct clone ({reason}): {error}"),
                });
            }
            reason
        }
    };
    clone_libgit2(repo, resolved, dest)?;
    Ok(CloneWay::Libgit2 { reason })
}

/// Why the direct way was not taken: the live repository has something it does not reproduce
/// (nothing was written), or it failed part way (`dest` may hold a partial clone).
enum Fallback {
    Unsupported(String),
    Failed(String),
}

fn failed(what: &str) -> impl Fn(String) -> Fallback + '_ {
    move |message| Fallback::Failed(format!("{what}: {message}"))
}

/// The direct way (module docs).
fn clone_direct(resolved: &ResolvedRev, dest: &Path, max_loose: usize) -> Result<(), Fallback> {
    let source = &resolved.clone_source;
    let objects = source.join("objects");
    for (path, what) in [
        (objects.join("info/alternates"), "an alternates file"),
        (source.join("shallow"), "a shallow file"),
    ] {
        if path.exists() {
            return Err(Fallback::Unsupported(format!("the repository has {what}")));
        }
    }
    let live = Repository::open_ext(
        source,
        RepositoryOpenFlags::NO_SEARCH | RepositoryOpenFlags::BARE,
        std::iter::empty::<&str>(),
    )
    .map_err(|e| Fallback::Unsupported(format!("open {}: {}", source.display(), e.message())))?;
    let format = git2::Config::open(&source.join("config"))
        .and_then(|config| config.get_i32("core.repositoryformatversion"))
        .unwrap_or(0);
    if format != 0 {
        return Err(Fallback::Unsupported(format!(
            "repository format version {format}"
        )));
    }
    let loose = loose_objects(&objects)
        .map_err(|e| Fallback::Unsupported(format!("list loose objects: {e}")))?;
    if loose.len() > max_loose {
        return Err(Fallback::Unsupported(format!(
            "{} loose objects (more than {max_loose} are hard-linked, not packed)",
            loose.len()
        )));
    }
    let refs = kept_refs(&live)
        .map_err(|e| Fallback::Unsupported(format!("read refs: {}", e.message())))?;

    let git_dir = dest.join(".git");
    let pack_dir = git_dir.join("objects/pack");
    fs::create_dir_all(&pack_dir).map_err(|e| failed("create the git directory")(e.to_string()))?;
    for dir in ["refs/heads", "refs/tags"] {
        fs::create_dir_all(git_dir.join(dir)).map_err(|e| failed("create refs")(e.to_string()))?;
    }
    link_packs(&objects.join("pack"), &pack_dir)
        .map_err(|e| failed("link packs")(e.to_string()))?;
    if !loose.is_empty() {
        let mut builder = live
            .packbuilder()
            .map_err(|e| failed("pack builder")(e.message().to_owned()))?;
        for oid in &loose {
            builder
                .insert_object(*oid, None)
                .map_err(|e| failed("pack loose objects")(format!("{oid}: {}", e.message())))?;
        }
        builder
            .write(&pack_dir, 0)
            .map_err(|e| failed("write the pack")(e.message().to_owned()))?;
    }
    let mut packed = String::from("# pack-refs with: sorted \n");
    for (name, oid) in &refs {
        packed.push_str(&format!("{oid} {name}\n"));
    }
    let config = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
    for (file, text) in [
        ("packed-refs", packed.as_str()),
        ("config", config),
        ("HEAD", &format!("{}\n", resolved.commit)),
    ] {
        fs::write(git_dir.join(file), text).map_err(|e| failed(file)(e.to_string()))?;
    }
    let clone = Repository::open_ext(
        dest,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&str>(),
    )
    .map_err(|e| failed("open the clone")(e.message().to_owned()))?;
    let oid =
        Oid::from_str(&resolved.commit).map_err(|e| failed("commit id")(e.message().to_owned()))?;
    let commit = clone
        .find_commit(oid)
        .map_err(|e| failed("find the commit in the clone")(e.message().to_owned()))?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force();
    clone
        .checkout_tree(commit.as_object(), Some(&mut checkout))
        .map_err(|e| failed("check out")(e.message().to_owned()))?;
    Ok(())
}

/// The live repository's loose objects (`objects/xx/<38 hex>`), sorted.
fn loose_objects(objects: &Path) -> io::Result<Vec<Oid>> {
    let mut found = Vec::new();
    let entries = match fs::read_dir(objects) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(prefix) = name
            .to_str()
            .filter(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        else {
            continue;
        };
        for object in fs::read_dir(entry.path())? {
            let object = object?;
            let rest = object.file_name();
            let Some(rest) = rest
                .to_str()
                .filter(|n| n.len() == 38 && n.bytes().all(|b| b.is_ascii_hexdigit()))
            else {
                continue; // a temporary file of a writer
            };
            if let Ok(oid) = Oid::from_str(&format!("{prefix}{rest}")) {
                found.push(oid);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The refs a `git clone` of the live repository keeps once its remote is deleted: the branch
/// the live `HEAD` names (when it exists) and every tag, as `(name, target)` sorted by name.
fn kept_refs(live: &Repository) -> Result<Vec<(String, Oid)>, git2::Error> {
    let mut refs = Vec::new();
    if let Ok(head) = live.find_reference("HEAD")
        && let Ok(Some(branch)) = head.symbolic_target()
        && branch.starts_with("refs/heads/")
        && let Ok(Some(oid)) = live.find_reference(branch).map(|r| r.target())
    {
        refs.push((branch.to_owned(), oid));
    }
    for reference in live.references_glob("refs/tags/*")? {
        let reference = reference?;
        if let (Ok(name), Some(oid)) = (reference.name(), reference.target()) {
            refs.push((name.to_owned(), oid));
        }
    }
    refs.sort();
    refs.dedup();
    Ok(refs)
}

/// Hard-links the live repository's pack files (`pack-*` and the multi-pack index) into the
/// clone's pack directory, copying where a link is refused (another filesystem).
fn link_packs(from: &Path, to: &Path) -> io::Result<()> {
    let entries = match fs::read_dir(from) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let wanted = name
            .to_str()
            .is_some_and(|n| n.starts_with("pack-") || n.starts_with("multi-pack-index"));
        if !wanted || !entry.file_type()?.is_file() {
            continue;
        }
        let target = to.join(&name);
        if fs::hard_link(entry.path(), &target).is_err() {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// libgit2's local clone (module docs), then the commit checked out with a detached HEAD and
/// the `origin` remote deleted.
fn clone_libgit2(repo: &Path, resolved: &ResolvedRev, dest: &Path) -> Result<(), SandboxError> {
    let provision = |message: String| SandboxError::Provision {
        path: dest.to_owned(),
        repo: repo.to_owned(),
        message,
    };
    let source = resolved
        .clone_source
        .to_str()
        .ok_or_else(|| provision("repository path is not UTF-8".into()))?;
    // Skip the clone's own checkout of the default branch; the commit is checked out below.
    let mut no_checkout = CheckoutBuilder::new();
    no_checkout.dry_run();
    let clone = RepoBuilder::new()
        .clone_local(CloneLocal::Local)
        .with_checkout(no_checkout)
        .clone(source, dest)
        .map_err(|e| provision(format!("clone: {}", e.message())))?;
    let oid = Oid::from_str(&resolved.commit).map_err(|e| provision(e.message().to_owned()))?;
    let commit = clone
        .find_commit(oid)
        .map_err(|e| provision(format!("find commit {oid} in the clone: {}", e.message())))?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force();
    clone
        .checkout_tree(commit.as_object(), Some(&mut checkout))
        .map_err(|e| provision(format!("check out {oid}: {}", e.message())))?;
    clone
        .set_head_detached(oid)
        .map_err(|e| provision(format!("detach HEAD at {oid}: {}", e.message())))?;
    clone
        .remote_delete("origin")
        .map_err(|e| provision(format!("delete remote `origin`: {}", e.message())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::fs::MetadataExt;
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git");
        assert!(
            output.status.success(),
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    fn commit_file(repo: &Path, name: &str, text: &str) {
        std::fs::write(repo.join(name), text).expect("write file");
        git(repo, &["add", name]);
        git(repo, &["commit", "-q", "-m", name]);
    }

    /// A live repository whose objects are partly packed and partly loose, with a second
    /// branch, an annotated and a lightweight tag, and a file in a subdirectory.
    fn live_repo(root: &Path) -> PathBuf {
        let repo = root.join("live");
        std::fs::create_dir_all(repo.join("src")).expect("mkdir");
        git(&repo, &["init", "-q", "-b", "main"]);
        commit_file(&repo, "a.txt", "a\n");
        git(&repo, &["tag", "-a", "v1", "-m", "v1"]);
        commit_file(&repo, "src/b.rs", "fn main() {}\n");
        git(&repo, &["repack", "-adq"]);
        git(&repo, &["branch", "feature"]);
        commit_file(&repo, "c.txt", "c\n");
        git(&repo, &["tag", "light"]);
        commit_file(&repo, "d.sh", "#!/bin/sh\n");
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(repo.join("d.sh"))
            .status()
            .expect("chmod");
        git(&repo, &["add", "d.sh"]);
        git(&repo, &["commit", "-q", "-m", "mode"]);
        repo
    }

    fn resolved(repo: &Path, rev: &str) -> ResolvedRev {
        resolve_rev(repo, rev).expect("resolve")
    }

    /// What a verifier can see of a clone through git: HEAD, whether it is detached, the refs,
    /// the history, the checked-out files, the work tree's status, remotes and `describe`.
    fn observed(clone: &Path) -> Vec<String> {
        let detached = Command::new("git")
            .args(["symbolic-ref", "-q", "HEAD"])
            .current_dir(clone)
            .status()
            .expect("git");
        vec![
            git(clone, &["rev-parse", "HEAD"]),
            format!("detached={}", !detached.success()),
            git(
                clone,
                &["for-each-ref", "--format=%(refname) %(objectname)"],
            ),
            git(clone, &["log", "--format=%H %s", "HEAD"]),
            git(clone, &["ls-files", "-s"]),
            git(clone, &["status", "--porcelain", "--untracked-files=all"]),
            git(clone, &["remote"]),
            git(clone, &["describe", "--tags"]),
            git(clone, &["rev-list", "--all", "--objects"]),
        ]
    }

    fn inodes(dir: &Path, found: &mut BTreeSet<(u64, u64)>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                inodes(&entry.path(), found);
            } else {
                found.insert((meta.dev(), meta.ino()));
            }
        }
    }

    #[test]
    fn the_direct_clone_is_what_libgit2s_local_clone_gives_and_passes_fsck() {
        let root = tempfile::tempdir().expect("tempdir");
        let repo = live_repo(root.path());
        let head = resolved(&repo, "HEAD");
        let direct = root.path().join("direct");
        let full = root.path().join("full");
        assert_eq!(
            clone_at(&repo, &head, &direct).expect("direct clone"),
            CloneWay::Direct
        );
        clone_libgit2(&repo, &head, &full).expect("libgit2 clone");
        assert_eq!(observed(&direct), observed(&full));
        git(&direct, &["fsck", "--full", "--strict", "--no-dangling"]);
        assert!(!direct.join(".git/objects/info/alternates").exists());
        assert_eq!(
            std::fs::read_to_string(direct.join("d.sh")).expect("read"),
            "#!/bin/sh\n"
        );
        assert!(
            direct.join("d.sh").metadata().expect("meta").mode() & 0o100 != 0,
            "the executable bit is checked out"
        );
        // An older rev: the commit checked out, the same refs.
        let older = resolved(&repo, "v1");
        let at_v1 = root.path().join("at-v1");
        assert_eq!(
            clone_at(&repo, &older, &at_v1).expect("clone at v1"),
            CloneWay::Direct
        );
        assert_eq!(git(&at_v1, &["rev-parse", "HEAD"]), older.commit);
        assert!(!at_v1.join("c.txt").exists());
        assert_eq!(git(&at_v1, &["status", "--porcelain"]), "");
    }

    #[test]
    fn no_loose_object_file_is_shared_with_the_live_repository() {
        let root = tempfile::tempdir().expect("tempdir");
        let repo = live_repo(root.path());
        let dest = root.path().join("clone");
        assert_eq!(
            clone_at(&repo, &resolved(&repo, "HEAD"), &dest).expect("clone"),
            CloneWay::Direct
        );
        let mut live_loose = BTreeSet::new();
        for entry in std::fs::read_dir(repo.join(".git/objects"))
            .expect("read")
            .flatten()
        {
            if entry.file_name().len() == 2 {
                inodes(&entry.path(), &mut live_loose);
            }
        }
        assert!(
            live_loose.len() >= 6,
            "the fixture has loose objects: {}",
            live_loose.len()
        );
        let mut cloned = BTreeSet::new();
        inodes(&dest.join(".git"), &mut cloned);
        assert!(
            live_loose.is_disjoint(&cloned),
            "a loose object of the live repository is hard-linked into the clone"
        );
        // The packs are hard-linked, as `git clone --local` does.
        let mut live_packs = BTreeSet::new();
        inodes(&repo.join(".git/objects/pack"), &mut live_packs);
        assert!(!live_packs.is_empty() && live_packs.is_subset(&cloned));
    }

    #[test]
    fn what_the_direct_way_does_not_reproduce_goes_through_libgit2() {
        let root = tempfile::tempdir().expect("tempdir");
        let repo = live_repo(root.path());
        // Too many loose objects for the limit.
        let dest = root.path().join("over-limit");
        let way = clone_with_limit(&repo, &resolved(&repo, "HEAD"), &dest, 3).expect("clone");
        assert!(
            matches!(&way, CloneWay::Libgit2 { reason } if reason.contains("loose objects")),
            "{way:?}"
        );
        assert_eq!(git(&dest, &["status", "--porcelain"]), "");

        // A repository borrowing objects through alternates.
        let borrower = root.path().join("borrower");
        git(
            root.path(),
            &[
                "clone",
                "-q",
                "--shared",
                repo.to_str().expect("utf-8"),
                "borrower",
            ],
        );
        let dest = root.path().join("from-borrower");
        let way = clone_at(&borrower, &resolved(&borrower, "HEAD"), &dest).expect("clone");
        assert!(
            matches!(&way, CloneWay::Libgit2 { reason } if reason.contains("alternates")),
            "{way:?}"
        );
        assert_eq!(
            git(&dest, &["rev-parse", "HEAD"]),
            resolved(&repo, "HEAD").commit
        );

        // A repository format with extensions.
        let extended = root.path().join("extended");
        git(
            root.path(),
            &["clone", "-q", repo.to_str().expect("utf-8"), "extended"],
        );
        git(&extended, &["config", "core.repositoryformatversion", "1"]);
        git(&extended, &["config", "extensions.worktreeConfig", "true"]);
        let dest = root.path().join("from-extended");
        let way = clone_at(&extended, &resolved(&extended, "HEAD"), &dest).expect("clone");
        assert!(
            matches!(&way, CloneWay::Libgit2 { reason } if reason.contains("format version 1")),
            "{way:?}"
        );
    }

    #[test]
    fn a_direct_clone_that_fails_part_way_is_removed_and_made_by_libgit2() {
        let root = tempfile::tempdir().expect("tempdir");
        let repo = live_repo(root.path());
        // A corrupt loose object nothing refers to: the pack builder cannot read it, libgit2's
        // clone links it without reading it, as git does.
        let corrupt = repo.join(".git/objects/ab");
        std::fs::create_dir_all(&corrupt).expect("mkdir");
        std::fs::write(
            corrupt.join("cdef0123456789abcdef0123456789abcdef01"),
            b"not zlib",
        )
        .expect("write");
        let dest = root.path().join("clone");
        let head = resolved(&repo, "HEAD");
        let way = clone_at(&repo, &head, &dest).expect("clone");
        assert!(
            matches!(&way, CloneWay::Libgit2 { reason } if reason.contains("pack loose objects")),
            "{way:?}"
        );
        assert_eq!(git(&dest, &["rev-parse", "HEAD"]), head.commit);
        assert_eq!(git(&dest, &["status", "--porcelain"]), "");
        assert!(!dest.join(".git/packed-refs").exists() || git(&dest, &["remote"]).is_empty());
    }
}
