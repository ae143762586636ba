#!/usr/bin/env bash
# What a durable write costs past the history limit (by hand; make bench does not run it):
# one lifecycled started as `make run` starts it (extra flags pass through, such as
# `--history-limit 100000000` to compare), 64 cold-started instances, then ROUNDS (default 9)
# rounds of wrk -t2 -c64 for DURATION (default 5) seconds with Benchmarks/events.lua. Each round
# prints its rate, the bytes the process wrote a request (write calls: the WAL's pages and the
# answers) and bench-1's version: past 10,000 (the default limit), writes drop records, which
# wait in groups (RetentionBacklog). LIFECYCLED picks another binary (to compare builds).
set -euo pipefail
cd "$(dirname "$0")/.."
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
PORT=${PORT:-18191}
WORK=$(mktemp -d /tmp/lifecycled-history-limit.XXXXXX)
"$LIFECYCLED" --port "$PORT" --data-dir "$WORK/data" "$@" 2>"$WORK/log" & PID=$!
trap 'kill $PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
for i in $(seq 0 63); do
  curl -sf -XPUT "http://127.0.0.1:$PORT/v1/instances/bench-$i" >/dev/null
  for body in '{"event":"didFinishLaunching"}' '{"event":"willConnectToWindow","window":"main"}' '{"event":"didBecomeActive"}'; do
    curl -sf -XPOST -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$PORT/v1/instances/bench-$i/events" >/dev/null
  done
done
for round in $(seq 1 "${ROUNDS:-9}"); do
  written=$(awk '/^wchar/ {print $2}' "/proc/$PID/io")
  out=$(wrk -t2 -c64 -d"${DURATION:-5}s" -s Benchmarks/events.lua "http://127.0.0.1:$PORT")
  written=$(( $(awk '/^wchar/ {print $2}' "/proc/$PID/io") - written ))
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  version=$(curl -sf "http://127.0.0.1:$PORT/v1/instances/bench-1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
  echo "round $round: $rate req/s, $(( written / requests )) bytes written a request, bench-1 at version $version"
done
