#!/usr/bin/env bash
# HTTP benchmarks for `make bench`: lifecycled against a bare libmicrohttpd server with
# the same threading flags, measured in the same run, alternating rounds, medians reported.
# Writes Benchmarks/RESULTS.md. Fails if any request was answered other than 2xx.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
CONNECTIONS=64
THREADS=2
LIFECYCLED=.build/release/lifecycled
BARE=Benchmarks/bare-server/bare-server
WORK=$(mktemp -d /tmp/lifecycled-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

gcc -O2 -o "$BARE" Benchmarks/bare-server/bare.c $(pkg-config --cflags --libs libmicrohttpd)

wait_for() { for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0; curl -sf -o /dev/null "http://127.0.0.1:$1/" 2>/dev/null && return 0; sleep 0.05; done; echo "server on $1 did not start" >&2; exit 1; }

# run_wrk URL [script] -> prints "rps p50 p99"; fails on any non-2xx or socket error.
run_wrk() {
  local url=$1 script=${2:-} args=(-t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency)
  [ -n "$script" ] && args+=(-s "$script")
  wrk "${args[@]}" -d"${WARMUP}s" "$url" >/dev/null
  local out; out=$(wrk "${args[@]}" "$url")
  if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx responses from $url:" >&2; echo "$out" >&2; exit 1; fi
  if grep -q "Socket errors" <<<"$out"; then echo "socket errors from $url:" >&2; echo "$out" >&2; exit 1; fi
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  echo "$rps $p50 $p99"
}

median_line() { sort -n -k1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }

# --- lifecycled, with a cold-started instance per connection
PORT_L=18181; PORT_B=18182
"$LIFECYCLED" --port $PORT_L --data-dir "$WORK/data" --log-level warning & PIDS+=($!)
wait_for $PORT_L
for i in $(seq 0 $((CONNECTIONS - 1))); do
  curl -sf -XPUT "http://127.0.0.1:$PORT_L/v1/instances/bench-$i" >/dev/null
  for e in didFinishLaunching '{"event":"willConnectToWindow","window":"main"}' didBecomeActive; do
    case $e in \{*) body=$e ;; *) body="{\"event\":\"$e\"}" ;; esac
    curl -sf -XPOST -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$PORT_L/v1/instances/bench-$i/events" >/dev/null
  done
done
curl -sf "http://127.0.0.1:$PORT_L/v1/instances/bench-0" >"$WORK/get-body.json"
curl -sf -XPOST -H 'Content-Type: application/json' -d '{"event":"willResignActive"}' "http://127.0.0.1:$PORT_L/v1/instances/bench-0/events" >"$WORK/post-body.json"

# --- the bare server answers with a body of the same size
"$BARE" $PORT_B "$WORK/get-body.json" & PIDS+=($!)
wait_for $PORT_B

# compare NAME URL_PATH [wrk script] -> alternating rounds; sets L_* and B_* (median lines) and RATIO.
compare() {
  local name=$1 path=$2 script=${3:-} r l b
  echo "$name: $ROUNDS rounds of ${DURATION}s each, alternating (wrk -t$THREADS -c$CONNECTIONS)"
  : >"$WORK/l"; : >"$WORK/b"
  for r in $(seq 1 "$ROUNDS"); do
    l=$(run_wrk "http://127.0.0.1:$PORT_L$path" $script); echo "$l" >>"$WORK/l"
    b=$(run_wrk "http://127.0.0.1:$PORT_B$path" $script); echo "$b" >>"$WORK/b"
    echo "  round $r: lifecycled $l | bare $b (req/s p50 p99)"
  done
  read -r L_RPS L_P50 L_P99 < <(median_line <"$WORK/l")
  read -r B_RPS B_P50 B_P99 < <(median_line <"$WORK/b")
  RATIO=$(awk -v a="$L_RPS" -v b="$B_RPS" 'BEGIN {printf "%.2f", a / b}')
  echo "$name median: lifecycled $L_RPS req/s, bare $B_RPS req/s, ratio $RATIO"
}

compare "GET /v1/instances/{id}" /v1/instances/bench-1
GET_ROW="| GET /v1/instances/{id} | $L_RPS | $L_P50 | $L_P99 | $B_RPS | $B_P50 | $B_P99 | $RATIO | 0.85 |"

# --- durable POST events, bare server restarted with the event response's size
kill "${PIDS[1]}"; wait "${PIDS[1]}" 2>/dev/null || true
"$BARE" $PORT_B "$WORK/post-body.json" & PIDS[1]=$!
wait_for $PORT_B
compare "POST /v1/instances/{id}/events (durable, sync normal, $CONNECTIONS instances)" "" Benchmarks/events.lua
POST_ROW="| POST events, durable (sync normal) | $L_RPS | $L_P50 | $L_P99 | $B_RPS | $B_P50 | $B_P99 | $RATIO | 0.30 |"
unexpected=$(curl -sf "http://127.0.0.1:$PORT_L/v1/instances?limit=1000" | python3 -c 'import json,sys; print(sum(i["counters"]["unexpected"] for i in json.load(sys.stdin)["items"]))')
[ "$unexpected" = 0 ] || { echo "benchmark events were unexpected: $unexpected" >&2; exit 1; }

{
  echo "## HTTP ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "wrk -t$THREADS -c$CONNECTIONS, ${WARMUP}s warm-up, ${DURATION}s measured, $ROUNDS alternating rounds, medians; $(nproc) cores shared by server and wrk."
  echo
  echo "| benchmark | lifecycled req/s | p50 | p99 | bare libmicrohttpd req/s | p50 | p99 | ratio | goal |"
  echo "|---|---|---|---|---|---|---|---|---|"
  echo "$GET_ROW"
  echo "$POST_ROW"
  echo
} >"$WORK/http.md"
cp "$WORK/http.md" Benchmarks/.http-results.md
