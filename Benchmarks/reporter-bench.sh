#!/usr/bin/env bash
# Reporter benchmark for `make bench` (runnable alone: `bash Benchmarks/reporter-bench.sh`, after
# `swift build -c release --product lifecycled` and `… --product reporter-bench`, one product a build): LifecycleReporter's
# cost to its caller per `report` call (median, p99, max µs: the write; the sync runs off the
# caller's thread) against a write + fsync on the thread (the path it replaced, goal: p99 under
# 1 ms, the main thread's budget per notification), the same while its automatic sender
# delivers (acks and compactions meanwhile), and events/s delivered from
# its queue one item per request against batches of 100, in the same run, rounds alternating
# (Benchmarks/reporter-bench/main.swift), against one lifecycled started as `make run` starts
# it. Fails unless every event was stored exactly once. Writes Benchmarks/.reporter-results.md.
# LIFECYCLED picks another binary; BENCH_EVENTS (default 1000) events a round, BENCH_ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${BENCH_EVENTS:-1000}
ROUNDS=${BENCH_ROUNDS:-3}
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
BENCH=${REPORTER_BENCH:-.build/release/reporter-bench}
WORK=$(mktemp -d /tmp/lifecycled-reporter-bench.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

PORT=18193
BASE=http://127.0.0.1:$PORT
"$LIFECYCLED" --port "$PORT" --data-dir "$WORK/data" 2>"$WORK/server.log" & PID=$!
for _ in $(seq 1 200); do curl -sf "$BASE/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -sf "$BASE/healthz" >/dev/null || { echo "lifecycled did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }

out=$(TMPDIR="$WORK" "$BENCH" "$BASE" "$EVENTS" "$ROUNDS")
echo "$out"
{
  echo "## Reporter ($(date -u +%Y-%m-%d))"
  echo
  echo "LifecycleReporter (Sources/LifecycleClient/Reporter/) against lifecycled on loopback: how long one"
  echo "\`report\` call holds its caller (the main thread in an app: goal p99 under 1 ms) against a write and"
  echo "an fsync on the thread, the path it replaced (5,000 calls each, blocks of 500 alternating), the"
  echo "same calls while the reporter's own sender delivers them (acks synced, compactions), and"
  echo "events/s delivered from a queue of $EVENTS events one per request against batches of 100 (medians of"
  echo "$ROUNDS rounds, alternating). Rerun: \`bash Benchmarks/reporter-bench.sh\`."
  echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo '```'
  echo "$out"
  echo '```'
  echo
} >Benchmarks/.reporter-results.md
