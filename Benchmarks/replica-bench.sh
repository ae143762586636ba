#!/usr/bin/env bash
# Replicas on PostgreSQL for `make bench`: durable POST events per second with one, two and
# three lifecycled replicas on one PostgreSQL (a fresh cluster of Tests/postgres/cluster.sh,
# fsync and synchronous_commit on), the load spread over the replicas (one wrk per replica,
# all on the same 64 instances, as a load balancer spreads them), beside SQLite single-node in
# the same run; then SSE delivery latency across replicas: posts on replica A, subscribers on
# replica B (sse-load --sub-port), beside subscribers on A itself. Writes
# Benchmarks/.replica-results.md. Fails if any request was answered other than 2xx.
#
# Knobs: BENCH_DURATION (5 s per round), BENCH_WARMUP (2 s), BENCH_ROUNDS (3, medians),
# REPLICA_SSE_RATE (20 events/s), REPLICA_SSE_SECONDS (15), REPLICA_SSE_SUBSCRIBERS (10).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-3}
CONNECTIONS=64
INSTANCES=64
SSE_RATE=${REPLICA_SSE_RATE:-20}
SSE_SECONDS=${REPLICA_SSE_SECONDS:-15}
SSE_SUBSCRIBERS=${REPLICA_SSE_SUBSCRIBERS:-10}
LIFECYCLED=.build/release/lifecycled
WORK=$(mktemp -d /tmp/lifecycled-replica-bench.XXXXXX)
# The server runs as the postgres user when this runs as root: it must reach its folder.
chmod 755 "$WORK"
PG=$WORK/pg
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  bash Tests/postgres/cluster.sh stop "$PG" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$LIFECYCLED" ] || { echo "no $LIFECYCLED: swift build -c release --product lifecycled" >&2; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "lifecycled on $1 did not start" >&2; exit 1; }
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; } # field NAME LINE
ms() { awk '{ v = $1 + 0; if ($1 ~ /us$/) v /= 1000; else if ($1 ~ /ms$/) v += 0; else if ($1 ~ /s$/) v *= 1000; printf "%.2f", v }' <<<"$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
median_line() { sort -n -k1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }

# --- PostgreSQL: a cluster of its own, stopped at the end (and by its watcher if this dies)
URL=$(bash Tests/postgres/cluster.sh start "$PG" $$)
psql_do() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$URL" -c "$1"; }
[ "$(psql_do 'SHOW synchronous_commit')" = on ] && [ "$(psql_do 'SHOW fsync')" = on ] \
  || { echo "PostgreSQL must have synchronous_commit and fsync on" >&2; exit 1; }
PG_VERSION=$(psql_do 'SHOW server_version' | cut -d' ' -f1)
database_url() { sed "s#^postgresql:///postgres?#postgresql:///$1?#" <<<"$URL"; }

# start NAME [flags...]: a lifecycled with its own data folder, on STARTED_PORT; STARTED_PID joins PIDS
STARTED_PORT=""
STARTED_PID=""
start() {
  local name=$1; shift
  STARTED_PORT=$(free_port)
  "$LIFECYCLED" --port "$STARTED_PORT" --data-dir "$WORK/$name" --log-level warning "$@" >"$WORK/$name.log" 2>&1 &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  wait_for "$STARTED_PORT"
}
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

# make_instances PORT: bench-0 ... cold-started, each ready for willResignActive / didBecomeActive in any order
make_instances() {
  local i e body
  for i in $(seq 0 $((INSTANCES - 1))); do
    curl -sf -XPUT "http://127.0.0.1:$1/v1/instances/bench-$i" >/dev/null
    for e in didFinishLaunching '{"event":"willConnectToWindow","window":"main"}' didBecomeActive; do
      case $e in \{*) body=$e ;; *) body="{\"event\":\"$e\"}" ;; esac
      curl -sf -XPOST -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$1/v1/instances/bench-$i/events" >/dev/null
    done
  done
}

# load SECONDS PORT... -> "req/s p50_ms p99_ms": one wrk per port at once, the 64 connections and
# 2 threads shared among them; req/s summed, latency the worst of them. Fails on non-2xx or socket errors.
load() {
  local seconds=$1; shift
  local n=$# threads=1 i=0 port pids=()
  [ "$n" = 1 ] && threads=2
  for port in "$@"; do
    i=$((i + 1))
    BENCH_INSTANCES=$INSTANCES wrk -t"$threads" -c$((CONNECTIONS / n)) -d"${seconds}s" --latency -s Benchmarks/events.lua \
      "http://127.0.0.1:$port" >"$WORK/wrk.$i" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  local rps=0 p50=0 p99=0 out
  for i in $(seq 1 "$n"); do
    out=$(cat "$WORK/wrk.$i")
    if grep -q "Non-2xx\|Socket errors" <<<"$out"; then echo "errors from wrk:" >&2; echo "$out" >&2; exit 1; fi
    rps=$(awk -v a="$rps" -v b="$(awk '/Requests\/sec/ {print $2}' <<<"$out")" 'BEGIN {printf "%.2f", a + b}')
    p50=$(awk -v a="$p50" -v b="$(ms "$(awk '$1=="50%" {print $2}' <<<"$out")")" 'BEGIN {print (b > a ? b : a)}')
    p99=$(awk -v a="$p99" -v b="$(ms "$(awk '$1=="99%" {print $2}' <<<"$out")")" 'BEGIN {print (b > a ? b : a)}')
  done
  echo "$rps $p50 $p99"
}

# measure LABEL PORT... -> warm-up, ROUNDS rounds, the median round in RESULT ("req/s p50 p99")
measure() {
  local label=$1 r line; shift
  load "$WARMUP" "$@" >/dev/null
  : >"$WORK/rounds"
  for r in $(seq 1 "$ROUNDS"); do
    line=$(load "$DURATION" "$@")
    echo "$line" >>"$WORK/rounds"
    echo "  $label round $r: $line (req/s, p50 ms, p99 ms)"
  done
  RESULT=$(median_line <"$WORK/rounds")
  echo "$label median: $RESULT"
}

# no event of the load may have been unexpected (each is valid in foreground, in any order)
check_expected() {
  local unexpected
  unexpected=$(curl -sf "http://127.0.0.1:$1/v1/instances?limit=1000" | python3 -c 'import json,sys; print(sum(i["counters"]["unexpected"] for i in json.load(sys.stdin)["items"]))')
  [ "$unexpected" = 0 ] || { echo "benchmark events were unexpected: $unexpected" >&2; exit 1; }
}

declare -A RPS P50 P99
for sync in normal full; do
  echo "== SQLite single node, --sync $sync"
  start "sqlite-$sync" --sync "$sync"
  port=$STARTED_PORT
  make_instances "$port"
  measure "sqlite $sync" "$port"
  read -r RPS[sqlite-$sync] P50[sqlite-$sync] P99[sqlite-$sync] <<<"$RESULT"
  check_expected "$port"
  stop_all
done

for replicas in 1 2 3; do
  echo "== PostgreSQL, $replicas replica(s)"
  psql_do "CREATE DATABASE bench_$replicas"
  ports=()
  for i in $(seq 1 "$replicas"); do
    start "pg$replicas-$i" --database-url "$(database_url "bench_$replicas")"
    ports+=("$STARTED_PORT")
  done
  make_instances "${ports[0]}"
  measure "postgresql x$replicas" "${ports[@]}"
  read -r RPS[pg-$replicas] P50[pg-$replicas] P99[pg-$replicas] <<<"$RESULT"
  check_expected "${ports[-1]}"
  stop_all
done

# --- SSE delivery across replicas: sse-load posts on A; its subscribers on B, then on A itself
LOAD=$WORK/sse-load
gcc -O2 -Wall -o "$LOAD" Benchmarks/sse-load/sse-load.c
psql_do "CREATE DATABASE bench_sse"
start sse-a --database-url "$(database_url bench_sse)"
A=$STARTED_PORT A_PID=$STARTED_PID
start sse-b --database-url "$(database_url bench_sse)"
B=$STARTED_PORT B_PID=$STARTED_PID
sse() { # LABEL SUB_PORT PREFIX
  echo "== SSE, $1: $SSE_SUBSCRIBERS subscribers, $SSE_RATE events/s for ${SSE_SECONDS}s" >&2
  "$LOAD" --mode lifecycled --label "$1" --port "$A" --sub-port "$2" --instance-prefix "$3" --subscribers "$SSE_SUBSCRIBERS" \
    --rate "$SSE_RATE" --seconds "$SSE_SECONDS" --warmup 2 --pid "$A_PID,$B_PID" >"$WORK/sse.$3"
  grep '^sse-result .* phase=rate ' "$WORK/sse.$3"
}
CROSS=$(sse "across replicas (post on A, subscribe on B)" "$B" cross-)
SAME=$(sse "one replica (post and subscribe on A)" "$A" same-)
echo "$CROSS"
echo "$SAME"
stop_all
for line in "$CROSS" "$SAME"; do
  [ "$(field missing "$line")/$(field duplicates "$line")/$(field order_violations "$line")" = 0/0/0 ] \
    || { echo "SSE deliveries missing, duplicated or out of order: $line" >&2; exit 1; }
done

# --- the markdown section
row() { # LABEL KEY
  echo "| $1 | ${RPS[$2]} | ${P50[$2]} | ${P99[$2]} | $(ratio "${RPS[$2]}" "${RPS[sqlite-normal]}") | $(ratio "${RPS[$2]}" "${RPS[sqlite-full]}") |"
}
sse_row() { # LABEL LINE
  echo "| $1 | $(field events "$2") | $(field deliveries "$2") | $(field ack_p50_ms "$2") | $(field ack_p99_ms "$2") | $(field ack_max_ms "$2") | $(field send_p50_ms "$2") | $(field send_p99_ms "$2") | $(field before_ack_pct "$2")% |"
}
{
  echo "## Replicas on PostgreSQL ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "Durable POST events: wrk with Benchmarks/events.lua on $INSTANCES cold-started instances, $CONNECTIONS connections"
  echo "and 2 threads in all; with several replicas one wrk per replica at once, each on all $INSTANCES instances (as a load"
  echo "balancer spreads them), its share of the connections; req/s summed, latency the worst replica's. ${WARMUP}s warm-up,"
  echo "$ROUNDS rounds of ${DURATION}s, medians. PostgreSQL $PG_VERSION, a fresh cluster (Tests/postgres/cluster.sh) on a Unix"
  echo "socket, fsync and synchronous_commit on: an answered event is on disk, as with SQLite --sync full."
  echo
  echo "On $(nproc) shared cores, replicas, PostgreSQL and wrk all share the same cores: this shows what an event costs"
  echo "on PostgreSQL against SQLite and how the cost changes as replicas are added (each must read what the others"
  echo "committed before it decides), not a scale-out speed-up, which needs replicas on machines of their own."
  echo
  echo "| setup | events/s | p50 ms | p99 ms | vs SQLite sync normal | vs SQLite sync full |"
  echo "|---|---|---|---|---|---|"
  row "SQLite single node, --sync normal (default)" sqlite-normal
  row "SQLite single node, --sync full" sqlite-full
  row "PostgreSQL, 1 replica" pg-1
  row "PostgreSQL, 2 replicas" pg-2
  row "PostgreSQL, 3 replicas" pg-3
  echo
  echo "SSE delivery across replicas: Benchmarks/sse-load posts $SSE_RATE events/s for ${SSE_SECONDS}s (after 2 s of warm-up) on"
  echo "replica A; $SSE_SUBSCRIBERS subscribers of GET /v1/stream on replica B, which learns of A's commits by NOTIFY and"
  echo "reads them from PostgreSQL. Latency from A's answer to B's delivery (negative: delivered before the answer), and"
  echo "from the POST's sending; beside the same load with the subscribers on A itself."
  echo
  echo "| subscribers | events | deliveries | from answer p50 ms | p99 | max | from send p50 ms | p99 | before answer |"
  echo "|---|---|---|---|---|---|---|---|---|"
  sse_row "on replica B (across)" "$CROSS"
  sse_row "on replica A (same)" "$SAME"
  echo
} >"$WORK/replica.md"
cp "$WORK/replica.md" Benchmarks/.replica-results.md
echo "wrote Benchmarks/.replica-results.md"
