#!/usr/bin/env bash
# Batch ingest on PostgreSQL, for `make bench` (runnable alone: `bash Benchmarks/ingest-postgres-bench.sh`,
# after `swift build -c release --product lifecycled`): items a second that lifecycled on
# PostgreSQL (a fresh cluster of Tests/postgres/cluster.sh, --database-url, otherwise the
# defaults) ingests as POST /v1/batch of 1,000 keyed items (Benchmarks/ingest.lua, as
# ingest-bench.sh sends them), against psql loading the same rows with COPY
# (Benchmarks/ingest-copy-baseline.py: three COPYs a transaction of 1,000 items) into another
# database of the same cluster whose schema lifecycled made. Reported; the issue sets no goal.
# Rounds alternate; medians with min and max. Writes Benchmarks/.ingest-postgres-results.md.
#
# Fails on a refused batch or item, a socket error, or unless every item answered was stored
# with its key (counted once the server has stopped).
# LIFECYCLED picks another binary; BENCH_DURATION, BENCH_WARMUP, BENCH_ROUNDS as ingest-bench.sh;
# BENCH_COPY_TRANSACTIONS (default 200) transactions of COPY a round.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
COPIES=${BENCH_COPY_TRANSACTIONS:-200}
SIZE=1000
CONNECTIONS=16
THREADS=2
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
WORK=$(mktemp -d /tmp/lifecycled-ingest-pg.XXXXXX)
# The server runs as the postgres user when this runs as root: it must reach its folder.
chmod 755 "$WORK"
PG=$WORK/pg
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true
  bash Tests/postgres/cluster.sh stop "$PG" immediate >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -x "$LIFECYCLED" ] || { echo "no $LIFECYCLED: swift build -c release --product lifecycled" >&2; exit 1; }

URL=$(bash Tests/postgres/cluster.sh start "$PG" $$)
psql_do() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
database_url() { sed "s#^postgresql:///postgres?#postgresql:///$1?#" <<<"$URL"; }
PG_VERSION=$(psql_do "$URL" 'SHOW server_version' | cut -d' ' -f1)
psql_do "$URL" "CREATE DATABASE ingest"
psql_do "$URL" "CREATE DATABASE baseline"

PORT=18196
BASE=http://127.0.0.1:$PORT
start_server() {
  "$LIFECYCLED" --port "$PORT" --data-dir "$WORK/$1" --database-url "$(database_url "$1")" 2>>"$WORK/server.log" & PID=$!
  for _ in $(seq 1 400); do curl -sf "$BASE/healthz" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "lifecycled did not start" >&2; cat "$WORK/server.log" >&2; exit 1
}
stop_server() { kill -TERM "$PID"; wait "$PID" || true; PID=; }

# The baseline's database: the schema lifecycled makes, empty.
start_server baseline; stop_server
start_server ingest

echo 0 >"$WORK/answered"; echo 0 >"$WORK/runs"
# lifecycled -> "items/s p50 p99" of the measured run (as ingest-bench.sh).
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
# psql's COPY -> items/s: the script is made before the clock starts.
baseline_run() {
  local began ended
  python3 Benchmarks/ingest-copy-baseline.py "$COPIES" "$SIZE" >"$WORK/copy.sql"
  began=$(date +%s%N)
  psql -X -q -v ON_ERROR_STOP=1 -d "$(database_url baseline)" -f "$WORK/copy.sql" >/dev/null
  ended=$(date +%s%N)
  awk -v n=$((COPIES * SIZE)) -v ns=$((ended - began)) 'BEGIN {printf "%.0f", n / (ns / 1e9)}'
}

median() { sort -g | awk '{a[NR]=$1} END {printf "%s", a[int((NR+1)/2)]}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }

echo "ingest on PostgreSQL $PG_VERSION: $ROUNDS rounds, lifecycled (wrk -t$THREADS -c$CONNECTIONS, batches of $SIZE keyed items, ${WARMUP}s warm-up, ${DURATION}s) and psql COPY ($COPIES transactions of $SIZE items), alternating"
: >"$WORK/l"; : >"$WORK/b"; : >"$WORK/r"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then l=$(lifecycled_run); b=$(baseline_run); else b=$(baseline_run); l=$(lifecycled_run); fi
  echo "$l" >>"$WORK/l"; echo "$b" >>"$WORK/b"
  ratio=$(awk -v a="${l%% *}" -v b="$b" 'BEGIN {printf "%.3f", a / b}')
  echo "$ratio" >>"$WORK/r"
  echo "  round $r: lifecycled $l (items/s p50 p99) | psql COPY $b items/s | ratio $ratio (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
stop_server

ANSWERED=$(cat "$WORK/answered")
records=$(psql_do "$(database_url ingest)" "SELECT count(*) FROM records")
keys=$(psql_do "$(database_url ingest)" "SELECT count(*) FROM idempotency")
[ "$records" -ge "$ANSWERED" ] || { echo "stored $records records, fewer than the $ANSWERED items answered" >&2; exit 1; }
[ "$keys" -ge "$ANSWERED" ] || { echo "stored $keys keys, fewer than the $ANSWERED items answered" >&2; exit 1; }
IN_FLIGHT=$(( $(cat "$WORK/runs") * CONNECTIONS * SIZE ))
[ "$records" -le $((ANSWERED + IN_FLIGHT)) ] || { echo "stored $records records, more than the $ANSWERED answered and $IN_FLIGHT in flight" >&2; exit 1; }
copied=$(psql_do "$(database_url baseline)" "SELECT count(*) FROM records")
[ "$copied" = $((ROUNDS * COPIES * SIZE)) ] || { echo "COPY stored $copied records, not $((ROUNDS * COPIES * SIZE))" >&2; exit 1; }

l_items=$(cut -d' ' -f1 "$WORK/l" | median); l_range=$(cut -d' ' -f1 "$WORK/l" | range)
b_items=$(median <"$WORK/b"); b_range=$(range <"$WORK/b")
ratio=$(median <"$WORK/r"); ratio_range=$(range <"$WORK/r")
p50=$(sort -g -k1 "$WORK/l" | awk '{a[NR]=$2} END {print a[int((NR+1)/2)]}')
p99=$(sort -g -k1 "$WORK/l" | awk '{a[NR]=$3} END {print a[int((NR+1)/2)]}')
echo "lifecycled on PostgreSQL $l_items items/s ($l_range), psql COPY $b_items ($b_range): ratio $ratio ($ratio_range); stored $records records and $keys keys for $ANSWERED items answered"

{
  echo "### Batch ingest on PostgreSQL ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "The same load against lifecycled on PostgreSQL $PG_VERSION (a fresh cluster on a Unix socket, fsync and synchronous_commit on; \`--database-url\`, otherwise the defaults), beside \`psql\` loading the same rows with COPY (\`Benchmarks/ingest-copy-baseline.py\`: a transaction of three COPYs a $SIZE items, $COPIES transactions a round, the script made before the clock starts) into another database of the cluster. $ROUNDS rounds, alternating, ${WARMUP}s warm-up and ${DURATION}s measured; medians with min-max. Reported: no goal is set."
  echo
  echo "| figure | median | min-max |"
  echo "|---|---|---|"
  echo "| lifecycled on PostgreSQL, items/s | $l_items | $l_range |"
  echo "| a batch's latency, p50 / p99 | $p50 / $p99 | |"
  echo "| psql COPY, items/s | $b_items | $b_range |"
  echo "| lifecycled against COPY, the rounds' ratios | $ratio | $ratio_range |"
  echo
  echo "Every item answered was stored with its key, once ($records records and $keys keys for $ANSWERED items answered)."
  echo
} >Benchmarks/.ingest-postgres-results.md
echo "wrote Benchmarks/.ingest-postgres-results.md"
