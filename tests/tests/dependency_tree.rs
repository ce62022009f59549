//! The control plane depends on runner payload and report types only (DESIGN §2; issue 11 item
//! 5): `cargo tree -p skillforge-workflows -e normal` names no git2, nix or bollard, because
//! the workflows crate uses the runner crates without their execution side (feature `exec`).

use std::path::Path;
use std::process::Command;

/// Crate names `cargo tree` lists for `skillforge-workflows`' normal dependencies, one per line.
fn workflows_dependency_names() -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let out = Command::new(cargo)
        .args(["tree", "--locked", "-p", "skillforge-workflows", "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_control_plane_tree_has_no_git2_nix_or_bollard() {
    let names = workflows_dependency_names();
    // The tree was read, and it holds the runners' payload crates.
    for expected in ["skillforge-workflows", "skillforge-runner-sandbox", "skillforge-runner-checker", "skillforge-runner-agent"] {
        assert!(names.iter().any(|n| n == expected), "`{expected}` missing from the tree: {names:?}");
    }
    // The same rule as `cargo tree -p skillforge-workflows -e normal | grep -E 'git2|nix|bollard'`.
    let execution: Vec<&String> = names.iter().filter(|n| ["git2", "nix", "bollard"].iter().any(|b| n.contains(b))).collect();
    assert!(execution.is_empty(), "the control plane pulls in execution dependencies: {execution:?}");
}
