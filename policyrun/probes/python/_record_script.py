"""Run by `python.record` inside the target interpreter (isolated, in an empty directory): the
installed distribution's RECORD, and for each Python file it lists, the installed bytes' sha256 and
git blob id. Reads metadata and files only; never imports the distribution. Prints one JSON object.
Like `_modules_script.py`, never imported by policyrun: its text runs with `python -I -B -c`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import sys
from typing import Any

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 20000


def main() -> None:
    args = json.loads(sys.argv[1])
    from importlib import metadata

    out: dict[str, Any] = {"python_version": platform.python_version(), "found": False}
    try:
        dist = metadata.distribution(args["distribution"])
    except metadata.PackageNotFoundError:
        print(json.dumps(out))
        return
    files = list(dist.files or [])
    entries: list[dict[str, Any]] = []
    for f in files:
        rel = str(f).replace(os.sep, "/")
        if not rel.endswith(".py") or rel.startswith("../") or rel.startswith("/"):
            continue
        if len(entries) >= MAX_ENTRIES:
            break
        entry = {"path": rel, "record": f"{f.hash.mode}={f.hash.value}" if f.hash else None}
        try:
            path = f.locate()
            if os.path.islink(path) or os.path.getsize(path) > MAX_FILE_BYTES:
                raise OSError("a link, or too large")
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            entry["error"] = str(exc)[:200]
        else:
            entry["sha256"] = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            blob = hashlib.new(args["object_format"])
            blob.update(b"blob %d\0" % len(data))
            blob.update(data)
            entry["blob"] = blob.hexdigest()
        entries.append(entry)

    def text(name: str) -> str | None:
        try:
            value = dist.read_text(name)
        except Exception:
            return None
        return value[:4000] if isinstance(value, str) else None

    out.update(found=True, name=dist.metadata["Name"], version=dist.version, record_files=len(files),
               entries=entries, installer=(text("INSTALLER") or "").strip() or None, direct_url=text("direct_url.json"))
    print(json.dumps(out))


main()
