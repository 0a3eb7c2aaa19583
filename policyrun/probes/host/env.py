"""`env`: the environment variables policyrun runs with, whether set, and their values.

A secret is never written to the fact: it is masked by name or by what the value holds
(policyrun/masking.py).

A module of its own: it reads the environment only, and shares nothing with `command` (which runs
a program) or `path` (which looks at files) beyond being a kind for policy authors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from policyrun import masking
from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes._kit.userregex import user_regex

DEFAULT_MASK_PATTERN = masking.NAME_PATTERN

_ENV_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "names": {"type": "array", "minItems": 1, "uniqueItems": True,
                  "items": {"type": "string", "pattern": "^[^=\\x00]+$"}, "description": "Variables to read."},
        "unmask": {"type": "array", "items": {"type": "string"},
                   "description": "Names whose values are shown even if they look secret."},
        "mask_pattern": {"type": "string", "default": DEFAULT_MASK_PATTERN,
                         "description": "RE2 searched in each name; a match masks the value. Default: names "
                                        "containing TOKEN, SECRET, PASS, PWD, KEY, DSN, CREDENTIAL, AUTH, COOKIE, "
                                        "SESSION, PRIVATE, SIGNATURE or CONTRASE (any case), except PWD and "
                                        "OLDPWD. Values are masked by what they hold whatever the name."},
    },
    "required": ["names"],
    "additionalProperties": False,
}

_ENV_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "vars": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "set": {"type": "boolean"},
            "value": {"type": ["string", "null"], "description": "null when unset or masked; a URL with a "
                                                                "password shows `***` in its place."},
            "masked": {"type": "boolean", "description": "Some or all of the value is hidden."},
            "length": {"type": ["integer", "null"], "description": "Characters in the value; null when unset."},
        }}},
        "missing": {"type": "array", "items": {"type": "string"}, "description": "Names not set."},
    },
}


class EnvProbe:
    kind = "env"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = "Environment variables policyrun runs with: set or not, value (secrets masked), length."
    params_schema: Mapping[str, Any] = _ENV_PARAMS
    fact_schema: Mapping[str, Any] = _ENV_FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        custom = params.get("mask_pattern")
        rx = (user_regex(str(custom), "parameter `mask_pattern`", code="env.bad_pattern") if custom is not None
              else None)
        unmask = set(params.get("unmask") or [])
        environ = {**os.environ, **ctx.env}
        out: dict[str, Any] = {}
        missing = []
        for name in params["names"]:
            value = environ.get(name)
            if value is None:
                out[name] = {"set": False, "value": None, "masked": False, "length": None}
                missing.append(name)
                continue
            if name in unmask:
                out[name] = {"set": True, "value": value, "masked": False, "length": len(value)}
                continue
            # A secret value is masked whatever the variable is called (a token pasted into MODEL_PATH).
            m = masking.mask_value(value, name=name, name_secret=None if rx is None else rx.search(name) is not None)
            out[name] = {"set": True, "value": m.shown, "masked": m.masked, "length": len(value)}
        return ProbeResult(value={"vars": out, "missing": missing})


PROBES = [EnvProbe()]
