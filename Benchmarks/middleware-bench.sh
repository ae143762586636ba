#!/usr/bin/env bash
# What the production middlewares cost, for `make bench`: the same lifecycled binary twice,
# once with a bearer token on every request (--token, --protect-reads) and metrics on, once
# with neither (no token, --metrics off), measured in alternating rounds, medians reported.
# Both get the same requests, the Authorization header included (the second ignores it), so
# the ratio is what the middlewares cost, not the 45 bytes of the header, which cost about as
# much again on this 2-core machine, where wrk shares the cores.
# Request ids, the security headers and the access log (off at --log-level warning) run in
# both. Goal: the middlewares cost under 5% (ratio at least 0.95). Fails on any non-2xx.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
CONNECTIONS=64
THREADS=2
TOKEN=bench-token-0123456789abcdef
LIFECYCLED=.build/release/lifecycled
WORK=$(mktemp -d /tmp/lifecycled-mw-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

wait_for() { for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "server on $1 did not start" >&2; exit 1; }

# run_wrk URL AUTH [script] -> "rps p50 p99"
run_wrk() {
  local url=$1 auth=$2 script=${3:-} args=(-t"$THREADS" -c"$CONNECTIONS" --latency)
  [ -n "$auth" ] && args+=(-H "Authorization: Bearer $auth")
  [ -n "$script" ] && args+=(-s "$script")
  wrk "${args[@]}" -d"${WARMUP}s" "$url" >/dev/null
  local out; out=$(wrk "${args[@]}" -d"${DURATION}s" "$url")
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then echo "errors from $url:" >&2; echo "$out" >&2; exit 1; fi
  echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(awk '$1=="50%" {print $2}' <<<"$out") $(awk '$1=="99%" {print $2}' <<<"$out")"
}
median_line() { sort -n -k1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }

# setup PORT AUTH: a cold-started instance per connection (the events script's instances)
setup() {
  local port=$1 auth=$2 i e body
  for i in $(seq 0 $((CONNECTIONS - 1))); do
    curl -sf -XPUT -H "Authorization: Bearer $auth" "http://127.0.0.1:$port/v1/instances/bench-$i" >/dev/null
    for e in didFinishLaunching '{"event":"willConnectToWindow","window":"main"}' didBecomeActive; do
      case $e in \{*) body=$e ;; *) body="{\"event\":\"$e\"}" ;; esac
      curl -sf -XPOST -H "Authorization: Bearer $auth" -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/v1/instances/bench-$i/events" >/dev/null
    done
  done
}

PORT_ON=18191; PORT_OFF=18192
"$LIFECYCLED" --port $PORT_ON --data-dir "$WORK/on" --log-level warning --token "$TOKEN" --protect-reads & PIDS+=($!)
"$LIFECYCLED" --port $PORT_OFF --data-dir "$WORK/off" --log-level warning --metrics off & PIDS+=($!)
wait_for $PORT_ON; wait_for $PORT_OFF
setup $PORT_ON "$TOKEN"; setup $PORT_OFF none
# The token is really checked, and metrics really off and on.
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT_ON/v1/instances/bench-1")" = 401 ] || { echo "auth is not on" >&2; exit 1; }
curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT_ON/metrics" | grep -q '^lifecycled_http_requests_total' || { echo "metrics are not on" >&2; exit 1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT_OFF/metrics")" = 404 ] || { echo "metrics are not off" >&2; exit 1; }

ROWS=""
# compare NAME PATH [script]
compare() {
  local name=$1 path=$2 script=${3:-} r on off
  echo "$name: $ROUNDS rounds of ${DURATION}s each, alternating"
  : >"$WORK/on.txt"; : >"$WORK/off.txt"
  for r in $(seq 1 "$ROUNDS"); do
    on=$(run_wrk "http://127.0.0.1:$PORT_ON$path" "$TOKEN" $script); echo "$on" >>"$WORK/on.txt"
    off=$(run_wrk "http://127.0.0.1:$PORT_OFF$path" "$TOKEN" $script); echo "$off" >>"$WORK/off.txt"
    echo "  round $r: auth+metrics $on | neither $off (req/s p50 p99)"
  done
  local on_rps on_p50 on_p99 off_rps off_p50 off_p99 ratio
  read -r on_rps on_p50 on_p99 < <(median_line <"$WORK/on.txt")
  read -r off_rps off_p50 off_p99 < <(median_line <"$WORK/off.txt")
  ratio=$(awk -v a="$on_rps" -v b="$off_rps" 'BEGIN {printf "%.3f", a / b}')
  echo "$name median: with $on_rps req/s, without $off_rps req/s, ratio $ratio"
  ROWS+="| $name | $on_rps | $on_p50 | $on_p99 | $off_rps | $off_p50 | $off_p99 | $ratio | 0.95 |"$'\n'
}

compare "GET /v1/instances/{id}" /v1/instances/bench-1
compare "POST events, durable" "" Benchmarks/events.lua

{
  echo "## Middlewares: auth and metrics ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "One binary, two processes: with \`--token --protect-reads\` and metrics, and with no token and \`--metrics off\`; both sent the same requests, Authorization header included."
  echo "wrk -t$THREADS -c$CONNECTIONS, ${WARMUP}s warm-up, ${DURATION}s measured, $ROUNDS alternating rounds, medians; $(nproc) cores."
  echo
  echo "| benchmark | with req/s | p50 | p99 | without req/s | p50 | p99 | ratio | goal |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s' "$ROWS"
  echo
} >Benchmarks/.middleware-results.md
