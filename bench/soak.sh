#!/usr/bin/env bash
# The long fault soak (issue 21): 20 000 jobs on each queue backend under a seeded fault schedule,
# the report of each appended to bench/README.md ("Fault soak: the long run").
#
#   bench/soak.sh [JOBS] [SEED]        # defaults: 20000, a new seed (printed in the report)
#
# Uses the main workspace's debug build of `skillforge` and `skillforge-soak` (tests/), not the
# bench workspace: the soak drives the binary exactly as CI does, only longer. The fault window
# covers the whole submission (about 20 jobs/s through `jobs submit` on a 2-core host).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
jobs="${1:-20000}"
seed="${2:-new}"
cd "$root"
# SOAK_BIN_DIR: a directory holding already built `skillforge` and `skillforge-soak` (skips the build).
if [[ -n "${SOAK_BIN_DIR:-}" ]]; then
  bin_dir="$SOAK_BIN_DIR"
else
  cargo build --locked -q -p skillforge -p skillforge-tests --bin skillforge --bin skillforge-soak
  bin_dir="${CARGO_TARGET_DIR:-$root/target}/debug"
fi
{
  echo
  echo "#### $(date -u '+%Y-%m-%d %H:%M UTC'): $jobs jobs per backend, seed $seed"
  echo
  echo "Host: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average at start $(cut -d' ' -f1-3 /proc/loadavg); debug build."
  echo
} >> "$here/README.md"
# About one fault every 1.5 s over the whole submission (20 jobs/s).
window=$(( jobs / 20 + 30 ))
"$bin_dir/skillforge-soak" --bin "$bin_dir/skillforge" --backend both --seeds "$seed" --jobs "$jobs" \
  --submitters 4 --fault-window "$window" --quiet 300 --append-report "$here/README.md"
