#!/usr/bin/env bash
# Page-bytes benchmark for `make bench`: the server's RSS while PAGE_BENCH_CLIENTS (default
# 20) clients each ask for `history?limit=1000` of an instance of 1,000 records of about
# 128 KiB (openURL actions with a 65,000-character url, which the record repeats as
# `replacedAction`) and never read the answer. Before: lifecycled at PAGE_BENCH_BEFORE
# (default c1cc58a, the commit before history pages and replays were bounded in bytes),
# built in release from a `git worktree` of it (or PAGE_BENCH_BEFORE_BIN, a binary built
# already); after: this tree's release build, with the default --page-bytes (4 MiB). Both
# serve copies of one data folder, written through the API of the "before" build (the
# "after" build refuses such a url: that is checked too).
# Writes Benchmarks/.pages-results.md.
set -euo pipefail
cd "$(dirname "$0")/.."

BEFORE_COMMIT=${PAGE_BENCH_BEFORE:-c1cc58a}
CLIENTS=${PAGE_BENCH_CLIENTS:-20}
RECORDS=${PAGE_BENCH_RECORDS:-1000}
URL_LENGTH=${PAGE_BENCH_URL_LENGTH:-65000}
AFTER=.build/release/lifecycled
WORK=$(mktemp -d /tmp/lifecycled-pages.XXXXXX)
PORT=18190
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -d "$WORK/before-src" ] && git worktree remove --force "$WORK/before-src" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "${PAGE_BENCH_BEFORE_BIN:-}" ]; then
  BEFORE=$PAGE_BENCH_BEFORE_BIN
else
  echo "building lifecycled at $BEFORE_COMMIT (release) ..."
  git worktree add --detach "$WORK/before-src" "$BEFORE_COMMIT" >/dev/null 2>&1
  swift build -c release --product lifecycled --package-path "$WORK/before-src" >"$WORK/before-build.log" 2>&1 \
    || { cat "$WORK/before-build.log" >&2; exit 1; }
  BEFORE=$WORK/before-src/.build/release/lifecycled
fi

wait_for() { for _ in $(seq 1 400); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "lifecycled did not start" >&2; exit 1; }
start() {  # start BINARY DATA-DIR [flags...]: sets PID
  local binary=$1 data=$2; shift 2
  "$binary" --port $PORT --data-dir "$data" --log-level warning "$@" 2>>"$WORK/lifecycled.log" & PID=$!
  PIDS+=($PID)
  wait_for
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }

cat >"$WORK/pages.py" <<'PY'
import http.client, json, socket, sys, time

port = int(sys.argv[2])

def post_actions(count, length):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("PUT", "/v1/instances/heavy", body=b'{"model": "ios-app"}', headers={"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status in (200, 201), r.status
    body = json.dumps({"action": "openURL", "url": "https://example.com/" + "u" * (length - 20)}).encode()
    for _ in range(count):
        c.request("POST", "/v1/instances/heavy/actions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        if r.status != 200:
            sys.exit(f"action refused: {r.status}")

def status_of_action(length):
    c = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"action": "openURL", "url": "u" * length}).encode()
    c.request("POST", "/v1/instances/heavy/actions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    print(r.status)

def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

def measure(pid, clients):
    # One client that reads: what a page weighs, and that paging reaches every record.
    c = http.client.HTTPConnection("127.0.0.1", port)
    first_bytes, first_items, items, pages, after = 0, 0, 0, 0, 0
    while True:
        c.request("GET", f"/v1/instances/heavy/history?after={after}&limit=1000")
        body = c.getresponse().read()
        page = json.loads(body)
        if pages == 0:
            first_bytes, first_items = len(body), len(page["items"])
        pages += 1
        items += len(page["items"])
        if page["nextAfter"] is None:
            break
        after = page["nextAfter"]
    c.close()
    time.sleep(1)
    baseline = rss_mib(pid)
    sockets = []
    for _ in range(clients):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /v1/instances/heavy/history?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sockets.append(s)
    # RSS until it has stopped growing for 3 s (at most 120 s).
    peak, steady_since, deadline = rss_mib(pid), time.time(), time.time() + 120
    while time.time() < deadline and time.time() - steady_since < 3:
        time.sleep(0.25)
        now = rss_mib(pid)
        if now > peak + 1:
            steady_since = time.time()
        peak = max(peak, now)
    for s in sockets:
        s.close()
    print(f"{baseline:.0f} {peak:.0f} {first_bytes} {first_items} {pages} {items}")

{"post": lambda: post_actions(int(sys.argv[3]), int(sys.argv[4])),
 "status": lambda: status_of_action(int(sys.argv[3])),
 "measure": lambda: measure(int(sys.argv[3]), int(sys.argv[4]))}[sys.argv[1]]()
PY

echo "writing $RECORDS actions with a $URL_LENGTH-character url through the $BEFORE_COMMIT build ..."
start "$BEFORE" "$WORK/data" --max-body 262144
python3 "$WORK/pages.py" post $PORT "$RECORDS" "$URL_LENGTH"
stop
echo "data folder: $(du -sh "$WORK/data" | cut -f1)"

cp -r "$WORK/data" "$WORK/before"; cp -r "$WORK/data" "$WORK/after"
start "$BEFORE" "$WORK/before"
read -r B_BASE B_PEAK B_PAGE B_ITEMS B_PAGES B_TOTAL < <(python3 "$WORK/pages.py" measure $PORT $PID "$CLIENTS")
stop
start "$AFTER" "$WORK/after" --max-body 262144
read -r A_BASE A_PEAK A_PAGE A_ITEMS A_PAGES A_TOTAL < <(python3 "$WORK/pages.py" measure $PORT $PID "$CLIENTS")
A_LONG=$(python3 "$WORK/pages.py" status $PORT "$URL_LENGTH")
A_LIMIT=$(python3 "$WORK/pages.py" status $PORT 8192)
stop
[ "$B_TOTAL" = "$RECORDS" ] && [ "$A_TOTAL" = "$RECORDS" ] || { echo "paging lost records: before $B_TOTAL, after $A_TOTAL of $RECORDS" >&2; exit 1; }
[ "$A_LONG" = 422 ] && [ "$A_LIMIT" = 200 ] || { echo "after: a $URL_LENGTH-character url got $A_LONG (want 422), 8192 got $A_LIMIT (want 200)" >&2; exit 1; }

mib() { awk "BEGIN { printf \"%.1f\", $1 / 1048576 }"; }
echo "before ($BEFORE_COMMIT): RSS ${B_BASE} MiB idle, ${B_PEAK} MiB with $CLIENTS clients not reading; first page $(mib "$B_PAGE") MiB ($B_ITEMS records), $B_PAGES pages"
echo "after: RSS ${A_BASE} MiB idle, ${A_PEAK} MiB with $CLIENTS clients not reading; first page $(mib "$A_PAGE") MiB ($A_ITEMS records), $A_PAGES pages"

{
  echo "## History pages bounded in bytes ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none))"
  echo
  echo "Server RSS while $CLIENTS clients each ask for \`history?limit=1000\` of one instance of $RECORDS records of"
  echo "about $(( URL_LENGTH * 2 / 1024 )) KiB (openURL actions with a $URL_LENGTH-character url, repeated as \`replacedAction\`)"
  echo "and never read the answer (receive buffer 4 KiB), peak once it stops growing; release builds on copies"
  echo "of one data folder, before at $BEFORE_COMMIT and after at this commit (default \`--page-bytes\`, 4 MiB)."
  echo "A reading client paged through all $RECORDS records on both."
  echo
  echo "| build | RSS idle | RSS, $CLIENTS clients not reading | first page | pages for $RECORDS records |"
  echo "|---|---|---|---|---|"
  echo "| before ($BEFORE_COMMIT) | ${B_BASE} MiB | ${B_PEAK} MiB | $(mib "$B_PAGE") MiB, $B_ITEMS records | $B_PAGES |"
  echo "| after | ${A_BASE} MiB | ${A_PEAK} MiB | $(mib "$A_PAGE") MiB, $A_ITEMS records | $A_PAGES |"
  echo
  echo "After, such records can no longer be written: a $URL_LENGTH-character url is answered $A_LONG, 8192 characters $A_LIMIT."
  echo
} >Benchmarks/.pages-results.md
