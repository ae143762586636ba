#!/usr/bin/env bash
# Batch benchmark for `make bench` (runnable alone: `bash Benchmarks/batch-bench.sh`, after
# `swift build -c release --product lifecycled`): durable events per second posted one per
# request (Benchmarks/events.lua) and as POST /v1/batch of 100 and of 1,000 (batch.lua),
# against one lifecycled started as `make run` starts it (the defaults: sync normal, access
# log on), in the same run, rounds alternating (each round in another order), medians
# reported. Writes Benchmarks/.batch-results.md.
#
# Fails on any non-2xx answer or socket error, on an unexpected event, and unless every item
# counted was stored: the records stored must be at least the events wrk counted (a 200 batch
# whose items were refused would store fewer) and at most that plus what was in flight when
# each run stopped.
# LIFECYCLED picks another binary; BENCH_DURATION, BENCH_WARMUP, BENCH_ROUNDS as http-bench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
INSTANCES=64
THREADS=2
# Single posts as http-bench.sh sends them; batches from fewer clients, as devices flushing a
# queue would, each waiting for its batch to be durable.
SINGLE_CONNECTIONS=64
BATCH_CONNECTIONS=16
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
WORK=$(mktemp -d /tmp/lifecycled-batch-bench.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

PORT=18191
BASE=http://127.0.0.1:$PORT
"$LIFECYCLED" --port "$PORT" --data-dir "$WORK/data" 2>"$WORK/server.log" & PID=$!
for _ in $(seq 1 200); do curl -sf "$BASE/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -sf "$BASE/healthz" >/dev/null || { echo "lifecycled did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
# One cold-started instance per single-post connection, in foreground, all in one batch.
items=""
for i in $(seq 0 $((INSTANCES - 1))); do
  items+="{\"instance\":\"bench-$i\",\"kind\":\"create\"},{\"instance\":\"bench-$i\",\"kind\":\"event\",\"body\":{\"event\":\"didFinishLaunching\"}},"
  items+="{\"instance\":\"bench-$i\",\"kind\":\"event\",\"body\":{\"event\":\"willConnectToWindow\",\"window\":\"main\"}},{\"instance\":\"bench-$i\",\"kind\":\"event\",\"body\":{\"event\":\"didBecomeActive\"}},"
done
curl -sf -H 'Content-Type: application/json' -d "{\"items\":[${items%,}]}" "$BASE/v1/batch" >"$WORK/setup.json"
grep -q '"status":4\|"status":5' "$WORK/setup.json" && { echo "the set-up batch refused items" >&2; exit 1; }

stored() { curl -sf "$BASE/v1/instances?limit=1000" | python3 -c 'import json,sys; print(sum(i["version"] for i in json.load(sys.stdin)["items"]))'; }
BEFORE=$(stored)
COUNTED=0
IN_FLIGHT=0

# run NAME SIZE -> prints "events/s p50 p99" of the measured run; adds both runs' events to COUNTED.
run() {
  local size=$1 connections script args out requests rps p50 p99 part
  if [ "$size" = 1 ]; then connections=$SINGLE_CONNECTIONS; script=Benchmarks/events.lua; else connections=$BATCH_CONNECTIONS; script=Benchmarks/batch.lua; fi
  args=(-t"$THREADS" -c"$connections" --latency --timeout 30s -s "$script")
  for part in warmup measured; do
    local seconds=$DURATION
    [ "$part" = warmup ] && seconds=$WARMUP
    out=$(BENCH_INSTANCES=$INSTANCES BENCH_BATCH=$size wrk "${args[@]}" -d"${seconds}s" "$BASE")
    if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx answers (batches of $size):" >&2; echo "$out" >&2; exit 1; fi
    if grep -q "Socket errors" <<<"$out"; then echo "socket errors (batches of $size):" >&2; echo "$out" >&2; exit 1; fi
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    COUNTED=$((COUNTED + requests * size))
    IN_FLIGHT=$((IN_FLIGHT + connections * size))
  done
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  awk -v r="$rps" -v s="$size" -v a="$p50" -v b="$p99" 'BEGIN {printf "%.0f %s %s\n", r * s, a, b}'
}

median_line() { sort -n -k1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
spread() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f-%.2f", lo, hi}'; }

echo "batches: $ROUNDS rounds of ${DURATION}s each, alternating; single posts wrk -t$THREADS -c$SINGLE_CONNECTIONS, batches -c$BATCH_CONNECTIONS"
: >"$WORK/1"; : >"$WORK/100"; : >"$WORK/1000"; : >"$WORK/r100"; : >"$WORK/r1000"
for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in 1) order="1 100 1000" ;; 2) order="100 1000 1" ;; 0) order="1000 1 100" ;; esac
  for size in $order; do run "$size" >"$WORK/$size.now"; cat "$WORK/$size.now" >>"$WORK/$size"; done
  one=$(cut -d' ' -f1 "$WORK/1.now")
  awk -v a="$(cut -d' ' -f1 "$WORK/100.now")" -v b="$one" 'BEGIN {printf "%.4f\n", a / b}' >>"$WORK/r100"
  awk -v a="$(cut -d' ' -f1 "$WORK/1000.now")" -v b="$one" 'BEGIN {printf "%.4f\n", a / b}' >>"$WORK/r1000"
  echo "  round $r: single $(cat "$WORK/1.now") | batches of 100 $(cat "$WORK/100.now") | batches of 1000 $(cat "$WORK/1000.now") (events/s p50 p99)"
done

STORED=$(( $(stored) - BEFORE ))
[ "$STORED" -ge "$COUNTED" ] || { echo "stored $STORED records, fewer than the $COUNTED events answered" >&2; exit 1; }
[ "$STORED" -le $((COUNTED + IN_FLIGHT)) ] || { echo "stored $STORED records, more than the $COUNTED answered and $IN_FLIGHT in flight" >&2; exit 1; }
unexpected=$(curl -sf "$BASE/v1/instances?limit=1000" | python3 -c 'import json,sys; print(sum(i["counters"]["unexpected"] for i in json.load(sys.stdin)["items"]))')
[ "$unexpected" = 0 ] || { echo "benchmark events were unexpected: $unexpected" >&2; exit 1; }
metrics=$(curl -sf "$BASE/metrics")
transactions=$(awk '$1=="lifecycled_store_commit_writes_count" {print $2}' <<<"$metrics")
writes=$(awk '$1=="lifecycled_store_commit_writes_sum" {print $2}' <<<"$metrics")

ROWS=""
for size in 1 100 1000; do
  read -r eps p50 p99 < <(median_line <"$WORK/$size")
  case $size in
    1) ratio="1"; label="single POST /v1/instances/{id}/events (-c$SINGLE_CONNECTIONS)" ;;
    *) ratio="$(median <"$WORK/r$size") ($(spread <"$WORK/r$size"))"; label="POST /v1/batch of $size events (-c$BATCH_CONNECTIONS)" ;;
  esac
  echo "$label: $eps events/s, request p50 $p50 p99 $p99, against single posts $ratio"
  ROWS+="| $label | $eps | $p50 | $p99 | $ratio |"$'\n'
done
echo "stored $STORED records for $COUNTED events answered; $transactions transactions committed $writes writes"

{
  echo "## Batches ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "Durable events per second posted one per request and as \`POST /v1/batch\` of 100 and 1,000, against one lifecycled started as \`make run\` starts it (the defaults), $ROUNDS rounds of ${WARMUP}s warm-up and ${DURATION}s measured, the three in turn (each round in another order), medians; wrk -t$THREADS, $(nproc) cores shared by the server and wrk. Latencies are per request (a batch's is its last item's). The ratio is against single posts in the same round, the median of the rounds' (their range beside it)."
  echo
  echo "| workload | events/s | p50 | p99 | against single posts |"
  echo "|---|---|---|---|---|"
  printf '%s' "$ROWS"
  echo
  echo "Every event answered was stored ($STORED records for $COUNTED events answered, the rest in flight when wrk stopped), none unexpected; the server committed $writes writes in $transactions transactions."
  echo
} >Benchmarks/.batch-results.md
echo "wrote Benchmarks/.batch-results.md"
