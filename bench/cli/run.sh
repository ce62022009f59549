#!/usr/bin/env bash
# The CLI's wait (issue 13 item 7), every figure against its baseline in the same run, trials
# interleaved so machine load hits both alike:
#   1. `skillforge jobs submit --wait -- true` (embedded queue, in-process worker) vs `true`
#      (a fork+exec of /bin/true through the same timing loop): the round trip's overhead,
#      goal <= 50 ms (median);
#   2. `skillforge verify --repo R -- true` vs `git clone --local --no-checkout R D && git -C D
#      checkout`: goal <= 1.2x (median against median);
#   3. when `redis-server` is on PATH: `jobs submit --wait -- true` against a local redis-server
#      with a `skillforge worker` process (the waiter wakes on the queue's `changed` message, not
#      a poll), reported beside 1 (no goal of its own).
# Usage: bench/cli/run.sh [--n N] [path/to/skillforge]
#   default binary target/release/skillforge (built with `cargo build --release` when missing);
#   N trials of each command (default 30), after 3 warm-up runs each.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=30
if [ "${1:-}" = "--n" ]; then n="$2"; shift 2; fi
bin="${1:-target/release/skillforge}"
[ -x "$bin" ] || cargo build --locked --release -p skillforge
bin="$(realpath "$bin")"
work="$(mktemp -d)"
worker_pid=""
redis_port=""
cleanup() {
  if [ -n "$worker_pid" ]; then kill "$worker_pid" 2>/dev/null; wait "$worker_pid" 2>/dev/null || true; fi
  if [ -n "$redis_port" ]; then redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
home="$work/home"
repo="$work/repo"
git init -q "$repo"
for i in $(seq 1 50); do printf 'line %s\n' "$i" > "$repo/f$i.txt"; done
git -C "$repo" add .
git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit -qm bench

# One timed run of "$@" (stdout/stderr discarded, must exit 0); prints milliseconds.
timed() {
  local s e
  s=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "bench: '$*' failed" >&2; exit 1; }
  e=$(date +%s%N)
  echo "scale=3; ($e - $s) / 1000000" | bc
}
clone() { rm -rf "$work/clone"; git clone -q --local --no-checkout "$repo" "$work/clone" && git -C "$work/clone" checkout -q HEAD; }
submit() { "$bin" --home "$home" jobs submit --wait -- true; }
verify() { "$bin" --home "$home" verify --repo "$repo" -- true; }
submit_redis() { "$bin" --home "$work/rhome" --queue "redis://127.0.0.1:$redis_port" jobs submit --wait -- true; }
with_redis=0
if command -v redis-server >/dev/null 2>&1; then
  with_redis=1
  redis_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  mkdir -p "$work/redis"
  redis-server --bind 127.0.0.1 --port "$redis_port" --daemonize yes --dir "$work/redis" --save "" --appendonly no \
    --logfile "$work/redis/log" >/dev/null
  for _ in $(seq 1 100); do [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] && break; sleep 0.05; done
  "$bin" --home "$work/rhome" --queue "redis://127.0.0.1:$redis_port" worker --name bench >"$work/worker.log" 2>&1 &
  worker_pid=$!
fi

for _ in 1 2 3; do
  timed true >/dev/null; timed submit >/dev/null; timed clone >/dev/null; timed verify >/dev/null
  if [ "$with_redis" = 1 ]; then timed submit_redis >/dev/null; fi
done
: > "$work/true"; : > "$work/submit"; : > "$work/clone.ms"; : > "$work/verify"; : > "$work/redis.ms"
for _ in $(seq 1 "$n"); do
  timed true >> "$work/true"
  timed submit >> "$work/submit"
  timed clone >> "$work/clone.ms"
  timed verify >> "$work/verify"
  if [ "$with_redis" = 1 ]; then timed submit_redis >> "$work/redis.ms"; fi
done

python3 - "$work" "$n" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(git rev-parse --short HEAD)" <<'PY'
import statistics, sys
work, n, cpus, load, rev = sys.argv[1:]
def read(name):
    return sorted(float(x) for x in open(f"{work}/{name}") if x.strip())
def row(label, xs):
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"| {label} | {statistics.median(xs):.1f} | {xs[0]:.1f} | {p90:.1f} | {xs[-1]:.1f} |"
t, s, c, v, r = (read(x) for x in ("true", "submit", "clone.ms", "verify", "redis.ms"))
print(f"skillforge CLI wait bench at {rev}: {n} interleaved trials, {cpus} CPUs, load {load}\n")
print("| command | median ms | min | p90 | max |\n|---|---|---|---|---|")
for label, xs in (("`true`", t), ("`jobs submit --wait -- true`", s),
                  ("`git clone --local` + checkout", c), ("`verify -- true`", v)):
    print(row(label, xs))
if r:
    print(row("`jobs submit --wait -- true` (Redis, worker process)", r))
over = statistics.median(s) - statistics.median(t)
ratio = statistics.median(v) / statistics.median(c)
print(f"\nsubmit --wait round trip over `true`: {over:.1f} ms (goal <= 50 ms): {'met' if over <= 50 else 'NOT met'}")
print(f"verify / (clone + checkout): {ratio:.2f}x (goal <= 1.2x): {'met' if ratio <= 1.2 else 'NOT met'}")
if r:
    print(f"submit --wait round trip on Redis over `true`: {statistics.median(r) - statistics.median(t):.1f} ms")
PY
