#!/usr/bin/env bash
# Container job overhead: builds bench/containers in release mode and runs it against the engine in
# DOCKER_HOST, or against a private podman engine started here (scripts/containers-env) when unset.
# Usage: bench/containers/run.sh [--n N]
set -euo pipefail
cd "$(dirname "$0")"
root="$(cd ../.. && pwd)"
if [ -z "${DOCKER_HOST:-}" ]; then
  # shellcheck source=../../scripts/containers-env
  source "$root/scripts/containers-env"
  sf_containers_install
  sf_containers_up
  trap sf_containers_down EXIT
fi
: "${SKILLFORGE_TEST_IMAGE:?set SKILLFORGE_TEST_IMAGE to a local image with /bin/true}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --quiet
"$CARGO_TARGET_DIR/release/container-overhead" "$@"
