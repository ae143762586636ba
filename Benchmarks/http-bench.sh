#!/usr/bin/env bash
# HTTP benchmarks for `make bench`: lifecycled as users run it against a bare libmicrohttpd
# server with the same threading flags, measured in the same run, rounds alternating (each
# round in a different order), medians reported. Writes Benchmarks/.http-results.md.
# Fails if any request was answered other than 2xx.
#
# Three lifecycled processes of one binary:
# - default: started exactly as `make run` starts it (`--port --data-dir`, from the
#   repository, so it serves the dashboard): access log on, request ids, metrics, the host
#   check; its standard error goes to a file, as a service manager would capture it.
# - quiet: the same with `--log-level warning` (no access log).
# - token: the default with `--token --protect-reads`, every request sending the token, so
#   that authentication is on the path of reads and writes alike.
# Beside them for GET, lifecycled's HTTP layer with nothing on it (Benchmarks/http-layer: the
# same server, configuration and routing, one route, no middleware, no store), answering the
# same body with Content-Type alone (as the bare server does) and with the five headers
# lifecycled's GET sends: what the layer costs, apart from what the service does on it.
# Every ratio is the median of the rounds' ratios against the bare server's rate in the same
# round, with their range beside it; rates are the medians of the rounds with their range,
# latencies those of the round of the median rate. The access log's cost is the median of
# the rounds' default/quiet ratios.
# LIFECYCLED picks another binary (a baseline build, to compare commits).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
CONNECTIONS=64
THREADS=2
TOKEN=bench-token-0123456789abcdef
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
BARE=Benchmarks/bare-server/bare-server
HTTP_LAYER=${HTTP_LAYER:-.build/release/http-layer}
OWN_LOOP=${OWN_LOOP:-.build/release/own-loop}
WORK=$(mktemp -d /tmp/lifecycled-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

[ -x "$HTTP_LAYER" ] || { echo "$HTTP_LAYER is missing: swift build -c release --product http-layer" >&2; exit 1; }
[ -x "$OWN_LOOP" ] || { echo "$OWN_LOOP is missing: swift build -c release --product own-loop" >&2; exit 1; }
gcc -O2 -o "$BARE" Benchmarks/bare-server/bare.c $(pkg-config --cflags --libs libmicrohttpd)

# wait_for PORT [PATH]: until PATH (/healthz or /) answers 2xx.
wait_for() { for _ in $(seq 1 200); do for path in ${2:-/healthz /}; do curl -sf -o /dev/null "http://127.0.0.1:$1$path" 2>/dev/null && return 0; done; sleep 0.05; done; echo "server on $1 did not start" >&2; exit 1; }

# The server's CPU time so far (user and system), in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run_wrk URL [script] [header] -> prints "rps p50 p99 cpu", cpu the server's microseconds of CPU
# a request (its pid from PID_OF by the URL's port); fails on any non-2xx or socket error.
run_wrk() {
  local url=$1 script=${2:-} header=${3:-} args=(-t"$THREADS" -c"$CONNECTIONS" --latency) port pid before
  [ -n "$script" ] && args+=(-s "$script")
  [ -n "$header" ] && args+=(-H "$header")
  port=${url#http://127.0.0.1:}; port=${port%%/*}; pid=${PID_OF[$port]}
  wrk "${args[@]}" -d"${WARMUP}s" "$url" >/dev/null
  before=$(cpu_ticks "$pid")
  local out; out=$(wrk "${args[@]}" -d"${DURATION}s" "$url")
  # Microseconds of the server's CPU a request: steadier than the rate on cores the servers
  # share with wrk (which is not counted in it).
  local cpu; cpu=$(awk -v t="$(($(cpu_ticks "$pid") - before))" -v hz="$(getconf CLK_TCK)" '/requests in/ {printf "%.2f", t / hz * 1e6 / $1}' <<<"$out")
  if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx responses from $url:" >&2; echo "$out" >&2; exit 1; fi
  if grep -q "Socket errors" <<<"$out"; then echo "socket errors from $url:" >&2; echo "$out" >&2; exit 1; fi
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  echo "$rps $p50 $p99 $cpu"
}

# The rounds' median CPU a request of one server, their range beside it.
cpu_cell() { cut -d' ' -f4 "$WORK/$1" | sort -n | awk '{a[NR] = $1} END {printf "%.1f (%.1f-%.1f)", a[int((NR + 1) / 2)], a[1], a[NR]}'; }
median_line() { sort -n -k1 | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
spread() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3f-%.3f", lo, hi}'; }
# The range of the first column (rates), to the unit.
range() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f-%.0f", lo, hi}'; }

# start PORT NAME FLAGS...: a lifecycled with a cold-started instance per connection.
# SERVER picks the binary: own-loop serves the same service without libmicrohttpd.
start() {
  local port=$1 name=$2 i e body
  shift 2
  "${SERVER:-$LIFECYCLED}" --port "$port" --data-dir "$WORK/data-$name" "$@" 2>"$WORK/$name.log" & PIDS+=($!); PID_OF[$port]=$!
  wait_for "$port"
  for i in $(seq 0 $((CONNECTIONS - 1))); do
    curl -sf -H "Authorization: Bearer $TOKEN" -XPUT "http://127.0.0.1:$port/v1/instances/bench-$i" >/dev/null
    for e in didFinishLaunching '{"event":"willConnectToWindow","window":"main"}' didBecomeActive; do
      case $e in \{*) body=$e ;; *) body="{\"event\":\"$e\"}" ;; esac
      curl -sf -H "Authorization: Bearer $TOKEN" -XPOST -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/v1/instances/bench-$i/events" >/dev/null
    done
  done
}

declare -A PID_OF
PORT_D=18181; PORT_Q=18183; PORT_T=18184; PORT_B=18182; PORT_L=18185; PORT_H=18186; PORT_O=18187
start $PORT_D default
start $PORT_Q quiet --log-level warning
start $PORT_T token --token "$TOKEN" --protect-reads
SERVER=$OWN_LOOP start $PORT_O own
# The token is really asked for.
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT_T/v1/instances/bench-0")" = 401 ] || { echo "the token configuration answered a read without the token" >&2; exit 1; }
curl -sf "http://127.0.0.1:$PORT_D/v1/instances/bench-0" >"$WORK/get-body.json"
curl -sf -XPOST -H 'Content-Type: application/json' -d '{"event":"willResignActive"}' "http://127.0.0.1:$PORT_D/v1/instances/bench-0/events" >"$WORK/post-body.json"
curl -sf -XPOST -H 'Content-Type: application/json' -d '{"event":"willResignActive"}' "http://127.0.0.1:$PORT_Q/v1/instances/bench-0/events" >/dev/null
# The access log is really on in one and off in the other.
grep -q 'msg=request method=GET' "$WORK/default.log" || { echo "the default configuration wrote no access log" >&2; exit 1; }
! grep -q 'msg=request ' "$WORK/quiet.log" || { echo "the quiet configuration wrote an access log" >&2; exit 1; }

# --- the bare server answers with a body of the same size
"$BARE" $PORT_B "$WORK/get-body.json" & PIDS+=($!); PID_OF[$PORT_B]=$!
BARE_INDEX=$((${#PIDS[@]} - 1))
wait_for $PORT_B
# --- the HTTP layer alone, with the same body: Content-Type alone, and lifecycled's five headers
"$HTTP_LAYER" $PORT_L "$WORK/get-body.json" one 2>"$WORK/layer.log" & PIDS+=($!); PID_OF[$PORT_L]=$!
"$HTTP_LAYER" $PORT_H "$WORK/get-body.json" service 2>"$WORK/layer-headers.log" & PIDS+=($!); PID_OF[$PORT_H]=$!
wait_for $PORT_L /v1/instances/bench-1; wait_for $PORT_H /v1/instances/bench-1

ROWS=""
# compare NAME URL_PATH [wrk script] [goal] [access log goal] -> rounds of the servers in
# SERVERS (default, quiet, token, bare; for GET the layer alone too), each round in another
# order; adds their rows; sets B_RPS (the bare median).
compare() {
  local name=$1 path=$2 script=${3:-} r order server s count
  count=$(echo $SERVERS | wc -w)
  echo "$name: $ROUNDS rounds of ${DURATION}s each, alternating (wrk -t$THREADS -c$CONNECTIONS)"
  for s in $SERVERS; do : >"$WORK/$s"; : >"$WORK/${s}b"; done
  : >"$WORK/dq"
  for r in $(seq 1 "$ROUNDS"); do
    # Each round starts with another server, and every other round runs them backwards.
    order=$(echo $SERVERS | tr ' ' '\n' | awk -v k=$(((r - 1) % count)) '{a[NR - 1] = $0} END {for (i = 0; i < NR; i++) print a[(i + k) % NR]}')
    [ $((r % 2)) = 0 ] && order=$(echo "$order" | tac)
    for server in $order; do
      case $server in
        d) run_wrk "http://127.0.0.1:$PORT_D$path" "$script" >"$WORK/d.now" ;;
        q) run_wrk "http://127.0.0.1:$PORT_Q$path" "$script" >"$WORK/q.now" ;;
        t) run_wrk "http://127.0.0.1:$PORT_T$path" "$script" "Authorization: Bearer $TOKEN" >"$WORK/t.now" ;;
        b) run_wrk "http://127.0.0.1:$PORT_B$path" "$script" >"$WORK/b.now" ;;
        l) run_wrk "http://127.0.0.1:$PORT_L$path" "$script" >"$WORK/l.now" ;;
        h) run_wrk "http://127.0.0.1:$PORT_H$path" "$script" >"$WORK/h.now" ;;
        o) run_wrk "http://127.0.0.1:$PORT_O$path" "$script" >"$WORK/o.now" ;;
      esac
      cat "$WORK/$server.now" >>"$WORK/$server"
    done
    local b line=""
    b=$(cut -d' ' -f1 "$WORK/b.now")
    for s in $SERVERS; do
      awk -v a="$(cut -d' ' -f1 "$WORK/$s.now")" -v b="$b" 'BEGIN {printf "%.4f\n", a / b}' >>"$WORK/${s}b"
      line+=" | $s $(cat "$WORK/$s.now")"
    done
    awk -v a="$(cut -d' ' -f1 "$WORK/d.now")" -v b="$(cut -d' ' -f1 "$WORK/q.now")" 'BEGIN {printf "%.4f\n", a / b}' >>"$WORK/dq"
    echo "  round $r ($(echo $order | tr -d ' ')):${line# |} (req/s p50 p99 CPU-us-a-request; load $(cut -d' ' -f1 /proc/loadavg))"
  done
  local b_p50 b_p99 b_range
  read -r B_RPS b_p50 b_p99 _ < <(median_line <"$WORK/b")
  b_range=$(range <"$WORK/b")
  # row SERVER LABEL GOAL: a table row for one lifecycled configuration.
  row() {
    local rps p50 p99
    read -r rps p50 p99 _ < <(median_line <"$WORK/$1")
    [ "$1" = d ] && D_RPS=$rps
    [ "$1" = o ] && O_RPS=$rps && O_RATIO=$(median <"$WORK/ob") && O_SPREAD=$(spread <"$WORK/ob")
    ROWS+="| $name, $2 | $rps ($(range <"$WORK/$1")) | $p50 | $p99 | $(cpu_cell "$1") | $B_RPS ($b_range) | $b_p50 | $b_p99 | $(cpu_cell b) | $(median <"$WORK/${1}b") ($(spread <"$WORK/${1}b")) | ${3:-} |"$'\n'
  }
  row d "default (as \`make run\`: access log on)" "${4:-}"
  row q "quiet (\`--log-level warning\`)"
  row t "token (default with \`--token --protect-reads\`)"
  if [[ " $SERVERS " == *" l "* ]]; then
    row l "lifecycled's HTTP layer alone (Benchmarks/http-layer), Content-Type only"
    row h "lifecycled's HTTP layer alone, with the five headers lifecycled's GET sends"
    LAYER_MEDIANS=" layer alone $(median <"$WORK/lb"), with five headers $(median <"$WORK/hb"),"
  else
    LAYER_MEDIANS=""
  fi
  row o "the default's service over an HTTP/1.1 loop of its own instead of libmicrohttpd (Benchmarks/own-loop; an upper bound, see below)"
  LAYER_MEDIANS+=" own loop $O_RATIO,"
  DQ=$(median <"$WORK/dq"); DQ_SPREAD=$(spread <"$WORK/dq")
  echo "$name median: default $(median <"$WORK/db") of bare ($(spread <"$WORK/db")), quiet $(median <"$WORK/qb"), token $(median <"$WORK/tb"),${LAYER_MEDIANS:-} bare $B_RPS req/s; access log on/off $DQ ($DQ_SPREAD)"
  LOG_ROWS+="| $name | $(median_line <"$WORK/d" | cut -d' ' -f1) | $(median_line <"$WORK/q" | cut -d' ' -f1) | $DQ | $DQ_SPREAD | ${5:-} |"$'\n'
}

LOG_ROWS=""
SERVERS="d q t l h o b"
compare "GET /v1/instances/{id}" /v1/instances/bench-1 "" 0.85 0.95
BARE_GET=$B_RPS
OWN_GET=$O_RATIO; OWN_GET_SPREAD=$O_SPREAD; DEFAULT_GET=$(median <"$WORK/db")

# --- durable POST events, bare server restarted with the event response's size
kill "${PIDS[$BARE_INDEX]}"; wait "${PIDS[$BARE_INDEX]}" 2>/dev/null || true
"$BARE" $PORT_B "$WORK/post-body.json" & PIDS[$BARE_INDEX]=$!; PID_OF[$PORT_B]=$!
wait_for $PORT_B
SERVERS="d q t o b"
compare "POST events, durable (sync normal, $CONNECTIONS instances)" "" Benchmarks/events.lua
# The goal for a durable POST is a share of the bare server's GET rate (what a request costs with nothing to store).
POST_OF_GET=$(awk -v a="$D_RPS" -v b="$BARE_GET" 'BEGIN {printf "%.3f", a / b}')
OWN_POST_OF_GET=$(awk -v a="$O_RPS" -v b="$BARE_GET" 'BEGIN {printf "%.3f", a / b}')
echo "durable POST, default, against the bare server's GET: $POST_OF_GET; over the own loop: $OWN_POST_OF_GET"
for port in $PORT_D $PORT_Q $PORT_T $PORT_O; do
  unexpected=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/v1/instances?limit=1000" | python3 -c 'import json,sys; print(sum(i["counters"]["unexpected"] for i in json.load(sys.stdin)["items"]))')
  [ "$unexpected" = 0 ] || { echo "benchmark events were unexpected on $port: $unexpected" >&2; exit 1; }
done
echo "default's access log: $(grep -c 'msg=request ' "$WORK/default.log") lines, $(du -h "$WORK/default.log" | cut -f1)"

{
  echo "## HTTP ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "wrk -t$THREADS -c$CONNECTIONS, ${WARMUP}s warm-up, ${DURATION}s measured, $ROUNDS rounds (default, quiet, token, the own loop, bare and for GET the layer alone in turn, each round in another order); $(nproc) cores shared by the servers and wrk."
  echo "Default: lifecycled started as \`make run\` starts it (access log on, standard error to a file); quiet: the same binary with \`--log-level warning\`; token: the default with \`--token --protect-reads\`, every request sending the token."
  echo "Rates: the rounds' median (their range); p50 and p99: those of the median round. Ratio: the median of the rounds' ratios to the bare server in the same round (their range)."
  echo "CPU a request: the server process's CPU time (user and system, from /proc) over a round's requests, the rounds' median (their range); wrk's is not in it."
  echo
  echo "| benchmark | lifecycled req/s | p50 | p99 | CPU µs a request | bare libmicrohttpd req/s | p50 | p99 | CPU µs a request | ratio | goal |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s' "$ROWS"
  echo
  echo "What the access log costs: the default configuration's rate over the quiet one's, the median of the rounds' ratios (their range beside it)."
  echo
  echo "| benchmark | default req/s | quiet req/s | on / off | rounds' ratios | goal |"
  echo "|---|---|---|---|---|---|"
  printf '%s' "$LOG_ROWS"
  echo
  # Measured by hand (callgrind, Benchmarks/middleware-instructions.sh's method: one request
  # at a time on one connection, every thread but the WAL checkpointer's) at the commit that
  # wrote it; to be measured again when the request path changes.
  echo "Why GET is short of 0.85 (instructions per GET under callgrind, measured by hand on 2026-12-02 after issue 18): the bare server runs 57k, of"
  echo "which 49k are libmicrohttpd zeroing its connection's memory pool (valgrind counts each byte of \`rep stosb\`; cheap in time),"
  echo "so about 8k of work. lifecycled ran 169k at the default configuration and 115k quiet before; 101k and 96k after (the access"
  echo "log from 54k to 6k: no \`String(format:)\`, \`Date\` or String per line, no write(2) on the request's thread). Of the 101k,"
  echo "49k are the same zeroing and about 44k are Swift: the middleware chain 18k (request ids 3k, metrics 1.3k, access log 6k,"
  echo "cache policy 2k, security headers 1.5k, the pass-through layers and router 1k, the handler and registry 2.5k), admission"
  echo "8k (routing 4.5k, the Host check), the head's headers copied into Strings and the request made 4k, the response handed"
  echo "to libmicrohttpd 5k (4k of it libmicrohttpd's own, 650 a header for six headers). 0.85 needs lifecycled within about"
  echo "10k instructions of the bare server: a request path that makes no Strings (headers read in place from libmicrohttpd,"
  echo "routes matched on bytes to an index with no parameter dictionary), middlewares run as one pass over one mutable"
  echo "response rather than a chain of closures each copying the request and the reply, and fewer headers handed over one by one."
  echo "Since then (by hand, the same way): lifecycled's connection memory pool is sized from its header limit (22 KiB at the"
  echo "default 16 KiB, where the bare server keeps libmicrohttpd's 32 KiB), so its zeroing is 34k, not 49k; and the access log's"
  echo "line costs 3.8k. GET: 84.7k at the default configuration, 80.9k quiet (the access log 4.7%)."
  echo "On 2026-12-06 (by hand: perf under wrk -c64, CPU per GET by what it ran in): the bare server 13.3 us (sendmsg 8.1, which on"
  echo "loopback also runs wrk's receiving side; recv 1.3; epoll 0.7; user space 2.4, most of it the pool's zeroing), lifecycled 20.8"
  echo "(sendmsg 8.5; user space 8.2: the binary 2.5, libc 2.7 with the zeroing 1.0 and malloc, free and memmove, the Swift runtime 1.8,"
  echo "libmicrohttpd 1.0; preempted at a system call's return or by a reschedule interrupt 2.5, against 0.7, as both cores stay busy)."
  echo "By callgrind, 74.0k at the default configuration after ec5c715 (76.4k before: method, version, header names and Host read"
  echo "with fewer strings made and checked). Past the zeroing, no function runs over 3% of it on its own."
  echo "On 2026-12-07 (by hand: each thread's CPU time over the requests, GET under wrk -c64): the bare server 10.4 us a GET (1.6 in user"
  echo "space, 8.8 in the kernel), lifecycled 15.5 (6.4 and 9.1), with 0.1 involuntary context switches a GET against 0.01. With wrk"
  echo "taking about 11 us a request of the same two cores, 0.85 needs lifecycled near 13.5 us: its user space cut by some 2.5 us,"
  echo "about half of what its Swift path spends. By perf that path is 24.5% of the process's time: the head, routing and admission"
  echo "6.6%, the middlewares' way in and the handler 4.5%, their way out 5.4% (the access log 3.6% of it), the response handed to"
  echo "libmicrohttpd 3.3%, the rest the locks and closures between them; none large alone."
  echo "Where the gap is, by the layer rows (added on 2026-12-07; by hand the same day: callgrind, one GET at a time, 2,000 of them):"
  echo "lifecycled's HTTP layer with nothing on it runs 56.2k instructions a GET against the bare server's 57.4k, but 34k of its"
  echo "count is zeroing its 22 KiB pool where the bare server zeroes 49k worth of 32 KiB, so the layer does some 22k of work to the"
  echo "bare server's 8k: routing its one route 1.8k, the head's fields read into Strings 2.3k, the request line's checks 1.2k,"
  echo "the request made and dropped 2.3k, the connection machine's checks and state for the head 3.2k (the Host check among"
  echo "them), the response handed over 1.9k, the rest reference counting and allocation. The service adds 16.5k on top (72.7k):"
  echo "the access log 3.8k, four more response headers"
  echo "4.5k (libmicrohttpd copies each header's name and value and frees them again, about 1.1k a header), metrics 1.3k, request"
  echo "ids 1k, the handler with its cache 2.1k, the other middlewares' passes the rest. In wrk rounds the same day (6 rounds,"
  echo "alternating), the layer alone ran 0.86 of the bare server, 0.835 with lifecycled's five headers, and lifecycled 0.765."
  echo "So 0.85 is about where the layer alone stands: it leaves the service's work on a GET next to no room, and no cut to the"
  echo "middlewares or the handler can reach it. What would: a layer that costs a small part of what it does now (the head read"
  echo "in place rather than into Strings, routes matched on bytes, one response head written whole rather than handed to"
  echo "libmicrohttpd a header at a time, which its API does not offer): lifecycled's own HTTP/1.1 reading and writing in place"
  echo "of libmicrohttpd's, a new server layer rather than a cut to this one."
  echo
  echo "What such a layer would buy, measured (the own-loop rows, added on 2026-12-07): the default configuration's service, the same"
  echo "binary's store, registry, router and middlewares, served over an HTTP/1.1 loop of a few hundred lines in Swift"
  echo "(\`Benchmarks/own-loop\`: an epoll loop a thread, the head read in place, each response head written whole, one send) answered"
  echo "GET at $OWN_GET of the bare server in this run ($OWN_GET_SPREAD), against the default's $DEFAULT_GET in the same rounds."
  echo "It is an upper bound: it skips the connection machine's checks (Host, framing, limits, deadlines), the target's decoding,"
  echo "chunked bodies, streams and connection limits, about 4.4k of lifecycled's 72.7k instructions a GET by callgrind. By hand the"
  echo "same day (each process's CPU over the requests, wrk -c64): 12.4 us a GET (3.7 to 4.1 in user space) against lifecycled's 15.2"
  echo "(5.7) and the bare server's 9.8 (1.6); a loop that answers fixed bytes with no service on it, 7.9 to 9.3 (0.5). So a layer of"
  echo "our own takes about 2.8 us off a GET, and what is left over the bare server is the service's own path: about 3 us in user space,"
  echo "with four mutexes a GET (request ids, the instance cache, metrics, the log's buffer), reference counting 13% of it."
  echo
  echo "Durable POST at the default configuration against the bare server's GET rate in the same run (the goal, 0.30): $POST_OF_GET;"
  echo "over the own loop (the own-loop row above; an upper bound as for GET): $OWN_POST_OF_GET."
  echo
  echo "Past the history limit (Benchmarks/history-limit-bench.sh, by hand): the POST rounds' 64 instances reach \`--history-limit\`'s 10,000"
  echo "records each during the third round (a round writes some 3,400 versions an instance), and from then on their writes drop"
  echo "records. Dropped in the transaction that passed the limit, one a write, each dirtied its instance's oldest index page and an"
  echo "old table page every commit: on 2026-12-07, 3.6 to 3.8 kB written a request past the limit against 3.0 to 3.2 below it, and"
  echo "23k to 29k req/s against 28k to 34k. One DELETE for a transaction's drops in place of two statements an instance changed"
  echo "nothing; the pages did. So the writer gathers drops (RetentionBacklog: up to an eighth of the limit, 1,250 records here) and"
  echo "the transaction that fills the backlog writes them all: the same run's new binary wrote 3.0 to 3.2 kB a request past the"
  echo "limit as below it, at 27k to 33k req/s. Histories hold up to that backlog more than the limit until it is written."
  echo
  echo "Why POST is short of 0.30 (callgrind and perf under wrk -c64, by hand on 2026-12-02): about 285k instructions a POST at the"
  echo "default configuration (316k before issue 18's cuts). Its CPU is split about evenly between the committer thread (about 40 us a"
  echo "write even in groups of 17-19: the transaction 58% of it, with the WAL's pwrite 21%, SQL statements 12% and deciding and"
  echo "encoding 29%; then the middlewares' reply maps, the hub and the cache 37%) and the request threads (about 37 us: 49k of"
  echo "libmicrohttpd zeroing its pool, the head 19k, admission 11k, the handler 9k). No request thread waits on a commit (the"
  echo "connection is suspended). What would close it: the middlewares' reply maps run on the request thread when the connection"
  echo "resumes rather than on the one committer thread; fewer WAL pages a commit; and the GET path's cuts above, which a POST shares."
  echo "Under perf one of libmicrohttpd's two worker threads carried most connections (each accepts from the shared socket). Counted"
  echo "by hand on 2026-12-05 (each thread's epoll set read from /proc during wrk -c64): 4 runs of 10 put 62 to 66 of the 64 connections"
  echo "on one thread, the bare server's too. An acceptor thread handing each connection to libmicrohttpd (\`MHD_add_connection\`,"
  echo "which picks the thread by descriptor) split them 32/32 every time, yet did not raise the rate in alternating runs beside the"
  echo "unchanged binary (load 2.5 to 6: 34k to 80k req/s for both): with wrk on the same 2 cores the idle thread's core serves wrk, so"
  echo "balancing is not the lead it seemed here. Per GET (CPU time of the process over requests, same load) lifecycled spends 6.7 us in"
  echo "user space and 8.5 us in the kernel, the bare server 1.7 and 7.4: the Swift request path is the gap, middleware chain first."
  echo "On 2026-12-07 (by hand: each thread's CPU time over the requests, durable POST under wrk -c64): about 46 us of the process a"
  echo "POST, in transactions of 16 writes on average: the request threads 21 (10 in user space, 11 in the kernel: receiving, sending,"
  echo "and for each resumed connection a write to libmicrohttpd's eventfd and its read), the committer 11.5 (2.3 of it in the"
  echo "kernel), the writer 11 (2.5), the log writer 1; the hub's thread 0.6 before 3d64042 and none since (no stream open, a commit wakes"
  echo "it no more). wrk's script takes most of the rest of the two cores. By callgrind one POST at a time 266k instructions after 1e6f439"
  echo "(293k before: the lock file's mark after each commit was 25k of \`String(format:)\`, and BEGIN was compiled each time)."
  echo "Later on 2026-12-07 (by hand, durable POST under wrk -c64): 12 to 13% of the two cores sat idle (no I/O wait), both at once"
  echo "only 1.3% of the time (\`perf sched timehist\`); while one idled, the other ran the committer (31%), a libmicrohttpd thread (28%),"
  echo "the writer (24%) or wrk (11%). Timed inside a build made for it, a group of about 15 writes took the committer 146 us to decide"
  echo "and 161 us to publish and answer, and it waited 160 us for the writer, whose commit ran about 200 us (160 us of CPU) but began"
  echo "130 to 170 us after it was handed over: the woken thread waits for a core. So the rate is the round trip of a group through"
  echo "the committer and the writer, in a closed loop of 64 connections, on cores shared with wrk. Tried each beside the unchanged"
  echo "binary in alternating runs, none moved the rate (19k to 32k req/s either way) or the idle share: libmicrohttpd's threads at"
  echo "SCHED_BATCH (no wake-up preemption) or nice 5 or 10; answering a committed group before deciding the next; the writer thread"
  echo "publishing and answering its own group; queuing the next group behind the one committing at once; writes that arrive during"
  echo "a decision joining its group; a thread of its own for the writer instead of a dispatch queue (the start lag stayed 150 us)."
  echo "Committing on the committer thread itself, with no writer thread (no decision overlapping a commit), gave medians of six"
  echo "alternating runs of 24.8k against 23.1k req/s, each within the other's range; the overlap is for batch ingest's large groups"
  echo "(three rounds of ingest-bench.sh: 1.06 of bare SQLite with it, 0.87 without). Since 2026-12-07 a batch is handed to the writer"
  echo "only while more writes wait behind it (batch requests from many devices), and one with nothing behind it (single writes,"
  echo "which the committer takes all at once) commits on the committer thread: by hand, 14 alternating rounds of this POST load"
  echo "beside the binary before it, 1.05 and 1.09 (medians of 8 and 6 rounds' ratios; 11 of the 14 higher), and ingest.lua's"
  echo "batches of 1,000 from 16 connections unchanged (4 rounds, 0.94 to 1.06)."
  echo "What is left is each write's CPU on those two threads: about 50k instructions on the committer and 36k on the writer."
  echo
} >"$WORK/http.md"
cp "$WORK/http.md" Benchmarks/.http-results.md
cat Benchmarks/.http-results.md
