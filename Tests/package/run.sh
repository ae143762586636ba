#!/usr/bin/env bash
# The client library inside an app's package (issue 32, points 1, 2 and 9). Copies the scratch
# app package (Tests/package/App) and two local packages whose modules are named `Logging` and
# `CSQLite`, as swift-log's and sqlite-nio's are, to a temporary folder; points the app at this
# repository by path; and builds the executable `App`, which imports and links all three, in
# Swift 6 language mode with complete strict concurrency and warnings as errors. Every file in
# App/Sources/App is compiled (an @MainActor app wired to the adapter among them). SwiftPM
# refuses the graph if any target of this repository reuses one of those module names.
# Also checks that the package declares no platform newer than iOS 15 and macOS 12.
# Its test target (AppTests) links LifecycleTesting under XCTest and Swift Testing, built too.
# Run by `make package-test`; only LifecycleClient, LifecycleKit, LifecycleLocks and
# LifecycleTesting are built.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
swift=${SWIFT:-swift}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What an app that supports iOS 15 and macOS 12 can depend on.
"$swift" package --package-path "$repo" dump-package | "${PYTHON:-python3}" -c '
import json, sys
declared = {p["platformName"]: p["version"] for p in json.load(sys.stdin)["platforms"]}
oldest = {"ios": (15, 0), "macos": (12, 0)}
for name, limit in oldest.items():
    version = tuple(int(part) for part in declared.get(name, "0").split("."))
    if name not in declared or version > limit:
        sys.exit(f"package-test: Package.swift declares {name} {declared.get(name)}, not {limit[0]}.{limit[1]} or older")
print("package-test: platforms", ", ".join(f"{k} {v}" for k, v in sorted(declared.items())))
'

cp -R "$repo/Tests/package/App" "$repo/Tests/package/Logging" "$repo/Tests/package/CSQLite" "$work/"
# The dependency's identity is its folder's name: `lifecycled`, whatever the checkout is called.
ln -s "$repo" "$work/lifecycled"

"$swift" build --package-path "$work/App" --product App 2>&1 | tee "$work/build.log"
# The app's tests with LifecycleTesting, as a test target links it: built, not run.
"$swift" build --package-path "$work/App" --build-tests 2>&1 | tee -a "$work/build.log"
output=$("$work/App/.build/debug/App")
echo "package-test: App ran: $output"
case $output in
  *'level=info message="app started" 3040000 http://127.0.0.1:8080'*) ;;
  *) echo "package-test: App printed something else" >&2; exit 1 ;;
esac
if grep -q 'warning:' "$work/build.log"; then
  echo "package-test: the build warned" >&2
  exit 1
fi
echo "package-test: passed"
