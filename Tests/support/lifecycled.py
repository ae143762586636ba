"""Starts the built lifecycled for the Python-driven tests (Tests/contract, Tests/client)."""

import os
import re
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STARTED = re.compile(r"lifecycled started\"? address=127\.0\.0\.1:(\d+)")


def start_server(binary, data_dir, log_path, name):
    """Starts lifecycled on a free loopback port and returns (process, port) once its start
    line is logged; `name` prefixes the message of the SystemExit raised when it does not start."""
    log_file = open(log_path, "wb")
    process = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", data_dir,
         "--public-dir", os.path.join(ROOT, "Public")],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path, "rb") as f:
            match = STARTED.search(f.read().decode("utf-8", "replace"))
        if match:
            return process, int(match.group(1))
        if process.poll() is not None:
            raise SystemExit(f"{name}: lifecycled exited with {process.returncode} before starting:\n{open(log_path).read()}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"{name}: lifecycled did not log its start line within 30 s")
