#!/usr/bin/env python3
"""Browser test: a page of another origin cannot write to lifecycled (issue 22, item 2).

Starts the built server (as Tests/browser/run.py does: a free loopback port, a fresh data
folder, no token) and a second HTTP server on another port for the attacker's page, then
loads that page in headless Chromium (Debian's `chromium` and `chromium-driver`, Debian's
`python3-selenium`). The page sends what a browser sends for any page without asking the
target first: a bodiless POST that creates an instance, a bodiless POST that relaunches
one, a `text/plain` POST with a JSON body, and two form POSTs (`text/plain` made to look
like JSON, and `application/x-www-form-urlencoded`). Once lifecycled has logged all five,
each must have been refused with 403 and the API must show nothing stored: the one
instance made beforehand, unchanged. Run once without `--cors-origin` and once with it
naming an origin other than the attacker's.

Usage: /usr/bin/python3 Tests/browser/csrf.py [--server PATH] [--keep]
"""

import argparse
import functools
import http.server
import os
import re
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the dashboard test's server, API client and browser)

ATTACKS = 5

PAGE = """<!doctype html>
<title>not lifecycled</title>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="json" method="post" enctype="text/plain" target="sink1" action="TARGET/v1/instances">
  <input name='{"model": "ios-app", "x": "' value='"}'>
</form>
<form id="urlencoded" method="post" target="sink2" action="TARGET/v1/instances/victim/relaunches">
  <input name="event" value="didFinishLaunching">
</form>
<script>
  const target = "TARGET";
  Promise.allSettled([
    fetch(target + "/v1/instances", {method: "POST", mode: "no-cors"}),
    fetch(target + "/v1/instances/victim/relaunches", {method: "POST", mode: "no-cors"}),
    fetch(target + "/v1/instances", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                                     body: JSON.stringify({id: "csrf-text"})}),
  ]).then(() => {
    document.getElementById("json").submit();
    document.getElementById("urlencoded").submit();
    window.__sent = true;
  });
</script>
"""

# The access log's line for a write, whatever the format's quoting.
WRITE = re.compile(r'msg=request method=(POST|PUT|DELETE) route=(\S+) status=(\d+)')


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *arguments):
        pass


class AttackerSite:
    """The attacker's page, served from its own port on loopback: another origin."""

    def __init__(self, target):
        self.folder = tempfile.mkdtemp(prefix="lifecycled-csrf-")
        with open(os.path.join(self.folder, "index.html"), "w") as f:
            f.write(PAGE.replace("TARGET", target))
        handler = functools.partial(QuietHandler, directory=self.folder)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class CrossSiteWrites(unittest.TestCase):
    def attack(self, *arguments):
        server = run.Server(*arguments)
        site = AttackerSite(server.base)
        driver = run.browser()
        try:
            api = run.API(server)
            api.create("victim")
            before = api.instance("victim")
            def writes():
                with open(server.log_path, encoding="utf-8", errors="replace") as f:
                    return WRITE.findall(f.read())

            # Log lines reach the file within 50 ms of their request: the setup's own line first.
            run.wait_until(lambda: any(method == "PUT" for method, _, _ in writes()), 5, "lifecycled logging the setup's PUT")
            setup = len(writes())

            driver.get(site.origin + "/")
            run.wait_until(lambda: driver.execute_script("return window.__sent === true"), 20, "the page's requests")
            run.wait_until(lambda: len(writes()) - setup >= ATTACKS, 20, f"lifecycled logging the page's {ATTACKS} writes",
                           explain=lambda: writes()[setup:])
            attacks = writes()[setup:]
            run.log(f"{' '.join(arguments) or 'no flags'}: {attacks}")
            self.assertEqual(len(attacks), ATTACKS, attacks)
            self.assertEqual({status for _, _, status in attacks}, {"403"}, attacks)

            items = api.ok("GET", "/v1/instances", expect=(200,))["items"]
            self.assertEqual([item["id"] for item in items], ["victim"])
            self.assertEqual(api.instance("victim"), before)
        finally:
            driver.quit()
            site.stop()
            server.stop()

    def test_without_cors(self):
        self.attack()

    def test_with_cors_for_another_origin(self):
        self.attack("--cors-origin", "http://localhost:9")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=run.OPTIONS.server)
    parser.add_argument("--keep", action="store_true", help="keep the server's data folder and log")
    arguments = parser.parse_args()
    run.OPTIONS.server, run.OPTIONS.keep = arguments.server, arguments.keep
    if not os.access(run.OPTIONS.server, os.X_OK):
        raise SystemExit(f"csrf: no server at {run.OPTIONS.server}; build it with swift build --product lifecycled")
    suite = unittest.TestLoader().loadTestsFromTestCase(CrossSiteWrites)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
