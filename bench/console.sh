#!/usr/bin/env bash
# The web console's page-render figure (issue 36, "Speed"): N finished jobs (default 100 000) on
# the embedded SQLite queue and on a private redis-server, the real `skillforge serve --listen`
# on each, every console page fetched 20 times; p50/p95 per page and the ratio to the baseline
# measured in the same run on the same home (`skillforge --json jobs list --state succeeded`).
#
#   bench/console.sh [--n N] [--calls K]
#
# Builds skillforge (release, root workspace) and skillforge-bench (release, bench workspace)
# unless SKILLFORGE_BIN / BENCH_BIN name built binaries. Writes bench/results/console-<stamp>.{json,md}.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "console.sh: '$tool' not found (apt-get install -y redis-server)" >&2; exit 2; }
done

if [[ -z "${SKILLFORGE_BIN:-}" ]]; then
  echo "building skillforge (release)…" >&2
  cargo build --release --locked --manifest-path "$root/Cargo.toml" -p skillforge >&2
  SKILLFORGE_BIN="${CARGO_TARGET_DIR:-$root/target}/release/skillforge"
fi
if [[ -z "${BENCH_BIN:-}" ]]; then
  echo "building skillforge-bench (release)…" >&2
  CARGO_TARGET_DIR="$here/target" cargo build --release --manifest-path "$here/Cargo.toml" >&2
  BENCH_BIN="$here/target/release/skillforge-bench"
fi

port=""
for _ in $(seq 1 50); do
  p=$(( 20000 + RANDOM % 30000 ))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n "$port" ]] || { echo "console.sh: no free port found" >&2; exit 2; }
rdir="$(mktemp -d)"
cleanup() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$rdir"
}
trap cleanup EXIT
redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --pidfile "$rdir/redis.pid" \
  --dir "$rdir" --logfile "$rdir/redis.log" --save '' --appendonly no >&2
for _ in $(seq 1 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.05
done

mkdir -p "$here/results"
"$BENCH_BIN" console --skillforge "$SKILLFORGE_BIN" --redis-url "redis://127.0.0.1:$port" --out-dir "$here/results" "$@"
