#!/usr/bin/env python3
"""Generated-client test: a client generated from openapi.yaml drives a live lifecycled.

Generates a Python client with openapi-python-client (a standard generator; the version the
Makefile pins) into a temporary folder, and fails if the generator warns about any schema or
response it could not turn into code: every schema must come out as a named type. Then starts
the built server (.build/debug/lifecycled) on a free loopback port with a fresh data folder
and, through the generated functions only, runs docs/API.md's walk-through (create, events,
an action, an unexpected event, a relaunch, the instance, history, the list), a conformance
check and a scenario run, checking that every answer is parsed into the generated type with
the values the server sent. Stops the server with SIGTERM and fails if it does not exit 0.

Usage: python3 Tests/client/run.py [--server PATH]
"""

import argparse
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from lifecycled import start_server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(ROOT, "openapi.yaml")
CONFIG = os.path.join(ROOT, "Tests", "client", "generator.yaml")
# What openapi-python-client prints for each piece of the spec it had to leave out.
GENERATOR_TROUBLE = re.compile(r"WARNING|Unable to|Cannot parse|Failure to process|will be omitted|has resulted in the removal")


def log(message):
    print(f"client: {message}", flush=True)


def fail(message):
    raise SystemExit(f"client: FAILED: {message}")


def generate(folder):
    """Generates the client package `lifecycled_client` in folder; fails on any generator warning."""
    generator = shutil.which("openapi-python-client", path=os.path.dirname(sys.executable)) or shutil.which("openapi-python-client")
    if generator is None:
        fail("openapi-python-client is not installed (make test installs it into the test venv)")
    result = subprocess.run(
        [generator, "generate", "--path", SPEC, "--meta", "none", "--config", CONFIG,
         "--output-path", os.path.join(folder, "lifecycled_client")],
        capture_output=True, text=True,
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        fail(f"the generator exited {result.returncode}:\n{output}")
    trouble = [line for line in output.splitlines() if GENERATOR_TROUBLE.search(line)]
    if trouble:
        fail("the generator could not express everything in openapi.yaml:\n" + output)
    log("generated lifecycled_client with no warning")
    sys.path.insert(0, folder)
    return importlib.import_module("lifecycled_client")


def expect(response, status, parsed_type):
    """The response's status is `status` and its body was parsed into `parsed_type`."""
    if response.status_code != status:
        fail(f"expected {status}, got {response.status_code}: {response.content[:400]!r}")
    if not isinstance(response.parsed, parsed_type):
        fail(f"the {status} answer was parsed as {type(response.parsed).__name__}, not {parsed_type.__name__}: {response.content[:400]!r}")
    return response.parsed


def same(what, got, wanted):
    if got != wanted:
        fail(f"{what}: got {got!r}, wanted {wanted!r}")


def walk_through(client_module, base):
    from lifecycled_client import Client
    from lifecycled_client.api.service import health
    from lifecycled_client.api.instances import create_instance, get_instance, history, list_instances, delete_instance
    from lifecycled_client.api.inputs import post_event, post_action, relaunch
    from lifecycled_client.api.models import list_models, get_model, check_conformance, run_scenario, list_scenarios, get_coverage, get_model_graph_svg
    from lifecycled_client import models as m

    client = Client(base_url=base, raise_on_unexpected_status=True)
    expect(health.sync_detailed(client=client), 200, m.Health)

    created = expect(create_instance.sync_detailed(client=client, body=m.NewInstance(id="generated-1")), 201, m.Instance)
    same("created id", created.id, "generated-1")
    same("created state", created.state, "initializing")
    same("created version", created.version, 0)

    def event(body, status=200, parsed=m.Record):
        return expect(post_event.sync_detailed("generated-1", client=client, body=body), status, parsed)

    launch = event(m.LaunchEvent(event=m.LaunchEventEvent.DIDFINISHLAUNCHING))
    same("launch", (launch.from_, launch.to, launch.version, launch.kind.value), ("initializing", "launching", 1, "event"))
    window = event(m.WindowEvent(event=m.WindowEventEvent.WILLCONNECTTOWINDOW, window="main"))
    same("window", (window.to, window.hooks), ("connected", window.hooks))
    active = event(m.PlainEvent(event=m.PlainEventEvent.DIDBECOMEACTIVE))
    same("active", active.to, "foreground")
    if "Foreground.onTransition" not in active.hooks:
        fail(f"didBecomeActive ran {active.hooks}, not Foreground.onTransition")

    action = expect(post_action.sync_detailed("generated-1", client=client, body=m.OpenURLAction(action=m.OpenURLActionAction.OPENURL, url="https://duckduckgo.com")), 200, m.Record)
    same("action", (action.kind.value, action.disposition.value), ("action", "handled"))

    background = event(m.PlainEvent(event=m.PlainEventEvent.DIDENTERBACKGROUND))
    same("background", background.to, "background")

    unexpected = event(m.LaunchEvent(event=m.LaunchEventEvent.DIDFINISHLAUNCHING), 409, m.UnexpectedEventProblem)
    same("unexpected status", unexpected.status, 409)
    same("unexpected record outcome", unexpected.record.outcome.value, "unexpected")
    same("unexpected type", unexpected.type_, "/problems/unexpected-event")

    again = expect(relaunch.sync_detailed("generated-1", client=client, body=m.RelaunchBody()), 200, m.Record)
    same("relaunch", (again.kind.value, again.to), ("relaunch", "initializing"))

    instance = expect(get_instance.sync_detailed("generated-1", client=client), 200, m.Instance)
    same("instance", (instance.state, instance.version, instance.launch_count, instance.counters.unexpected), ("initializing", again.version, 2, 1))

    page = expect(history.sync_detailed("generated-1", client=client), 200, m.HistoryPage)
    same("history versions", [r.version for r in page.items], list(range(1, again.version + 1)))
    same("history's last record", page.items[-1].sequence, again.sequence)

    listed = expect(list_instances.sync_detailed(client=client), 200, m.InstancePage)
    same("listed ids", [i.id for i in listed.items], ["generated-1"])

    models = expect(list_models.sync_detailed(client=client), 200, m.ModelList)
    if "ios-app" not in [model.name for model in models.items]:
        fail("ios-app is not among the models")
    model = expect(get_model.sync_detailed(m.ModelName.IOS_APP, client=client), 200, m.Model)
    if not all(isinstance(row, m.TransitionRow) for row in model.transitions):
        fail("the model's rows are not TransitionRows")
    coverage = expect(get_coverage.sync_detailed(m.ModelName.IOS_APP, client=client), 200, m.Coverage)
    if not any(row.taken > 0 for row in coverage.rows):
        fail("coverage counts no row taken after the walk-through")
    graph = get_model_graph_svg.sync_detailed(m.ModelName.IOS_APP, client=client)
    same("graph status", graph.status_code, 200)
    if b"<svg" not in graph.content:
        fail("graph.svg is not an SVG document")

    steps = [
        m.EventStep(event=m.EventName.DIDFINISHLAUNCHING, believed_state=m.StateName.LAUNCHING),
        m.EventStep(event=m.EventName.WILLCONNECTTOWINDOW),
        m.ActionStep(action=m.ActionName.OPENURL),
        m.EventStep(event=m.EventName.DIDBECOMEACTIVE, believed_state=m.StateName.BACKGROUND),
    ]
    steps[1].additional_properties["window"] = "main"
    steps[2].additional_properties["url"] = "https://duckduckgo.com"
    report = expect(check_conformance.sync_detailed(m.ModelName.IOS_APP, client=client, body=m.ConformanceRequest(steps=steps)), 200, m.ConformanceReport)
    same("conforming", report.conforming, False)
    if not isinstance(report.first_problem, m.ConformanceProblem):
        fail(f"firstProblem was parsed as {type(report.first_problem).__name__}")
    same("first problem", (report.first_problem.kind.value, report.first_problem.step), ("beliefMismatch", 3))
    if not all(isinstance(step, m.ReplayedStep) for step in report.steps):
        fail(f"the report's steps were parsed as {[type(s).__name__ for s in report.steps]}")
    same("replayed sequence numbers", [s.record.sequence for s in report.steps], [0, 0, 0, 0])
    same("final state", report.final_state, "foreground")

    scenarios = expect(list_scenarios.sync_detailed(m.ModelName.IOS_APP, client=client), 200, m.ScenarioList)
    if "cold-start" not in [s.name for s in scenarios.items]:
        fail("cold-start is not among the scenarios")
    run = expect(run_scenario.sync_detailed(m.ModelName.IOS_APP, m.ScenarioName.COLD_START, client=client), 200, m.ScenarioRun)
    same("cold-start passing", run.passing, True)
    if not all(isinstance(r, m.ReplayedRecord) for r in run.records) or not run.records:
        fail("the scenario's records are not ReplayedRecords")

    missing = expect(get_instance.sync_detailed("no-such-instance", client=client), 404, m.Problem)
    same("404 status", missing.status, 404)

    deleted = delete_instance.sync_detailed("generated-1", client=client)
    same("delete", deleted.status_code, 204)
    log("walk-through, conformance check and scenario run answered as the spec says")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default=os.path.join(ROOT, ".build", "debug", "lifecycled"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="lifecycled-client-")
    succeeded = False
    try:
        client_module = generate(work)
        data_dir = os.path.join(work, "data")
        os.mkdir(data_dir)
        log_path = os.path.join(work, "server.log")
        process, port = start_server(args.server, data_dir, log_path, "client")
        try:
            walk_through(client_module, f"http://127.0.0.1:{port}")
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
        if code != 0:
            fail(f"lifecycled exited {code} after SIGTERM:\n{open(log_path).read()}")
        succeeded = True
        log("passed")
    finally:
        if succeeded:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"client: kept {work} (generated client, server log)", flush=True)


if __name__ == "__main__":
    main()
