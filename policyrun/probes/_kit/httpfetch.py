"""One bounded HTTP request through the standard library, for the `http` and `python.index` probes,
and its body read as JSON.

What the probes must never do, whatever the server answers: wait longer than their deadline, read
more than their byte cap, or reach a host other than loopback when their mode did not grant the
`network` permission. So redirects are followed here, one at a time (never by urllib), each target
checked before it is requested; proxies from the environment are used only for a request that may
reach the network (a loopback request through `http_proxy` would leave the machine).
"""

from __future__ import annotations

import ipaddress
import socket
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from policyrun import limits, masking
from policyrun.errors import UsageError
from policyrun.probes.base import ProbeError

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def is_loopback(url: str) -> bool:
    """Whether the URL's host is this machine: `localhost` (and `*.localhost`, RFC 6761) or a
    loopback address literal. Any other name may resolve anywhere, so it counts as the network."""
    host = (urllib.parse.urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """`https://user:token@host/...` as the URL without its user part and a Basic Authorization
    header (urllib itself cannot use credentials written in a URL, as pip's index URLs hold them)."""
    import base64

    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    netloc = parts.netloc.rpartition("@")[2]
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


def check_url(url: str, code: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProbeError(code, f"{url!r} is not an http:// or https:// URL with a host")


@dataclass
class Response:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    truncated: bool
    url: str  # after redirects
    content_type: str = ""
    redirects: list[str] = field(default_factory=list)


@cache
def _no_redirect() -> Any:
    # urllib.request (with http.client and ssl) is imported on first use: the registry, which
    # `policyrun lint` loads, imports this module, and lint must stay fast.
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
            return None  # urllib then raises HTTPError with the 3xx response, which `fetch` follows itself

    return NoRedirect


def _opener(network: bool) -> Any:
    import urllib.request

    proxies = urllib.request.ProxyHandler() if network else urllib.request.ProxyHandler({})
    return urllib.request.build_opener(proxies, _no_redirect()())


def _content_type(headers: Any) -> str:
    return (headers.get_content_type() or "").lower() if headers.get("Content-Type") else ""


def fetch(url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None, data: bytes | None = None,
          timeout_s: float, max_bytes: int, network: bool, code: str) -> Response:
    """One request (and its redirects) within `timeout_s` overall; raises ProbeError(`code`.…) for a
    redirect it may not follow, and OSError (urllib's URLError is one) for a connection that failed."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    opener = _opener(network)
    redirects: list[str] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no answer within {timeout_s:g}s")
        req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
        try:
            resp = opener.open(req, timeout=remaining)
        except urllib.error.HTTPError as exc:  # a 4xx/5xx (or a 3xx not followed) is still an answer
            resp = exc
        with resp:
            status = int(resp.status if resp.status is not None else resp.code)
            hdrs = resp.headers
            location = hdrs.get("Location")
            if status in _REDIRECTS and location:
                target = urllib.parse.urljoin(url, location)
                # A redirect target may be a signed URL (a token in its query): shown masked.
                here, there = masking.shown(url), masking.shown(target)
                if urllib.parse.urlsplit(target).scheme not in ("http", "https"):
                    raise ProbeError(f"{code}.redirect_refused", f"{here} redirects to {there!r}, which is not "
                                                                 "http or https; not followed")
                if not network and not is_loopback(target):
                    raise ProbeError(f"{code}.redirect_refused",
                                     f"{here} redirects to {there}, off this machine, and the probe may not reach "
                                     "the network; grant `network` in the mode and set `network: true` on the "
                                     "probe to follow it, or request the final URL")
                if len(redirects) >= MAX_REDIRECTS:
                    raise ProbeError(f"{code}.redirect_refused", f"{here}: more than {MAX_REDIRECTS} redirects")
                redirects.append(target)
                if urllib.parse.urlsplit(target).netloc != urllib.parse.urlsplit(url).netloc:
                    # Credentials are for the host they were given for (as curl does): not sent on.
                    headers = {k: v for k, v in (headers or {}).items() if k.lower() != "authorization"}
                if status == 303 or (status in (301, 302) and method == "POST"):
                    method, data = "GET", None  # what browsers and curl do
                url = target
                continue
            sock_timeout = max(deadline - time.monotonic(), 0.001)
            _set_timeout(resp, sock_timeout)
            body = resp.read(max_bytes + 1)
            return Response(status=status, reason=str(resp.reason or ""), headers=list(hdrs.items()),
                            body=body[:max_bytes], truncated=len(body) > max_bytes, url=url,
                            content_type=_content_type(hdrs), redirects=redirects)


def _set_timeout(resp: Any, seconds: float) -> None:
    """Bound the body read by what is left of the deadline (urlopen's timeout covered the connect)."""
    raw = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
    if isinstance(raw, socket.socket):
        raw.settimeout(seconds)


def failure_text(exc: BaseException) -> str:
    """A connection failure in words (`connection refused`, `timed out`), not urllib's repr."""
    reason: Any = getattr(exc, "reason", exc)  # urllib's URLError wraps the socket error
    if isinstance(reason, socket.timeout) or isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host ({reason.strerror or reason})"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror[0].lower() + reason.strerror[1:]
    return str(reason) or type(reason).__name__


def body_json(text: str, content_type: str, truncated: bool) -> tuple[Any, str | None]:
    """(parsed, why not): JSON is read by the one guarded reader, so a body is held to the
    bounds of a facts file (no NaN, no duplicate keys, bounded numbers and nesting)."""
    from policyrun.jsonfile import parse_json

    declared = content_type.endswith("json")
    if not declared and not text.lstrip().startswith(("{", "[")):
        return None, None
    if truncated:
        return None, "the body was cut at max_body_bytes" if declared else None
    try:
        return parse_json(text, "body", what="the body", code="http", max_depth=limits.FACTS_DEPTH), None
    except UsageError as exc:
        return None, (f"line {exc.location.line}, column {exc.location.column}: {exc.message}"
                      if declared and exc.location else exc.message if declared else None)
