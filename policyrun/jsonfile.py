"""Read a JSON document into a model, with errors that name the file, the position and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from policyrun.errors import Location, UsageError

M = TypeVar("M", bound=BaseModel)


def load_json_model(path: Path, model: type[M], *, what: str, code: str, hint: str) -> M:
    """`code` is a prefix ("F", "T"): 001 unreadable, 002 not JSON, 003 wrong shape."""
    where = Location(str(path))
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what}: {exc.strerror}", code=f"{code}001", location=where) from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} is not valid UTF-8", code=f"{code}001", location=where) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg}", code=f"{code}002",
                         location=Location(str(path), exc.lineno, exc.colno)) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = " → ".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"{what} does not match its schema at {at}: {first['msg']}; {hint}",
                         code=f"{code}003", location=where) from None
