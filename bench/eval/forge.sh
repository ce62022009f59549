#!/usr/bin/env bash
# Benchmark of issue 17: a forge of 3 samples x 2 arms on a 2-worker Redis fleet, the scripted
# agent sleeping 2 s an arm, against the same forge run serially (one worker, concurrency 1), in
# the same run on the same redis-server. The sleep is tied to FORGE_SAMPLE, so arms sleep and the
# judge (which has no sample) does not. Prints both wall times and their ratio (goal <= 0.55).
# Usage: bench/eval/forge.sh [path/to/skillforge]   (default: target/release/skillforge, built if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-target/release/skillforge}"
[ -x "$bin" ] || cargo build --locked --release -p skillforge
bin="$(realpath "$bin")"
work="$(mktemp -d)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes --dir "$work" --pidfile "$work/redis.pid" >/dev/null
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/skills/tldr"
printf -- '---\nname: tldr\ndescription: short replies\n---\nscripted: reply SHORT: shipped\n' > "$work/skills/tldr/SKILL.md"
cat > "$work/brief.json" <<JSON
{"id": "bench", "prompt": "Write the status.\nscripted: reply LONG status with every detail\nscripted@1: sleep 2000\nscripted@2: sleep 2000\nscripted@3: sleep 2000",
 "verify": "true", "rubric": "Better?\nscripted: prefer SHORT", "output": "reply"}
JSON
run() { # $1 = label, $2 = workers, $3 = concurrency, $4 = redis db; wall seconds into $work/$1.secs
  local home="$work/home-$1" db="$4"
  mkdir -p "$home"
  for i in $(seq 1 "$2"); do
    "$bin" --home "$home" --queue "redis://127.0.0.1:$port/$db" worker --name "$1-$i" --concurrency "$3" 2>"$home/worker-$i.log" &
    pids+=($!)
  done
  local start end
  start=$(date +%s.%N)
  "$bin" --home "$home" --queue "redis://127.0.0.1:$port/$db" eval forge --runtime scripted --brief "$work/brief.json" \
    --skill-dir "$work/skills/tldr" --install-root "$home/installed" >/dev/null 2>"$home/forge.log"
  end=$(date +%s.%N)
  echo "$end - $start" | bc > "$work/$1.secs"
}
run serial 1 1 1
run fleet 2 1 2
serial=$(cat "$work/serial.secs")
fleet=$(cat "$work/fleet.secs")
printf 'serial (1 worker x 1): %.2f s\nfleet (2 workers x 1): %.2f s\nratio: %.3f (goal <= 0.55)\n' "$serial" "$fleet" "$(echo "$fleet / $serial" | bc -l)"
