#!/usr/bin/env bash
# The optimize loop, parallel vs serial (issue 18 "Benchmarks"): four experiments whose scripted
# worker sleeps 2 s each, on a 2-worker Redis fleet (one job at a time per worker); wall time of `skillforge optimize run` in
# parallel mode as a ratio to serial mode, measured in the same run. Goal: <= 0.55x.
#
#   bench/optimize_parallel.sh [SKILLFORGE_BINARY]
#
# Uses target/debug/skillforge (or the argument); needs redis-server and git.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../target/debug/skillforge}"
[[ -x "$bin" ]] || { echo "optimize_parallel.sh: build skillforge first (cargo build -p skillforge)" >&2; exit 2; }
for tool in redis-server redis-cli git; do
  command -v "$tool" >/dev/null || { echo "optimize_parallel.sh: '$tool' not found" >&2; exit 2; }
done

work="$(mktemp -d)"
port=$(( 20000 + RANDOM % 30000 ))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --daemonize yes >/dev/null
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
queue="redis://127.0.0.1:$port"

# The project: four independent files, each hypothesis a neutral edit to one of them.
repo="$work/repo"
mkdir -p "$repo/src"
git -C "$repo" init -q -b main
for i in 1 2 3 4; do echo "value $i" > "$repo/src/part$i.txt"; done
printf '#!/bin/sh\necho "{\\"metrics\\": {\\"size\\": $(cat src/*.txt | wc -c)}}"\n' > "$repo/measure.sh"
git -C "$repo" add -A
git -C "$repo" -c user.name=b -c user.email=b@b.invalid commit -q -m base

plan="$work/plan.json"
printf '{"experiments": [' > "$plan"
for i in 1 2 3 4; do
  [[ $i -gt 1 ]] && printf ',' >> "$plan"
  printf '{"when": "part %s", "sleep_ms": 2000, "edits": [{"path": "src/part%s.txt", "replace": "value", "with": "value "}]}' "$i" "$i" >> "$plan"
done
printf ']}\n' >> "$plan"

spec() { # MODE NAME
  cat <<YAML
name: $2
description: bench of the optimize loop's dispatch ($1 mode)
metric:
  primary: { name: size, direction: minimize }
measurement:
  command: sh measure.sh
  stability: { mode: stable }
scope:
  mutable: [src]
execution: { mode: $1, max_concurrent: 4 }
hypotheses:
YAML
  for i in 1 2 3 4; do
    cat <<YAML
  - { id: h-$i, description: "edit part $i", category: c$i, opportunity: { workload: w, baseline: b, evidence: e, expected_benefit: unknown, confidence: low, cost_and_risk: small } }
YAML
  done
}

home="$work/home"
mkdir -p "$home"
for w in w1 w2; do
  SKILLFORGE_SCRIPTED_EDITS="$plan" "$bin" --home "$home" --queue "$queue" worker --name "$w" --concurrency 1 2>"$work/$w.log" &
  pids+=($!)
done

run_mode() { # MODE -> seconds on stdout
  local mode=$1
  spec "$mode" "bench-$mode" > "$work/$mode.yaml"
  SKILLFORGE_SCRIPTED_EDITS="$plan" "$bin" --home "$home" --queue "$queue" -q optimize init --spec "$work/$mode.yaml" --repo "$repo" >/dev/null 2>&1
  local start end
  start=$(date +%s.%N)
  SKILLFORGE_SCRIPTED_EDITS="$plan" "$bin" --home "$home" --queue "$queue" -q optimize run --spec "$work/$mode.yaml" >/dev/null 2>&1
  end=$(date +%s.%N)
  local n
  n=$("$bin" --home "$home" --json optimize status --spec "$work/$mode.yaml" | grep -c '"hypothesis_id":')
  [[ "$n" == 4 ]] || { echo "optimize_parallel.sh: $mode ran $n experiments, expected 4" >&2; exit 1; }
  echo "$end - $start" | bc -l
}

serial=$(run_mode serial)
parallel=$(run_mode parallel)
ratio=$(echo "$parallel / $serial" | bc -l)
printf '| figure | serial s | parallel s | ratio | goal |\n|---|---|---|---|---|\n'
printf '| optimize: 4 experiments x 2 s worker, 2-worker Redis fleet | %.2f | %.2f | %.2fx | <= 0.55x |\n' "$serial" "$parallel" "$ratio"
