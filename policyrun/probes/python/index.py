"""`python.index`: the versions a package index offers for named packages, as pip or uv would see
them: the simple repository API, asked for its JSON form (PEP 691) and read as HTML (PEP 503)
when the index only speaks that. Yanked files (PEP 592) and `requires-python` (PEP 503's
`data-requires-python`, PEP 691's `requires-python`) are kept.

The index is the `index_url` parameter, else the one pip and uv are configured with through the
environment (`PIP_INDEX_URL`, `UV_DEFAULT_INDEX`, `UV_INDEX_URL`), else PyPI. Always declares
the `network` side effect: an index is a service elsewhere, even when a mirror answers on
loopback, and a mode that audits without the network must not depend on one.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from html.parser import HTMLParser
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun import masking
from policyrun.probes._kit.httpfetch import body_json, check_url, failure_text, fetch, split_credentials

PYPI = "https://pypi.org/simple/"
INDEX_ENV = ("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL")
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
DEFAULT_MAX_PAGE = 32 << 20  # PyPI's page for torch is a few MiB of JSON; a page this large is not an index

_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "packages": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                     "description": "Distribution names, as written anywhere (normalised per PEP 503)."},
        "index_url": {"type": "string", "description": "Simple index root, e.g. https://pypi.org/simple/ "
                                                       "(default: $PIP_INDEX_URL, $UV_DEFAULT_INDEX, $UV_INDEX_URL, "
                                                       "then PyPI)."},
        "max_page_bytes": {"type": "integer", "minimum": 1024, "maximum": 256 << 20, "default": DEFAULT_MAX_PAGE},
    },
    "required": ["packages"],
    "additionalProperties": False,
}

_PACKAGE: dict[str, Any] = {"type": "object", "properties": {
    "name": {"type": "string", "description": "The normalised name (PEP 503)."},
    "url": {"type": "string", "description": "The project page read."},
    "api": {"enum": ["json", "html"], "description": "PEP 691 JSON or PEP 503 HTML."},
    "versions": {"type": "array", "items": {"type": "string"},
                 "description": "Versions with at least one file not yanked, ascending (PEP 440 order)."},
    "yanked": {"type": "array", "items": {"type": "string"}, "description": "Versions whose every file is yanked."},
    "latest": {"type": ["string", "null"], "description": "Highest version in `versions` that is not a pre- or "
                                                          "dev-release (null if none)."},
    "requires_python": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "Version → its files' Requires-Python, where given."},
    "files": {"type": "integer", "description": "Files on the page."},
}, "additionalProperties": False}

_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "index_url": {"type": "string"},
        "packages": {"type": "object", "additionalProperties": _PACKAGE,
                     "description": "Name as given in `packages` → what the index offers."},
        "missing": {"type": "array", "items": {"type": "string"}, "description": "Names the index does not know "
                                                                                 "(404), as given."},
    },
    "additionalProperties": False,
}


def index_url(params: Mapping[str, Any], env: Mapping[str, str]) -> str:
    url = str(params.get("index_url") or next((env[k] for k in INDEX_ENV if env.get(k)), PYPI))
    return url if url.endswith("/") else url + "/"


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.files: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            yanked: Any = a["data-yanked"] if "data-yanked" in a else False
            self._open = {"href": a.get("href") or "", "filename": "", "requires-python": a.get("data-requires-python"),
                          "yanked": True if yanked == "" or yanked is None else yanked}

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["filename"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            f = self._open
            f["filename"] = f["filename"].strip() or urllib.parse.urlsplit(f["href"]).path.rsplit("/", 1)[-1]
            self.files.append(f)
            self._open = None


def _file_version(filename: str) -> str | None:
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
    from packaging.version import InvalidVersion

    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        if filename.endswith((".tar.gz", ".zip")):
            return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None  # .egg, .exe, .msi: formats no installer of today picks


def _sorted(versions: Iterable[str]) -> list[str]:
    from packaging.version import Version

    return sorted(set(versions), key=Version)


def summarise(name: str, url: str, api: str, files: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a project page offers, from its files. PEP 700's `versions` list is not read: a version
    without a file an installer can use is not on offer."""
    live: set[str] = set()
    seen: set[str] = set()
    requires: dict[str, str] = {}
    for f in files:
        version = _file_version(str(f.get("filename") or ""))
        if version is None:
            continue
        seen.add(version)
        if f.get("yanked") in (False, None):
            live.add(version)
        rp = f.get("requires-python")
        if isinstance(rp, str) and rp.strip() and version not in requires:
            requires[version] = rp.strip()
    from packaging.version import Version

    versions = _sorted(live)
    finals = [v for v in versions if not Version(v).is_prerelease]
    return {"name": name, "url": url, "api": api, "versions": versions, "yanked": _sorted(seen - live),
            "latest": finals[-1] if finals else None, "requires_python": dict(sorted(requires.items())),
            "files": len(files)}


def parse_page(name: str, url: str, body: bytes, content_type: str, truncated: bool) -> dict[str, Any]:
    text = body.decode("utf-8", "replace")
    if truncated:
        raise ProbeError("python.index.too_large", f"{url}: the page is larger than max_page_bytes; raise it "
                                                   "or check that index_url is a simple index")
    if content_type.startswith("application/vnd.pypi.simple.") and content_type.endswith("+json") \
            or content_type == "application/json":
        data, why = body_json(text, "application/json", False)
        if not isinstance(data, dict) or not isinstance(data.get("files"), list):
            raise ProbeError("python.index.bad_page", f"{url}: not a PEP 691 project page "
                                                      f"({why or 'no `files` list'})")
        files = [f for f in data["files"] if isinstance(f, dict)]
        return summarise(name, url, "json", files)
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    return summarise(name, url, "html", parser.files)


class PythonIndexProbe:
    kind = "python.index"
    summary = "Versions a package index offers for named packages (PEP 691 JSON or PEP 503 HTML), yanked ones apart."
    params_schema: Mapping[str, Any] = _PARAMS
    fact_schema: Mapping[str, Any] = _FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({"network"})

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        from packaging.utils import canonicalize_name

        configured = index_url(params, {**os.environ, **ctx.env})
        check_url(configured, "python.index.bad_url")
        # A private index's URL often carries a token (https://user:token@host/simple): it is sent
        # as a header to that host only, and every URL written is masked.
        root, auth = split_credentials(configured)
        shown_root = masking.shown(configured)
        deadline = time.monotonic() + ctx.timeout_s
        max_bytes = int(params.get("max_page_bytes", DEFAULT_MAX_PAGE))
        packages: dict[str, Any] = {}
        missing: list[str] = []
        commands: list[str] = []
        for given in params["packages"]:
            url = urllib.parse.urljoin(root, f"{canonicalize_name(str(given))}/")
            commands.append(f"GET {masking.shown(url)}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProbeError("python.index.timeout", f"no time left for {masking.shown(url)} within {ctx.timeout_s:g}s",
                                 commands=commands)
            try:
                resp = fetch(url, headers={"Accept": ACCEPT, **auth}, timeout_s=left, max_bytes=max_bytes, network=True,
                             code="python.index")
            except OSError as exc:  # URLError and TimeoutError are OSErrors
                raise ProbeError("python.index.unreachable", f"GET {masking.shown(url)}: {failure_text(exc)}",
                                 commands=commands) from None
            if resp.status == 404:
                missing.append(str(given))
                continue
            if resp.status != 200:
                raise ProbeError("python.index.http_error",
                                 f"GET {masking.shown(url)}: {resp.status} {resp.reason}".rstrip(),
                                 commands=commands)
            packages[str(given)] = parse_page(str(canonicalize_name(str(given))), masking.shown(resp.url), resp.body,
                                              resp.content_type, resp.truncated)
        return ProbeResult(value={"index_url": shown_root, "packages": packages, "missing": missing},
                           commands=commands, sources=[shown_root])


PROBES = [PythonIndexProbe()]
