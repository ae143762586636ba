#!/usr/bin/env python3
"""Contract test: schemathesis against a live lifecycled, from openapi.yaml.

Starts the built server (.build/debug/lifecycled) on a free loopback port with a fresh
data folder, checks that the enums in openapi.yaml name exactly the built-in models'
states, events, actions and scenarios, runs schemathesis with every check, a fixed seed, at least
200 examples per operation and the stateful phase over the spec's links, then stops the
server with SIGTERM. Fails if schemathesis fails or the server does not exit 0.

Usage: .build/venv/bin/python Tests/contract/run.py [--seed N] [--max-examples N] [--stateful-rounds N] [--server PATH]
Everything it ran (server log, HAR of every request, schemathesis events) is kept in a
temporary folder when it fails; the seed and `st replay` ids in the output reproduce a failure.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from lifecycled import start_server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(ROOT, "openapi.yaml")
CONFIG = os.path.join(ROOT, "Tests", "contract", "schemathesis.toml")
# The members that carry the app's report and the device's clock (AppReport.reservedNames).
RESERVED = {"believedState", "ranHooks", "occurredAt"}


def log(message):
    print(f"contract: {message}", flush=True)


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, json.load(response)


def wait_healthy(base):
    deadline = time.monotonic() + 30
    while True:
        try:
            status, body = get_json(f"{base}/healthz")
            if status == 200 and body.get("status") == "ok":
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("contract: /healthz did not answer 200 within 30 s")
        time.sleep(0.05)


def spec_enums_match_models(models, scenarios):
    """The spec's name enums are the built-in models' (and scenarios') names: returns the differences."""
    spec = yaml.safe_load(open(SPEC, encoding="utf-8"))
    schemas = spec["components"]["schemas"]
    served = {
        "ModelName": sorted(m["name"] for m in models),
        "StateName": sorted(s["name"] for m in models for s in m["states"]),
        "EventName": sorted(e["name"] for m in models for e in m["events"]),
        "ActionName": sorted(a["name"] for m in models for a in m["actions"]),
        "ScenarioName": sorted(scenarios),
    }
    problems = [
        f"{name}: spec {sorted(schemas[name]['enum'])}, server {names}"
        for name, names in served.items() if sorted(schemas[name]["enum"]) != names
    ]
    # Each body alternative names its inputs and declares their parameters exactly.
    for kind, body in (("event", "EventBody"), ("action", "ActionBody")):
        declared = {
            i["name"]: {p["name"]: (p["type"], p.get("required", False)) for p in i["parameters"]}
            for m in models for i in m[kind + "s"]
        }
        described = {}
        for alternative in schemas[body]["oneOf"]:
            if "$ref" in alternative:
                alternative = schemas[alternative["$ref"].rsplit("/", 1)[1]]
            name_schema = alternative["properties"][kind]
            names = [name_schema["const"]] if "const" in name_schema else name_schema["enum"]
            parameters = {}
            # What the app reports and when by its clock: members of every input, never parameters.
            missing = sorted(RESERVED - alternative["properties"].keys())
            if missing:
                problems.append(f"{body}: {name_schema} lacks {missing}")
            for parameter, schema in alternative["properties"].items():
                if parameter == kind or parameter in RESERVED:
                    continue
                types = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
                required = parameter in alternative["required"]
                # `null` means absent: an optional parameter takes it, a required one does not.
                if ("null" in types) == required:
                    problems.append(f"{body}: {parameter} of {name_schema} must {'not ' if required else ''}allow null")
                parameters[parameter] = ([t for t in types if t != "null"][0], required)
            for name in names:
                described[name] = parameters
        if described != declared:
            problems.append(f"{body}: spec {described}, server {declared}")
    return problems


def spec_links():
    """Every link in openapi.yaml, named as schemathesis names a followed one."""
    spec = yaml.safe_load(open(SPEC, encoding="utf-8"))
    targets = {
        operation["operationId"]: f"{method.upper()} {path}"
        for path, item in spec["paths"].items()
        for method, operation in item.items() if isinstance(operation, dict) and "operationId" in operation
    }
    components = spec["components"]["links"]
    links = set()
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                for name, link in response.get("links", {}).items():
                    link = components[link["$ref"].rsplit("/", 1)[1]] if "$ref" in link else link
                    links.add(f"{method.upper()} {path} -> [{status}] {name} -> {targets[link['operationId']]}")
    return links


def stop_server(process):
    """SIGTERM, then the exit code (None if it had to be killed)."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def stop_on_sigterm(signum, frame):
    # `timeout` sends SIGTERM: unwind through the `finally` that stops the server.
    raise SystemExit(f"contract: stopped by signal {signum}")


def main():
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20251130)
    parser.add_argument("--max-examples", type=int, default=200, help="per operation")
    parser.add_argument("--stateful-rounds", type=int, default=5, help="stateful suites, the first with the seed")
    parser.add_argument("--server", default=os.path.join(ROOT, ".build", "debug", "lifecycled"))
    args = parser.parse_args()
    if not os.access(args.server, os.X_OK):
        raise SystemExit(f"contract: {args.server} is not built (swift build first)")

    began = time.monotonic()
    work = tempfile.mkdtemp(prefix="lifecycled-contract-")
    server_log = os.path.join(work, "server.log")
    process, port = start_server(args.server, os.path.join(work, "data"), server_log, "contract")
    base = f"http://127.0.0.1:{port}"
    failed = []
    try:
        wait_healthy(base)
        log(f"lifecycled up at {base} (data in {work})")
        _, listing = get_json(f"{base}/v1/models")
        models_path = os.path.join(work, "models.json")
        with open(models_path, "w", encoding="utf-8") as f:
            json.dump(listing, f)
        scenarios = [
            s["name"] for m in listing["items"] for s in get_json(f"{base}/v1/models/{m['name']}/scenarios")[1]["items"]
        ]
        problems = spec_enums_match_models(listing["items"], scenarios)
        for problem in problems:
            log(f"openapi.yaml does not match the built-in models: {problem}")
        if problems:
            failed.append("openapi.yaml enums")
        environment = {
            **os.environ,
            "NO_PROXY": "127.0.0.1",
            "SCHEMATHESIS_HOOKS": os.path.join(ROOT, "Tests", "contract", "hooks.py"),
            "LIFECYCLED_CONTRACT_MODELS": models_path,
        }
        links = set()
        # A stateful suite ends early when a replayed scenario meets a server that an earlier
        # one changed (Hypothesis calls that flaky data generation); more suites, each with
        # the next seed, walk more of the links.
        rounds = [("examples,coverage,fuzzing,stateful", args.seed)]
        rounds += [("stateful", args.seed + n) for n in range(1, args.stateful_rounds)]
        for number, (phases, seed) in enumerate(rounds, 1):
            events = os.path.join(work, f"events-{number}.ndjson")
            command = [
                sys.executable, "-m", "schemathesis.cli", "--config-file", CONFIG, "--no-color",
                "run", SPEC, "--url", base,
                "--checks", "all",
                # Event streams never end: their own tests (swift test) read them as a client does.
                "--exclude-tag", "streams",
                "--phases", phases,
                "--seed", str(seed),
                "--max-examples", str(args.max_examples),
                # Every request and response, for triage; kept with the server log on failure.
                "--report", "har,ndjson",
                "--report-har-path", os.path.join(work, f"requests-{number}.har"),
                "--report-ndjson-path", events,
            ]
            log(f"round {number} of {len(rounds)}: " + " ".join(command[3:]))
            # Its own temporary folder as working directory: schemathesis keeps nothing there.
            result = subprocess.run(command, cwd=work, env=environment)
            if result.returncode != 0:
                failed.append(f"schemathesis round {number} (exit {result.returncode})")
            with open(events, encoding="utf-8") as f:
                text = f.read()
            links.update(re.findall(r'"transition": ?\{"id": ?"([^"]+)"', text))
        every = spec_links()
        log(f"stateful: {len(links & every)} of {len(every)} links of openapi.yaml followed")
        for link in sorted(every - links):
            log(f"  not followed: {link}")
    finally:
        code = stop_server(process)
    if code != 0:
        failed.append(f"lifecycled exit {code} after SIGTERM")
    log(f"took {time.monotonic() - began:.0f} s")
    if failed:
        log("FAILED: " + "; ".join(failed))
        log(f"server log, requests and events kept in {work}")
        with open(server_log, encoding="utf-8", errors="replace") as f:
            print("".join(f.readlines()[-20:]), end="")
        return 1
    shutil.rmtree(work)
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
