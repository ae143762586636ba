#!/usr/bin/env bash
# Server-sent events for `make bench`: sse-load (C, epoll, Benchmarks/sse-load) holds
# SSE_SUBSCRIBERS subscribers on one stream and measures every delivery's latency from its
# POST, at SSE_RATE events/s and then posted as fast as answered; nginx + nchan (the anchor,
# Benchmarks/nchan/nginx.conf) and lifecycled's GET /v1/stream are measured in the same run by
# the same load process, in SSE_ROUNDS rounds that alternate which goes first. Each one's
# tail latency swings from run to run on the shared cores (nchan's p99 from send has ranged
# over 5x between runs), so the verdicts compare the rounds' medians, and each server's table
# rows are its round of the median p99 from send. lifecycled runs in its default configuration
# (as `make run` starts it), with only its per-client connection limit raised to hold the
# subscribers, which all come from 127.0.0.1. Writes Benchmarks/.sse-results.md.
#
#   bash Benchmarks/sse-bench.sh [path/to/lifecycled]    (default .build/release/lifecycled)
#
# SSE_BEFORE=path/to/another/lifecycled measures that build too, in the same run (between
# nchan and the first), for a before/after comparison.
#
# Knobs: SSE_ROUNDS (3), SSE_SUBSCRIBERS (10000), SSE_SECONDS (30, the rate window), SSE_RATE (10),
# SSE_MAX_SECONDS (10, the max-rate window), SSE_WARMUP (3), SSE_INFLIGHT (4 POSTs in flight
# at max rate), SSE_NCHAN_WORKERS (nproc), SSE_LIFECYCLED_FLAGS (extra lifecycled flags).
# Installs nothing: `make bench-deps` brings nginx, libnginx-mod-nchan and gcc.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${SSE_ROUNDS:-3}
SUBSCRIBERS=${SSE_SUBSCRIBERS:-10000}
WINDOW=${SSE_SECONDS:-30}
RATE=${SSE_RATE:-10}
MAX_WINDOW=${SSE_MAX_SECONDS:-10}
WARMUP=${SSE_WARMUP:-3}
INFLIGHT=${SSE_INFLIGHT:-4}
WORKERS=${SSE_NCHAN_WORKERS:-$(nproc)}
LIFECYCLED=${1:-.build/release/lifecycled}
NCHAN_MODULE=/usr/lib/nginx/modules/ngx_nchan_module.so
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
WORK=$(mktemp -d /tmp/lifecycled-sse.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
stop() { # PID: one we started, then forgotten so that cleanup cannot hit a reused id
  local keep=() p
  kill "$1"; wait "$1" 2>/dev/null || true
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
trap cleanup EXIT

if [ ! -x "$NGINX" ] || [ ! -f "$NCHAN_MODULE" ]; then
  echo "nginx with the nchan module is missing: make bench-deps (nginx libnginx-mod-nchan)" >&2
  exit 1
fi
# every subscriber is a descriptor in the load process and in the server
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt $((SUBSCRIBERS + 100)) ]; then
  echo "open-file limit $(ulimit -n) is too low for $SUBSCRIBERS subscribers" >&2
  exit 1
fi

LOAD=$WORK/sse-load
gcc -O2 -Wall -o "$LOAD" Benchmarks/sse-load/sse-load.c
"$LOAD" --self-test

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # PORT PATH
  for _ in $(seq 1 200); do curl -s -o /dev/null -m 1 "http://127.0.0.1:$1$2" && return 0; sleep 0.05; done
  echo "server on $1 did not start" >&2; return 1
}
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; } # field NAME LINE

# run_load LABEL OUT [sse-load options] -> the load's machine lines in OUT, its summary on stderr
run_load() {
  local label=$1 out=$2; shift 2
  echo "== $label: $SUBSCRIBERS subscribers, $RATE events/s for ${WINDOW}s (after ${WARMUP}s), then max rate for ${MAX_WINDOW}s"
  "$LOAD" --label "$label" --subscribers "$SUBSCRIBERS" --rate "$RATE" --seconds "$WINDOW" \
    --warmup "$WARMUP" --max-seconds "$MAX_WINDOW" --inflight "$INFLIGHT" "$@" | tee "$out"
  # A delivery sse-load had no room to record would be counted missing: the server's fault.
  if ! grep -q '^sse-totals .* dropped_deliveries=0 ' "$out"; then
    echo "$label: sse-load did not record every delivery (its record is full, or it gave no totals): the run cannot be reported" >&2
    exit 1
  fi
}

# --- nginx + nchan, WORKERS workers, on its own in the machine
# measure_nchan OUT: one run, started afresh
measure_nchan() {
  local out=$1 port workers server_pids nginx_pid
  rm -rf "$WORK/nchan"; mkdir -p "$WORK/nchan"
  port=$(free_port)
  sed -e "s#__DIR__#$WORK/nchan#g" -e "s#__PORT__#$port#g" -e "s#__WORKERS__#$WORKERS#g" \
    Benchmarks/nchan/nginx.conf >"$WORK/nchan/nginx.conf"
  "$NGINX" -p "$WORK/nchan/" -c "$WORK/nchan/nginx.conf" -e "$WORK/nchan/error.log" & nginx_pid=$!
  PIDS+=("$nginx_pid")
  wait_for "$port" / || { cat "$WORK/nchan/error.log" >&2; exit 1; }
  workers=""
  for _ in $(seq 1 100); do
    workers=$(cat "/proc/$nginx_pid/task/$nginx_pid/children" 2>/dev/null || true)
    [ "$(wc -w <<<"$workers")" -ge "$WORKERS" ] && break
    sleep 0.05
  done
  server_pids=$(echo "$nginx_pid $workers" | xargs | tr ' ' ',')
  run_load nchan "$out" --mode nchan --port "$port" --sub-path /sub --pub-path /pub --pid "$server_pids"
  stop "$nginx_pid"
}
NGINX_VERSION=$("$NGINX" -v 2>&1 | sed 's#.*nginx/##')
NCHAN_VERSION=$(dpkg-query -W -f='${Version}' libnginx-mod-nchan 2>/dev/null || echo unknown)

# --- lifecycled, when it serves GET /v1/stream
# measure_lifecycled LABEL EXECUTABLE OUT -> sets LIFECYCLED_STATE; the count of
# subscriptions it ended for overflow in OUT.dropped
measure_lifecycled() {
  local label=$1 executable=$2 out=$3 port pid
  LIFECYCLED_STATE="no /v1/stream yet (no executable at $executable)"
  [ -x "$executable" ] || return 0
  port=$(free_port)
  rm -rf "$WORK/data"
  # shellcheck disable=SC2086
  "$executable" --port "$port" --data-dir "$WORK/data" --max-connections-per-client 20000 ${SSE_LIFECYCLED_FLAGS:-} \
    >"$WORK/$label.log" 2>&1 & pid=$!
  PIDS+=("$pid")
  wait_for "$port" /healthz || exit 1
  curl -s -N -m 2 -o /dev/null -D "$WORK/stream-head" -H 'Accept: text/event-stream' \
    "http://127.0.0.1:$port/v1/stream" || true
  if head -1 "$WORK/stream-head" | grep -q '^HTTP/1\.[01] 200' &&
     grep -qi '^content-type: *text/event-stream' "$WORK/stream-head"; then
    LIFECYCLED_STATE=measured
    run_load "$label" "$out" --mode lifecycled --port "$port" --pid "$pid"
    # Subscriptions the server ended with `event: overflow` (further behind than their
    # buffer): sse-load does not reconnect, so what came after counts as missing.
    curl -sf "http://127.0.0.1:$port/metrics" | awk '$1 == "lifecycled_stream_subscribers_dropped_total" {print $2}' >"$out.dropped"
  else
    LIFECYCLED_STATE="no /v1/stream yet (GET /v1/stream: $(head -1 "$WORK/stream-head" | tr -d '\r' || echo no answer))"
  fi
  stop "$pid"
}
BEFORE_STATE=""
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r of $ROUNDS"
  # Odd rounds start with nchan, even ones with lifecycled.
  [ $((r % 2)) = 1 ] && measure_nchan "$WORK/nchan.$r.out"
  # The build before, when asked for, once, between nchan and lifecycled.
  if [ "$r" = 1 ] && [ -n "${SSE_BEFORE:-}" ]; then
    measure_lifecycled before "$SSE_BEFORE" "$WORK/before.out"
    BEFORE_STATE=$LIFECYCLED_STATE
  fi
  measure_lifecycled lifecycled "$LIFECYCLED" "$WORK/lifecycled.$r.out"
  [ $((r % 2)) = 0 ] && measure_nchan "$WORK/nchan.$r.out"
  [ "$LIFECYCLED_STATE" = measured ] || break
done
echo "lifecycled: $LIFECYCLED_STATE"

# median_round NAME: the output file of NAME's round with the median p99 from send at the
# rate (the lower middle one of an even count).
median_round() {
  local f
  for f in "$WORK/$1".[0-9]*.out; do
    echo "$(grep '^sse-result .* phase=rate ' "$f" | tr ' ' '\n' | sed -n 's/^send_p99_ms=//p') $f"
  done | sort -g | awk '{a[NR] = $2} END {print a[int((NR + 1) / 2)]}'
}
# p99s NAME: every round's p99 from send at the rate, in round order.
p99s() {
  local r list=""
  for r in $(seq 1 "$ROUNDS"); do
    [ -f "$WORK/$1.$r.out" ] || continue
    list+="${list:+, }$(grep '^sse-result .* phase=rate ' "$WORK/$1.$r.out" | tr ' ' '\n' | sed -n 's/^send_p99_ms=//p')"
  done
  echo "$list"
}
NCHAN_OUT=$(median_round nchan)

# --- the markdown section
# row NAME LINE -> one table row of a sse-result line
row() {
  local l=$2
  echo "| $1 | $(field posts_per_s "$l") | $(field deliveries_per_s "$l") | $(field send_p50_ms "$l") | $(field send_p99_ms "$l") | $(field send_max_ms "$l") |" \
       "$(field ack_p50_ms "$l") | $(field ack_p99_ms "$l") | $(field ack_max_ms "$l") | $(field before_ack_pct "$l")% |" \
       "$(field missing "$l") / $(field duplicates "$l") / $(field order_violations "$l") / $(field subs_closed "$l") |" \
       "$(field post_p50_ms "$l") / $(field post_p99_ms "$l") |" \
       "$(field server_cpu_pct "$l")% | $(field rss_kib_per_sub "$l") | $(field loader_cpu_pct "$l")% / $(field host_busy_pct "$l")% |"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

N_RATE=$(grep '^sse-result .* phase=rate ' "$NCHAN_OUT")
N_MAX=$(grep '^sse-result .* phase=max ' "$NCHAN_OUT")
{
  echo "## Server-sent events ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "sse-load (C, epoll, one thread) holds $SUBSCRIBERS subscribers on one stream: $RATE events/s for ${WINDOW}s"
  echo "after ${WARMUP}s of warm-up, then events posted as fast as answered ($INFLIGHT POSTs in flight) for ${MAX_WINDOW}s."
  echo "Latency of every delivery from its POST's sending and from its answer (negative: delivered before the answer);"
  echo "memory is the servers' resident set (all processes) grown since before the subscribers, per subscriber, at the"
  echo "window's end; server and load CPU are in per cent of one core."
  echo "Anchor: nginx $NGINX_VERSION with nchan $NCHAN_VERSION, $WORKERS workers (one per core, as lifecycled's threads),"
  echo "~350-byte messages. $(nproc) cores shared by server and load; the last column shows how busy they were."
  echo "$ROUNDS rounds, alternating which server goes first; each server's rows are its round of the median p99 from send."
  echo
  echo "| server, load | events/s | deliveries/s | from send p50 ms | p99 | max | from answer p50 ms | p99 | max | before answer | missing / dup / out of order / closed | POST answered p50 / p99 ms | server CPU | KiB per subscriber | load CPU / machine busy |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  row "nchan, $RATE events/s" "$N_RATE"
  if [ "$BEFORE_STATE" = measured ]; then
    B_RATE=$(grep '^sse-result .* phase=rate ' "$WORK/before.out")
    B_MAX=$(grep '^sse-result .* phase=max ' "$WORK/before.out")
    row "before ($SSE_BEFORE), $RATE events/s" "$B_RATE"
  fi
  if [ "$LIFECYCLED_STATE" = measured ]; then
    LIFECYCLED_OUT=$(median_round lifecycled)
    L_RATE=$(grep '^sse-result .* phase=rate ' "$LIFECYCLED_OUT")
    L_MAX=$(grep '^sse-result .* phase=max ' "$LIFECYCLED_OUT")
    row "lifecycled, $RATE events/s" "$L_RATE"
  fi
  row "nchan, max rate" "$N_MAX"
  [ "$BEFORE_STATE" = measured ] && row "before ($SSE_BEFORE), max rate" "$B_MAX"
  if [ "$LIFECYCLED_STATE" = measured ]; then
    row "lifecycled, max rate" "$L_MAX"
    echo
    # dropped OUT LABEL: the sentence on the subscriptions a lifecycled run ended for falling behind.
    dropped() {
      local count; count=$(cat "$1.dropped" 2>/dev/null || true)
      echo "$2 ended ${count:-an unknown number of} subscriptions with \`event: overflow\` for falling further behind than their buffer (\`--stream-buffer\`)."
    }
    dropped "$LIFECYCLED_OUT" "In its round in the table, lifecycled"
    [ "$BEFORE_STATE" = measured ] && dropped "$WORK/before.out" "The build before ($SSE_BEFORE)"
    echo "A client that reconnects with its \`Last-Event-ID\` (EventSource does) gets the rest; sse-load does not, so what follows an"
    echo "overflow is counted missing. It happens when events are posted faster than the server writes them to every subscriber."
    echo
    echo "| goal | lifecycled | nchan | ratio | goal |"
    echo "|---|---|---|---|---|"
    echo "| p50 from send at $RATE events/s | $(field send_p50_ms "$L_RATE") ms | $(field send_p50_ms "$N_RATE") ms |" \
         "$(ratio "$(field send_p50_ms "$L_RATE")" "$(field send_p50_ms "$N_RATE")") | at most 1.00 |"
    echo "| p99 from send at $RATE events/s, the rounds' median (each round's) | $(field send_p99_ms "$L_RATE") ms ($(p99s lifecycled)) | $(field send_p99_ms "$N_RATE") ms ($(p99s nchan)) |" \
         "$(ratio "$(field send_p99_ms "$L_RATE")" "$(field send_p99_ms "$N_RATE")") | under 100 ms and at most 1.00 |"
    echo "| deliveries/s at max rate | $(field deliveries_per_s "$L_MAX") | $(field deliveries_per_s "$N_MAX") |" \
         "$(ratio "$(field deliveries_per_s "$L_MAX")" "$(field deliveries_per_s "$N_MAX")") | at least 1.50 |"
    echo "| KiB per subscriber at $RATE events/s | $(field rss_kib_per_sub "$L_RATE") | $(field rss_kib_per_sub "$N_RATE") |" \
         "$(ratio "$(field rss_kib_per_sub "$L_RATE")" "$(field rss_kib_per_sub "$N_RATE")") | at most 1.50 |"
    echo "| POST answered p99 at $RATE events/s, streams running | $(field post_p99_ms "$L_RATE") ms | $(field post_p99_ms "$N_RATE") ms | | under 20 ms |"
  else
    echo
    echo "lifecycled: $LIFECYCLED_STATE"
  fi
  echo
} >"$WORK/sse.md"
cp "$WORK/sse.md" Benchmarks/.sse-results.md
echo "wrote Benchmarks/.sse-results.md"
