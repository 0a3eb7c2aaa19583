"""`http`: one request to a URL (a model server's /health, /v1/models, a completion), retried
until an answer or a deadline, the answer recorded as a fact: status, headers, body (as JSON when
it is JSON).

Loopback by default: a URL on another host declares the `network` side effect, which the mode
must grant; so does `network: true`, which also lets a redirect leave the machine. Response
headers whose name or value the masking rule flags (`Set-Cookie`, an echoed token) are masked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from policyrun import masking
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.httpfetch import Response, body_json, check_url, failure_text, fetch, is_loopback

DEFAULT_MAX_BODY = 1 << 20
MAX_BODY = 16 << 20

_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "http:// or https:// URL; a host other than localhost or a loopback "
                                                 "address needs the `network` permission."},
        "method": {"enum": ["GET", "POST", "HEAD"], "default": "GET"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"},
                    "description": "Request headers, e.g. {Authorization: 'Bearer ${inputs.token}'}."},
        "body": {"type": "string", "description": "Request body as text (POST)."},
        "json": {"description": "Request body as JSON (POST); sets Content-Type: application/json."},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "default": 10,
                      "description": "Budget of one attempt (connect, redirects and body)."},
        "wait_s": {"type": "number", "minimum": 0, "default": 0,
                   "description": "Keep retrying (connection failures and `retry_statuses`) until this many "
                                  "seconds have passed, e.g. while a server starts; 0: one attempt."},
        "interval_s": {"type": "number", "exclusiveMinimum": 0, "default": 1, "description": "Pause between attempts."},
        "retry_statuses": {"type": "array", "items": {"type": "integer", "minimum": 100, "maximum": 599},
                           "default": [502, 503, 504], "description": "Statuses retried while `wait_s` lasts."},
        "max_body_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_BODY, "default": DEFAULT_MAX_BODY,
                           "description": "Bytes of the body kept; a longer body is cut and `body.truncated`."},
        "network": {"type": "boolean", "default": False,
                    "description": "May reach other hosts (declares `network`): needed to follow a redirect off "
                                   "this machine."},
    },
    "required": ["url"],
    "not": {"required": ["body", "json"]},
    "additionalProperties": False,
}

_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "The URL requested."},
        "final_url": {"type": "string", "description": "The URL that answered, after redirects."},
        "status": {"type": "integer"},
        "reason": {"type": "string"},
        "ok": {"type": "boolean", "description": "Status 200-299."},
        "headers": {"type": "object", "additionalProperties": {"type": "string"},
                    "description": "Lower-case name → value (repeated headers joined by ', '); secrets masked."},
        "content_type": {"type": "string", "description": "Media type without parameters, lower case; '' if none."},
        "body": {"type": "object", "properties": {
            "text": {"type": "string", "description": "The body as UTF-8 (invalid bytes replaced)."},
            "bytes": {"type": "integer", "description": "Bytes kept."},
            "truncated": {"type": "boolean"},
            "json": {"description": "The body parsed as JSON when it is JSON (by Content-Type, or text that "
                                    "starts with { or [), else null."},
            "json_error": {"type": ["string", "null"],
                           "description": "Why a body declared as JSON could not be read as JSON."}},
            "additionalProperties": False},
        "attempts": {"type": "integer"},
        "redirects": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


def _network(params: Mapping[str, Any]) -> bool:
    return bool(params.get("network")) or not is_loopback(str(params["url"]))


def _headers(resp: Response) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in resp.headers:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return {k: masking.shown(v, name=k) for k, v in sorted(out.items())}


def _request_body(params: Mapping[str, Any]) -> tuple[bytes | None, dict[str, str]]:
    headers = dict(params.get("headers") or {})
    if "json" in params:
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        return json.dumps(params["json"]).encode(), headers
    if "body" in params:
        return str(params["body"]).encode(), headers
    return None, headers


class HttpProbe:
    kind = "http"
    summary = "One HTTP request (GET/POST/HEAD), retried until a deadline: status, headers, body, JSON body."
    params_schema: Mapping[str, Any] = _PARAMS
    fact_schema: Mapping[str, Any] = _FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({"network"}) if _network(params) else frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        url = str(params["url"])
        check_url(url, "http.bad_url")
        method = str(params.get("method") or "GET")
        data, headers = _request_body(params)
        if data is not None and method != "POST":
            raise ProbeError("http.bad_params", f"a request body needs method: POST (got {method})")
        max_body = int(params.get("max_body_bytes", DEFAULT_MAX_BODY))
        # The probe's own budget bounds everything: no wait outlives the collection timeout, and
        # the last attempt ends a little before it, so its answer (or why none) is the fact.
        start = time.monotonic()
        limit = ctx.timeout_s * 0.95
        budget = min(float(params.get("wait_s", 0)), limit)
        per_try = min(float(params.get("timeout_s", 10)), limit)
        retry = {int(s) for s in params.get("retry_statuses", (502, 503, 504))}
        attempts, last_error = 0, ""
        shown = masking.shown(url)  # a password in the URL (user:pass@host) is never written
        command = f"{method} {shown}"
        while True:
            attempts += 1
            left = limit - (time.monotonic() - start)
            try:
                resp = fetch(url, method=method, headers=headers, data=data, timeout_s=max(min(per_try, left), 0.001),
                             max_bytes=max_body, network=_network(params), code="http")
            except OSError as exc:  # URLError and TimeoutError are OSErrors
                resp, last_error = None, failure_text(exc)
            waited = time.monotonic() - start
            again = resp is None or resp.status in retry
            if not again or waited + float(params.get("interval_s", 1)) > budget:
                break
            time.sleep(float(params.get("interval_s", 1)))
        if resp is None:
            raise ProbeError("http.unreachable", f"{method} {shown}: {last_error} (after {attempts} attempt"
                                                 f"{'' if attempts == 1 else 's'}"
                                                 f"{f' over {budget:g}s' if budget else ''})", commands=[command])
        text = resp.body.decode("utf-8", "replace")
        parsed, json_error = body_json(text, resp.content_type, resp.truncated)
        final_url = masking.shown(resp.url)
        value = {"url": shown, "final_url": final_url, "status": resp.status, "reason": resp.reason,
                 "ok": 200 <= resp.status < 300, "headers": _headers(resp), "content_type": resp.content_type,
                 "body": {"text": text, "bytes": len(resp.body), "truncated": resp.truncated, "json": parsed,
                          "json_error": json_error},
                 "attempts": attempts, "redirects": [masking.shown(r) for r in resp.redirects]}
        return ProbeResult(value=value, commands=[command], sources=[final_url])


PROBES = [HttpProbe()]
