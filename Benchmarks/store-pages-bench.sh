#!/usr/bin/env bash
# History and replay pages read straight from a SQLite store (`lifecycle-bench pages`), this
# tree against an earlier commit, in the same run: for a change to how the stores read pages.
# Both read copies of one store of 50,000 records (200 instances of 250); rounds alternate,
# each the other way round from the last. Prints each round, then the median ratio new/old of
# milliseconds a page (below 1: this tree is faster).
#
#   bash Benchmarks/store-pages-bench.sh [BASE_COMMIT]   (default: HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${1:-HEAD}
ROUNDS=${BENCH_ROUNDS:-7}
WORK=$(mktemp -d /tmp/lifecycled-pages-ab.XXXXXX)
cleanup() { git worktree remove --force "$WORK/base" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT

echo "building lifecycle-bench at $BASE and in this tree (release) ..."
git worktree add --detach "$WORK/base" "$BASE" >/dev/null 2>&1
# The base gets this tree's benchmark: it reads through the stores' public API, the same at both.
cp Benchmarks/lifecycle-bench/main.swift "$WORK/base/Benchmarks/lifecycle-bench/main.swift"
swift build -c release --product lifecycle-bench --package-path "$WORK/base" >"$WORK/base-build.log" 2>&1 || { cat "$WORK/base-build.log" >&2; exit 1; }
swift build -c release --product lifecycle-bench >"$WORK/new-build.log" 2>&1 || { cat "$WORK/new-build.log" >&2; exit 1; }
OLD=$WORK/base/.build/release/lifecycle-bench
NEW=.build/release/lifecycle-bench

"$OLD" pages "$WORK/store" >/dev/null  # writes the store
run() { rm -rf "$WORK/copy"; cp -r "$WORK/store" "$WORK/copy"; "$1" pages "$WORK/copy"; }

: >"$WORK/rounds"
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then old=$(run "$OLD"); new=$(run "$NEW"); else new=$(run "$NEW"); old=$(run "$OLD"); fi
  echo "round $round old: $old"
  echo "round $round new: $new"
  echo "$old|$new" >>"$WORK/rounds"
done
python3 - "$WORK/rounds" <<'PY'
import statistics, sys
rows = [line.strip().split("|") for line in open(sys.argv[1])]
def fields(text):
    parts = text.split()
    return dict(zip(parts[0::2], map(float, parts[1::2])))
old = [fields(o) for o, _ in rows]
new = [fields(n) for _, n in rows]
print("| read | old ms a page (median) | new ms a page (median) | new/old (median of rounds) |")
print("|---|---|---|---|")
for key in old[0]:
    ratio = statistics.median(n[key] / o[key] for o, n in zip(old, new))
    print(f"| {key} | {statistics.median(o[key] for o in old):.3f} | {statistics.median(n[key] for n in new):.3f} | {ratio:.2f} |")
PY
