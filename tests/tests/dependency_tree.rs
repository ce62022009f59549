//! The crate graph's rules, read from `cargo tree`: the control-plane crates (the stage core and
//! the three products) use runner payload and report types only, so no git2, nix or bollard in
//! their trees (DESIGN §2); and no product crate depends on another (a new family is a copy of
//! the smallest product crate, never an import of a sibling).

use std::path::Path;
use std::process::Command;

/// The stage core and the product crates.
const CONTROL_PLANE: [&str; 4] = [
    "skillforge-stage",
    "skillforge-skillopt",
    "skillforge-evalloop",
    "skillforge-optimize",
];
/// The product crates, each one workflow family or a cluster of them.
const PRODUCTS: [&str; 3] = [
    "skillforge-skillopt",
    "skillforge-evalloop",
    "skillforge-optimize",
];

/// Crate names `cargo tree` lists for `package`'s normal dependencies (itself included), one per line.
fn dependency_names(package: &str) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let out = Command::new(cargo)
        .args([
            "tree", "--locked", "-p", package, "-e", "normal", "--prefix", "none", "--format",
            "{p}",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_control_plane_tree_has_no_git2_nix_or_bollard() {
    for package in CONTROL_PLANE {
        let names = dependency_names(package);
        // The tree was read, and it holds the crate itself and the engine.
        for expected in [package, "skillforge-engine"] {
            assert!(
                names.iter().any(|n| n == expected),
                "`{expected}` missing from the tree of {package}: {names:?}"
            );
        }
        // The same rule as `cargo tree -p <crate> -e normal | grep -E 'git2|nix|bollard'`.
        let execution: Vec<&String> = names
            .iter()
            .filter(|n| ["git2", "nix", "bollard"].iter().any(|b| n.contains(b)))
            .collect();
        assert!(
            execution.is_empty(),
            "{package} pulls in execution dependencies: {execution:?}"
        );
    }
    // The products reach the runners' payload crates (so the check above is about a real tree).
    let skillopt = dependency_names("skillforge-skillopt");
    for expected in [
        "skillforge-runner-sandbox",
        "skillforge-runner-checker",
        "skillforge-runner-agent",
    ] {
        assert!(
            skillopt.iter().any(|n| n == expected),
            "`{expected}` missing from skillopt's tree: {skillopt:?}"
        );
    }
}

#[test]
fn no_product_crate_depends_on_another() {
    for package in PRODUCTS {
        let names = dependency_names(package);
        assert!(
            names.iter().any(|n| n == "skillforge-stage"),
            "{package} does not build on the stage core: {names:?}"
        );
        let siblings: Vec<&str> = PRODUCTS
            .iter()
            .copied()
            .filter(|p| *p != package && names.iter().any(|n| n == p))
            .collect();
        assert!(
            siblings.is_empty(),
            "{package} depends on {siblings:?}; products share code only through skillforge-stage"
        );
    }
}
