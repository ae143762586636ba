#!/usr/bin/env bash
# What a keyed batch item costs in instructions, for `make bench`, beside the wall-clock rate
# of ingest-bench.sh: lifecycled as `make run` starts it, under valgrind's callgrind, sent
# exactly N POST /v1/batch of 1,000 items as the reporter sends them (Benchmarks/ingest.lua's
# items, by Benchmarks/fixed-requests.py: one request at a time on one connection, so every
# batch commits alone), after 5 such batches as a warm-up. Instructions executed while they
# are served, divided by the items, for each thread that does the work: the request threads
# (libmicrohttpd's, which parse the batches), the committer (deciding, encoding, publishing,
# answering) and the writer (SQLite's statements and commits, and the checkpoints that keep
# the WAL bounded). One batch at a time has nothing waiting behind it, so since e8c661f it
# commits on the committer thread, SQLite's work with it, and the writer thread does none. The background checkpointer runs on a 200 ms timer, so its share follows
# how long the batches take under valgrind: it is left out, as in middleware-instructions.sh.
#
# Why beside the rate: ingest-bench.sh's rate moves by 10% from one round to the next with
# what else the machine does, so a change worth a few percent is seen here, not there. The
# count repeats to within about 1% (the ids, and so the dictionaries' hashing, differ by run).
# It is not time (cache misses, the kernel's share and waiting are not in it): ingest-bench.sh
# is the figure the goal is on.
#
# BASELINE=BINARY counts that binary too, in the same run, and gives each thread's ratio: how
# a change is measured (build the commit before it in a worktree).
# Writes Benchmarks/.ingest-instructions-results.md, which run-all.sh puts after the batch
# ingest section of RESULTS.md.
# BENCH_CALLGRIND_BATCHES (default 10) batches; LIFECYCLED picks the binary.
set -euo pipefail
cd "$(dirname "$0")/.."

BATCHES=${BENCH_CALLGRIND_BATCHES:-10}
ITEMS=$((BATCHES * 1000))
LIFECYCLED=${LIFECYCLED:-.build/release/lifecycled}
BASELINE=${BASELINE:-}
WORK=$(mktemp -d /tmp/lifecycled-ingest-instructions.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

. Benchmarks/callgrind.sh

# measure NAME PORT BINARY: writes "requests committer writer total", instructions per item,
# to $WORK/NAME.counts. (Not in a subshell, so that the cleanup knows the server's pid.)
measure() {
  local name=$1 port=$2 binary=$3 pid
  callgrind_start "$name" "$port" "$binary"
  pid=$CALLGRIND_PID
  python3 Benchmarks/fixed-requests.py "$port" batch 5
  callgrind_control --zero "$pid" >/dev/null 2>&1
  python3 Benchmarks/fixed-requests.py "$port" batch "$BATCHES"
  callgrind_control --dump=batches "$pid" >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  # Each thread's file, named for the work in it (the last match wins: the committer's thread
  # also answers requests). A function is named once in a file, where it is first met, as a
  # callee (cfn=) or not (fn=): hence no anchor.
  local file role
  for file in $(grep -l "^desc: Trigger: dump batches\$" "$WORK/$name".*); do
    role=other
    grep -q "DaemonContext.*handle" "$file" && role=requests
    grep -q "BatchCommitterV6decide" "$file" && role=committer
    grep -q "fn=.*BatchCommitterV5start.*fU_\$" "$file" && role=writer
    grep -q "BackgroundCheckpointerC5start" "$file" && role=checkpointer
    echo "$role $(awk '/^totals:/ {print $2}' "$file")"
  done | awk -v n="$ITEMS" '
    { count[$1] += $2; if ($1 != "checkpointer") total += $2 }
    END { printf "%d %d %d %d\n", count["requests"] / n, count["committer"] / n, count["writer"] / n, total / n }' >"$WORK/$name.counts"
  # A thread not found (a function renamed) would read as a cut to nothing. (The writer's may
  # be none: see above.)
  if awk '$1 == 0 || $2 == 0 {exit 1}' "$WORK/$name.counts"; then :; else
    echo "$name: a thread's work was not found in the dumps (request threads, committer, writer: $(cut -d' ' -f1-3 "$WORK/$name.counts"))" >&2
    exit 1
  fi
}

echo "ingest: instructions per keyed batch item under callgrind, $BATCHES batches of 1,000"
measure current 18197 "$LIFECYCLED"
read -r requests committer writer total <"$WORK/current.counts"
echo "  $LIFECYCLED: request threads $requests, committer $committer, writer $writer; all but the checkpointer $total"
if [ -n "$BASELINE" ]; then
  measure baseline 18198 "$BASELINE"
  read -r b_requests b_committer b_writer b_total <"$WORK/baseline.counts"
  echo "  $BASELINE: request threads $b_requests, committer $b_committer, writer $b_writer; all but the checkpointer $b_total"
fi

row() {
  if [ -n "$BASELINE" ]; then
    awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN {printf "| %s | %d | %d | %.3f |\n", n, a, b, a / b}'
  else
    echo "| $1 | $2 |"
  fi
}
{
  echo "Instructions per keyed batch item (\`bash Benchmarks/ingest-instructions.sh\`), counted by valgrind's callgrind: $BATCHES"
  echo "batches of 1,000 items as the reporter sends them, one at a time on one connection, lifecycled as \`make run\` starts it."
  echo "Repeatable to about 1% whatever else the machine runs, but not time: the rate above is the figure the goal is on."
  echo
  if [ -n "$BASELINE" ]; then
    echo "| thread | this build | baseline ($BASELINE) | ratio |"
    echo "|---|---|---|---|"
  else
    echo "| thread | instructions an item |"
    echo "|---|---|"
  fi
  row "request threads (parsing the batch)" "$requests" "${b_requests:-}"
  row "committer (deciding, encoding, publishing, answering; with nothing behind a batch, its SQLite work too)" "$committer" "${b_committer:-}"
  row "writer (SQLite statements, commits, WAL checkpoints, for a batch with others waiting behind it)" "$writer" "${b_writer:-}"
  row "all but the background checkpointer" "$total" "${b_total:-}"
  echo
} >Benchmarks/.ingest-instructions-results.md
cat Benchmarks/.ingest-instructions-results.md
