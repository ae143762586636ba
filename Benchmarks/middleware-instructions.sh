#!/usr/bin/env bash
# What the production middlewares cost in instructions, for `make bench`, beside the
# wall-clock rates of middleware-bench.sh: the same lifecycled binary under valgrind's
# callgrind, once with --token --protect-reads and metrics on, once with no token and
# --metrics off (both --log-level warning), then as `make run` starts it (access log on)
# against the same with --log-level warning, each sent exactly the same N GET and N POST requests (Authorization header
# included) one at a time on one kept-alive connection (Benchmarks/fixed-requests.py), after
# a warm-up. Instructions executed by the process while they are served, divided by N.
#
# Why beside the rates: instruction counts do not depend on what else runs on the machine.
# GET repeats to within about 0.1%. POST less well, within about 1% (a few thousand
# instructions): the committer's SQLite work depends on where the WAL checkpoints fall, and
# the background checkpointer runs on a 200 ms timer, so both follow how long the requests
# take under valgrind. The checkpointer's thread is left out of the count for that reason
# (it is the same work in both runs, in the long run); the committer's stays in, as the
# middlewares' work on a write's answer is done on its thread. Swift's hashing is made
# deterministic (SWIFT_DETERMINISTIC_HASHING), as a random seed per process changes how
# far dictionary look-ups probe.
#
# Counts are not time: cache misses, waking threads and the kernel's share (the network
# stack, not counted here) are not in them, and valgrind counts each byte of a `rep stosb` as
# an instruction, which inflates the part both runs share (libmicrohttpd zeroes its
# connection's memory pool after every request: about half of a GET's count). So the
# ratio understates what the middlewares cost in time; the difference per request is the
# figure to watch.
#
# Writes Benchmarks/.middleware-instructions-results.md, which run-all.sh puts in the
# middlewares' section of RESULTS.md.
# BENCH_CALLGRIND_REQUESTS (default 2000) requests of each kind; LIFECYCLED picks the binary;
# BENCH_CALLGRIND_OUT=DIR keeps the dumps there (one file per thread), for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${BENCH_CALLGRIND_REQUESTS:-2000}
WARMUP=200
TOKEN=bench-token-0123456789abcdef
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
WORK=$(mktemp -d /tmp/lifecycled-mw-instructions.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

. Benchmarks/callgrind.sh

# measure NAME PORT FLAGS...: sets GET_COUNT and POST_COUNT, instructions per request.
# (Not in a subshell, so that the cleanup knows the server's pid if a step fails.)
measure() {
  local name=$1 port=$2 i e body pid
  shift 2
  callgrind_start "$name" "$port" "$LIFECYCLED" "$@"
  pid=$CALLGRIND_PID
  # The instances fixed-requests.py uses, in the foreground.
  for i in $(seq 0 7); do
    curl -sf -XPUT -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/v1/instances/bench-$i" >/dev/null
    for e in didFinishLaunching '{"event":"willConnectToWindow","window":"main"}' didBecomeActive; do
      case $e in \{*) body=$e ;; *) body="{\"event\":\"$e\"}" ;; esac
      curl -sf -XPOST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/v1/instances/bench-$i/events" >/dev/null
    done
  done
  python3 Benchmarks/fixed-requests.py "$port" get "$WARMUP" "$TOKEN"
  python3 Benchmarks/fixed-requests.py "$port" post "$WARMUP" "$TOKEN"
  # Zero the counts, serve N, dump (which zeroes them again); then the same for POST.
  callgrind_control --zero "$pid" >/dev/null 2>&1
  python3 Benchmarks/fixed-requests.py "$port" get "$REQUESTS" "$TOKEN"
  callgrind_control --dump=get "$pid" >/dev/null 2>&1
  python3 Benchmarks/fixed-requests.py "$port" post "$REQUESTS" "$TOKEN"
  callgrind_control --dump=post "$pid" >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  [ -z "${BENCH_CALLGRIND_OUT:-}" ] || { mkdir -p "$BENCH_CALLGRIND_OUT"; cp "$WORK/$name".[0-9]* "$BENCH_CALLGRIND_OUT/"; }
  GET_COUNT=$(per_request "$name" get); POST_COUNT=$(per_request "$name" post)
}

# per_request NAME DUMP: the dump's instructions in every thread but the WAL checkpointer's
# (see above), per request.
per_request() {
  local files total
  files=$(grep -l "^desc: Trigger: dump $2\$" "$WORK/$1".*)
  total=$(for f in $files; do grep -q BackgroundCheckpointerC5start "$f" || awk '/^totals:/ {print $2}' "$f"; done | awk '{s += $1} END {print s}')
  echo $((total / REQUESTS))
}

echo "instructions per request under callgrind, $REQUESTS GET and $REQUESTS POST each"
measure with 18193 --log-level warning --token "$TOKEN" --protect-reads
on_get=$GET_COUNT; on_post=$POST_COUNT
echo "  auth+metrics: GET $on_get, POST $on_post"
measure without 18194 --log-level warning --metrics off
off_get=$GET_COUNT; off_post=$POST_COUNT
echo "  neither:      GET $off_get, POST $off_post"
# As users run it (make run: no token, metrics on, access log on), against the same quiet.
measure default 18195
default_get=$GET_COUNT; default_post=$POST_COUNT
measure quiet 18196 --log-level warning
quiet_get=$GET_COUNT; quiet_post=$POST_COUNT
echo "  default:      GET $default_get, POST $default_post; quiet: GET $quiet_get, POST $quiet_post"

row() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN {printf "| %s | %d | %d | %+d | %.3f |\n", n, a, b, a - b, a / b}'; }
{
  echo "Instructions per request, counted by valgrind's callgrind in every thread but the WAL checkpointer's: $REQUESTS requests"
  echo "of each kind, one at a time on one connection. The same whatever else the machine runs (GET to about 0.1%, POST to about"
  echo "2k instructions), but not time: see Benchmarks/middleware-instructions.sh."
  echo
  echo "| benchmark | with | without | difference | with / without |"
  echo "|---|---|---|---|---|"
  row "GET /v1/instances/{id}" "$on_get" "$off_get"
  row "POST events, durable" "$on_post" "$off_post"
  echo
  echo "The access log alone: the default configuration (as \`make run\` starts it) against the same with \`--log-level warning\`."
  echo
  echo "| benchmark | access log on | off | difference | on / off |"
  echo "|---|---|---|---|---|"
  row "GET /v1/instances/{id}" "$default_get" "$quiet_get"
  row "POST events, durable" "$default_post" "$quiet_post"
  echo
} >Benchmarks/.middleware-instructions-results.md
cat Benchmarks/.middleware-instructions-results.md
