#!/usr/bin/env bash
# A million instances, for `make bench` (runnable alone: `bash Benchmarks/million-bench.sh`,
# after `swift build -c release --product lifecycled`): how soon lifecycled, started as
# `make run` starts it (the defaults), serves again after a stop (SIGTERM) and after a crash
# (kill -9) with 1,000,000 instances, 4,000,000 records and 4,000,000 idempotency keys:
# launch to the first 200 from /healthz, and to the first answer of a read of an instance
# picked at random (data, not only health); its resident memory then and after every
# instance's page has been listed; a list page's latency, filtered and not. Baseline: the
# same with an empty database, same run. Then batch ingest (Benchmarks/ingest.lua, as
# ingest-bench.sh sends it) into the million against the same into a tenth of it (100,000
# instances written alike), the two servers running side by side and measured in turn:
# ingest must be as fast at 1M instances as at 100k. The rows are written straight into the
# schema lifecycled makes, with sqlite3. Writes Benchmarks/.million-results.md.
# BENCH_MILLION_INSTANCES (default 1000000) scales it down for a quick look.
set -euo pipefail
cd "$(dirname "$0")/.."

INSTANCES=${BENCH_MILLION_INSTANCES:-1000000}
PER=4
RECORDS=$((INSTANCES * PER))
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
WORK=$(mktemp -d /tmp/lifecycled-million.XXXXXX)
PORT=18195
BASE=http://127.0.0.1:$PORT
PID=
TENTH_PORT=18196
TENTH_PID=
cleanup() {
  for pid in $PID $TENTH_PID; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
rss_mib() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

# start DIR [OPTION...]: writes "ms-to-healthz ms-to-read rss-MiB" to $WORK/started; leaves the server
# running in $PID (so it is not called in a subshell).
start() {
  local dir=$1 began health read id
  shift
  began=$(now_ms)
  "$LIFECYCLED" --port "$PORT" --data-dir "$dir" "$@" >/dev/null 2>>"$WORK/server.log" & PID=$!
  until curl -sf "$BASE/healthz" >/dev/null 2>&1; do
    kill -0 "$PID" 2>/dev/null || { echo "lifecycled exited during start-up" >&2; tail -5 "$WORK/server.log" >&2; exit 1; }
    sleep 0.005
  done
  health=$(( $(now_ms) - began ))
  id=$(printf 'instance-%07d' $(( (RANDOM * 32768 + RANDOM) % INSTANCES )))
  [ "$INSTANCES" = 0 ] && id=none
  curl -s -o /dev/null "$BASE/v1/instances/$id"
  read=$(( $(now_ms) - began ))
  echo "$health $read $(rss_mib "$PID")" >"$WORK/started"
}
stop() { kill "-$1" "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

# The schema, from lifecycled itself.
start "$WORK/empty"; stop TERM

# generate DIR N: N instances, 4N records and 4N keys into DIR (a copy of the empty schema).
generate() {
  local n=$2
  cp -r "$WORK/empty" "$1"
  sqlite3 "$1/lifecycled.sqlite" >/dev/null <<SQL
  PRAGMA journal_mode = WAL;
  PRAGMA synchronous = OFF;
  BEGIN;
  WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $n - 1)
  INSERT INTO instances (id, model, state, version, launch_count, buffered_action, window, breadcrumb_step,
    scene_connected, unexpected, ignored, incomplete_launches, created_at, updated_at, divergences, dropped, labels)
  SELECT printf('instance-%07d', i), 'ios-app', CASE i % 3 WHEN 0 THEN 'background' ELSE 'foreground' END, $PER - 1, 1, NULL,
    'main', NULL, 1, 0, 0, 0, 1800000000000, 1800000000000 + i, 0, 0, '{"run":"r' || (i % 10) || '"}' FROM n;
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $((n * PER)))
  INSERT INTO records (seq, instance, version, kind, outcome, body)
  SELECT i, printf('instance-%07d', (i - 1) / $PER), (i - 1) % $PER, CASE (i - 1) % $PER WHEN 0 THEN 3 ELSE 0 END, 0,
    '{"sequence":' || i || ',"instance":"' || printf('instance-%07d', (i - 1) / $PER) || '","version":' || ((i - 1) % $PER)
    || ',"kind":"event","event":"didBecomeActive","from":"background","to":"foreground","outcome":"transitioned",'
    || '"hooks":["Foreground.onTransition","Foreground.didReturn"],"row":"r13","time":"2027-01-15T08:00:00.000Z"}'
  FROM n;
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $((n * PER)))
  INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
  SELECT printf('key-%08d', i), randomblob(32), CASE (i - 1) % $PER WHEN 0 THEN 0 ELSE 1 END,
    printf('instance-%07d', (i - 1) / $PER), 'ios-app', 1800000000000,
    '{"sequence":' || i || ',"instance":"' || printf('instance-%07d', (i - 1) / $PER) || '","kind":"event","outcome":"transitioned"}',
    1800000000000
  FROM n;
  COMMIT;
  PRAGMA wal_checkpoint(TRUNCATE);
SQL
}

echo "writing $INSTANCES instances, $RECORDS records and $RECORDS keys ..."
began=$(now_ms)
generate "$WORK/full" "$INSTANCES"
FULL_SIZE=$(du -h "$WORK/full/lifecycled.sqlite" | cut -f1)
echo "written in $(( ($(now_ms) - began) / 1000 )) s: $FULL_SIZE"

start "$WORK/empty"; EMPTY=$(cat "$WORK/started"); stop TERM
# First start on the data (cold: the file as sqlite3 left it), then a stop and a crash.
start "$WORK/full"; COLD=$(cat "$WORK/started")
stop TERM
start "$WORK/full"; TERM_START=$(cat "$WORK/started")
# Every page listed, filtered and not: memory once all of it has been touched; page latency.
page() { curl -s -o /dev/null -w '%{time_total}\n' "$BASE/v1/instances?$1"; }
PLAIN_MS=$(for _ in 1 2 3 4 5; do page "limit=100"; done | sort -g | sed -n 3p | awk '{printf "%.2f", $1 * 1000}')
FILTERED_MS=$(for _ in 1 2 3 4 5; do page "state=background&label=run%3Dr3&limit=100"; done | sort -g | sed -n 3p | awk '{printf "%.2f", $1 * 1000}')
cursor=""
for _ in $(seq 1 20); do
  cursor=$(curl -sf "$BASE/v1/instances?limit=1000${cursor:+&cursor=$cursor}" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("nextCursor") or "")')
  [ -n "$cursor" ] || break
done
RSS_LISTED=$(rss_mib "$PID")
stop 9
start "$WORK/full"; KILL_START=$(cat "$WORK/started")
stop TERM

# Batch ingest into the million against a tenth of it, measured in turn. The default
# --max-instances is 1,000,000, which the data already fills: both run with room for more.
ROOM=(--max-instances 2000000)
start "$WORK/full" "${ROOM[@]}"
TENTH=$((INSTANCES / 10))
echo "writing $TENTH instances for the ingest baseline ..."
generate "$WORK/tenth" "$TENTH"
"$LIFECYCLED" --port "$TENTH_PORT" --data-dir "$WORK/tenth" "${ROOM[@]}" >/dev/null 2>>"$WORK/server.log" & TENTH_PID=$!
until curl -sf "http://127.0.0.1:$TENTH_PORT/healthz" >/dev/null 2>&1; do
  kill -0 "$TENTH_PID" 2>/dev/null || { echo "lifecycled exited during start-up" >&2; tail -5 "$WORK/server.log" >&2; exit 1; }
  sleep 0.05
done
# ingest URL RUN: items/s of a 5 s run after a 2 s warm-up; RUN keeps ids and keys new.
ingest() {
  local out part seconds
  for part in w m; do
    seconds=5; [ "$part" = w ] && seconds=2
    out=$(BENCH_RUN="$2$part" BENCH_BATCH=1000 wrk -t2 -c16 --timeout 30s -s Benchmarks/ingest.lua -d"${seconds}s" "$1")
    grep -q "refused batches: 0" <<<"$out" || { echo "batches refused:" >&2; echo "$out" >&2; exit 1; }
    if grep -q "Socket errors\|Non-2xx" <<<"$out"; then echo "errors:" >&2; echo "$out" >&2; exit 1; fi
  done
  awk '/Requests\/sec/ {printf "%.0f", $2 * 1000}' <<<"$out"
}
: >"$WORK/ingest"
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then
    full=$(ingest "$BASE" "f$r"); tenth=$(ingest "http://127.0.0.1:$TENTH_PORT" "t$r")
  else
    tenth=$(ingest "http://127.0.0.1:$TENTH_PORT" "t$r"); full=$(ingest "$BASE" "f$r")
  fi
  echo "$full $tenth $(awk -v a="$full" -v b="$tenth" 'BEGIN {printf "%.3f", a / b}')" >>"$WORK/ingest"
  echo "  ingest round $r: at $INSTANCES instances $full items/s, at $TENTH $tenth items/s"
done
median_of() { cut -d' ' -f"$1" "$WORK/ingest" | sort -g | sed -n 2p; }
INGEST_FULL=$(median_of 1); INGEST_TENTH=$(median_of 2); INGEST_RATIO=$(median_of 3)
INGEST_RANGE=$(cut -d' ' -f3 "$WORK/ingest" | sort -g | sed -n '1p;3p' | paste -sd-)
stop TERM
kill -TERM "$TENTH_PID"; wait "$TENTH_PID" 2>/dev/null || true; TENTH_PID=

row() { read -r h r m <<<"$2"; echo "| $1 | $h ms | $r ms | $m MiB |"; }
echo "empty: $EMPTY; cold: $COLD; after SIGTERM: $TERM_START; after kill -9: $KILL_START (ms to /healthz, ms to a read, RSS MiB); pages ${PLAIN_MS} ms, filtered ${FILTERED_MS} ms; RSS after listing $RSS_LISTED MiB; ingest $INGEST_FULL items/s at $INSTANCES, $INGEST_TENTH at $TENTH (ratio $INGEST_RATIO, $INGEST_RANGE)"
{
  echo "## A million instances ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "lifecycled started as \`make run\` starts it on $INSTANCES instances, $RECORDS records and $RECORDS idempotency keys (written with sqlite3 into the schema lifecycled made; $FULL_SIZE), against an empty database in the same run: launch to the first 200 from \`/healthz\`, and to the answer of a read of an instance picked at random; resident memory then. $(nproc) cores."
  echo
  echo "| start | to /healthz | to a read | memory | "
  echo "|---|---|---|---|"
  row "empty database (baseline)" "$EMPTY"
  row "first start on the data" "$COLD"
  row "after a stop (SIGTERM)" "$TERM_START"
  row "after a crash (kill -9)" "$KILL_START"
  echo
  echo "Goal: serving within 2 s of a restart, at most 600 MiB. A list page of 100: ${PLAIN_MS} ms, filtered by state and label ${FILTERED_MS} ms (goal under 1 ms). Memory after listing 20 pages of 1,000: $RSS_LISTED MiB."
  echo
  echo "Batch ingest (\`POST /v1/batch\` of 1,000 keyed items, new instances' creates and cold starts, as ingest-bench.sh sends them; wrk -t2 -c16, 2 s warm-up, 5 s measured, 3 rounds alternating) into the $INSTANCES instances above against the same into $TENTH instances written alike, both servers running side by side, with \`--max-instances 2000000\` (the default, 1,000,000, is full): medians."
  echo
  echo "| instances | items/s | ratio to $TENTH (rounds' range) | goal |"
  echo "|---|---|---|---|"
  echo "| $TENTH (baseline) | $INGEST_TENTH | 1 | |"
  echo "| $INSTANCES | $INGEST_FULL | $INGEST_RATIO ($INGEST_RANGE) | at least 0.8 |"
  echo
} >Benchmarks/.million-results.md
echo "wrote Benchmarks/.million-results.md"
