"""Schemathesis hooks for the contract test (loaded through SCHEMATHESIS_HOOKS by run.py).

schemathesis.toml lets valid inputs be answered 412 and 422, because no schema can tie a
body to the instance its path names. This check takes back all of that allowance but the
two refusals that really depend on other requests:

- 422 for an event or action that the instance's model does not declare (the body is
  valid for the other built-in model), or a state it does not have (a conformance step's
  `believedState`), or for an Idempotency-Key that an earlier, different request used;
- 422 for a reported `believedState` that is a state of the other built-in model only;
- 422 for an `occurredAt` more than 24 hours ahead of the server's clock (the schema can
  say "a date-time", not "not in tomorrow's tomorrow");
- 422 for a U+0000 (NUL) in a member's name or a string of the body, which no stored
  string may hold on either store (openapi.yaml says so; JSON Schema cannot, for the names
  of members a body may carry besides its own);
- 412 only when the request carried If-Match.

A batch (POST /v1/batch) answers invalid items inside its 200, one result each: a second
check takes back that allowance unless some item of such a 200 was refused.
"""

import datetime
import json
import os
import re

import schemathesis

# {"model": {"event": [...], "action": [...], "state": [...]}}, from the live server's GET /v1/models.
with open(os.environ["LIFECYCLED_CONTRACT_MODELS"], encoding="utf-8") as f:
    INPUTS = {
        model["name"]: {
            "event": {e["name"] for e in model["events"]},
            "action": {a["name"] for a in model["actions"]},
            "state": {s["name"] for s in model["states"]},
        }
        for model in json.load(f)["items"]
    }

UNDECLARED = re.compile(r'^model "([^"]+)" has no (event|action|state) "(.*?)"(;.*)?$', re.S)
BELIEF = re.compile(r'^believedState "(.*?)" is not a state of model "([^"]+)"(;.*)?$', re.S)
NUL = re.compile(r'.* holds U\+0000 \(NUL\), which no stored string may', re.S)
AHEAD = re.compile(r'^"occurredAt" (\S+) is more than 24 hours ahead of the server\'s clock', re.S)
KEY_REUSED = re.compile(r'^Idempotency-Key ".*" was used for a different request$', re.S)


def _holds_nul(value):
    """Whether a member name or string anywhere in `value` holds U+0000."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


def _detail(response):
    try:
        return response.json().get("detail", "")
    except ValueError:
        return ""


@schemathesis.check
def valid_input_refused_only_for_another_model_or_reused_key(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    headers = {name.lower() for name in (case.headers or {})}
    if response.status_code == 412 and "if-match" not in headers:
        raise AssertionError("412 without If-Match")
    if response.status_code != 422:
        return None
    detail = _detail(response)
    if KEY_REUSED.match(detail) and "idempotency-key" in headers:
        return None
    if NUL.match(detail) and _holds_nul(case.body):
        return None
    belief = BELIEF.match(detail)
    if belief:
        name, model, _ = belief.groups()
        if model in INPUTS and name not in INPUTS[model]["state"] and any(name in i["state"] for i in INPUTS.values()):
            return None
    ahead = AHEAD.match(detail)
    if ahead and isinstance(case.body, dict) and case.body.get("occurredAt") == ahead.group(1):
        try:
            sent = datetime.datetime.fromisoformat(ahead.group(1).replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            sent = None
        if sent is not None and sent > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=24):
            return None
    undeclared = UNDECLARED.match(detail)
    if undeclared:
        model, kind, name, _ = undeclared.groups()
        others = [m for m, inputs in INPUTS.items() if m != model and name in inputs[kind]]
        if model in INPUTS and name not in INPUTS[model][kind] and others:
            return None
    raise AssertionError(f"a valid request was refused with 422: {detail}")


@schemathesis.check
def invalid_batch_item_refused(ctx, response, case):
    meta = case.meta
    if meta is None or meta.generation.mode.is_positive or case.operation.path != "/v1/batch":
        return None
    if response.status_code != 200:
        return None
    statuses = [result.get("status", 0) for result in response.json().get("results", [])]
    if not any(status >= 400 for status in statuses):
        raise AssertionError(f"a batch with an invalid item was applied whole: {statuses}")
    return None
