# Sourced by the instruction benchmarks (middleware-instructions.sh, ingest-instructions.sh):
# lifecycled under valgrind's callgrind, started the one way both count it. The caller sets
# WORK (a folder for the dumps) and PIDS (what its cleanup kills).
command -v valgrind >/dev/null || { echo "valgrind is not installed (make bench-deps)" >&2; exit 1; }

# callgrind_start NAME PORT BINARY [FLAGS...]: BINARY under callgrind, one dump file per
# thread ($WORK/NAME.<pid>-<thread>), waited for until it answers /healthz; sets
# CALLGRIND_PID. Swift's hashing is made deterministic, as a random seed per process
# changes how far dictionary look-ups probe. Not in a subshell, so that the cleanup knows
# the server's pid if a step fails.
callgrind_start() {
  local name=$1 port=$2 binary=$3
  shift 3
  SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$WORK/$name.%p" \
    "$binary" --port "$port" --data-dir "$WORK/$name-data" "$@" 2>"$WORK/$name.valgrind.log" &
  CALLGRIND_PID=$!
  PIDS+=("$CALLGRIND_PID")
  for _ in $(seq 1 1200); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$name: lifecycled under valgrind did not start" >&2
  cat "$WORK/$name.valgrind.log" >&2
  exit 1
}
