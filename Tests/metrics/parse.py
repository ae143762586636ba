#!/usr/bin/env python3
"""Parses a Prometheus text exposition (format 0.0.4) with the prometheus_client parser and
prints its families as JSON:

    {"families": [{"name", "type", "help", "samples": [{"name", "labels", "value"}]}]}

Refuses the text if the parser does, or if it is what that (lax) parser accepts but the
format does not mean: a sample outside a family with its own HELP and TYPE (the parser makes
it an untyped family of its own), a family named twice or without help, a series given
twice, a negative counter, or a histogram whose buckets do not ascend to a `+Inf` bucket
equal to its `_count`.

    parse.py [FILE]   the exposition in FILE (or on standard input); exits 1 with the reason
                      on standard error when it is refused
    parse.py --serve  one exposition per line of standard input, each a JSON string; one
                      line of JSON out for each: the families, or {"error": reason}

Tests/LifecycleServiceTests/MetricsSupport.swift runs one `--serve` process for a whole test
run: a process per scrape would end dozens of children during the run, and each end's
SIGCHLD interrupts whatever poll() or timed recv() another test's thread is in.
"""

import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


class Refused(Exception):
    """The text is not a valid exposition."""


def fail(message):
    raise Refused(message)


def check_histogram(family):
    series = {}
    for sample in family.samples:
        labels = {k: v for k, v in sample.labels.items() if k != "le"}
        key = tuple(sorted(labels.items()))
        entry = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sample.name == family.name + "_bucket":
            if "le" not in sample.labels:
                fail(f"{family.name}: a bucket without le: {sample}")
            entry["buckets"].append((float(sample.labels["le"]), sample.value))
        elif sample.name == family.name + "_sum":
            entry["sum"] = sample.value
        elif sample.name == family.name + "_count":
            entry["count"] = sample.value
    for key, entry in series.items():
        bounds = [bound for bound, _ in entry["buckets"]]
        counts = [count for _, count in entry["buckets"]]
        if not bounds or bounds[-1] != math.inf:
            fail(f"{family.name}{dict(key)}: no +Inf bucket last")
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            fail(f"{family.name}{dict(key)}: bucket bounds do not ascend: {bounds}")
        if counts != sorted(counts):
            fail(f"{family.name}{dict(key)}: bucket counts are not cumulative: {counts}")
        if entry["count"] is None or entry["sum"] is None:
            fail(f"{family.name}{dict(key)}: _sum or _count missing")
        if counts[-1] != entry["count"]:
            fail(f"{family.name}{dict(key)}: +Inf bucket {counts[-1]} differs from _count {entry['count']}")


def parse(text):
    """The families of an exposition, as JSON-ready values; raises Refused."""
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as error:  # the parser raises ValueError and others on malformed text
        fail(f"prometheus_client refused the text: {error!r}")
    names = set()
    series = set()
    out = []
    for family in families:
        if family.type not in ("counter", "gauge", "histogram", "summary"):
            fail(f"{family.name}: type {family.type}: a sample without its own HELP and TYPE lines")
        if family.name in names:
            fail(f"{family.name}: family given twice")
        names.add(family.name)
        if not family.documentation:
            fail(f"{family.name}: no help text")
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            if key in series:
                fail(f"series given twice: {sample.name}{sample.labels}")
            series.add(key)
            if family.type == "counter" and not sample.value >= 0:
                fail(f"{sample.name}{sample.labels}: counter value {sample.value}")
        if family.type == "histogram":
            check_histogram(family)
        out.append({
            "name": family.name,
            "type": family.type,
            "help": family.documentation,
            "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples],
        })
    return {"families": out}


def main():
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            try:
                result = parse(json.loads(line))
            except Refused as error:
                result = {"error": str(error)}
            print(json.dumps(result), flush=True)
        return
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as file:
            text = file.read()
    else:
        text = sys.stdin.read()
    try:
        json.dump(parse(text), sys.stdout)
    except Refused as error:
        print(f"parse.py: {error}", file=sys.stderr)
        sys.exit(1)


main()
