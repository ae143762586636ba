#!/usr/bin/env python3
"""Browser test: the dashboard in a real Chromium, driven by Selenium, against the real server.

Starts the built server (.build/debug/lifecycled) on a free loopback port with a fresh
data folder for each group of tests, loads the page in headless Chromium (Debian's
`chromium` and `chromium-driver`, Debian's `python3-selenium`) and checks what issue 8
asks the page to show: no console errors or CSP violations; one graph node per state of
each model; an event posted through the API moving the highlight and adding a timeline
row within 2 s; event buttons posting; the fleet counts on the graph matching
GET /v1/instances; replay to the first record showing the initial state; a trace with a
wrong event showing its divergence; the token asked for on a 401 and kept in
sessionStorage. Issue 21's first hour: the list's count columns sort and its filters
(the server's) leave only the broken instances; a replay shows the replayed record's facts
and says that sending acts on the live instance; report and graph describe the same trace
or scenario, and number steps as the API does; every view at 1400 and 400 px is no wider
than the window, with edge labels of 11 px or more, focusable graph regions and legends;
one time format; no Token button where /healthz says writes need no token. Issue 19: a
record whose app report (believedState, ranHooks) differs from the model is marked in the
timeline (from history and live) and in the replay, with the state believed and the actual
one and the hooks expected, ran, missing and extra (or order only); the device's
occurredAt beside the server's time; the fleet's divergences per state as coverage counts
them, leading to the instances with divergences (divergence-*.png). Issue 20: a gap (inputs
dropped on the device) in the timeline and the replay, in words with its own mark, and the
instance's dropped count (gap-*.png). Issue 33: at a phone's width (400 px, emulated through
the DevTools protocol: headless Chromium makes no window under 500 px) and at 1400, the
instance graph fits or scrolls with every node reachable, tapping an instance brings its
details into view, and the filters and the chosen instance live in the URL (phone-*.png).
It also
measures how long the page takes to load with 10,000 instances (figures printed, never
asserted).

Screenshots go to .build/screenshots/ (printed at the start and the end).

Usage: /usr/bin/python3 Tests/browser/run.py [--server PATH] [--keep] [-k PATTERN] [--load-instances N]
"""

import argparse
import base64
import datetime
import http.client
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCREENSHOTS = os.path.join(ROOT, ".build", "screenshots")
STARTED = re.compile(r"lifecycled started\"? address=127\.0\.0\.1:(\d+)")
OPTIONS = argparse.Namespace(server=os.path.join(ROOT, ".build", "debug", "lifecycled"), keep=False, load_instances=10_000)

COLD_START = [
    {"event": "didFinishLaunching"},
    {"event": "willConnectToWindow", "window": "main"},
    {"event": "didBecomeActive"},
]
BACKGROUNDING = [{"event": "willResignActive"}, {"event": "didEnterBackground"}]


def log(message):
    print(f"browser: {message}", flush=True)


# MARK: the server


class Server:
    """lifecycled on a free loopback port with a fresh data folder; stopped with SIGTERM."""

    def __init__(self, *arguments, port=0, folder=None):
        self.arguments = arguments
        self.folder = folder or tempfile.mkdtemp(prefix="lifecycled-browser-")
        self.log_path = os.path.join(self.folder, "server.log")
        start = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [OPTIONS.server, "--host", "127.0.0.1", "--port", str(port), "--data-dir", os.path.join(self.folder, "data"),
             "--public-dir", os.path.join(ROOT, "Public"), *arguments],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            with open(self.log_path, "rb") as f:
                match = STARTED.search(f.read().decode("utf-8", "replace"), start)
            if match:
                self.port = int(match.group(1))
                break
            if self.process.poll() is not None:
                raise RuntimeError(f"lifecycled exited with {self.process.returncode}:\n{open(self.log_path).read()}")
            if time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError("lifecycled did not log its start line within 30 s")
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{self.port}"

    def restart(self):
        """Stops the server and starts it again on the same port and data folder."""
        self.terminate()
        self.__init__(*self.arguments, port=self.port, folder=self.folder)

    def stop(self):
        self.terminate()
        if not OPTIONS.keep:
            shutil.rmtree(self.folder, ignore_errors=True)

    def terminate(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        if code != 0:
            raise RuntimeError(f"lifecycled exited with {code}; log in {self.log_path}")


class API:
    """A keep-alive HTTP client for one server (one per thread)."""

    def __init__(self, server, token=None):
        self.server = server
        self.token = token
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

    def call(self, method, path, body=None):
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        payload = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            payload = json.dumps(body).encode()
        for attempt in range(2):
            try:
                self.connection.request(method, path, body=payload, headers=headers)
                response = self.connection.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, ConnectionError):
                # A connection the server closed (e.g. after a refusal) is opened anew once.
                self.connection.close()
                if attempt:
                    raise
        if response.getheader("Connection", "").lower() == "close":
            self.connection.close()
        return response.status, (json.loads(data) if data.strip() else None)

    def ok(self, method, path, body=None, expect=(200, 201, 204)):
        status, data = self.call(method, path, body)
        if status not in expect:
            raise AssertionError(f"{method} {path}: {status} {data}")
        return data

    def create(self, instance, model="ios-app"):
        return self.ok("PUT", f"/v1/instances/{instance}", {"model": model})

    def event(self, instance, step, expect=(200,)):
        status, data = self.call("POST", f"/v1/instances/{instance}/events", step)
        if status not in expect:
            raise AssertionError(f"event {step} on {instance}: {status} {data}")
        return data.get("record", data) if status == 409 else data

    def instance(self, instance):
        return self.ok("GET", f"/v1/instances/{instance}", expect=(200,))

    def all_instances(self, model):
        items, cursor = [], None
        while True:
            path = f"/v1/instances?model={model}&limit=1000" + (f"&cursor={cursor}" if cursor else "")
            page = self.ok("GET", path, expect=(200,))
            items += page["items"]
            cursor = page["nextCursor"]
            if not cursor:
                return items


def plan(index):
    """The inputs that bring instance `index` of a seeded fleet to its state: every state
    of ios-app gets some, every 50th instance also has an unexpected (or ignored) event, and
    every 100th a launch left incomplete by a relaunch."""
    k = index % 10
    steps = {
        0: [],
        1: COLD_START[:1],
        2: COLD_START[:2],
        3: COLD_START, 4: COLD_START, 5: COLD_START,
        6: COLD_START + BACKGROUNDING, 7: COLD_START + BACKGROUNDING,
        8: [{"event": "didFinishLaunching", "setupError": "disk full"}],
        9: [{"event": "didFinishLaunching", "isTesting": True}],
    }[k]
    steps = [("events", s) for s in steps]
    if index % 100 == 2:
        steps += [("relaunches", None), ("events", {"event": "didFinishLaunching"})]
    if index % 50 == 0:
        steps.append(("events", {"event": "didBecomeActive"}))
    return steps


def seed(server, count, prefix, threads=4):
    """Creates `count` ios-app instances spread over the states, from a few keep-alive connections."""
    started = time.monotonic()
    errors = []

    def work(worker):
        api = API(server)
        try:
            for index in range(worker, count, threads):
                instance = f"{prefix}-{index:05d}"
                api.create(instance)
                for kind, body in plan(index):
                    status, data = api.call("POST", f"/v1/instances/{instance}/{kind}", body)
                    if status not in (200, 409):
                        raise AssertionError(f"{kind} {body} on {instance}: {status} {data}")
        except Exception as error:  # reported below, after every worker stopped
            errors.append(error)

    workers = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    log(f"seeded {count} instances in {time.monotonic() - started:.1f} s")


# MARK: the browser

CSP_RECORDER = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + (e.sourceFile || '') + ':' + e.lineNumber);
});
"""


def browser(width=1400, height=1000):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}", "--lang=en-US", "--no-first-run",
                     f"--user-data-dir={tempfile.mkdtemp(prefix='lifecycled-chromium-')}"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=ChromeService(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    # Recorded from the first script of every document on, before the page's own.
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CSP_RECORDER})
    still(driver)
    return driver


def still(driver, scheme=None):
    """No transitions (screenshots show where things end up), and the colour scheme asked for."""
    features = [{"name": "prefers-reduced-motion", "value": "reduce"}]
    if scheme:
        features.append({"name": "prefers-color-scheme", "value": scheme})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})


def wait_until(condition, timeout=10.0, message="condition", explain=None):
    """Polls `condition` until it returns something truthy; fails after `timeout` seconds
    (saying what `explain()` returns then, if given)."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # the page may be between states; keep polling
            last_error = error
        if time.monotonic() > deadline:
            found = f"; found: {explain()}" if explain else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {message}{found}" + (f" (last error: {last_error})" if last_error else ""))
        time.sleep(0.05)


def click_live(find, message):
    """Clicks what `find()` returns, found again if the page replaced it in between: a live
    list (the findings) renders again whenever records arrive, which leaves an element found
    a moment before stale."""
    wait_until(lambda: find().click() or True, 5, message)


# A server without findings (before issue 33) answers the page's request 404, which the page
# says in words and Chromium logs.
NO_FINDINGS = r"/v1/findings\?.* 404"


def has_findings(api):
    return api.call("GET", "/v1/findings?model=ios-app")[0] != 404


class DashboardCase(unittest.TestCase):
    """One server and one browser per class; every test ends with no console errors."""

    server_arguments = ()
    token = None
    # Console lines a test expects (e.g. the 401s that make the page ask for the token).
    allowed_console = ()

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.server_arguments)
        cls.api = API(cls.server, token=cls.token)
        cls.has_findings = has_findings(cls.api)
        cls.driver = browser()

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.server.stop()

    def setUp(self):
        self.expected_console = list(self.allowed_console)
        if not self.has_findings:
            self.expected_console.append(NO_FINDINGS)
        self.metrics = None

    def set_width(self, width, height):
        """The page at `width` × `height` CSS px, through the DevTools protocol's device metrics:
        headless Chromium makes no window narrower than 500 px. Under 500 px it is a phone's
        (`mobile`: the viewport meta tag applies, scrollbars overlay the page)."""
        self.metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", self.metrics)

    def reset_width(self):
        self.metrics = None
        self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        self.driver.set_window_size(1400, 1000)

    def tearDown(self):
        self.assertNoConsoleErrors()

    def assertNoConsoleErrors(self):
        entries = self.driver.get_log("browser")
        errors = [e["message"] for e in entries if e["level"] == "SEVERE"
                  and not any(re.search(pattern, e["message"]) for pattern in self.expected_console)]
        violations = self.driver.execute_script("return window.__cspViolations || []")
        self.assertEqual(errors, [], "console errors")
        self.assertEqual(violations, [], "Content-Security-Policy violations")

    # Page helpers

    def load(self, fragment):
        """A cold load of the page at `fragment`, waiting until it says it is ready."""
        self.driver.get("about:blank")
        self.driver.get(f"{self.server.base}/{fragment}")
        wait_until(lambda: self.driver.execute_script("return document.body.dataset.ready") == "true", 15, "the page to be ready")

    def js(self, script, *arguments):
        return self.driver.execute_script(script, *arguments)

    def find(self, selector):
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def finds(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def current_state(self, graph="instance-graph"):
        return self.js(f"return [...document.querySelectorAll('#{graph} svg g.current')].map(g => g.dataset.state).join(' ')")

    def last_rows(self):
        return self.js("return [...document.querySelectorAll('#instance-graph svg g.last')].map(g => g.dataset.row).join(' ')")

    def timeline_versions(self):
        return self.js("return [...document.querySelectorAll('#timeline > li')].map(li => Number(li.dataset.version))")

    def screenshot(self, name, slices=False):
        """The whole page, not only the window's part of it; with `slices`, also in pieces
        of 900 px under slices/ (a tall narrow page is easier to look at in pieces)."""
        os.makedirs(SCREENSHOTS, exist_ok=True)
        path = os.path.join(SCREENSHOTS, name)
        # No focus ring left by a check on the picture.
        self.js("document.activeElement?.blur()")
        # The window made as tall as the page for the capture, then given back: Chromium's own
        # capture beyond the viewport leaves its input out of step with the page afterwards (the
        # next click lands where the page no longer is).
        width, scroll = self.js("return innerWidth"), self.js("return [scrollX, scrollY]")
        height = min(self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]["height"], 6000)
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": math.ceil(height), "deviceScaleFactor": 1,
                                                                           "mobile": bool(self.metrics and self.metrics["mobile"])})
        try:
            size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
            height = min(size["height"], 6000)
            pieces = [(path, 0, height)]
            if slices:
                os.makedirs(os.path.join(SCREENSHOTS, "slices"), exist_ok=True)
                stem = os.path.splitext(name)[0]
                pieces += [(os.path.join(SCREENSHOTS, "slices", f"{stem}-{n + 1}.png"), top, min(900, height - top))
                           for n, top in enumerate(range(0, int(height), 900))]
            for target, top, tall in pieces:
                shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
                    "format": "png",
                    "clip": {"x": 0, "y": top, "width": size["width"], "height": tall, "scale": 1},
                })
                with open(target, "wb") as f:
                    f.write(base64.b64decode(shot["data"]))
        finally:
            # Back to the width the test set (see set_width), or the window's own.
            if self.metrics:
                self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", self.metrics)
            else:
                self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            self.js("scrollTo(arguments[0], arguments[1])", *scroll)
        log(f"screenshot {path}")

    def open_instance(self, instance, state):
        self.load(f"#/instances/{instance}")
        wait_until(lambda: self.current_state() == state, 10, f"{instance} shown in {state}")

    def post_and_watch(self, instance, step):
        """Posts an event through the API; within 2 s the highlight moves to the record's
        state and the timeline's newest row is that record."""
        record = self.api.event(instance, step)
        wait_until(lambda: self.current_state() == record["to"] and self.timeline_versions()[:1] == [record["version"]],
                   2.0, f"{step['event']} on the graph and in the timeline")
        if record.get("row"):
            self.assertEqual(self.last_rows(), record["row"], "the last transition's edge is marked")
        return record

    def fact(self, term):
        """The text of one of the instance's facts (`State`, `Unexpected`…)."""
        return self.find(f"#detail-facts [data-fact='{term}'] dd").text

    def settled(self, version):
        """Waits until the facts beside the graph were read at `version` (for screenshots)."""
        wait_until(lambda: self.find("#detail-facts").get_attribute("data-version") == str(version), 5, f"the facts at version {version}")


# MARK: the tests


class Dashboard(DashboardCase):
    """The page against a server without a token."""

    def test_a_graph_has_one_node_per_state_of_each_model(self):
        models = self.api.ok("GET", "/v1/models")["items"]
        self.load("#/fleet")
        select = Select(self.find("#model-select"))
        self.assertEqual(sorted(o.get_attribute("value") for o in select.options), sorted(m["name"] for m in models))
        for model in models:
            select.select_by_value(model["name"])
            states = sorted(s["name"] for s in model["states"])
            rows = sorted(r["id"] for r in model["transitions"])
            nodes = wait_until(lambda: (lambda found: found if sorted(found) == states else None)(
                self.js("return [...document.querySelectorAll('#fleet-graph svg g.node')].map(g => g.dataset.state)")),
                10, f"{model['name']}'s graph")
            self.assertEqual(len(nodes), len(set(nodes)), "one node per state")
            edges = self.js("return [...document.querySelectorAll('#fleet-graph svg g.edge')].map(g => g.dataset.row)")
            self.assertEqual(sorted(edges), rows, "one edge per transition row")
            kinds = self.js("return Object.fromEntries([...document.querySelectorAll('#fleet-graph svg g.node')].map(g => [g.dataset.state, [...g.classList].filter(c => ['initial','transient','permanent','terminal'].includes(c))]))")
            self.assertEqual(kinds, {s["name"]: [s["kind"]] for s in model["states"]}, "each node names its kind")
        # Ids stay unique in the document although the graph is inlined three times.
        self.assertEqual(self.js("const ids = [...document.querySelectorAll('[id]')].map(e => e.id); return ids.length - new Set(ids).size"), 0)
        # Every form control has a label, every button a name (keyboard and screen reader use).
        unlabelled = self.js("""return [...document.querySelectorAll('input, select, textarea')]
            .filter(e => e.type !== 'hidden' && !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.outerHTML)""")
        self.assertEqual(unlabelled, [])
        nameless = self.js("return [...document.querySelectorAll('button')].filter(b => !(b.textContent.trim() || b.getAttribute('aria-label'))).map(b => b.outerHTML)")
        self.assertEqual(nameless, [])

    def test_b_event_posted_through_the_api_moves_the_highlight(self):
        self.api.create("live-1")
        self.open_instance("live-1", "initializing")
        for step in COLD_START:
            record = self.post_and_watch("live-1", step)
        self.settled(record["version"])
        self.screenshot("instance-after-cold-start.png")
        for step in BACKGROUNDING:
            record = self.post_and_watch("live-1", step)
        self.settled(record["version"])
        self.screenshot("instance-after-backgrounding.png")
        # An unexpected event: recorded (409), shown as such, the state unchanged.
        record = self.api.event("live-1", {"event": "willResignActive"}, expect=(409,))
        wait_until(lambda: self.timeline_versions()[:1] == [record["version"]], 2.0, "the unexpected record in the timeline")
        self.assertIn("outcome-unexpected", self.find("#timeline > li").get_attribute("class"))
        self.assertEqual(self.current_state(), "background")

    def test_c_buttons_and_forms_post_inputs(self):
        self.api.create("click-1")
        self.open_instance("click-1", "initializing")
        self.find("#event-forms button[data-event='didFinishLaunching']").click()
        wait_until(lambda: self.api.instance("click-1")["state"] == "launching", 5, "the click's event to be committed")
        wait_until(lambda: self.current_state() == "launching", 2, "the highlight on launching")

        # An event the state does not expect is marked, and still sent when clicked; the
        # server answers 409 (recorded and counted), which Chromium logs as a failed load.
        self.expected_console.append(r"/v1/instances/click-1/events - Failed to load resource: .* 409")
        unexpected = self.find("#event-forms form[data-event='didBecomeActive']")
        wait_until(lambda: unexpected.get_attribute("data-fate") == "unexpected", 2, "didBecomeActive marked unexpected")
        self.assertIn("unexpected", self.find("#fate-didBecomeActive").text)
        self.find("#event-forms button[data-event='didBecomeActive']").click()
        wait_until(lambda: self.api.instance("click-1")["counters"]["unexpected"] == 1, 5, "the unexpected event to be recorded")
        wait_until(lambda: "unexpected" in self.find("#write-status").text, 2, "the answer to say unexpected")

        # A required parameter, typed, sent from the keyboard.
        window = self.find("#event-willConnectToWindow-window")
        window.send_keys("main")
        window.send_keys(Keys.ENTER)
        wait_until(lambda: self.api.instance("click-1")["window"] == "main", 5, "willConnectToWindow with its window")

        # An action: buffered in connected (no action hook there).
        Select(self.find("#action-name")).select_by_value("openURL")
        self.find("#action-url").send_keys("https://example.com/a")
        self.find("#action-form button[type='submit']").click()
        wait_until(lambda: (self.api.instance("click-1")["bufferedAction"] or {}).get("name") == "openURL", 5, "the buffered action")

        self.find("#relaunch-button").click()
        wait_until(lambda: self.api.instance("click-1")["launchCount"] == 2, 5, "the relaunch")
        wait_until(lambda: self.current_state() == "initializing", 2, "the highlight back on initializing")

        self.find("#delete-button").click()
        self.find("#delete-yes").click()
        wait_until(lambda: self.api.call("GET", "/v1/instances/click-1")[0] == 404, 5, "the deletion")
        wait_until(lambda: self.find("#detail-deleted").is_displayed(), 2, "the page to say it is deleted")

        # Create: the new instance is opened.
        self.find("details.create summary").click()
        self.find("#create-form input[name='id']").send_keys("made-in-page")
        self.find("#create-form button[type='submit']").click()
        wait_until(lambda: self.api.call("GET", "/v1/instances/made-in-page")[0] == 200, 5, "the creation")
        wait_until(lambda: self.current_state() == "initializing" and "made-in-page" in self.find("#detail-heading").text, 5, "the new instance shown")

    def test_d_fleet_counts_match_the_instances(self):
        seed(self.server, 1000, "fleet")
        self.load("#/fleet")
        expected = {}
        for instance in self.api.all_instances("ios-app"):
            expected[instance["state"]] = expected.get(instance["state"], 0) + 1
        states = [s["name"] for s in self.api.ok("GET", "/v1/models/ios-app")["states"]]
        want = {state: expected.get(state, 0) for state in states}
        self.assertGreaterEqual(sum(want.values()), 1000)
        self.assertEqual(sum(1 for n in want.values() if n > 0), len(states), "the fleet covers every state")
        read = """return Object.fromEntries([...document.querySelectorAll('#fleet-graph svg g.node')].map(g => [g.dataset.state,
            Number(document.querySelector(`#fleet-graph svg g.badge.count[data-state="${g.dataset.state}"] text`)?.textContent ?? -1)]))"""
        wait_until(lambda: self.js(read) == want, 10, f"the graph's counts to be {want}")
        coverage = self.api.ok("GET", "/v1/models/ios-app/coverage")
        never = sorted(coverage["neverTaken"])
        marked = sorted(self.js("return [...document.querySelectorAll('#fleet-graph svg g.edge.never-taken')].map(g => g.dataset.row)"))
        self.assertEqual(marked, never, "never-taken edges are marked")
        warned = sorted(self.js("return [...document.querySelectorAll('#fleet-graph svg g.node.has-unexpected')].map(g => g.dataset.state)"))
        self.assertEqual(warned, sorted(s["state"] for s in coverage["states"] if s["unexpected"] > 0))
        self.assertTrue(warned, "the seeded fleet has unexpected events")
        incomplete = sorted(self.js("return [...document.querySelectorAll('#fleet-graph svg g.node.has-incomplete')].map(g => g.dataset.state)"))
        self.assertEqual(incomplete, sorted(s["state"] for s in coverage["states"] if s["incompleteLaunches"] > 0))
        self.assertTrue(incomplete, "the seeded fleet has incomplete launches")
        self.screenshot("fleet-1000-instances.png")

        # The list pages through them, 100 at a time.
        self.js("location.hash = '#/instances'")
        wait_until(lambda: len(self.finds("#instance-list tbody tr")) == 100, 5, "the first page of instances")
        first = self.find("#instance-list tbody tr").get_attribute("data-id")
        self.find("#page-next").click()
        wait_until(lambda: self.find("#instance-list tbody tr").get_attribute("data-id") != first, 5, "the second page")
        self.assertIn("101–200", self.find("#list-status").text)
        Select(self.find("#filter-state")).select_by_value("terminating")
        wait_until(lambda: self.finds("#instance-list tbody tr") and all(
            b.get_attribute("data-state") == "terminating" for b in self.finds("#instance-list tbody .badge-state")), 5, "the state filter")

    def test_e_replay_to_the_first_record_shows_the_initial_state(self):
        self.api.create("replay-1")
        for step in COLD_START + BACKGROUNDING:
            self.api.event("replay-1", step)
        # One unexpected event (409, recorded and counted): live, the facts count it.
        self.api.event("replay-1", {"event": "willResignActive"}, expect=(409,))
        self.open_instance("replay-1", "background")
        wait_until(lambda: len(self.timeline_versions()) == 6, 5, "the history in the timeline")
        self.settled(6)
        self.assertEqual(self.fact("Unexpected"), "1")
        self.assertFalse(self.find("#send-note").is_displayed(), "no replay note while live")
        self.find("#replay-first").click()
        wait_until(lambda: self.current_state() == "initializing", 2, "the initial state at the first record")
        self.assertEqual(self.last_rows(), "")
        self.assertIn("replaying", self.find("#instance-graph svg").get_attribute("class"))
        # The facts are the replayed record's, not the live instance's.
        self.assertEqual(self.find("#detail-facts").get_attribute("data-replay"), "true")
        self.assertEqual(self.find("#detail-facts").get_attribute("data-state"), "initializing")
        self.assertEqual(self.fact("State"), "initializing")
        self.assertEqual(self.fact("Version"), "0")
        self.assertEqual(self.fact("Unexpected"), "0")
        # Sending acts on the live instance, and the page says so.
        note = self.find("#send-note")
        self.assertTrue(note.is_displayed(), "the Send panel says it acts on the live instance")
        self.assertIn("live instance, now in background", note.text)
        self.assertIn("unexpected in background (live)", self.find("#fate-willResignActive").text, "the fates are the live state's")
        self.screenshot("replay-first-record.png")

        # New records keep arriving while the replay holds its place.
        for step in [{"event": "willEnterForeground"}, {"event": "didBecomeActive"}]:
            self.api.event("replay-1", step)
        wait_until(lambda: len(self.timeline_versions()) == 8, 2, "the new records in the timeline")
        self.assertEqual(self.find("#replay-position").get_attribute("max"), "8")
        self.assertEqual(self.current_state(), "initializing", "the replay stays where it was")

        # The slider steps from the keyboard: one record on, the first transition.
        self.find("#replay-position").send_keys(Keys.ARROW_RIGHT)
        wait_until(lambda: self.current_state() == "launching" and self.last_rows() == "r2", 2, "the first record's state and edge")
        self.assertEqual((self.fact("State"), self.fact("Version")), ("launching", "1"), "the facts follow the replay")
        self.screenshot("replay-first-transition.png")
        self.find("#replay-live").click()
        wait_until(lambda: self.current_state() == "foreground", 2, "live again")
        self.assertNotIn("replaying", self.find("#instance-graph svg").get_attribute("class"))
        self.assertEqual((self.fact("State"), self.fact("Unexpected")), ("foreground", "1"), "the live facts again")
        self.assertFalse(self.find("#send-note").is_displayed())

        # Its history, checked as a trace, diverges where the unexpected event was (step 5,
        # numbered as the API numbers it).
        self.find("#check-history").click()
        wait_until(lambda: self.find("#trace-result .trace-summary").get_attribute("data-kind") == "unexpectedEvent", 5, "the history checked as a trace",
                   lambda: self.find("#trace-result").text)
        self.assertEqual(self.find("#trace-result .trace-summary").get_attribute("data-step"), "5")
        self.assertEqual(len(self.finds("#trace-result tbody tr")), 8)

    def test_f_trace_with_a_wrong_event_shows_the_divergence(self):
        self.load("#/trace")
        # Before anything is checked, the report says what to do (not a blank box).
        placeholder = self.find("#trace-result .placeholder")
        self.assertTrue(placeholder.is_displayed() and "Check a trace" in placeholder.text, "the empty report's placeholder")
        self.assertEqual(self.find("#trace-result").get_attribute("data-subject"), "none")
        trace = {"steps": [{"event": "didFinishLaunching", "believedState": "launching"}, {"event": "didBecomeActive"}]}
        self.check_trace(trace)
        summary = wait_until(lambda: self.find("#trace-result .trace-summary"), 5, "the trace's report",
                             lambda: self.find("#trace-result").text)
        self.assertEqual(summary.get_attribute("data-kind"), "unexpectedEvent")
        # One numbering: the page's step is the API's.
        api_step = self.api.ok("POST", "/v1/models/ios-app/conformance", trace, expect=(200,))["firstProblem"]["step"]
        self.assertEqual(summary.get_attribute("data-step"), str(api_step))
        self.assertIn(f"Diverges at step {api_step}", summary.text)
        self.assertEqual(self.find("#trace-result tbody tr.divergence th").text, str(api_step), "the divergent row's number")
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.divergence')].map(g => g.dataset.state).join(' ')"), "launching")
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.exercised')].map(g => g.dataset.row).join(' ')"), "r2")
        self.assertIn("divergence", self.finds("#trace-result tbody tr")[1].get_attribute("class"))
        self.screenshot("trace-divergence.png")

        # A wrong belief: the state reached and the state believed both show.
        self.check_trace({"steps": COLD_START[:2] + [{"event": "didBecomeActive", "believedState": "background"}]})
        wait_until(lambda: self.find("#trace-result .trace-summary").get_attribute("data-kind") == "beliefMismatch", 5, "a belief mismatch")
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.divergence')].map(g => g.dataset.state).join(' ')"), "foreground")
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.believed')].map(g => g.dataset.state).join(' ')"), "background")

        # Hooks the app ran that the model does not: a hook divergence, where the step took it.
        self.check_trace({"steps": [{"event": "didFinishLaunching", "ranHooks": ["Launching.init", "Launching.again"]}]})
        wait_until(lambda: self.find("#trace-result .trace-summary").get_attribute("data-kind") == "hookDivergence", 5, "a hook divergence")
        self.assertIn("✗ hooks: 1 extra hook (extra Launching.again)", self.find("#trace-result tbody tr").text)
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.divergence')].map(g => g.dataset.state).join(' ')"), "launching")

        # A conforming trace.
        self.check_trace({"steps": COLD_START})
        wait_until(lambda: "Conforms" in self.find("#trace-result .trace-summary").text, 5, "a conforming trace")

        # The built-in scenarios are listed and run.
        scenarios = self.api.ok("GET", "/v1/models/ios-app/scenarios")["items"]
        self.assertTrue(scenarios)
        wait_until(lambda: len(self.finds("#scenario-table tbody tr")) == len(scenarios), 5, "every scenario listed")
        first = scenarios[0]["name"]
        self.find(f"#scenario-table button[data-scenario='{first}'][data-do='run']").click()
        wait_until(lambda: self.find(f"#scenario-table tr[data-scenario='{first}']").get_attribute("data-passing") == "true", 5, f"{first} to pass")
        # One scenario run on its own: the report and the graph both describe it.
        self.assertEqual(self.find("#trace-result").get_attribute("data-subject"), f"scenario {first}")
        self.assertEqual(self.find("#trace-graph svg").get_attribute("data-subject"), f"scenario {first}")
        self.assertIn("passes", self.find("#trace-result .trace-summary").text)
        # After a pasted trace, "Run all" fills in the table and leaves report and graph on the trace.
        self.check_trace(trace)
        wait_until(lambda: self.find("#trace-result").get_attribute("data-subject") == "trace", 5, "the trace's report again")
        self.find("#scenarios-run-all").click()
        wait_until(lambda: self.find("#scenarios-status").text == f"{len(scenarios)} of {len(scenarios)} scenarios pass.", 10, "every scenario to pass",
                   lambda: self.find("#scenarios-status").text)
        self.assertEqual(self.find("#trace-result").get_attribute("data-subject"), "trace")
        self.assertEqual(self.find("#trace-graph svg").get_attribute("data-subject"), "trace", "the graph shows what the report describes")
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.divergence')].map(g => g.dataset.state).join(' ')"), "launching")
        self.assertEqual(self.js("return [...document.querySelectorAll('#trace-graph svg g.exercised')].map(g => g.dataset.row).join(' ')"), "r2")
        # A name the model lacks is refused (422) naming its step.
        self.expected_console.append(r"/v1/models/ios-app/conformance - Failed to load resource: .* 422")
        self.check_trace({"steps": COLD_START[:1] + [{"event": "didBecomeActiv"}]})
        status, problem = self.api.call("POST", "/v1/models/ios-app/conformance", {"steps": COLD_START[:1] + [{"event": "didBecomeActiv"}]})
        self.assertEqual((status, problem["step"]), (422, 1))
        wait_until(lambda: "Step 1 names something" in self.find("#trace-result").text, 5, "the refusal naming step 1, as the API does")

    def check_trace(self, trace):
        area = self.find("#trace-text")
        area.clear()
        # Pasted as one value: typing JSON key by key would be slow.
        self.js("arguments[0].value = arguments[1]", area, json.dumps(trace))
        self.find("#trace-form button[type='submit']").click()

    def test_h_stream_resumes_after_the_server_restarts(self):
        self.api.create("resume-1")
        self.open_instance("resume-1", "initializing")
        wait_until(lambda: self.find("#live-status").get_attribute("data-state") == "live", 5, "the stream")
        self.server.restart()
        # Posted before the page's stream is back: it must come as a replay after its last id.
        record = self.api.event("resume-1", COLD_START[0])
        wait_until(lambda: self.current_state() == record["to"] and self.timeline_versions()[:1] == [record["version"]],
                   15, "the record committed while the stream was down")
        self.assertEqual(self.find("#live-status").get_attribute("data-state"), "live")
        self.post_and_watch("resume-1", COLD_START[1])
        self.assertEqual(self.timeline_versions(), [2, 1], "each record once")
        # The browser logged its lost connection while the server was down (and the fleet's
        # counters, reloaded a second after the stream opened, may have been asked for then).
        self.expected_console.append(r"/v1/models/ios-app/coverage - Failed to load resource: net::ERR_CONNECTION_REFUSED")
        self.expected_console.append(r"/v1/stream\?model=ios-app - Failed to load resource: net::ERR_(CONNECTION_REFUSED|EMPTY_RESPONSE|INCOMPLETE_CHUNKED_ENCODING)")

    def test_i_a_page_in_the_background_gives_its_stream_back_and_catches_up(self):
        self.api.create("tab-1")
        for step in COLD_START:
            self.api.event("tab-1", step)
        first = self.driver.current_window_handle
        # A tab of its own: a frozen tab stays hidden for every page it loads afterwards.
        self.driver.switch_to.new_window("tab")
        try:
            self.open_instance("tab-1", "foreground")
            wait_until(lambda: self.find("#live-status").get_attribute("data-state") == "live", 5, "the stream")
            self.driver.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "frozen"})
            records = [self.api.event("tab-1", step) for step in BACKGROUNDING]
            self.driver.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "active"})
            wait_until(lambda: self.current_state() == "background" and self.timeline_versions()[:2] == [r["version"] for r in reversed(records)],
                       2.0, "the records committed while the page was frozen")
            # The frozen page had closed its stream (a finished load of it is on record), then opened another.
            closed = self.js("return performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/stream?')).length")
            self.assertGreaterEqual(closed, 1, "the stream was closed while frozen")
            wait_until(lambda: self.find("#live-status").get_attribute("data-state") == "live", 5, "the stream back")
            self.assertEqual(sorted(self.timeline_versions()), list(range(1, 6)), "each record once")
            self.settled(records[-1]["version"])
            self.screenshot("instance-after-tab-in-background.png")
            self.assertNoConsoleErrors()
        finally:
            self.driver.close()
            self.driver.switch_to.window(first)

    def launch_twice(self, instance):
        """A launch left incomplete by a relaunch with a scene connected (counted when the next launch starts)."""
        for step in COLD_START[:2]:
            self.api.event(instance, step)
        self.api.ok("POST", f"/v1/instances/{instance}/relaunches", expect=(200,))
        self.api.event(instance, COLD_START[0])

    def list_ids(self):
        return self.js("return [...document.querySelectorAll('#instance-list tbody tr')].map(tr => tr.dataset.id)")

    def test_j_the_list_leads_to_the_broken_instances(self):
        # A few broken among fine ones (ids first in the list, whatever other tests made):
        # two unexpected events, a launch left incomplete, both.
        for instance in ["a-fine-1", "a-fine-2", "a-fine-3", "a-bg-launch-twice", "a-oops-1", "a-both-1"]:
            self.api.create(instance)
        for instance in ["a-fine-1", "a-fine-2", "a-fine-3"]:
            for step in COLD_START:
                self.api.event(instance, step)
        for instance in ["a-bg-launch-twice", "a-both-1"]:
            self.launch_twice(instance)
        for instance, times in [("a-oops-1", 2), ("a-both-1", 1)]:
            for _ in range(times):
                self.api.event(instance, {"event": "didBecomeActive"}, expect=(409,))
        everything = self.api.all_instances("ios-app")

        def broken(unexpected, incomplete):
            """The first page, in id order, of the instances with these problems (from the unfiltered list)."""
            return sorted(i["id"] for i in everything if (not unexpected or i["counters"]["unexpected"] > 0)
                          and (not incomplete or i["counters"]["incompleteLaunches"] > 0))[:100]

        self.load("#/instances")
        wait_until(lambda: self.list_ids()[:6] == sorted(["a-fine-1", "a-fine-2", "a-fine-3", "a-bg-launch-twice", "a-oops-1", "a-both-1"]),
                   5, "the list", self.list_ids)
        # Count columns, sortable; divergences too, since the server counts them.
        headings = self.js("return [...document.querySelectorAll('#instance-list thead th')].filter(th => !th.hidden).map(th => th.dataset.sort)")
        self.assertEqual(headings, ["id", "state", "version", "unexpected", "incompleteLaunches", "divergences"])
        cell = lambda instance, counter: self.find(f"#instance-list tr[data-id='{instance}'] td[data-counter='{counter}']").text
        self.assertEqual((cell("a-oops-1", "unexpected"), cell("a-both-1", "incompleteLaunches"), cell("a-fine-1", "unexpected")), ("2", "1", "0"))
        self.find("#instance-list th[data-sort='unexpected'] button").click()
        wait_until(lambda: self.list_ids()[:2] == ["a-oops-1", "a-both-1"], 2, "the most unexpected first", self.list_ids)
        self.assertEqual(self.find("#instance-list th[data-sort='unexpected']").get_attribute("aria-sort"), "descending")
        self.find("#instance-list th[data-sort='incompleteLaunches'] button").click()
        wait_until(lambda: self.list_ids()[:2] == ["a-bg-launch-twice", "a-both-1"], 2, "incomplete launches first", self.list_ids)
        # The filters ask the server: only the broken instances are left.
        self.find("#filter-unexpected").click()
        wait_until(lambda: sorted(self.list_ids()) == broken(True, False), 5, "instances with unexpected events", self.list_ids)
        self.assertIn("a-oops-1", self.list_ids())
        self.assertNotIn("a-fine-1", self.list_ids())
        self.find("#filter-incomplete").click()
        wait_until(lambda: sorted(self.list_ids()) == broken(True, True), 5, "instances with both", self.list_ids)
        self.assertIn("a-both-1", self.list_ids())
        self.find("#filter-unexpected").click()
        wait_until(lambda: sorted(self.list_ids()) == broken(False, True), 5, "instances with incomplete launches", self.list_ids)
        self.assertIn("with incomplete launches", self.find("#list-status").text)
        # A record on the stream counts on the row it lands on.
        self.api.event("a-bg-launch-twice", {"event": "didBecomeActive"}, expect=(409,))
        wait_until(lambda: cell("a-bg-launch-twice", "unexpected") == "1", 2, "the row's count, live")
        self.screenshot("instances-filtered-1400.png")
        self.find("#filter-incomplete").click()
        wait_until(lambda: self.list_ids()[:1] == ["a-bg-launch-twice"], 5, "every instance again", self.list_ids)
        # Divergences (the app reported a belief the model does not share): counted on the
        # row as they stream in, and in the instance's facts; the filter finds the instances
        # with any (the page reads the server's pages for them).
        wait_until(lambda: "a-fine-1" in self.list_ids(), 5, "the fine instances listed again", self.list_ids)
        self.assertEqual(cell("a-fine-1", "divergences"), "0")
        for _ in range(3):
            self.api.event("a-fine-1", {"event": "didBecomeActive", "believedState": "background"})
        wait_until(lambda: cell("a-fine-1", "divergences") == "3", 2, "the divergences counted on the row, live")
        self.find("#filter-divergent").click()
        diverged = sorted(i["id"] for i in self.api.all_instances("ios-app") if i["counters"]["divergences"] > 0)[:100]
        wait_until(lambda: sorted(self.list_ids()) == diverged, 5, "instances with divergences", self.list_ids)
        self.assertIn("a-fine-1", self.list_ids())
        self.assertIn("with divergences", self.find("#list-status").text)
        self.find("#instance-list tr[data-id='a-fine-1'] a").click()
        wait_until(lambda: self.finds("#detail-facts [data-fact='Divergences']") and self.fact("Divergences") == "3", 5, "the divergences fact")
        self.find("#filter-divergent").click()
        wait_until(lambda: self.list_ids()[:1] == ["a-bg-launch-twice"], 5, "every instance again", self.list_ids)
        # Ids wrap at their hyphens, never inside a word.
        breaks = self.js("""
            const result = [];
            for (const link of document.querySelectorAll('#instance-list tbody th a')) {
              const text = link.firstChild, range = document.createRange();
              let top = null;
              for (let i = 0; i < text.length; i += 1) {
                range.setStart(text, i); range.setEnd(text, i + 1);
                const y = range.getBoundingClientRect().top;
                // A new line starts half a line or more lower.
                if (top !== null && y > top + 8 && text.data[i - 1] !== '-') result.push(text.data.slice(0, i) + '|' + text.data.slice(i));
                top = y;
              }
            }
            return result""")
        self.assertEqual(breaks, [], "ids broken mid-word")

    # Every view, at a wide and a narrow window: nothing wider than the window, edge labels
    # readable, graph regions focusable, legends present, the current state in view.
    VIEWS = ["fleet", "instances", "instance", "trace"]

    def view(self, name):
        fragment = {"fleet": "#/fleet", "instances": "#/instances", "instance": "#/instances/wide-and-narrow", "trace": "#/trace"}[name]
        self.load(fragment)
        if name == "instance":
            wait_until(lambda: self.current_state() == "background", 5, "the instance")
            self.settled(5)
        if name == "fleet":
            wait_until(lambda: self.finds("#fleet-graph svg g.badge.count"), 5, "the fleet's counts")
        if name == "trace":
            self.check_trace({"steps": COLD_START + [{"event": "didBecomeActive", "believedState": "background"}]})
            wait_until(lambda: self.finds("#trace-result .trace-summary"), 5, "the report")
            scenarios = self.api.ok("GET", "/v1/models/ios-app/scenarios")["items"]
            wait_until(lambda: len(self.finds("#scenario-table tbody tr")) == len(scenarios), 5, "the scenarios")
            self.find("#scenarios-run-all").click()
            wait_until(lambda: "scenarios pass" in self.find("#scenarios-status").text, 10, "the scenarios run")

    def edge_label_sizes(self):
        """Per visible graph, the smallest edge label: its font size as rendered, and its box's height (CSS px)."""
        return self.js("""
            const sizes = {};
            for (const region of document.querySelectorAll('.graph')) {
              const svg = region.querySelector('svg');
              if (!svg || !region.offsetParent) continue;
              const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
              let font = Infinity, box = Infinity;
              for (const text of svg.querySelectorAll('g.edge text')) {
                font = Math.min(font, parseFloat(getComputedStyle(text).fontSize) * scale);
                box = Math.min(box, text.getBoundingClientRect().height);
              }
              sizes[region.id] = [Math.round(font * 10) / 10, Math.round(box * 10) / 10];
            }
            return sizes""")

    def test_k_every_view_is_readable_at_1400_and_400(self):
        self.api.create("wide-and-narrow")
        for step in COLD_START + BACKGROUNDING:
            self.api.event("wide-and-narrow", step)
        self.api.create("bg-launch-twice-narrow")
        self.launch_twice("bg-launch-twice-narrow")
        self.api.event("bg-launch-twice-narrow", {"event": "didBecomeActive"}, expect=(409,))
        try:
            for width, height in [(1400, 900), (400, 800)]:
                self.set_width(width, height)
                inner = width
                for name in self.VIEWS:
                    with self.subTest(view=name, width=width):
                        self.view(name)
                        self.assertLessEqual(self.js("return document.documentElement.scrollWidth"), inner,
                                             f"{name} at {width}: the page is no wider than the window")
                        sizes = self.edge_label_sizes()
                        self.assertTrue(sizes or name == "instances", f"{name} shows a graph")
                        for graph, (font, box) in sizes.items():
                            self.assertGreaterEqual(font, 11, f"{graph} at {width}: edge labels' font size")
                            self.assertGreaterEqual(box, 11, f"{graph} at {width}: edge labels' height")
                        regions = self.js("return [...document.querySelectorAll('.graph')].filter(r => r.offsetParent).map(r => { r.focus(); return [r.id, r.tabIndex, document.activeElement === r]; })")
                        for graph, index, focused in regions:
                            self.assertTrue(index >= 0 and focused, f"{graph} is keyboard-focusable")
                        legend = {"fleet": "#fleet-legend", "instance": "#instance-legend", "trace": "#trace-legend"}.get(name)
                        if legend:
                            self.assertTrue(self.find(legend).is_displayed(), f"{name} has a legend")
                            self.assertTrue(self.find(legend).text.strip())
                        if name == "instances":
                            # Every column of the list inside its panel, none cut off.
                            spill = self.js("""const region = document.querySelector('.list-scroll').getBoundingClientRect();
                                return document.getElementById('instance-list').getBoundingClientRect().right - region.right""")
                            self.assertLessEqual(spill, 0.5, f"the list's columns fit its panel at {width}")
                        if name == "fleet":
                            self.assertLessEqual(self.fleet_table_spill(), 0.5, f"every cell of the fleet's tables inside their panel at {width}")
                        if name == "trace":
                            # The report's every column (Belief last) inside its panel.
                            spill = self.js("""const panel = document.getElementById('trace-result');
                                return document.querySelector('#trace-result table').getBoundingClientRect().right - (panel.getBoundingClientRect().right - panel.clientLeft)""")
                            self.assertLessEqual(spill, 0.5, f"the trace's steps fit the report at {width}")
                        if name == "instance":
                            # The current state is in view in its region, or the region scrolled to it.
                            inside = self.js("""const region = document.getElementById('instance-graph').getBoundingClientRect();
                                const node = document.querySelector('#instance-graph svg g.current').getBoundingClientRect();
                                return node.left >= region.left - 1 && node.right <= region.right + 1""")
                            self.assertTrue(inside, f"the current state is in view at {width}")
                            self.assertIn("background", self.find("#graph-caption").text)
                        self.screenshot(f"{name}-{width}.png", slices=True)
                # The pill of an incomplete launch stays inside its card.
                self.load("#/instances/bg-launch-twice-narrow")
                wait_until(lambda: self.finds("#timeline .chip.incomplete"), 5, "the incomplete launch's record")
                self.assertLessEqual(self.js("return document.documentElement.scrollWidth"), inner)
                overflow = self.js("""const chip = document.querySelector('#timeline .chip.incomplete').getBoundingClientRect();
                    const card = document.querySelector('#timeline .chip.incomplete').closest('li').getBoundingClientRect();
                    return chip.right - card.right""")
                self.assertLessEqual(overflow, 0, f"the incomplete-launch pill inside its card at {width}")
                # The scenarios' buttons inside their panel.
                self.load("#/trace")
                wait_until(lambda: self.finds("#scenario-table tbody tr"), 5, "the scenarios")
                outside = self.js("""const panel = document.getElementById('scenario-table').closest('section').getBoundingClientRect();
                    return [...document.querySelectorAll('#scenario-table button')].filter(b => b.getBoundingClientRect().right > panel.right + 0.5).length""")
                self.assertEqual(outside, 0, f"scenario buttons inside the panel at {width}")
        finally:
            self.reset_width()

    def fleet_table_spill(self):
        """How far the fleet tables' farthest cell reaches past their panel's inner right edge (px)."""
        shown, spill = self.js("""const panel = document.querySelector('.fleet-tables');
            const right = panel.getBoundingClientRect().right - panel.clientLeft;
            const cells = [...panel.querySelectorAll('tbody th, tbody td')].filter(c => c.offsetParent);
            return [cells.length, Math.max(0, ...cells.map(c => c.getBoundingClientRect().right - right))]""")
        self.assertGreater(shown, 20, "the fleet's tables show their cells")
        return spill

    def test_l_device_time_in_its_own_offset(self):
        """A device's time shows as its clock read it, in its offset, even at the calendar's
        first day with the largest offset (once shown as year -1 in the page's zone)."""
        instance = "clock-1"
        self.api.create(instance)
        for step in COLD_START:
            self.api.event(instance, step)
        record = self.api.event(instance, {"event": "willResignActive", "occurredAt": "0000-01-01T00:00:00+23:59"})
        self.assertEqual(record["occurredAt"], "0000-01-01T00:00:00.000+23:59")
        self.open_instance(instance, "foreground")
        item = self.find(f"#timeline > li[data-version='{record['version']}']")
        self.check_device_time(item, record["occurredAt"], None)
        self.assertEqual(item.find_element(By.CSS_SELECTOR, ".device-time time").text, "0000-01-01 00:00:00.000 +23:59")

    def test_l_one_time_format_and_no_token_button_without_auth(self):
        self.api.create("times-1")
        for step in COLD_START:
            self.api.event("times-1", step)
        self.open_instance("times-1", "foreground")
        self.settled(3)
        self.assertEqual(self.api.ok("GET", "/healthz", expect=(200,))["writesNeedToken"], False)
        self.assertFalse(self.find("#token-button").is_displayed(), "no Token button on a server without auth")
        times = self.js("return [...document.querySelectorAll('time')].map(t => t.textContent)")
        self.assertGreaterEqual(len(times), 4, "the facts' and the timeline's times")
        for text in times:
            self.assertRegex(text, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$", "one time format")

    def test_m_divergent_reports_in_timeline_replay_and_fleet(self):
        """What the app reported beside what the model did (issue 19): a divergent record is
        marked in the timeline (from history and live from the stream) and in the replay, with
        the state believed and the actual one and the hooks expected, ran, missing and extra;
        the device's time shows beside the server's; the fleet counts divergences per state
        and leads to the instances that have them."""
        instance = "referee-1"
        self.api.create(instance)
        for step in COLD_START + [{"event": "willResignActive"}, {"event": "didEnterBackground"}]:
            self.api.event(instance, step)
        # Queued on the device an hour ago, on a clock an hour east of UTC: the belief is wrong
        # and Foreground.onTransition ran twice.
        east = datetime.timezone(datetime.timedelta(hours=1))
        device = lambda ago: (datetime.datetime.now(east) - datetime.timedelta(seconds=ago)).isoformat(timespec="milliseconds")
        queued = device(3600)
        first = self.api.event(instance, {"event": "didBecomeActive", "believedState": "background", "occurredAt": queued,
                                          "ranHooks": ["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"]})
        self.assertEqual(first["divergence"]["hooks"]["extra"], ["Foreground.onTransition"], "the server saw the divergence")
        self.assertEqual(first["occurredAt"], queued)
        self.open_instance(instance, "foreground")
        wait_until(lambda: self.timeline_versions()[:1] == [first["version"]], 5, "the history in the timeline")
        item = lambda version: self.find(f"#timeline > li[data-version='{version}']")
        text = lambda version, selector: item(version).find_element(By.CSS_SELECTOR, selector).text

        # From the history: marked, in words (not colour alone), with what was believed and ran.
        self.check_divergent_item(item(first["version"]), kinds=["state", "1 extra hook"], believed="background", actual="foreground",
                                  expected=["Foreground.onTransition", "Foreground.didReturn"],
                                  ran=["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"],
                                  missing=[], extra=["Foreground.onTransition"])
        self.check_device_time(item(first["version"]), queued, "arrived 1 h 0 min later")
        for version in range(1, first["version"]):
            self.assertEqual(item(version).get_attribute("data-divergent"), "false", f"v{version} did not diverge")
            self.assertEqual(item(version).find_elements(By.CSS_SELECTOR, ".badge-divergence, .divergence-detail, .device-time"), [])

        # Live from the stream: a missing hook, hooks in another order, and a report that agrees.
        missing = self.api.event(instance, {"event": "willResignActive", "ranHooks": [], "occurredAt": device(0)})
        wait_until(lambda: self.timeline_versions()[:1] == [missing["version"]], 2, "the live record in the timeline")
        self.check_divergent_item(item(missing["version"]), kinds=["1 missing hook"], expected=["Foreground.willLeave"], ran=[],
                                  missing=["Foreground.willLeave"], extra=[])
        self.check_device_time(item(missing["version"]), missing["occurredAt"], None)
        reordered = self.api.event(instance, {"event": "didEnterBackground", "ranHooks": ["Background.didReturn", "Background.onTransition"]})
        wait_until(lambda: self.timeline_versions()[:1] == [reordered["version"]], 2, "the reordered hooks in the timeline")
        self.check_divergent_item(item(reordered["version"]), kinds=["hooks out of order"], expected=["Background.onTransition", "Background.didReturn"],
                                  ran=["Background.didReturn", "Background.onTransition"], order_only=True)
        agreed = self.api.event(instance, {"event": "didBecomeActive", "believedState": "foreground",
                                           "ranHooks": ["Foreground.onTransition", "Foreground.didReturn"]})
        wait_until(lambda: self.timeline_versions()[:1] == [agreed["version"]], 2, "the agreeing report in the timeline")
        self.assertEqual(item(agreed["version"]).get_attribute("data-divergent"), "false")
        self.assertIn("agrees", text(agreed["version"], ".report-agrees"))
        self.assertEqual(item(agreed["version"]).find_elements(By.CSS_SELECTOR, ".badge-divergence"), [])
        self.settled(agreed["version"])
        wait_until(lambda: self.fact("Divergences") == "3", 5, "the live facts' divergences")
        self.assertEqual(self.api.instance(instance)["counters"]["divergences"], 3)
        self.check_widths("the instance's divergent records")
        self.screenshot("divergence-timeline-1400.png")

        # Replayed to the divergent record: its facts and its report in full.
        self.replay_to(first["version"])
        wait_until(lambda: self.find("#detail-facts").get_attribute("data-replay") == "true" and self.fact("Version") == str(first["version"]),
                   2, "the replay at the divergent record", lambda: (self.find("#detail-facts").text, self.find("#replay-label").text))
        self.assertIn("diverged", self.fact("Report"))
        self.assertEqual(self.fact("Divergences"), "1", "divergences counted up to the replayed record")
        self.assertEqual(self.find("#detail-facts [data-fact='Device time'] time").get_attribute("datetime"), queued)
        replayed = self.find("#replay-record")
        self.assertTrue(replayed.is_displayed(), "the replayed record's report is shown")
        self.assertEqual(replayed.get_attribute("data-sequence"), str(first["sequence"]))
        self.check_divergent_detail(replayed, believed="background", actual="foreground", expected=["Foreground.onTransition", "Foreground.didReturn"],
                                    ran=["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"], missing=[], extra=["Foreground.onTransition"])
        self.assertIn("at-position", item(first["version"]).get_attribute("class"))
        self.check_widths("the replayed divergent record")
        self.screenshot("divergence-replay-1400.png")
        self.find("#replay-next").click()
        wait_until(lambda: self.fact("Version") == str(missing["version"]), 2, "the next record replayed")
        self.assertIn("Missing\nForeground.willLeave", self.find("#replay-record").text)
        self.find("#replay-live").click()
        wait_until(lambda: self.find("#detail-facts").get_attribute("data-replay") == "false", 2, "live again")
        self.assertFalse(self.find("#replay-record").is_displayed(), "no replayed report while live")
        # Its history checked as a trace carries what the app reported: the check stops at the
        # divergent record (step 5, numbered from 0 as the API numbers steps).
        self.find("#check-history").click()
        wait_until(lambda: self.find("#trace-result .trace-summary").get_attribute("data-step") == "5", 5, "the history checked with its reports",
                   lambda: self.find("#trace-result").text)
        self.assertIn(self.find("#trace-result .trace-summary").get_attribute("data-kind"), ("beliefMismatch", "hookDivergence"))
        step = self.finds("#trace-result tbody tr")[5]
        self.assertIn("✗ believed", step.text)
        self.assertIn("✗ hooks: 1 extra hook (extra Foreground.onTransition)", step.text.replace("\n", " "))
        self.assertIn("✗ hooks: 1 missing hook (missing Foreground.willLeave)", self.finds("#trace-result tbody tr")[6].text)
        spill = self.js("""const panel = document.getElementById('trace-result');
            return document.querySelector('#trace-result table').getBoundingClientRect().right - (panel.getBoundingClientRect().right - panel.clientLeft)""")
        self.assertLessEqual(spill, 0.5, "the trace's steps fit the report")
        self.screenshot("divergence-trace-1400.png")

        # The fleet: divergences per state (the record's `to`), as coverage counts them, and a
        # way to the instances that have them.
        self.load("#/fleet")
        coverage = self.api.ok("GET", "/v1/models/ios-app/coverage")
        want = {s["state"]: s["divergences"] for s in coverage["states"] if s["divergences"] > 0}
        self.assertGreaterEqual(want.get("foreground", 0), 2, "coverage counts the records into foreground")
        self.assertGreaterEqual(want.get("background", 0), 1, "and the one into background")
        read = "return Object.fromEntries([...document.querySelectorAll('#fleet-graph svg g.badge.divergence')].map(g => [g.dataset.state, g.querySelector('text').textContent]))"
        wait_until(lambda: self.js(read) == {state: f"≠{n}" for state, n in want.items()}, 5, f"the graph's divergence badges to be {want}", lambda: self.js(read))
        self.assertEqual(sorted(self.js("return [...document.querySelectorAll('#fleet-graph svg g.node.has-divergence')].map(g => g.dataset.state)")), sorted(want))
        cells = self.js("return Object.fromEntries([...document.querySelectorAll('#state-table tbody tr')].map(tr => [tr.dataset.state, tr.querySelector('td[data-counter=divergences]')?.textContent]))")
        self.assertEqual({state: value for state, value in cells.items() if value != "0"}, {state: f"≠ {n}" for state, n in want.items()})
        self.assertTrue(self.find("#legend-divergence").is_displayed(), "the legend says what ≠ means")
        self.assertIn(f"{sum(want.values())} divergent records", self.find("#fleet-summary").text)
        self.check_widths("the fleet with divergences")
        self.screenshot("divergence-fleet-1400.png")
        # Foreground's count lists the instances there with divergences, the most first.
        # (The tables are drawn anew whenever the counters reload: clicked again if a reload replaced the link.)
        wait_until(lambda: self.find("#state-table tr[data-state='foreground'] td[data-counter='divergences'] a").click() or True, 5, "the link clicked")
        there = sorted(((-i["counters"]["divergences"], i["id"]) for i in self.api.all_instances("ios-app")
                        if i["state"] == "foreground" and i["counters"]["divergences"] > 0))
        wait_until(lambda: self.list_ids() == [i for _, i in there][:100], 5, "the instances in foreground with divergences", self.list_ids)
        self.assertTrue(self.find("#filter-divergent").is_selected())
        self.assertEqual(self.find("#instance-list th[data-sort='divergences']").get_attribute("aria-sort"), "descending")
        self.assertEqual(self.find(f"#instance-list tr[data-id='{instance}'] td[data-counter='divergences']").text, "3")

        # The same at a narrow window: nothing wider than it, the details inside their cards.
        self.set_width(400, 800)
        try:
            self.open_instance(instance, "foreground")
            wait_until(lambda: self.timeline_versions()[:1] == [agreed["version"]], 5, "the timeline")
            self.settled(agreed["version"])
            self.check_widths("the narrow timeline")
            self.replay_to(first["version"])
            wait_until(lambda: self.find("#replay-record").is_displayed(), 2, "the replayed report")
            self.check_widths("the narrow replay")
            self.screenshot("divergence-replay-400.png", slices=True)
            self.find("#replay-live").click()
            wait_until(lambda: self.find("#detail-facts").get_attribute("data-replay") == "false", 2, "live again")
            self.screenshot("divergence-timeline-400.png", slices=True)
            still(self.driver, scheme="dark")
            try:
                self.screenshot("divergence-timeline-400-dark.png", slices=True)
            finally:
                still(self.driver)
            self.load("#/fleet")
            wait_until(lambda: self.js(read) == {state: f"≠{n}" for state, n in want.items()}, 5, "the narrow fleet's badges")
            self.check_widths("the narrow fleet")
            # Every count in view without scrolling sideways: the divergences' column too.
            self.assertLessEqual(self.fleet_table_spill(), 0.5, "every cell of the narrow fleet's tables inside their panel")
            self.assertTrue(self.find("#state-table tr[data-state='foreground'] td[data-counter='divergences'] a").is_displayed())
            self.assertEqual(self.find("#state-table tr[data-state='foreground'] td[data-counter='divergences']").get_attribute("data-label"), "Divergences")
            self.screenshot("divergence-fleet-400.png", slices=True)
        finally:
            self.reset_width()

    def test_n_a_gap_of_dropped_reports_in_timeline_replay_and_facts(self):
        """A reporter that dropped queued inputs says how many (issue 20): the gap's record is
        in the timeline, live from the stream and from the history, in words with a mark of
        its own; the instance's facts count what was dropped, live and replayed; the history
        checked as a trace leaves the gap out (it is no input of the model)."""
        instance = "gappy-1"
        self.api.create(instance)
        for step in COLD_START:
            self.api.event(instance, step)
        self.open_instance(instance, "foreground")
        wait_until(lambda: self.timeline_versions()[:1] == [3], 5, "the history in the timeline")
        self.assertEqual(self.fact("Dropped on the device"), "0")
        gap = self.api.ok("POST", f"/v1/instances/{instance}/gaps", {"dropped": 37}, expect=(200,))
        self.assertEqual((gap["kind"], gap["dropped"], gap["from"], gap["to"]), ("gap", 37, "foreground", "foreground"))
        item = lambda version: self.find(f"#timeline > li[data-version='{version}']")
        # Live from the stream: in words, marked, the state unchanged.
        wait_until(lambda: self.timeline_versions()[:1] == [gap["version"]], 2, "the gap live in the timeline")
        self.assertEqual(self.current_state(), "foreground", "a gap moves no state")
        live = item(gap["version"])
        self.assertIn("kind-gap", live.get_attribute("class"))
        self.assertEqual(live.find_element(By.CSS_SELECTOR, ".input").text, "37 reports dropped on the device before delivery")
        self.assertIn("gap", live.find_element(By.CSS_SELECTOR, ".gap-mark").text)
        self.assertEqual(len(self.finds("#timeline .gap-mark")), 1, "only the gap is marked")
        edge = self.js("return getComputedStyle(arguments[0]).borderLeftStyle", live)
        self.assertEqual(edge, "dashed", "the gap's edge differs from every other record's")
        self.settled(gap["version"])
        wait_until(lambda: self.fact("Dropped on the device") == "37", 5, "the live facts' dropped count")
        one = self.api.ok("POST", f"/v1/instances/{instance}/gaps", {"dropped": 1}, expect=(200,))
        after = self.api.event(instance, {"event": "willResignActive"})
        wait_until(lambda: self.timeline_versions()[:1] == [after["version"]], 2, "the event after the gaps")
        wait_until(lambda: self.fact("Dropped on the device") == "38", 5, "both gaps counted")
        self.assertEqual(self.api.instance(instance)["counters"]["dropped"], 38)
        # From the history, after a reload: the same words.
        self.load(f"#/instances/{instance}")
        wait_until(lambda: self.timeline_versions()[:1] == [after["version"]], 5, "the history reloaded")
        self.assertEqual(item(one["version"]).find_element(By.CSS_SELECTOR, ".input").text, "1 report dropped on the device before delivery")
        self.assertEqual(item(gap["version"]).find_element(By.CSS_SELECTOR, ".input").text, "37 reports dropped on the device before delivery")
        self.settled(after["version"])
        self.check_widths("the timeline with gaps")
        self.screenshot("gap-timeline-1400.png")
        # Replayed to the first gap: the record in words, what was dropped up to there.
        self.replay_to(gap["version"])
        wait_until(lambda: self.find("#detail-facts").get_attribute("data-replay") == "true" and self.fact("Version") == str(gap["version"]),
                   2, "the replay at the gap", lambda: self.find("#detail-facts").text)
        self.assertIn("37 reports dropped on the device before delivery", self.fact("Record"))
        self.assertEqual(self.fact("Dropped on the device"), "37", "dropped counted up to the replayed record")
        self.assertEqual(self.fact("State"), "foreground")
        self.screenshot("gap-replay-1400.png")
        self.find("#replay-live").click()
        wait_until(lambda: self.find("#detail-facts").get_attribute("data-replay") == "false", 2, "live again")
        # The history as a trace: the gaps are left out, so it conforms.
        self.find("#check-history").click()
        wait_until(lambda: self.find("#trace-result .trace-summary").text.startswith("Conforms"), 5, "the history checked, conforming",
                   lambda: self.find("#trace-result").text)
        self.assertEqual(len(self.finds("#trace-result tbody tr")), 4, "the four events, not the gaps")
        self.assertNoConsoleErrors()

    # A phone's width (issue 33, point 8).

    def in_view(self, selector):
        """Whether the element's top is inside the window (what a tap should bring into view)."""
        return self.js("""const box = document.querySelector(arguments[0]).getBoundingClientRect();
            return box.top >= 0 && box.top < innerHeight - 40""", selector)

    def unreachable_nodes(self, graph):
        """The states of the graph's nodes that scrolling its region sideways cannot bring
        wholly inside it (each node is scrolled to, then measured)."""
        return self.js("""const region = document.getElementById(arguments[0]);
            const missed = [];
            for (const node of region.querySelectorAll('svg g.node')) {
              let box = node.getBoundingClientRect(), r = region.getBoundingClientRect();
              region.scrollLeft += box.left + box.width / 2 - (r.left + region.clientLeft + region.clientWidth / 2);
              box = node.getBoundingClientRect(); r = region.getBoundingClientRect();
              const left = r.left + region.clientLeft, top = r.top + region.clientTop;
              if (box.left < left - 1 || box.right > left + region.clientWidth + 1 || box.top < top - 1 || box.bottom > top + region.clientHeight + 1) {
                missed.push(node.dataset.state);
              }
            }
            return missed""", graph)

    def graph_width(self, graph):
        return self.js("""const region = document.getElementById(arguments[0]);
            return [region.querySelector('svg').getBoundingClientRect().width, region.clientWidth]""", graph)

    def test_o_a_phones_width_graph_details_and_url(self):
        """At 400 px (and 1400): the instance graph fits its region or scrolls with every node
        reachable, and a button fits it to the width; tapping an instance in the list brings its
        details into view; the filters, the order and the chosen instance live in the URL, so a
        reload, and the same link in a tab that last showed another model, show the same view."""
        for index in range(3):
            instance = f"a-phone-{index}"
            self.api.create(instance)
            for step in COLD_START:
                self.api.event(instance, step)
        for instance, times in [("a-phone-1", 1), ("a-phone-2", 2)]:
            for _ in range(times):
                self.api.event(instance, {"event": "willEnterForeground"}, expect=(409,))
        other = next(m["name"] for m in self.api.ok("GET", "/v1/models")["items"] if m["name"] != "ios-app")
        try:
            for width, height in [(400, 800), (1400, 900)]:
                with self.subTest(width=width):
                    self.set_width(width, height)
                    self.check_phone_width(width, other)
        finally:
            self.reset_width()

    def check_phone_width(self, width, other):
        there = sorted((-i["counters"]["unexpected"], i["id"]) for i in self.api.all_instances("ios-app")
                       if i["state"] == "foreground" and i["counters"]["unexpected"] > 0)
        expected = [i for _, i in there][:100]
        self.assertIn("a-phone-2", expected)
        self.assertNotIn("a-phone-0", expected)
        self.load("#/instances")
        wait_until(lambda: "a-phone-0" in self.list_ids(), 5, "the list", self.list_ids)
        # Filters and order chosen on the page.
        Select(self.find("#filter-state")).select_by_value("foreground")
        self.find("#filter-unexpected").click()
        self.find("#instance-list th[data-sort='unexpected'] button").click()
        wait_until(lambda: self.list_ids() == expected, 5, "the filtered list, the most unexpected first", self.list_ids)
        if width < 500:
            self.assertFalse(self.in_view("#detail-heading"), "at a phone's width the details are below the list")
        # Tapping an instance brings its details into view.
        self.find("#instance-list tr[data-id='a-phone-2'] a").click()
        wait_until(lambda: "a-phone-2" in self.find("#detail-heading").text and self.current_state() == "foreground", 5, "a-phone-2's details")
        wait_until(lambda: self.in_view("#detail-heading"), 2, "the details brought into view")
        self.assertEqual(self.js("return innerWidth"), width)
        self.settled(self.api.instance("a-phone-2")["version"])
        fragment = self.driver.current_url.split("#", 1)[1]
        path, query = fragment.split("?", 1)
        self.assertEqual(path, "/instances/a-phone-2")
        self.assertEqual(urllib.parse.parse_qs(query), {"model": ["ios-app"], "state": ["foreground"], "unexpected": ["true"], "sort": ["-unexpected"]},
                         "the filters, the order and the model in the URL")

        # The graph: every node reachable by scrolling its region; fitted, every node inside it.
        self.assertLessEqual(self.js("return document.documentElement.scrollWidth"), width, "no wider than the window")
        self.assertEqual(self.unreachable_nodes("instance-graph"), [], f"every node reachable at {width}")
        drawn, room = self.graph_width("instance-graph")
        hint = self.find("#instance-graph").find_element(By.XPATH, "preceding-sibling::p[contains(@class, 'scroll-hint')]")
        fit = hint.find_element(By.CSS_SELECTOR, "button.fit-button")
        if drawn > room + 1:
            self.assertTrue(hint.is_displayed() and "scroll it sideways" in hint.text, "a graph wider than its region says so, above it")
            self.js("arguments[0].scrollIntoView({block: 'center'})", fit)
            fit.click()
            wait_until(lambda: self.graph_width("instance-graph")[0] <= self.graph_width("instance-graph")[1] + 1, 2, "the graph fitted to the width")
            self.assertEqual(fit.get_attribute("aria-pressed"), "true")
            self.assertEqual(self.js("return document.getElementById('instance-graph').scrollWidth - document.getElementById('instance-graph').clientWidth"), 0)
            self.assertEqual(self.unreachable_nodes("instance-graph"), [], "every node inside the fitted graph")
            self.screenshot(f"phone-graph-fitted-{width}.png", slices=width < 500)
            fit.click()
            wait_until(lambda: self.graph_width("instance-graph")[0] > self.graph_width("instance-graph")[1] + 1, 2, "the graph at its readable size again")
            inside = """const region = document.getElementById('instance-graph').getBoundingClientRect();
                const node = document.querySelector('#instance-graph svg g.current').getBoundingClientRect();
                return node.left >= region.left - 1 && node.right <= region.right + 1"""
            wait_until(lambda: self.js(inside), 2, "the current state in view again")
        else:
            self.assertTrue(not hint.is_displayed(), "no hint where the graph fits")
        self.js("document.getElementById('detail-heading').scrollIntoView()")
        self.screenshot(f"phone-instance-{width}.png", slices=width < 500)

        # The same view after a reload, and from the link in a tab that last showed another model.
        def same_view(what):
            wait_until(lambda: self.list_ids() == expected, 5, f"{what}: the same list", self.list_ids)
            wait_until(lambda: "a-phone-2" in self.find("#detail-heading").text and self.current_state() == "foreground", 5, f"{what}: a-phone-2's details")
            self.assertEqual(Select(self.find("#model-select")).first_selected_option.get_attribute("value"), "ios-app", f"{what}: the model")
            self.assertEqual(Select(self.find("#filter-state")).first_selected_option.get_attribute("value"), "foreground", f"{what}: the state filter")
            self.assertTrue(self.find("#filter-unexpected").is_selected(), f"{what}: the problem filter")
            self.assertEqual(self.find("#instance-list th[data-sort='unexpected']").get_attribute("aria-sort"), "descending", f"{what}: the order")
            self.assertTrue(self.find("#instance-list tr[data-id='a-phone-2']").get_attribute("class").count("selected"), f"{what}: the row chosen")
            wait_until(lambda: self.in_view("#detail-heading"), 2, f"{what}: the details in view")
            self.assertEqual(self.driver.current_url.split("#", 1)[1], fragment, f"{what}: the same URL")

        self.driver.refresh()
        wait_until(lambda: self.js("return document.body.dataset.ready") == "true", 15, "the page reloaded")
        same_view("reloaded")
        self.js("localStorage.setItem('lifecycled.model', arguments[0])", other)
        self.load("#" + fragment)
        same_view("a shared link")
        self.assertEqual(self.js("return localStorage.getItem('lifecycled.model')"), "ios-app", "the link's model is the one shown")
        # The views' links keep the model and the list's filters.
        self.find("nav a[data-view='fleet']").click()
        wait_until(lambda: self.driver.current_url.endswith("#/fleet?model=ios-app"), 2, "the fleet's URL")
        self.find("nav a[data-view='instances']").click()
        wait_until(lambda: self.list_ids() == expected and self.find("#filter-unexpected").is_selected(), 5, "the list as it was", self.list_ids)

    # Findings and labels (issue 33, points 7 and 3).

    def needs_service_side(self):
        if not self.has_findings:
            self.fail("this server has no GET /v1/findings (the service side of issue 33, branch wt33-backend)")

    def needs_labels(self):
        if self.api.call("GET", "/v1/instances?model=ios-app&label=run%3Dx")[0] != 200:
            self.fail("this server has no labels (the service side of issue 33, branch wt33-backend)")

    def create_labelled(self, instance, labels, steps=()):
        self.api.ok("POST", "/v1/instances", {"id": instance, "model": "ios-app", "labels": labels}, expect=(201,))
        for step in steps:
            self.api.event(instance, step, expect=(200, 409))

    def findings(self, **filters):
        query = urllib.parse.urlencode({"model": "ios-app", "limit": 1000, **filters})
        return self.api.ok("GET", f"/v1/findings?{query}", expect=(200,))["items"]

    def shown_findings(self):
        return self.js("""return [...document.querySelectorAll('#findings-list > li')].map(li =>
            [li.dataset.signature, li.querySelector('.finding-instances').textContent])""")

    def finding_requests(self):
        return self.js("return performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/findings?')).length")

    def test_p_findings_live_leading_to_instances_and_the_graph(self):
        """The findings panel lists GET /v1/findings in its order; records with problems on the
        stream update it (a burst costs a few requests, not one per record); a finding opens
        the list of its instances (in the URL: a reload keeps it) and marks its state on the
        fleet's graph and in the states' table."""
        self.needs_service_side()
        for instance in ["f-late-1", "f-late-2"]:
            self.create_labelled(instance, {"run": "p-run"}, COLD_START + [{"event": "willEnterForeground"}])
        self.create_labelled("f-late-3", {"run": "p-run"}, COLD_START)
        self.create_labelled("f-fine-1", {"run": "p-run"}, COLD_START)
        self.load("#/fleet")
        want = [f["signature"] for f in self.findings()][:20]
        wait_until(lambda: [sig for sig, _ in self.shown_findings()] == want, 5, "the findings in the API's order", self.shown_findings)
        finding = next(f for f in self.findings() if f["kind"] == "unexpected" and f.get("event") == "willEnterForeground" and f["state"] == "foreground")
        sig = finding["signature"]
        item = lambda: self.find(f"#findings-list > li[data-signature='{sig}']")
        self.assertIn("willEnterForeground unexpected in foreground", item().text)
        self.assertEqual(item().find_element(By.CSS_SELECTOR, ".finding-instances").text, f"{finding['instances']} instances")

        # Live: a record with a problem updates its finding; a burst costs a few requests.
        before = self.finding_requests()
        self.api.event("f-late-3", {"event": "willEnterForeground"}, expect=(409,))
        for _ in range(20):
            self.api.event("f-late-1", {"event": "willEnterForeground"}, expect=(409,))
        live = next(f for f in self.findings() if f["signature"] == sig)
        self.assertEqual(live["instances"], finding["instances"] + 1)
        wait_until(lambda: item().find_element(By.CSS_SELECTOR, ".finding-instances").text == f"{live['instances']} instances"
                   and f"{live['count']} records" in item().text, 5, "the finding's figures, live", lambda: item().text)
        self.assertLessEqual(self.finding_requests() - before, 4, "one reload per burst of records, not one per record")
        # A new kind of problem appears without a reload.
        diverged = self.api.event("f-fine-1", {"event": "willResignActive", "believedState": "terminating"})
        self.assertTrue(diverged.get("divergence"))
        wait_until(lambda: any(f["kind"] == "divergence" and f["signature"] in [s for s, _ in self.shown_findings()] for f in self.findings()),
                   5, "the divergence's finding, live")
        self.check_widths("the findings")
        self.screenshot("findings-1400.png")

        # Its state on the graph and in the table.
        click_live(lambda: item().find_element(By.CSS_SELECTOR, "button[data-signature]"), "the finding's button")
        wait_until(lambda: self.js("return [...document.querySelectorAll('#fleet-graph svg g.node.finding')].map(g => g.dataset.state)") == ["foreground"],
                   2, "the finding's state marked on the graph")
        self.assertEqual(self.js("return [...document.querySelectorAll('#state-table tr.finding')].map(tr => tr.dataset.state)"), ["foreground"])
        self.assertIn("willEnterForeground unexpected in foreground", self.find("#fleet-finding").text)
        self.screenshot("findings-on-graph-1400.png")

        # Its instances: the list filtered by the finding, as the API lists them.
        click_live(lambda: item().find_element(By.CSS_SELECTOR, ".finding-instances"), "the finding's instances")
        named = sorted(i["id"] for i in self.api.ok("GET", f"/v1/instances?model=ios-app&finding={urllib.parse.quote(sig, safe='')}&limit=1000")["items"])
        self.assertLessEqual({"f-late-1", "f-late-2", "f-late-3"}, set(named))
        self.assertNotIn("f-fine-1", named)
        wait_until(lambda: sorted(self.list_ids()) == named, 5, "the finding's instances", self.list_ids)
        self.assertIn("willEnterForeground unexpected in foreground", self.find("#filter-finding").text)
        self.assertEqual(urllib.parse.parse_qs(self.driver.current_url.split("?", 1)[1])["finding"], [sig])
        self.driver.refresh()
        wait_until(lambda: self.js("return document.body.dataset.ready") == "true", 15, "the page reloaded")
        wait_until(lambda: sorted(self.list_ids()) == named, 5, "the finding's instances after a reload", self.list_ids)
        wait_until(lambda: "willEnterForeground unexpected in foreground" in self.find("#filter-finding").text, 5, "the finding named after a reload")
        self.find("#filter-finding-clear").click()
        wait_until(lambda: len(self.list_ids()) > len(named), 5, "every instance again")
        self.assertNotIn("finding", self.driver.current_url)

        # At a phone's width: inside the window.
        self.set_width(400, 800)
        try:
            self.load("#/fleet")
            wait_until(lambda: self.finds(f"#findings-list > li[data-signature='{sig}']"), 5, "the findings at 400 px")
            self.check_widths("the findings at 400 px")
            spill = self.js("""const panel = document.getElementById('findings').getBoundingClientRect();
                return Math.max(...[...document.querySelectorAll('#findings-list > li')].map(li => li.getBoundingClientRect().right - panel.right))""")
            self.assertLessEqual(spill, 0, "each finding inside the panel")
            self.screenshot("findings-400.png", slices=True)
        finally:
            self.reset_width()

    def label_chips(self):
        return self.js("return [...document.querySelectorAll('#detail-labels li')].map(li => li.textContent)")

    def test_q_labels_in_the_details_and_the_lists_filter(self):
        """An instance's labels show in its details, each leading to the instances that share
        it; the list filters by labels (all must match), in the URL."""
        self.needs_labels()
        self.create_labelled("q-1", {"run": "q-run-1", "app.version": "1.2", "device.model": "iPhone 15 Pro"}, COLD_START)
        self.create_labelled("q-2", {"run": "q-run-1", "app.version": "2.0"})
        self.create_labelled("q-3", {"run": "q-run-2", "app.version": "2.0"})
        self.open_instance("q-1", "foreground")
        wait_until(lambda: self.label_chips() == ["app.version=1.2", "device.model=iPhone 15 Pro", "run=q-run-1"], 5, "the labels", self.label_chips)
        self.screenshot("labels-instance-1400.png")
        self.find("#detail-labels li[data-key='run'] a").click()
        wait_until(lambda: self.list_ids() == ["q-1", "q-2"], 5, "the instances of run q-run-1", self.list_ids)
        self.assertEqual(self.js("return [...document.querySelectorAll('#filter-labels li')].map(li => li.dataset.label)"), ["run=q-run-1"])
        self.assertEqual(urllib.parse.parse_qs(self.driver.current_url.split("?", 1)[1])["label"], ["run=q-run-1"])
        # A second label: both must match.
        self.find("#filter-label-input").send_keys("app.version=2.0", Keys.ENTER)
        wait_until(lambda: self.list_ids() == ["q-2"], 5, "the instances with both labels", self.list_ids)
        self.assertEqual(urllib.parse.parse_qs(self.driver.current_url.split("?", 1)[1])["label"], ["run=q-run-1", "app.version=2.0"])
        self.assertIn("labelled run=q-run-1, app.version=2.0", self.find("#list-status").text)
        # Malformed: said so, nothing changes.
        self.find("#filter-label-input").send_keys("novalue", Keys.ENTER)
        self.assertIn("key=value", self.find("#filter-label-status").text)
        self.assertEqual(len(self.finds("#filter-labels li")), 2)
        self.driver.refresh()
        wait_until(lambda: self.js("return document.body.dataset.ready") == "true", 15, "the page reloaded")
        wait_until(lambda: self.list_ids() == ["q-2"], 5, "the label filters after a reload", self.list_ids)
        self.screenshot("labels-list-1400.png")
        self.find("#filter-labels button[data-label='run=q-run-1']").click()
        wait_until(lambda: self.list_ids() == ["q-2", "q-3"], 5, "the instances of version 2.0", self.list_ids)
        # Labels given at creation on the page.
        self.find("details.create summary").click()
        self.find("#create-form input[name='id']").send_keys("q-made")
        self.find("#create-form textarea[name='labels']").send_keys("run=q-run-3\napp.version=3.0")
        self.find("#create-form button[type='submit']").click()
        wait_until(lambda: self.api.call("GET", "/v1/instances/q-made")[0] == 200, 5, "the creation")
        self.assertEqual(self.api.instance("q-made")["labels"], {"run": "q-run-3", "app.version": "3.0"})
        wait_until(lambda: self.label_chips() == ["app.version=3.0", "run=q-run-3"], 5, "the new instance's labels", self.label_chips)

    def replay_to(self, version):
        """Clicks a timeline record's "Replay to here" (brought to the middle of the window first)."""
        button = self.find(f"#timeline > li[data-version='{version}'] button[data-position]")
        self.js("arguments[0].scrollIntoView({block: 'center'})", button)
        button.click()

    def check_divergent_item(self, item, kinds, **detail):
        self.assertEqual(item.get_attribute("data-divergent"), "true")
        self.assertIn("divergent", item.get_attribute("class"))
        badge = item.find_element(By.CSS_SELECTOR, ".record-head .badge-divergence")
        self.assertEqual(badge.text, f"≠ diverged: {', '.join(kinds)}", "the mark says so in words")
        self.check_divergent_detail(item, **detail)

    def check_divergent_detail(self, container, believed=None, actual=None, expected=None, ran=None, missing=None, extra=None, order_only=False):
        detail = container.find_element(By.CSS_SELECTOR, ".divergence-detail")
        self.assertTrue(detail.is_displayed())
        terms = self.js("""return Object.fromEntries([...arguments[0].querySelectorAll('dl > div')].map(d => [d.dataset.term,
            [...d.querySelectorAll('dd .hooks li')].map(li => li.textContent)]))""", detail)
        row = lambda term: detail.find_element(By.CSS_SELECTOR, f"[data-term='{term}'] dd").text
        if believed:
            self.assertEqual(row("State"), f"believed {believed}, actual {actual}")
        else:
            self.assertNotIn("State", terms, "no state divergence shown where there is none")
        self.assertEqual(terms["Hooks expected"], expected)
        self.assertEqual(terms["Hooks ran"], ran)
        if order_only:
            self.assertEqual(row("Order"), "only the order differs")
            self.assertNotIn("Missing", terms)
        else:
            self.assertEqual(terms["Missing"], missing)
            self.assertEqual(terms["Extra"], extra)
            if not missing:
                self.assertEqual(row("Missing"), "none")

    def check_device_time(self, item, occurred, note):
        device = item.find_element(By.CSS_SELECTOR, ".record-head .device-time")
        time_element = device.find_element(By.CSS_SELECTOR, "time")
        self.assertEqual(time_element.get_attribute("datetime"), occurred)
        # The device's wall clock as it read it, in its own offset, not moved to the page's zone.
        offset = "UTC" if occurred.endswith("Z") else occurred[23:]
        self.assertEqual(time_element.text, f"{occurred[:10]} {occurred[11:23]} {offset}", "the device's time, in its offset")
        server = item.find_element(By.CSS_SELECTOR, ".record-head > time")
        self.assertNotEqual(server.get_attribute("datetime"), occurred, "the server's time beside it")
        self.assertTrue(device.text.startswith("device "))
        if note:
            self.assertIn(note, device.text)

    def check_widths(self, what):
        """Nothing wider than the window; every divergence mark and detail inside its card."""
        self.assertLessEqual(self.js("return document.documentElement.scrollWidth"), self.js("return window.innerWidth"), f"{what}: no wider than the window")
        spill = self.js("""return [...document.querySelectorAll('.badge-divergence, .divergence-detail, .device-time')].filter(e => e.offsetParent).map(e => {
            const card = e.closest('li.record, #replay-record, dl.facts') ?? document.body;
            return e.getBoundingClientRect().right - card.getBoundingClientRect().right; })""")
        self.assertTrue(all(x <= 0.5 for x in spill), f"{what}: marks inside their cards ({spill})")

    def test_g_narrow_dark_window(self):
        self.api.create("narrow-1")
        for step in COLD_START:
            self.api.event("narrow-1", step)
        still(self.driver, scheme="dark")
        self.set_width(420, 1400)
        try:
            self.open_instance("narrow-1", "foreground")
            background = self.js("return getComputedStyle(document.body).backgroundColor")
            self.assertEqual(background, "rgb(14, 17, 22)", "the dark palette")
            # Nothing wider than the window: no sideways scrolling.
            self.assertLessEqual(self.js("return document.documentElement.scrollWidth"), self.js("return window.innerWidth"))
            self.settled(3)
            self.screenshot("instance-narrow-dark.png")
        finally:
            still(self.driver)
            self.reset_width()


class WritesNeedToken(DashboardCase):
    """--token: the page reads freely; a refused write asks for the token, which the tab keeps."""

    token = "browser-test-token"
    server_arguments = ("--token", token)
    allowed_console = (r"status of 401",)

    def test_a_refused_write_asks_for_the_token(self):
        self.api.create("token-1")
        self.open_instance("token-1", "initializing")
        # The server says writes need a token (/healthz): the page offers the Token button.
        wait_until(lambda: self.find("#token-button").is_displayed(), 5, "the Token button")
        self.assertIsNone(self.js("return sessionStorage.getItem('lifecycled.token')"))
        self.find("#event-forms button[data-event='didFinishLaunching']").click()
        wait_until(lambda: self.find("#token-dialog").get_attribute("open") is not None, 5, "the token dialog")
        # A wrong token is refused and asked for again.
        self.find("#token-input").send_keys("not-the-token")
        self.find("#token-form button[type='submit']").click()
        wait_until(lambda: "not accepted" in self.find("#token-reason").text and self.find("#token-dialog").get_attribute("open") is not None,
                   5, "the token asked for again")
        self.find("#token-input").send_keys(self.token)
        self.find("#token-form button[type='submit']").click()
        wait_until(lambda: self.api.instance("token-1")["state"] == "launching", 5, "the write, once the token is given")
        self.assertEqual(self.js("return sessionStorage.getItem('lifecycled.token')"), self.token)
        self.assertEqual(self.js("return localStorage.getItem('lifecycled.token')"), None, "kept for the tab only")
        wait_until(lambda: self.current_state() == "launching", 2, "the highlight moved")
        # The next write uses the kept token without asking.
        self.find("#event-willConnectToWindow-window").send_keys("main", Keys.ENTER)
        wait_until(lambda: self.api.instance("token-1")["state"] == "connected", 5, "a second write")
        self.assertIsNone(self.find("#token-dialog").get_attribute("open"))


class ReadsNeedToken(DashboardCase):
    """--token --protect-reads: the page asks before it can read, and its stream takes the token."""

    token = "browser-test-token"
    server_arguments = ("--token", token, "--protect-reads")
    allowed_console = (r"status of 401",)

    def test_a_page_asks_for_the_token_to_read_and_streams_with_it(self):
        self.api.create("guarded-1")
        self.driver.get("about:blank")
        self.driver.get(f"{self.server.base}/#/instances/guarded-1")
        wait_until(lambda: self.find("#token-dialog").get_attribute("open") is not None, 10, "the token dialog")
        self.find("#token-input").send_keys(self.token, Keys.ENTER)
        wait_until(lambda: self.js("return document.body.dataset.ready") == "true", 10, "the page, once the token is given")
        wait_until(lambda: self.current_state() == "initializing", 5, "the instance")
        wait_until(lambda: self.find("#live-status").get_attribute("data-state") == "live", 5, "the stream, with the token in its query")
        self.post_and_watch("guarded-1", COLD_START[0])


class LoadTime(unittest.TestCase):
    """How long the page takes to be ready with many instances (measured, not asserted)."""

    def test_load_time_with_many_instances(self):
        count = OPTIONS.load_instances
        server = Server()
        driver = browser()
        try:
            seed(server, count, "load", threads=4)
            timings = []
            for _ in range(5):
                driver.get("about:blank")
                driver.get(f"{server.base}/#/fleet")
                wait_until(lambda: driver.execute_script("return document.body.dataset.ready") == "true", 30, "the page")
                timings.append(driver.execute_script("return performance.getEntriesByName('lifecycled-ready')[0].startTime"))
            total = driver.execute_script("return [...document.querySelectorAll('#fleet-graph svg g.node')].reduce((n, g) => n + Number(g.dataset.count), 0)")
            self.assertEqual(total, count, "the fleet view counts every instance")
            driver.get(f"{server.base}/#/instances")
            wait_until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#instance-list tbody tr")) == 100, 10, "the first page of the list")
            log(f"page ready with {count} instances: median {statistics.median(timings):.0f} ms, "
                f"min {min(timings):.0f} ms, max {max(timings):.0f} ms over {len(timings)} cold loads "
                f"(navigation start to the page's 'lifecycled-ready' mark)")
            allowed = [] if has_findings(API(server)) else [NO_FINDINGS]
            errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
                      and not any(re.search(pattern, e["message"]) for pattern in allowed)]
            self.assertEqual(errors, [])
        finally:
            driver.quit()
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=OPTIONS.server)
    parser.add_argument("--keep", action="store_true", help="keep the servers' data folders and logs")
    parser.add_argument("--load-instances", type=int, default=OPTIONS.load_instances)
    parser.add_argument("-k", dest="patterns", action="append", help="only tests whose name contains this")
    arguments = parser.parse_args()
    OPTIONS.server, OPTIONS.keep, OPTIONS.load_instances = arguments.server, arguments.keep, arguments.load_instances
    if not os.access(OPTIONS.server, os.X_OK):
        raise SystemExit(f"browser: no server at {OPTIONS.server}; build it with swift build --product lifecycled")
    log(f"screenshots in {SCREENSHOTS}")
    loader = unittest.TestLoader()
    if arguments.patterns:
        loader.testNamePatterns = [f"*{p}*" for p in arguments.patterns]
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(case) for case in (Dashboard, WritesNeedToken, ReadsNeedToken, LoadTime))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    # A test whose body and tearDown both fail counts once; a class that could not start counts as one.
    failed = len({test.id() for test, _ in result.failures + result.errors})
    passed = max(0, result.testsRun - failed)
    log(f"screenshots in {SCREENSHOTS}")
    print(f"browser: {passed} passed, {failed} failed", flush=True)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
