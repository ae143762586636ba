"""The baseline of the batch-ingest benchmark: bare SQLite writing, from Python's sqlite3, the
rows lifecycled writes for the items of Benchmarks/ingest.lua, into a database whose schema
lifecycled made: a record and an idempotency key an item, an instance row an instance, 1,000
items a transaction, WAL, synchronous=normal (lifecycled's defaults). Only the transactions
are timed (the rows are made before each one): no deciding, no JSON, no HTTP, and no Python
building strings either, so the figure is what the store itself costs.

usage: python3 ingest-baseline.py DATABASE SECONDS [ITEMS_PER_TRANSACTION]
Prints "<items/s> <transactions>".
"""
import hashlib
import os
import sqlite3
import sys
import time

path, seconds = sys.argv[1], float(sys.argv[2])
size = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = NORMAL")

EVENTS = [
    ("didFinishLaunching", "initializing", "launching", '["Launching.init"]', "r2"),
    ("willConnectToWindow", "launching", "connected", '["Connected.init"]', "r4"),
    ("didBecomeActive", "connected", "foreground", '["Foreground.onTransition","Foreground.didReturn"]', "r6"),
    ("willResignActive", "foreground", "foreground", '["Foreground.willLeave"]', "r10"),
]
seq = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0]
run = os.getpid()
transactions = 0
items = 0
elapsed = 0.0
while elapsed < seconds:
    now = int(time.time() * 1000)
    records, keys, instances = [], [], []
    for i in range(size // 5):
        instance = f"baseline-{run}-{transactions}-{i}"
        version = 0
        for n, body in enumerate([None] + EVENTS):
            seq += 1
            if body is None:
                text = (f'{{"sequence":{seq},"instance":"{instance}","version":0,"kind":"created","model":"ios-app",'
                        f'"time":"2026-12-05T05:00:00.000Z"}}')
                kind = 3
            else:
                version += 1
                event, before, after, hooks, row = body
                text = (f'{{"sequence":{seq},"instance":"{instance}","version":{version},"kind":"event","event":"{event}",'
                        f'"from":"{before}","to":"{after}","outcome":"transitioned","hooks":{hooks},"row":"{row}",'
                        f'"time":"2026-12-05T05:00:00.000Z"}}')
                kind = 0
            data = text.encode()
            records.append((seq, instance, version, kind, None if body is None else 0, data, 0))
            key = f"{instance}-{n}"
            keys.append((key, hashlib.sha256(key.encode()).digest(), 0 if body is None else 1, instance, "ios-app", now, data, now))
        instances.append((instance, "ios-app", "foreground", version, 1, None, "main", "active", 1, 0, 0, 0, now, now, 0, 0, "{}"))
    start = time.monotonic()
    db.execute("BEGIN")
    db.executemany("INSERT INTO records (seq, instance, version, kind, outcome, body, divergent) VALUES (?, ?, ?, ?, ?, ?, ?)", records)
    db.executemany(
        "INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        keys,
    )
    db.executemany(
        "INSERT INTO instances (id, model, state, version, launch_count, buffered_action, window, breadcrumb_step, scene_connected, unexpected,"
        " ignored, incomplete_launches, created_at, updated_at, divergences, dropped, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        instances,
    )
    db.execute("COMMIT")
    elapsed += time.monotonic() - start
    transactions += 1
    items += len(records)
print(f"{items / elapsed:.0f} {transactions}")
