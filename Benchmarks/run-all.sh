#!/usr/bin/env bash
# `make bench`: every benchmark, release build, results collected in Benchmarks/RESULTS.md.
# Each benchmark compares against a baseline measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== engine"
engine=$(.build/release/lifecycle-bench engine)
echo "$engine"
echo "== HTTP: lifecycled as \`make run\` starts it (access log on) and quiet (--log-level warning), beside a bare libmicrohttpd server"
bash Benchmarks/http-bench.sh
echo "== batches: durable events/s posted singly and as POST /v1/batch of 100 and 1,000"
bash Benchmarks/batch-bench.sh
echo "== batch ingest: keyed creates and events in POST /v1/batch of 1,000, beside bare SQLite from Python"
bash Benchmarks/ingest-bench.sh
echo "== batch ingest: instructions per item (callgrind)"
bash Benchmarks/ingest-instructions.sh
echo "== batch ingest on PostgreSQL, beside psql COPY of the same rows"
bash Benchmarks/ingest-postgres-bench.sh
echo "== reporter: journal cost per report, delivery one per request and in batches of 100"
bash Benchmarks/reporter-bench.sh
echo "== middlewares: auth and metrics on and off, at the default log level and quiet"
bash Benchmarks/middleware-bench.sh
echo "== middlewares: instructions per request (callgrind)"
bash Benchmarks/middleware-instructions.sh
echo "== start-up"
bash Benchmarks/startup-bench.sh
echo "== a million instances: restart, memory, list pages"
bash Benchmarks/million-bench.sh
echo "== WAL under sustained writes"
bash Benchmarks/wal-bench.sh
echo "== event streams: 10,000 subscribers, lifecycled beside nginx+nchan"
bash Benchmarks/sse-bench.sh .build/release/lifecycled
echo "== history pages of large records, clients not reading: before (c1cc58a) and after the byte bound"
bash Benchmarks/page-bytes-bench.sh
echo "== replicas on PostgreSQL: events/s with 1, 2 and 3 replicas beside SQLite, SSE across replicas"
bash Benchmarks/replica-bench.sh

{
  echo "# Benchmark results"
  echo
  echo "Written by \`make bench\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo none),"
  echo "on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))."
  echo
  echo "## Engine ($(date -u +%Y-%m-%d))"
  echo
  echo "LifecycleKit applying a foreground/background cycle of valid events on one core, against a"
  echo "hand-written switch machine producing the same records in the same run."
  echo
  echo '```'
  echo "$engine"
  echo '```'
  echo
  cat Benchmarks/.http-results.md
  cat Benchmarks/.batch-results.md
  cat Benchmarks/.ingest-results.md
  cat Benchmarks/.ingest-instructions-results.md
  cat Benchmarks/.ingest-postgres-results.md
  cat Benchmarks/.reporter-results.md
  cat Benchmarks/.middleware-results.md
  cat Benchmarks/.middleware-instructions-results.md
  cat Benchmarks/.startup-results.md
  cat Benchmarks/.million-results.md
  cat Benchmarks/.wal-results.md
  cat Benchmarks/.sse-results.md
  cat Benchmarks/.pages-results.md
  cat Benchmarks/.replica-results.md
} >Benchmarks/RESULTS.md
rm -f Benchmarks/.http-results.md Benchmarks/.batch-results.md Benchmarks/.ingest-results.md Benchmarks/.ingest-instructions-results.md Benchmarks/.ingest-postgres-results.md Benchmarks/.reporter-results.md Benchmarks/.middleware-results.md Benchmarks/.middleware-instructions-results.md Benchmarks/.startup-results.md Benchmarks/.million-results.md \
  Benchmarks/.wal-results.md Benchmarks/.sse-results.md Benchmarks/.pages-results.md Benchmarks/.replica-results.md
echo "wrote Benchmarks/RESULTS.md"
