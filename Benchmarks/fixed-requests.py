#!/usr/bin/env python3
"""Sends exactly N requests to lifecycled, one after another on one kept-alive connection,
and fails on any answer but 2xx. For instruction counts (middleware-instructions.sh): wrk
runs for a time, not a count, and concurrent requests would make the store's batches, and
so its work, depend on timing.

usage: fixed-requests.py PORT get|post|batch N [TOKEN]
  get:   GET /v1/instances/bench-1
  post:  POST /v1/instances/bench-K/events, K = i % 8 over bench-0..7, alternating
         willResignActive and didBecomeActive per round over the instances (as events.lua),
         so every event is valid in the foreground state the setup leaves them in
  batch: POST /v1/batch of 1,000 keyed items as Benchmarks/ingest.lua sends them (200 new
         instances' creates and cold starts), ids new in every request and every run; an
         item refused fails the run (ingest-instructions.sh)
"""
import os
import re
import socket
import sys

INSTANCES = 8


def batch(prefix):
    items = []
    for i in range(1, 201):
        instance = f"ingest-{prefix}-{i}"
        for suffix, kind, body in [
            ("c", "create", None), ("1", "event", '{"event":"didFinishLaunching"}'),
            ("2", "event", '{"event":"willConnectToWindow","window":"main"}'), ("3", "event", '{"event":"didBecomeActive"}'),
            ("4", "event", '{"event":"willResignActive"}'),
        ]:
            member = "" if body is None else f',"body":{body}'
            items.append(f'{{"instance":"{instance}","kind":"{kind}"{member},"idempotencyKey":"{instance}-{suffix}"}}')
    return ('{"items":[' + ",".join(items) + "]}").encode()


def requests(kind, count, token):
    auth = f"Authorization: Bearer {token}\r\n"
    run = os.getpid()
    for i in range(count):
        if kind == "batch":
            body = batch(f"{run}x{i}")
            yield (f"POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        elif kind == "get":
            yield f"GET /v1/instances/bench-1 HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n".encode()
        else:
            event = ("willResignActive", "didBecomeActive")[(i // INSTANCES) % 2]
            body = f'{{"event":"{event}"}}'
            yield (f"POST /v1/instances/bench-{i % INSTANCES}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()


def read_response(sock, buffered):
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed before a response")
        buffered += chunk
    head, _, rest = buffered.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed inside a body")
        rest += chunk
    return status, rest[:length], rest[length:]


def main():
    port, kind, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    token = sys.argv[4] if len(sys.argv) > 4 else "none"
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffered = b""
    for request in requests(kind, count, token):
        sock.sendall(request)
        status, body, buffered = read_response(sock, buffered)
        if not 200 <= status < 300:
            raise SystemExit(f"answered {status}")
        if kind == "batch" and re.search(rb'"status":[45]', body):
            raise SystemExit("a batch item was refused")
    sock.close()


if __name__ == "__main__":
    main()
