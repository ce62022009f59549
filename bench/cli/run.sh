#!/usr/bin/env bash
# The CLI's wait (issue 13 item 7), every figure against its baseline in the same run, trials
# interleaved so machine load hits both alike:
#   1. `skillforge jobs submit --wait -- true` (embedded queue, in-process worker) vs `true`
#      (a fork+exec of /bin/true through the same timing loop): the round trip's overhead,
#      goal <= 50 ms (median);
#   2. `skillforge verify --repo R -- true` vs `git clone --local --no-checkout R D && git -C D
#      checkout`: goal <= 1.2x (median against median).
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
trap 'rm -rf "$work"' EXIT
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

for _ in 1 2 3; do timed true >/dev/null; timed submit >/dev/null; timed clone >/dev/null; timed verify >/dev/null; done
: > "$work/true"; : > "$work/submit"; : > "$work/clone.ms"; : > "$work/verify"
for _ in $(seq 1 "$n"); do
  timed true >> "$work/true"
  timed submit >> "$work/submit"
  timed clone >> "$work/clone.ms"
  timed verify >> "$work/verify"
done

python3 - "$work" "$n" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(git rev-parse --short HEAD)" <<'PY'
import statistics, sys
work, n, cpus, load, rev = sys.argv[1:]
def read(name):
    return sorted(float(x) for x in open(f"{work}/{name}") if x.strip())
def row(label, xs):
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"| {label} | {statistics.median(xs):.1f} | {xs[0]:.1f} | {p90:.1f} | {xs[-1]:.1f} |"
t, s, c, v = (read(x) for x in ("true", "submit", "clone.ms", "verify"))
print(f"skillforge CLI wait bench at {rev}: {n} interleaved trials, {cpus} CPUs, load {load}\n")
print("| command | median ms | min | p90 | max |\n|---|---|---|---|---|")
for label, xs in (("`true`", t), ("`jobs submit --wait -- true`", s),
                  ("`git clone --local` + checkout", c), ("`verify -- true`", v)):
    print(row(label, xs))
over = statistics.median(s) - statistics.median(t)
ratio = statistics.median(v) / statistics.median(c)
print(f"\nsubmit --wait round trip over `true`: {over:.1f} ms (goal <= 50 ms): {'met' if over <= 50 else 'NOT met'}")
print(f"verify / (clone + checkout): {ratio:.2f}x (goal <= 1.2x): {'met' if ratio <= 1.2 else 'NOT met'}")
PY
