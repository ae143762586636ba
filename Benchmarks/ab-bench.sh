#!/usr/bin/env bash
# Two builds of lifecycled against each other, in the same run: GET /v1/instances/{id} and
# durable POST events, as Benchmarks/http-bench.sh sends them, on the defaults plus
# --log-level warning (as http-bench.sh runs). Rounds alternate, and each round runs the two
# the other way round from the last, so a machine that speeds up or slows down during the
# run favours neither. Prints each round and the median ratio new/old.
#
#   bash Benchmarks/ab-bench.sh OLD_BINARY NEW_BINARY
#
# For a change that should not change speed (a refactoring): build the commit before it in a
# worktree (`git worktree add /tmp/old <commit> && swift build -c release --product lifecycled`)
# and pass both release binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

# Run by hand, not by `make bench`: without wrk every round would be empty, and the ratio nan.
command -v wrk >/dev/null || { echo "ab-bench.sh: wrk is missing (make bench-deps installs it)" >&2; exit 1; }
OLD=${1:?usage: ab-bench.sh OLD_BINARY NEW_BINARY}
NEW=${2:?usage: ab-bench.sh OLD_BINARY NEW_BINARY}
DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-6}
CONNECTIONS=64
WORK=$(mktemp -d /tmp/lifecycled-ab.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

wait_for() { for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "server on $1 did not start" >&2; exit 1; }

start() { # BINARY PORT NAME
  "$1" --port "$2" --data-dir "$WORK/data-$3" --log-level warning & PIDS+=($!)
  wait_for "$2"
  for i in $(seq 0 $((CONNECTIONS - 1))); do
    curl -sf -XPUT "http://127.0.0.1:$2/v1/instances/bench-$i" >/dev/null
    for body in '{"event":"didFinishLaunching"}' '{"event":"willConnectToWindow","window":"main"}' '{"event":"didBecomeActive"}'; do
      curl -sf -XPOST -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$2/v1/instances/bench-$i/events" >/dev/null
    done
  done
}

rate() { # URL [wrk script]
  local args=(-t2 -c"$CONNECTIONS" --latency)
  [ -n "${2:-}" ] && args+=(-s "$2")
  wrk "${args[@]}" -d"${WARMUP}s" "$1" >/dev/null
  local out; out=$(wrk "${args[@]}" -d"${DURATION}s" "$1")
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then echo "errors from $1:" >&2; echo "$out" >&2; exit 1; fi
  awk '/Requests\/sec/ {print $2}' <<<"$out"
}

median() { sort -n | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }

PORT_OLD=18281; PORT_NEW=18282
start "$OLD" $PORT_OLD old
start "$NEW" $PORT_NEW new

compare() { # NAME PATH [wrk script]
  local name=$1 path=$2 script=${3:-} r old new
  : >"$WORK/ratios"; : >"$WORK/old"; : >"$WORK/new"
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
      old=$(rate "http://127.0.0.1:$PORT_OLD$path" "$script"); new=$(rate "http://127.0.0.1:$PORT_NEW$path" "$script")
    else
      new=$(rate "http://127.0.0.1:$PORT_NEW$path" "$script"); old=$(rate "http://127.0.0.1:$PORT_OLD$path" "$script")
    fi
    echo "$old" >>"$WORK/old"; echo "$new" >>"$WORK/new"
    awk -v a="$new" -v b="$old" 'BEGIN {printf "%.3f\n", a / b}' >>"$WORK/ratios"
    echo "  $name round $r: old $old req/s, new $new req/s"
  done
  echo "$name: old median $(median <"$WORK/old") req/s, new median $(median <"$WORK/new") req/s; new/old median of rounds $(median <"$WORK/ratios") (rounds $(sort -n "$WORK/ratios" | head -1)-$(sort -n "$WORK/ratios" | tail -1))"
}

compare "GET /v1/instances/{id}" /v1/instances/bench-1
compare "POST events, durable" "" Benchmarks/events.lua
