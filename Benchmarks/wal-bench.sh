#!/usr/bin/env bash
# WAL benchmark for `make bench`: the heaviest durable write load (wrk posting relaunches
# on 32 connections, as many as the server takes) for WAL_BENCH_SECONDS (default 60). The
# WAL file's size is sampled every 100 ms and must stay under lifecycled's bound (--max-wal,
# default 64 MiB); the write rate is reported beside a bare libmicrohttpd server answering
# the same requests with a body of the same size, measured in the same run.
# Writes Benchmarks/.wal-results.md. Fails if the WAL passed its bound or any request was
# answered other than 2xx.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_UNDER_LOAD=${WAL_BENCH_SECONDS:-60}
BARE_SECONDS=${WAL_BENCH_BARE_SECONDS:-10}
CONNECTIONS=${WAL_BENCH_CONNECTIONS:-32}
MAX_WAL=${WAL_BENCH_MAX_WAL:-67108864}
THREADS=2
LIFECYCLED=.build/release/lifecycled
BARE=Benchmarks/bare-server/bare-server
WORK=$(mktemp -d /tmp/lifecycled-wal.XXXXXX)
PORT_L=18184; PORT_B=18185
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

[ -x "$BARE" ] || gcc -O2 -o "$BARE" Benchmarks/bare-server/bare.c $(pkg-config --cflags --libs libmicrohttpd)

wait_for() { for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0; curl -sf -o /dev/null "http://127.0.0.1:$1/" 2>/dev/null && return 0; sleep 0.05; done; echo "server on $1 did not start" >&2; exit 1; }

# run_wrk URL SECONDS -> prints "rps p50 p99"; fails on any non-2xx or socket error.
run_wrk() {
  local out
  [ -f Benchmarks/relaunches.lua ] || { echo "Benchmarks/relaunches.lua is missing" >&2; exit 1; }
  out=$(BENCH_INSTANCES=$CONNECTIONS wrk -t"$THREADS" -c"$CONNECTIONS" -d"$2s" --latency -s Benchmarks/relaunches.lua "$1")
  if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx responses from $1:" >&2; echo "$out" >&2; exit 1; fi
  if grep -q "Socket errors" <<<"$out"; then echo "socket errors from $1:" >&2; echo "$out" >&2; exit 1; fi
  echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(awk '$1=="50%" {print $2}' <<<"$out") $(awk '$1=="99%" {print $2}' <<<"$out")"
}

"$LIFECYCLED" --port $PORT_L --data-dir "$WORK/data" --max-wal "$MAX_WAL" --log-level warning 2>"$WORK/lifecycled.log" & PIDS+=($!)
wait_for $PORT_L
for i in $(seq 0 $((CONNECTIONS - 1))); do curl -sf -XPUT "http://127.0.0.1:$PORT_L/v1/instances/wal-$i" >/dev/null; done
curl -sf -XPOST "http://127.0.0.1:$PORT_L/v1/instances/wal-0/relaunches" >"$WORK/launch-body.json"

# The WAL's size every 100 ms while the load runs.
WAL="$WORK/data/lifecycled.sqlite-wal"
( while :; do stat -c %s "$WAL" 2>/dev/null || echo 0; sleep 0.1; done ) >"$WORK/wal-sizes" & SAMPLER=$!; PIDS+=($SAMPLER)

echo "lifecycled: ${SECONDS_UNDER_LOAD}s of relaunches, wrk -t$THREADS -c$CONNECTIONS, --max-wal $MAX_WAL"
read -r L_RPS L_P50 L_P99 < <(run_wrk "http://127.0.0.1:$PORT_L" "$SECONDS_UNDER_LOAD")
kill $SAMPLER; wait $SAMPLER 2>/dev/null || true
WAL_MAX=$(sort -n "$WORK/wal-sizes" | tail -1)
WAL_END=$(stat -c %s "$WAL" 2>/dev/null || echo 0)
DB_SIZE=$(stat -c %s "$WORK/data/lifecycled.sqlite")
RECORDS=$(curl -sf "http://127.0.0.1:$PORT_L/v1/instances/wal-1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
# Every request was a relaunch of one of the instances, so each holds about its share of them.
[ "$RECORDS" -gt 0 ] || { echo "the load stored no relaunch (wal-1 at version $RECORDS): is Benchmarks/relaunches.lua there?" >&2; exit 1; }
kill -TERM "${PIDS[0]}"; wait "${PIDS[0]}"
grep -E "error|warning" "$WORK/lifecycled.log" | grep -v "no dashboard folder" >&2 && { echo "lifecycled logged warnings or errors under load" >&2; exit 1; } || true
echo "lifecycled: $L_RPS req/s (p50 $L_P50, p99 $L_P99); WAL at most $WAL_MAX bytes (bound $MAX_WAL), $WAL_END at the end; database $DB_SIZE bytes; wal-1 at version $RECORDS"

"$BARE" $PORT_B "$WORK/launch-body.json" & PIDS+=($!)
wait_for $PORT_B
read -r B_RPS B_P50 B_P99 < <(run_wrk "http://127.0.0.1:$PORT_B" "$BARE_SECONDS")
RATIO=$(awk -v a="$L_RPS" -v b="$B_RPS" 'BEGIN {printf "%.2f", a / b}')
echo "bare server: $B_RPS req/s (p50 $B_P50, p99 $B_P99); ratio $RATIO"

mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
{
  echo "## WAL under sustained writes ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "Durable relaunches (\`POST /v1/instances/{id}/relaunches\`, sync normal) on $CONNECTIONS instances, wrk -t$THREADS -c$CONNECTIONS"
  echo "for ${SECONDS_UNDER_LOAD}s; the WAL file's size sampled every 100 ms. Baseline: the bare libmicrohttpd server"
  echo "answering the same requests with a body of the same size, ${BARE_SECONDS}s, same run."
  echo
  echo "| server | req/s | p50 | p99 | largest WAL | WAL bound | database at the end |"
  echo "|---|---|---|---|---|---|---|"
  echo "| lifecycled | $L_RPS | $L_P50 | $L_P99 | $(mib "$WAL_MAX") | $(mib "$MAX_WAL") | $(mib "$DB_SIZE") |"
  echo "| bare libmicrohttpd | $B_RPS | $B_P50 | $B_P99 | | | |"
  echo
  echo "Ratio to the bare server: $RATIO."
  echo
} >Benchmarks/.wal-results.md
[ "$WAL_MAX" -le "$MAX_WAL" ] || { echo "the WAL passed its bound: $WAL_MAX > $MAX_WAL bytes" >&2; exit 1; }
