#!/bin/sh
# Builds and runs the transfer-area benchmark against a private redis-server (no persistence).
# bench/transfer/run.sh [--quick]   (--quick: 5 files, 1 trial; a smoke run, not a measurement)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes --dir "$dir" --pidfile "$dir/redis.pid" >/dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
cargo build --release --manifest-path "$here/Cargo.toml"
REDIS_URL="redis://127.0.0.1:$port/0" "$here/target/release/transfer-staging" "$@"
