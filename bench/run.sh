#!/usr/bin/env bash
# skillforge's benchmark: every figure for skillforge and its peers (BullMQ, apalis-sqlite) in one run.
#
#   bench/run.sh [--quick] [--figures throughput,latency,recovery] (also: scale, memory [--memory-n N], backlog [--scale-n N])
#
# Starts a private redis-server on a free loopback port (no persistence), builds the bench
# (its own cargo workspace, target dir bench/target), installs the BullMQ peer (npm), runs
# `skillforge-bench all`, prints the markdown ratio table and writes raw figures to bench/results/.
# Set BENCH_BIN to use an already built skillforge-bench binary.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"

for tool in redis-server redis-cli node npm; do
  command -v "$tool" >/dev/null || { echo "run.sh: '$tool' not found (apt-get install -y redis-server nodejs npm)" >&2; exit 2; }
done

if [[ -z "${BENCH_BIN:-}" ]]; then
  echo "building skillforge-bench (release)…" >&2
  cargo build --release --manifest-path "$here/Cargo.toml" >&2
  BENCH_BIN="$CARGO_TARGET_DIR/release/skillforge-bench"
fi

if [[ ! -d "$here/bullmq/node_modules/bullmq" ]]; then
  echo "installing the BullMQ peer (npm ci)…" >&2
  (cd "$here/bullmq" && npm ci --no-audit --no-fund >&2)
fi

# A free loopback port.
port=""
for _ in $(seq 1 50); do
  p=$(( 20000 + RANDOM % 30000 ))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n "$port" ]] || { echo "run.sh: no free port found" >&2; exit 2; }

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
echo "redis-server on 127.0.0.1:$port" >&2

mkdir -p "$here/results"
"$BENCH_BIN" all \
  --redis-url "redis://127.0.0.1:$port" --redis-port "$port" \
  --bullmq-dir "$here/bullmq" --out-dir "$here/results" "$@"
