# lifecycled: `make run` and `make test` work on a fresh Debian machine with Swift;
# each installs what is missing first: `make run` what building and running need, `make
# test` what the tests need besides.

SWIFT       ?= swift
# The Python that makes the tests' virtual environment (nothing is installed into it, so
# Debian's own python3, which refuses pip installs (PEP 668), does as well as any other).
PYTHON      ?= python3
PORT        ?= 8080
DATA_DIR    ?= data
# What building and running need (make run): the C libraries' headers and pkg-config.
APT_PACKAGES = libmicrohttpd-dev libsqlite3-dev libpq-dev libgraphviz-dev pkg-config
# What the tests need besides (make test): postgresql-15, pgbouncer: the tests start a real
# PostgreSQL, and PgBouncer before it (Tests/postgres/cluster.sh); node-eventsource: a
# browser's EventSource client reads the streams; python3-venv: Debian's python3 makes the
# virtual environment below with it.
TEST_APT     = postgresql-15 pgbouncer node-eventsource python3-venv
BENCH_APT    = wrk gcc sqlite3 nginx libnginx-mod-nchan valgrind postgresql-15 curl python3
# The dashboard's browser test: Chromium driven by Selenium, both Debian's (so the test
# runs under Debian's python3, which python3-selenium installs into).
BROWSER_APT  = chromium chromium-driver python3-selenium
BROWSER_PYTHON ?= /usr/bin/python3
SCHEMATHESIS_VERSION = 4.32.5
# prometheus_client: its parser reads what GET /metrics answers in the tests.
PROMETHEUS_CLIENT_VERSION = 0.26.0
# openapi-python-client: a standard generator, whose client of openapi.yaml drives a live
# server in the tests (Tests/client/run.py).
OPENAPI_PYTHON_CLIENT_VERSION = 0.29.1
PY_PACKAGES  = openapi-spec-validator schemathesis==$(SCHEMATHESIS_VERSION) prometheus_client==$(PROMETHEUS_CLIENT_VERSION) openapi-python-client==$(OPENAPI_PYTHON_CLIENT_VERSION)
# The tests' PyPI packages live in a virtual environment of their own, and every Python
# step of the tests but the browser test's runs its python; the Swift tests that start one
# (Tests/metrics/parse.py) find it in LIFECYCLED_TEST_PYTHON.
VENV         = .build/venv
VENV_PYTHON  = $(VENV)/bin/python
export LIFECYCLED_TEST_PYTHON = $(abspath $(VENV_PYTHON))
CONTAINER_APT = podman buildah debootstrap uidmap fuse-overlayfs slirp4netns iproute2 curl

.PHONY: run test bench deps test-deps bench-deps browser-deps container-deps build release postgres-test openapi-check contract-test client-test browser-test container-test package-test examples-test clean

# Installs only the Debian packages that are not there yet (apt-get update once, if needed).
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call apt_install,$(APT_PACKAGES))

test-deps: deps
	$(call apt_install,$(TEST_APT))
	@$(VENV_PYTHON) -c "import openapi_spec_validator, prometheus_client.parser, importlib.metadata as m; assert m.version('schemathesis') == '$(SCHEMATHESIS_VERSION)' and m.version('prometheus_client') == '$(PROMETHEUS_CLIENT_VERSION)' and m.version('openapi-python-client') == '$(OPENAPI_PYTHON_CLIENT_VERSION)'" 2>/dev/null \
	  || { $(PYTHON) -m venv $(VENV) && $(VENV_PYTHON) -m pip install -q $(PY_PACKAGES); }

bench-deps: deps
	$(call apt_install,$(BENCH_APT))

browser-deps:
	$(call apt_install,$(BROWSER_APT))

container-deps:
	$(call apt_install,$(CONTAINER_APT))

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product lifecycled

run: release
	mkdir -p $(DATA_DIR)
	.build/release/lifecycled --port $(PORT) --data-dir $(DATA_DIR)

# The executables are built too: the process, CLI and crash tests run lifecycled itself.
# A hung test fails the run after 25 minutes rather than holding CI to its limit.
# The client library's tests run on their own: their reporter and streams are async tasks,
# which the synchronous service tests (blocking on sockets and processes) starve of Swift's
# cooperative threads, one per core, when they all share one process.
test: test-deps
	$(SWIFT) build --build-tests
	timeout 1500 $(SWIFT) test --skip LifecycleClientTests
	timeout 600 $(SWIFT) test --filter LifecycleClientTests
	$(MAKE) --no-print-directory package-test
	$(MAKE) --no-print-directory examples-test
	$(MAKE) --no-print-directory postgres-test
	$(MAKE) --no-print-directory openapi-check
	$(MAKE) --no-print-directory contract-test
	$(MAKE) --no-print-directory client-test
	$(MAKE) --no-print-directory browser-test
	$(MAKE) --no-print-directory container-test

# The client library inside an app's own package (Tests/package/run.sh): beside local packages
# whose modules are named `Logging` and `CSQLite`, built in Swift 6 language mode with complete
# strict concurrency and warnings as errors; and no platform newer than iOS 15 / macOS 12.
package-test: deps
	SWIFT=$(SWIFT) PYTHON=$(PYTHON) timeout 600 bash Tests/package/run.sh

# The sample app's adapter part (Examples/LifecycleSample, docs/IOS-GUIDE.md) built as an
# app would build it: Swift 6, complete strict concurrency, warnings as errors. Only its
# module and the two it needs (LifecycleClient, LifecycleKit) are compiled, in a build
# folder of their own under .build.
examples-test: deps
	timeout 600 $(SWIFT) build --package-path Examples/LifecycleSample --scratch-path $(abspath .build/examples) --target SampleAdapter

# The service tests again, each server on a fresh database of a real PostgreSQL that the
# tests start themselves (Tests/postgres/cluster.sh) instead of SQLite: every suite but those
# marked `.sqliteOnly` (Tests/LifecycleTestSupport/TestStore.swift says when a suite may be).
postgres-test: test-deps
	$(SWIFT) build --build-tests
	LIFECYCLED_TEST_STORE=postgres timeout 900 $(SWIFT) test --filter LifecycleServiceTests

openapi-check: test-deps
	$(VENV_PYTHON) -m openapi_spec_validator openapi.yaml

# Schemathesis against a live lifecycled (fresh data folder, a free port on 127.0.0.1):
# every check, a fixed seed, 200 examples per operation, stateful over openapi.yaml's links.
contract-test: test-deps
	$(SWIFT) build --product lifecycled
	timeout 900 $(VENV_PYTHON) Tests/contract/run.py

# A client generated from openapi.yaml by openapi-python-client (no generator warning
# allowed) runs the walk-through, a conformance check and a scenario run on a live server.
client-test: test-deps
	$(SWIFT) build --product lifecycled
	timeout 600 $(VENV_PYTHON) Tests/client/run.py

# The dashboard in headless Chromium against a live lifecycled (fresh data folders, free
# ports on 127.0.0.1); screenshots in .build/screenshots/, and the page's load time with
# 10,000 instances printed.
browser-test: deps browser-deps
	$(SWIFT) build --product lifecycled
	timeout 900 $(BROWSER_PYTHON) Tests/browser/run.py
	timeout 300 $(BROWSER_PYTHON) Tests/browser/csrf.py

# The Dockerfile built with podman and its image run (Tests/container/run.sh): base-image
# stand-ins where the official ones cannot be pulled, health check, a stop and a restart.
container-test: container-deps
	timeout --kill-after=30 1200 bash Tests/container/run.sh

bench: bench-deps
	$(SWIFT) build -c release --product lifecycle-bench
	$(SWIFT) build -c release --product reporter-bench
	$(SWIFT) build -c release --product http-layer
	$(SWIFT) build -c release --product own-loop
	$(SWIFT) build -c release --product lifecycled
	bash Benchmarks/run-all.sh

clean:
	rm -rf .build
