"""The PostgreSQL baseline of the batch-ingest benchmark: a psql script that loads, with COPY,
the rows lifecycled writes for the items of Benchmarks/ingest.lua (the same rows as
Benchmarks/ingest-baseline.py writes into SQLite): a record and an idempotency key an item, an
instance row an instance, ITEMS_PER_TRANSACTION items a transaction, each transaction three
COPYs. The caller times psql running it: no deciding, no JSON, no HTTP.

usage: python3 ingest-copy-baseline.py TRANSACTIONS [ITEMS_PER_TRANSACTION] > script.sql
"""
import hashlib
import os
import sys
import time

transactions = int(sys.argv[1])
size = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
EVENTS = [
    ("didFinishLaunching", "initializing", "launching", '["Launching.init"]', "r2"),
    ("willConnectToWindow", "launching", "connected", '["Connected.init"]', "r4"),
    ("didBecomeActive", "connected", "foreground", '["Foreground.onTransition","Foreground.didReturn"]', "r6"),
    ("willResignActive", "foreground", "foreground", '["Foreground.willLeave"]', "r10"),
]


def bytea(data):
    return "\\\\x" + data.hex()  # COPY's text format reads \\x as the escape-format prefix \x


out = sys.stdout
seq = 10**12 + os.getpid() * 10**6  # clear of the sequences lifecycled writes in the same database
run = os.getpid()
now = int(time.time() * 1000)
for t in range(transactions):
    records, keys, instances = [], [], []
    for i in range(size // 5):
        instance = f"copy-{run}-{t}-{i}"
        version = 0
        for n, body in enumerate([None] + EVENTS):
            seq += 1
            if body is None:
                text = (f'{{"sequence":{seq},"instance":"{instance}","version":0,"kind":"created","model":"ios-app",'
                        f'"time":"2026-12-05T05:00:00.000Z"}}')
                kind, outcome = 3, "\\N"
            else:
                version += 1
                event, before, after, hooks, row = body
                text = (f'{{"sequence":{seq},"instance":"{instance}","version":{version},"kind":"event","event":"{event}",'
                        f'"from":"{before}","to":"{after}","outcome":"transitioned","hooks":{hooks},"row":"{row}",'
                        f'"time":"2026-12-05T05:00:00.000Z"}}')
                kind, outcome = 0, "0"
            data = text.encode()
            records.append(f"{seq}\t{instance}\t{version}\t{kind}\t{outcome}\t{bytea(data)}\tf")
            key = f"{instance}-{n}"
            fingerprint = hashlib.sha256(key.encode()).digest()
            keys.append(f"{key}\t{bytea(fingerprint)}\t{0 if body is None else 1}\t{instance}\tios-app\t{now}\t{bytea(data)}\t{now}")
        instances.append(f"{instance}\tios-app\tforeground\t{version}\t1\t\\N\tmain\tactive\tt\t0\t0\t0\t{now}\t{now}\t0\t0\t{{}}")
    out.write("BEGIN;\n")
    out.write("COPY records (seq, instance, version, kind, outcome, body, divergent) FROM STDIN;\n")
    out.write("\n".join(records) + "\n\\.\n")
    out.write("COPY idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at) FROM STDIN;\n")
    out.write("\n".join(keys) + "\n\\.\n")
    out.write(
        "COPY instances (id, model, state, version, launch_count, buffered_action, window_name, breadcrumb_step, scene_connected,"
        " unexpected, ignored, incomplete_launches, created_at, updated_at, divergences, dropped, labels) FROM STDIN;\n"
    )
    out.write("\n".join(instances) + "\n\\.\n")
    out.write("COMMIT;\n")
