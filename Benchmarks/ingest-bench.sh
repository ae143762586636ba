#!/usr/bin/env bash
# Batch-ingest benchmark for `make bench` (runnable alone: `bash Benchmarks/ingest-bench.sh`,
# after `swift build -c release --product lifecycled`): items a second that lifecycled,
# started as `make run` starts it (the defaults: SQLite, sync normal, access log on), ingests
# as POST /v1/batch of 1,000 items from 16 connections (Benchmarks/ingest.lua: new instances'
# creates and cold starts, every item with an idempotency key of its own, as the offline
# reporter sends them), against bare SQLite writing the same rows from Python's sqlite3
# (Benchmarks/ingest-baseline.py: a record and a key an item, an instance row an instance,
# 1,000 items a transaction, WAL, synchronous=normal) into a schema lifecycled made. Rounds
# alternate (each in another order); medians, with min and max. Writes
# Benchmarks/.ingest-results.md.
#
# Fails on a refused batch or item, a socket error, or unless every item answered was stored
# with its key, and no more than were sent (counted in the database once the server has
# stopped).
# LIFECYCLED picks another binary; BENCH_DURATION, BENCH_WARMUP, BENCH_ROUNDS as http-bench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
SIZE=1000
CONNECTIONS=16
THREADS=2
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
PYTHON=${BENCH_PYTHON:-python3}
WORK=$(mktemp -d /tmp/lifecycled-ingest-bench.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

PORT=18193
BASE=http://127.0.0.1:$PORT
start_server() {
  "$LIFECYCLED" --port "$PORT" --data-dir "$1" 2>>"$WORK/server.log" & PID=$!
  for _ in $(seq 1 400); do curl -sf "$BASE/healthz" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "lifecycled did not start" >&2; cat "$WORK/server.log" >&2; exit 1
}
stop_server() { kill -TERM "$PID"; wait "$PID" || true; PID=; }

# The baseline's database: the schema lifecycled makes, empty.
start_server "$WORK/baseline"; stop_server
start_server "$WORK/data"

# lifecycled -> "items/s p50 p99" of the measured run; adds both runs' items to $WORK/answered
# (it runs in a subshell).
echo 0 >"$WORK/answered"; echo 0 >"$WORK/runs"
lifecycled_run() {
  local part out requests seconds run
  for part in warmup measured; do
    seconds=$DURATION; [ "$part" = warmup ] && seconds=$WARMUP
    run=$(( $(cat "$WORK/runs") + 1 )); echo "$run" >"$WORK/runs"
    out=$(BENCH_RUN=$run BENCH_BATCH=$SIZE wrk -t"$THREADS" -c"$CONNECTIONS" --latency --timeout 30s -s Benchmarks/ingest.lua -d"${seconds}s" "$BASE")
    grep -q "refused batches: 0" <<<"$out" || { echo "batches refused:" >&2; echo "$out" >&2; exit 1; }
    if grep -q "Socket errors\|Non-2xx" <<<"$out"; then echo "errors:" >&2; echo "$out" >&2; exit 1; fi
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    echo $(( $(cat "$WORK/answered") + requests * SIZE )) >"$WORK/answered"
  done
  awk -v r="$(awk '/Requests\/sec/ {print $2}' <<<"$out")" -v s="$SIZE" -v a="$(awk '$1=="50%" {print $2}' <<<"$out")" \
    -v b="$(awk '$1=="99%" {print $2}' <<<"$out")" 'BEGIN {printf "%.0f %s %s\n", r * s, a, b}'
}
baseline_run() { "$PYTHON" Benchmarks/ingest-baseline.py "$WORK/baseline/lifecycled.sqlite" "$DURATION" "$SIZE" | cut -d' ' -f1; }

median() { sort -g | awk '{a[NR]=$1} END {printf "%s", a[int((NR+1)/2)]}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }

echo "ingest: $ROUNDS rounds, lifecycled (wrk -t$THREADS -c$CONNECTIONS, batches of $SIZE keyed items, ${WARMUP}s warm-up, ${DURATION}s) and bare SQLite from Python (${DURATION}s), alternating"
: >"$WORK/l"; : >"$WORK/b"; : >"$WORK/r"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then l=$(lifecycled_run); b=$(baseline_run); else b=$(baseline_run); l=$(lifecycled_run); fi
  echo "$l" >>"$WORK/l"; echo "$b" >>"$WORK/b"
  ratio=$(awk -v a="${l%% *}" -v b="$b" 'BEGIN {printf "%.3f", a / b}')
  echo "$ratio" >>"$WORK/r"
  echo "  round $r: lifecycled $l (items/s p50 p99) | bare SQLite $b items/s | ratio $ratio (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
stop_server

ANSWERED=$(cat "$WORK/answered")
DB="$WORK/data/lifecycled.sqlite"
# Each item answered is a record; the set-up made none. Keys: one an item.
read -r records keys < <("$PYTHON" -c 'import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); print(d.execute("SELECT count(*) FROM records").fetchone()[0], d.execute("SELECT count(*) FROM idempotency").fetchone()[0])' "$DB")
[ "$records" -ge "$ANSWERED" ] || { echo "stored $records records, fewer than the $ANSWERED items answered" >&2; exit 1; }
[ "$keys" -ge "$ANSWERED" ] || { echo "stored $keys keys, fewer than the $ANSWERED items answered" >&2; exit 1; }
# wrk counts a batch only if it was answered before the run ended; those in flight then (a
# connection's batch a run) are stored too, and nothing more.
IN_FLIGHT=$(( $(cat "$WORK/runs") * CONNECTIONS * SIZE ))
[ "$records" -le $((ANSWERED + IN_FLIGHT)) ] || { echo "stored $records records, more than the $ANSWERED answered and $IN_FLIGHT in flight" >&2; exit 1; }

l_items=$(cut -d' ' -f1 "$WORK/l" | median); l_range=$(cut -d' ' -f1 "$WORK/l" | range)
b_items=$(median <"$WORK/b"); b_range=$(range <"$WORK/b")
ratio=$(median <"$WORK/r"); ratio_range=$(range <"$WORK/r")
p50=$(sort -g -k1 "$WORK/l" | awk '{a[NR]=$2} END {print a[int((NR+1)/2)]}')
p99=$(sort -g -k1 "$WORK/l" | awk '{a[NR]=$3} END {print a[int((NR+1)/2)]}')
echo "lifecycled $l_items items/s ($l_range), bare SQLite $b_items ($b_range): ratio $ratio ($ratio_range); stored $records records and $keys keys for $ANSWERED items answered"

{
  echo "## Batch ingest ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "Items a second ingested as \`POST /v1/batch\` of $SIZE items (new instances' creates and cold starts, each item with an idempotency key of its own, as the offline reporter sends them; wrk -t$THREADS -c$CONNECTIONS, \`Benchmarks/ingest.lua\`) by lifecycled started as \`make run\` starts it (the defaults), against bare SQLite writing the same rows from Python's sqlite3 (\`Benchmarks/ingest-baseline.py\`: a record and a key an item, an instance row an instance, $SIZE items a transaction, WAL, synchronous=normal; only its transactions timed) in the same run. $ROUNDS rounds, alternating, ${WARMUP}s warm-up and ${DURATION}s measured; medians with min-max; $(nproc) cores shared by the server, wrk and Python."
  echo
  echo "| figure | median | min-max | goal |"
  echo "|---|---|---|---|"
  echo "| lifecycled, items/s | $l_items | $l_range | |"
  echo "| a batch's latency, p50 / p99 | $p50 / $p99 | | |"
  echo "| bare SQLite from Python, items/s | $b_items | $b_range | |"
  echo "| lifecycled against bare SQLite, the rounds' ratios | $ratio | $ratio_range | at least 1 |"
  echo
  echo "Every item answered was stored with its key, once ($records records and $keys keys for $ANSWERED items answered; the rest were in flight when a run stopped)."
  echo
} >Benchmarks/.ingest-results.md
echo "wrote Benchmarks/.ingest-results.md"
