"""Serving and deployment probes: http (loopback server in a thread, retries, redirects, the
network permission), python.index (PEP 691 JSON and PEP 503 HTML from a loopback index),
net.ports (a real listening socket), system.disk (statvfs) and docker (a fake CLI printing
Docker's JSON shapes). Nothing here leaves the machine."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.cli import main
from policyrun.collection.run import collect
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.host.disk import DiskProbe
from policyrun.probes.host.dockercli import DockerProbe
from policyrun.probes._kit.httpfetch import is_loopback
from policyrun.probes.host.netports import NetPortsProbe
from policyrun.probes.python.index import PythonIndexProbe, index_url
from policyrun.probes.registry import get
from policyrun.probes.host.webhttp import HttpProbe

DOCKER_DATA = Path(__file__).parent / "data" / "docker"

Route = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]


def handler_for(routes: dict[str, Route], seen: list[tuple[str, str, dict[str, str], bytes]]
                ) -> type[BaseHTTPRequestHandler]:
    """A request handler answering from `routes` (404 elsewhere) and logging each request in `seen`."""

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            route = routes.get(self.path)
            status, headers, out = route(self) if route else (404, {"Content-Type": "text/plain"}, b"not found")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(out)

        do_GET = do_POST = do_HEAD = _any

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, Route], list[tuple[str, str, dict[str, str], bytes]]]]:
    """A loopback HTTP server: (base URL, routes to fill in, requests seen)."""
    routes: dict[str, Route] = {}
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(routes, seen))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", routes, seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _run(probe: Any, tmp_path: Path, params: Mapping[str, Any], *, timeout: float = 30,
         env: Mapping[str, str] | None = None) -> Any:
    value = probe.run(params, ProbeContext(base_dir=tmp_path, timeout_s=timeout, env=dict(env or {}))).value
    jsonschema.Draft202012Validator(probe.fact_schema).validate(value)  # a closed schema lists every field
    jsonschema.Draft202012Validator(probe.params_schema).validate(dict(params))
    return value


def _error(probe: Any, tmp_path: Path, params: Mapping[str, Any], **kw: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        probe.run(params, ProbeContext(base_dir=tmp_path, timeout_s=kw.get("timeout", 30), env=kw.get("env", {})))
    return info.value


def _json(status: int, data: Any, ctype: str = "application/json") -> Route:
    return lambda h: (status, {"Content-Type": ctype}, json.dumps(data).encode())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_new_kinds_are_registered_with_their_side_effects() -> None:
    for kind in ("http", "net.ports", "docker", "system.disk", "python.index"):
        assert get(kind) is not None, kind
    assert HttpProbe().side_effects({"url": "http://127.0.0.1:8000/health"}) == frozenset()
    assert HttpProbe().side_effects({"url": "http://localhost:8000/"}) == frozenset()
    assert HttpProbe().side_effects({"url": "http://[::1]:8000/"}) == frozenset()
    assert HttpProbe().side_effects({"url": "https://api.example.com/v1"}) == {"network"}
    assert HttpProbe().side_effects({"url": "http://127.0.0.1/", "network": True}) == {"network"}
    assert PythonIndexProbe().side_effects({"packages": ["x"]}) == {"network"}
    for probe in (NetPortsProbe(), DiskProbe(), DockerProbe()):
        assert probe.side_effects({}) == frozenset()


@pytest.mark.parametrize(("url", "loop"), [("http://127.0.0.1/", True), ("http://127.8.0.1/", True),
                                           ("http://localhost./", True), ("http://api.localhost/", True),
                                           ("http://[::1]/", True), ("http://10.0.0.1/", False),
                                           ("http://localhost.example.com/", False), ("http://0.0.0.0/", False)])
def test_loopback_is_by_address_or_localhost_name(url: str, loop: bool) -> None:
    assert is_loopback(url) is loop


# --- http -----------------------------------------------------------------------------------------

def test_http_get_reads_status_headers_and_json_body(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    routes["/v1/models"] = lambda h: (200, {"Content-Type": "application/json; charset=utf-8",
                                            "Set-Cookie": "session=abc123", "X-Served-By": "vllm"},
                                      b'{"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B-Instruct"}]}')
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/v1/models", "headers": {"Authorization": "Bearer t0k"}})
    assert (fact["status"], fact["ok"], fact["content_type"]) == (200, True, "application/json")
    assert fact["body"]["json"]["data"][0]["id"] == "Qwen/Qwen2.5-7B-Instruct"
    assert fact["headers"]["x-served-by"] == "vllm"
    assert fact["headers"]["set-cookie"] == "***"  # a cookie is a credential
    assert seen[0][2]["authorization"] == "Bearer t0k"
    assert fact["attempts"] == 1 and fact["redirects"] == [] and fact["final_url"] == f"{base}/v1/models"


def test_http_post_json_and_error_statuses_are_facts(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    routes["/v1/completions"] = _json(400, {"error": {"message": "bad model"}})
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/v1/completions", "method": "POST",
                                        "json": {"model": "m", "prompt": "hi", "max_tokens": 1}})
    assert (fact["status"], fact["ok"]) == (400, False)
    assert fact["body"]["json"] == {"error": {"message": "bad model"}}
    assert seen[0][0] == "POST" and json.loads(seen[0][3]) == {"model": "m", "prompt": "hi", "max_tokens": 1}
    assert seen[0][2]["content-type"] == "application/json"


def test_http_body_json_is_held_to_the_facts_bounds(tmp_path: Path, server: Any) -> None:
    base, routes, _ = server
    routes["/nan"] = lambda h: (200, {"Content-Type": "application/json"}, b'{"score": NaN}')
    routes["/text"] = lambda h: (200, {"Content-Type": "text/plain"}, b"OK")
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/nan"})
    assert fact["body"]["json"] is None and "numbers must be finite" in fact["body"]["json_error"]
    assert fact["body"]["json_error"].startswith("line 1, column 11: ")
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/text"})
    assert (fact["body"]["text"], fact["body"]["json"], fact["body"]["json_error"]) == ("OK", None, None)


def test_http_body_is_bounded(tmp_path: Path, server: Any) -> None:
    base, routes, _ = server
    routes["/big"] = lambda h: (200, {"Content-Type": "application/json"}, b'{"a": "' + b"x" * 5000 + b'"}')
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/big", "max_body_bytes": 100})
    assert fact["body"]["bytes"] == 100 and fact["body"]["truncated"] is True
    assert fact["body"]["json"] is None and fact["body"]["json_error"] == "the body was cut at max_body_bytes"


def test_http_retries_until_the_server_answers(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    answers = iter([503, 503, 200])
    routes["/health"] = lambda h: (next(answers), {}, b"")
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/health", "wait_s": 30, "interval_s": 0.05})
    assert (fact["status"], fact["attempts"]) == (200, 3) and len(seen) == 3


def test_http_without_wait_tries_once_and_reports_the_status(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    routes["/health"] = lambda h: (503, {}, b"loading")
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/health"})
    assert (fact["status"], fact["ok"], fact["attempts"]) == (503, False, 1) and len(seen) == 1


def test_http_unreachable_is_a_failed_fact_after_the_deadline(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/health"
    err = _error(HttpProbe(), tmp_path, {"url": url, "wait_s": 0.3, "interval_s": 0.1})
    assert err.code == "http.unreachable"
    assert err.message.startswith(f"GET {url}: connection refused (after ") and "over 0.3s" in err.message


def test_http_follows_loopback_redirects_but_never_off_the_machine(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    routes["/old"] = lambda h: (302, {"Location": "/new"}, b"")
    routes["/new"] = _json(200, {"ok": True})
    routes["/away"] = lambda h: (302, {"Location": "http://example.com/steal"}, b"")
    fact = _run(HttpProbe(), tmp_path, {"url": f"{base}/old"})
    assert fact["final_url"] == f"{base}/new" and fact["redirects"] == [f"{base}/new"] and fact["body"]["json"]
    err = _error(HttpProbe(), tmp_path, {"url": f"{base}/away"})
    assert err.code == "http.redirect_refused" and "http://example.com/steal" in err.message
    assert "grant `network`" in err.message
    assert [p for _, p, _, _ in seen] == ["/old", "/new", "/away"]  # example.com was never asked


def test_http_ignores_proxies_for_loopback(tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    base, routes, _ = server
    routes["/health"] = lambda h: (200, {}, b"")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:1")  # a proxy that would refuse the connection
    monkeypatch.setenv("no_proxy", "")
    assert _run(HttpProbe(), tmp_path, {"url": f"{base}/health"})["status"] == 200


def test_http_refuses_a_body_without_post_and_bad_urls(tmp_path: Path) -> None:
    assert _error(HttpProbe(), tmp_path, {"url": "http://127.0.0.1:9/", "body": "x"}).code == "http.bad_params"
    assert _error(HttpProbe(), tmp_path, {"url": "file:///etc/passwd"}).code == "http.bad_url"


def _rulebook(probes: dict[str, Any], permissions: dict[str, bool] | None = None) -> Rulebook:
    return Rulebook.model_validate({
        "policyrun": 1, "name": "t", "modes": {"m": {"phases": ["P"], "permissions": permissions or {}}},
        "phases": [{"id": "P"}], "probes": probes})


def test_a_remote_http_probe_is_refused_without_the_network_permission(tmp_path: Path) -> None:
    rb = _rulebook({"remote": {"uses": "http", "with": {"url": "http://192.0.2.1/health", "timeout_s": 0.2}},
                    "index": {"uses": "python.index", "with": {"packages": ["vllm"]}}})
    facts = collect(rb, "m", {}, base_dir=tmp_path).facts
    for pid in ("remote", "index"):
        err = facts[pid].error
        assert err is not None and err.code == "refused.permission" and "'network'" in err.message


# --- python.index -------------------------------------------------------------------------------------

PEP691 = {"meta": {"api-version": "1.1"}, "name": "vllm", "versions": ["0.6.2", "0.6.3", "0.7.0rc1", "0.5.0"],
          "files": [
              {"filename": "vllm-0.5.0.tar.gz", "url": "x", "hashes": {}, "yanked": "broken build"},
              {"filename": "vllm-0.6.2-cp38-abi3-manylinux1_x86_64.whl", "url": "x", "hashes": {},
               "requires-python": ">=3.8"},
              {"filename": "vllm-0.6.3.tar.gz", "url": "x", "hashes": {}, "requires-python": ">=3.9", "yanked": False},
              {"filename": "vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl", "url": "x", "hashes": {},
               "requires-python": ">=3.9"},
              {"filename": "vllm-0.7.0rc1-cp38-abi3-manylinux1_x86_64.whl", "url": "x", "hashes": {}},
              {"filename": "vllm-0.4.0.egg", "url": "x", "hashes": {}}]}

PEP503 = """<!DOCTYPE html><html><body><h1>Links for flash-attn</h1>
<a href="../../files/flash_attn-2.6.3.tar.gz#sha256=ab" data-requires-python="&gt;=3.8">flash_attn-2.6.3.tar.gz</a><br/>
<a href="../../files/flash_attn-2.7.0.post2.tar.gz#sha256=cd" data-requires-python="&gt;=3.9">flash_attn-2.7.0.post2.tar.gz</a><br/>
<a href="../../files/flash_attn-2.5.0.tar.gz" data-yanked="">flash_attn-2.5.0.tar.gz</a><br/>
<a href="../../files/flash_attn-2.5.1.tar.gz" data-yanked="bad wheel tags">flash_attn-2.5.1.tar.gz</a>
</body></html>"""


def _index(routes: dict[str, Route]) -> None:
    routes["/simple/vllm/"] = _json(200, PEP691, "application/vnd.pypi.simple.v1+json")
    routes["/simple/flash-attn/"] = lambda h: (200, {"Content-Type": "text/html"}, PEP503.encode())


def test_python_index_reads_pep_691_json(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    _index(routes)
    fact = _run(PythonIndexProbe(), tmp_path, {"packages": ["vllm"], "index_url": f"{base}/simple"})
    page = fact["packages"]["vllm"]
    assert page["api"] == "json" and page["name"] == "vllm"
    assert page["versions"] == ["0.6.2", "0.6.3", "0.7.0rc1"]
    assert page["yanked"] == ["0.5.0"] and page["latest"] == "0.6.3"
    assert page["requires_python"] == {"0.6.2": ">=3.8", "0.6.3": ">=3.9"}
    assert page["files"] == 6 and fact["missing"] == [] and fact["index_url"] == f"{base}/simple/"
    assert "application/vnd.pypi.simple.v1+json" in seen[0][2]["accept"]


def test_python_index_reads_pep_503_html_and_normalises_names(tmp_path: Path, server: Any) -> None:
    base, routes, seen = server
    _index(routes)
    fact = _run(PythonIndexProbe(), tmp_path, {"packages": ["Flash_Attn", "no-such-pkg"],
                                               "index_url": f"{base}/simple/"})
    page = fact["packages"]["Flash_Attn"]
    assert (page["api"], page["name"]) == ("html", "flash-attn")
    assert page["versions"] == ["2.6.3", "2.7.0.post2"] and page["latest"] == "2.7.0.post2"
    assert page["yanked"] == ["2.5.0", "2.5.1"]
    assert page["requires_python"] == {"2.6.3": ">=3.8", "2.7.0.post2": ">=3.9"}
    assert fact["missing"] == ["no-such-pkg"]
    assert [p for _, p, _, _ in seen] == ["/simple/flash-attn/", "/simple/no-such-pkg/"]


def test_python_index_takes_the_configured_index(tmp_path: Path, server: Any) -> None:
    base, routes, _ = server
    _index(routes)
    assert index_url({}, {}) == "https://pypi.org/simple/"
    assert index_url({}, {"UV_INDEX_URL": "https://mirror/simple"}) == "https://mirror/simple/"
    fact = _run(PythonIndexProbe(), tmp_path, {"packages": ["vllm"]}, env={"PIP_INDEX_URL": f"{base}/simple/"})
    assert fact["packages"]["vllm"]["latest"] == "0.6.3"


def test_python_index_errors_are_failed_facts(tmp_path: Path, server: Any) -> None:
    base, routes, _ = server
    routes["/simple/x/"] = lambda h: (500, {}, b"")
    routes["/simple/big/"] = _json(200, {**PEP691, "pad": "x" * 4096}, "application/vnd.pypi.simple.v1+json")
    routes["/simple/bad/"] = _json(200, {"name": "bad"}, "application/vnd.pypi.simple.v1+json")
    err = _error(PythonIndexProbe(), tmp_path, {"packages": ["x"], "index_url": f"{base}/simple/"})
    assert err.code == "python.index.http_error" and "500" in err.message
    err = _error(PythonIndexProbe(), tmp_path, {"packages": ["big"], "index_url": f"{base}/simple/",
                                                "max_page_bytes": 1024})
    assert err.code == "python.index.too_large"
    err = _error(PythonIndexProbe(), tmp_path, {"packages": ["bad"], "index_url": f"{base}/simple/"})
    assert err.code == "python.index.bad_page"
    err = _error(PythonIndexProbe(), tmp_path, {"packages": ["x"], "index_url": f"http://127.0.0.1:{_free_port()}/"})
    assert err.code == "python.index.unreachable" and "connection refused" in err.message


def test_latest_patch_of_the_current_major_end_to_end(tmp_path: Path, server: Any) -> None:
    """The author's need from issue 21: index versions plus the version functions in a check."""
    base, routes, _ = server
    _index(routes)
    rb = tmp_path / "rb.yaml"
    rb.write_text(f"""policyrun: 1
name: index
inputs:
  current: {{type: string, default: "0.6.2"}}
modes:
  online: {{phases: [PLAN], permissions: {{network: true}}}}
probes:
  idx: {{uses: python.index, with: {{packages: [vllm], index_url: "{base}/simple/"}}}}
derive:
  target:
    value: >
      facts.idx.packages.vllm.versions
        .filter(v, v.version_major() == inputs.current.version_major()
                   && v.version_minor() == inputs.current.version_minor() && v.version_valid())
        .max()
phases:
  - id: PLAN
    evidence:
      - id: on_latest_patch
        check: inputs.current == derived.target
        message: "latest patch is ${{derived.target}}"
""")
    assert main(["evaluate", str(rb), "-q", "--out", str(tmp_path / "o")]) == 1
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    assert trace["phases"][0]["status"] == "FAIL"
    assert "latest patch is 0.6.3" in json.dumps(trace)
    assert main(["evaluate", str(rb), "-q", "--set", "current=0.6.3", "--out", str(tmp_path / "p")]) == 0


# --- net.ports ------------------------------------------------------------------------------------

def test_net_ports_sees_a_listening_socket_and_that_it_cannot_be_bound(tmp_path: Path) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads Linux /proc")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        free = _free_port()
        fact = _run(NetPortsProbe(), tmp_path, {"ports": [busy, free], "host": "127.0.0.1"})
    assert busy in fact["listening_ports"]
    row_busy, row_free = fact["ports"]
    assert row_busy == {"port": busy, "listening": True, "addresses": ["127.0.0.1"], "bindable": False,
                        "bind_error": "address in use"}
    assert row_free["port"] == free and row_free["bindable"] is True and row_free["bind_error"] is None
    assert any(s["port"] == busy and s["address"] == "127.0.0.1" for s in fact["listening"])


def test_net_ports_reads_a_fake_proc(tmp_path: Path) -> None:
    net = tmp_path / "proc" / "net"
    net.mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (net / "tcp").write_text(header + "   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 "
                                      "00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n")
    fact = _run(NetPortsProbe(), tmp_path, {"proc_root": str(tmp_path / "proc")})
    assert fact["listening"] == [{"port": 8000, "address": "0.0.0.0", "family": "ipv4", "inode": 4242, "uid": 1000}]
    assert fact["listening_ports"] == [8000] and fact["ports"] == []


# --- system.disk ----------------------------------------------------------------------------------

def test_system_disk_measures_a_path_and_a_missing_one_at_its_ancestor(tmp_path: Path) -> None:
    fact = _run(DiskProbe(), tmp_path, {"paths": [".", "models/not/yet"]})
    here, missing = fact["paths"]["."], fact["paths"]["models/not/yet"]
    st = os.statvfs(tmp_path)
    assert here["exists"] is True and here["total_bytes"] == st.f_blocks * st.f_frsize
    assert 0 < here["available_bytes"] <= here["free_bytes"] <= here["total_bytes"]
    assert here["used_bytes"] == here["total_bytes"] - here["free_bytes"]
    assert 0 <= here["used_fraction"] <= 1
    assert missing["exists"] is False and missing["measured_at"] == str(tmp_path)
    assert missing["total_bytes"] == here["total_bytes"]


# --- docker ---------------------------------------------------------------------------------------

def _fake_docker(tmp_path: Path, *, fail: str | None = None) -> Path:
    """A `docker` that prints Docker 27's JSON shapes and logs every argv it is given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    data = tmp_path / "docker-data"
    if not data.exists():
        shutil.copytree(DOCKER_DATA, data)
    log = tmp_path / "docker.log"
    failure = ("echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
               "Is the docker daemon running?' >&2; exit 1\n") if fail else ""
    script = f"""#!/bin/sh
echo "$*" >> {log}
{f'[ "$1" = "{fail}" ] && {{ {failure} }}' if fail else ''}
case "$1" in
  version) cat {data}/version.json ;;
  info) cat {data}/info.json ;;
  ps) cat {data}/ps.jsonl ;;
  images) cat {data}/images.jsonl ;;
  inspect) cat {data}/inspect.json ;;
  *) echo "unexpected docker $*" >&2; exit 64 ;;
esac
"""
    exe = bin_dir / "docker"
    exe.write_text(script)
    exe.chmod(0o755)
    return exe


def test_docker_reads_engine_runtimes_images_and_containers(tmp_path: Path) -> None:
    exe = _fake_docker(tmp_path)
    fact = _run(DockerProbe(), tmp_path, {}, env={"PATH": f"{exe.parent}:/usr/bin:/bin"})
    assert (fact["client_version"], fact["server_version"], fact["api_version"]) == ("27.3.1", "27.3.1", "1.47")
    assert fact["runtimes"] == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert (fact["default_runtime"], fact["nvidia_runtime"], fact["gpus"]) == ("runc", True, True)
    assert [i["ref"] for i in fact["images"]] == ["vllm/vllm-openai:v0.6.3", "nvidia/cuda:12.4.1-base-ubuntu22.04"]
    assert fact["images"][0]["digest"] is None
    (c,) = fact["containers"]
    assert (c["name"], c["image"], c["state"], c["gpus"], c["runtime"]) == (
        "vllm-server", "vllm/vllm-openai:v0.6.3", "running", True, "runc")
    assert c["ports"] == [{"container_port": 8000, "protocol": "tcp", "host_ip": "0.0.0.0", "host_port": 8000},
                          {"container_port": 8000, "protocol": "tcp", "host_ip": "::", "host_port": 8000}]
    assert c["mounts"][0] == {"type": "bind", "source": "/data/models", "destination": "/models", "rw": False,
                              "name": None}
    assert c["command"].startswith("python3 -m vllm.entrypoints.openai.api_server")
    # Read-only: nothing but these subcommands ran.
    ran = [line.split()[0] for line in (tmp_path / "docker.log").read_text().splitlines()]
    assert ran == ["version", "info", "images", "ps", "inspect"]


def test_docker_without_containers_skips_inspect_and_include_limits_the_lists(tmp_path: Path) -> None:
    exe = _fake_docker(tmp_path)
    (tmp_path / "docker-data" / "ps.jsonl").write_text("")
    fact = _run(DockerProbe(), tmp_path, {"docker": str(exe), "include": ["containers"]})
    assert fact["containers"] == [] and fact["images"] == []
    ran = [line.split()[0] for line in (tmp_path / "docker.log").read_text().splitlines()]
    assert ran == ["version", "info", "ps"]


def test_docker_failures_are_failed_facts(tmp_path: Path) -> None:
    err = _error(DockerProbe(), tmp_path, {"docker": str(tmp_path / "nope")})
    assert err.code == "docker.not_found"
    exe = _fake_docker(tmp_path, fail="info")
    err = _error(DockerProbe(), tmp_path, {"docker": str(exe)})
    assert err.code == "docker.no_engine" and "Is the docker daemon running?" in err.message
    (tmp_path / "docker-data" / "version.json").write_text("Client: 27.3.1\n")
    exe = _fake_docker(tmp_path)
    err = _error(DockerProbe(), tmp_path, {"docker": str(exe)})
    assert err.code == "docker.bad_output"


def test_probes_command_lists_the_new_kinds() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "policyrun", "probes", "python.index"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("python.index  Versions a package index offers")
    assert "packages.<key>.latest (string|null)" in out and "side effects: network" in out


# --- the documented deployment gate -----------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "probes-serving.md"


def test_documented_deployment_gate_lints_and_runs(tmp_path: Path, server: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from policyrun.language.lint import findings_for
    from policyrun.language.rulebook import load_rulebook

    base, routes, _ = server
    port = int(base.rsplit(":", 1)[1])
    rb = tmp_path / "gate.yaml"
    block = re.search(r"```yaml\n(policyrun: 1\n.*?)```", DOCS.read_text(), re.S)
    assert block is not None
    rb.write_text(block.group(1))
    assert [f for f in findings_for(load_rulebook(rb)) if f.severity == "error"] == []
    exe = _fake_docker(tmp_path)
    inspect = tmp_path / "docker-data" / "inspect.json"
    inspect.write_text(inspect.read_text().replace('"HostPort":"8000"', f'"HostPort":"{port}"'))
    monkeypatch.setenv("PATH", f"{exe.parent}:{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    model = ["--set", "model=Qwen/Qwen2.5-7B-Instruct"]

    free = _free_port()
    args = ["evaluate", str(rb), *model, "--set", f"port={free}", "--set", "min_free_gib=0.001", "-q"]
    assert main([*args, "--mode", "before-start", "--out", "pre"]) == 0
    # The server's port is taken: the gate before start fails on it, naming why.
    assert main(["evaluate", str(rb), *model, "--set", f"port={port}", "--set", "min_free_gib=0.001", "-q",
                 "--mode", "before-start", "--out", "busy"]) == 1
    trace = json.loads((tmp_path / "busy" / "trace.json").read_text())
    assert trace["phases"][0]["blocker"] == f"port {port}: address in use"

    routes["/health"] = lambda h: (200, {}, b"")
    routes["/v1/models"] = _json(200, {"object": "list", "data": [{"id": "Qwen/Qwen2.5-7B-Instruct"}]})
    after = ["evaluate", str(rb), "--set", f"port={port}", "--mode", "after-start", "-q"]
    assert main([*after, *model, "--out", "up"]) == 0
    assert main([*after, "--set", "model=other", "--out", "wrong"]) == 1
    trace = json.loads((tmp_path / "wrong" / "trace.json").read_text())
    serving = next(p for p in trace["phases"] if p["phase"] == "SERVING")
    assert (serving["status"], serving["blocker"]) == ("FAIL", "the server does not serve other")


def test_lint_checks_fact_paths_of_the_new_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text("""\
policyrun: 1
name: paths
modes: {m: {phases: [P], permissions: {network: true}}}
probes:
  health: {uses: http, with: {url: "http://127.0.0.1:8000/health"}}
  idx: {uses: python.index, with: {packages: [vllm]}}
  engine: {uses: docker}
  disk: {uses: system.disk, with: {paths: ["."]}}
  ports: {uses: net.ports, with: {ports: [8000]}}
phases:
  - id: P
    evidence:
      - {id: a, check: "facts.health.staus == 200"}
      - {id: b, check: "facts.idx.packages.vllm.lastest == '1'"}
      - {id: c, check: "facts.engine.containers.exists(c, c.gpu)"}
      - {id: d, check: "facts.disk.paths['.'].free_gib > 1.0"}
      - {id: e, check: "facts.ports.ports.all(p, p.bindable) && facts.health.body.json.anything == 1"}
""")
    assert main(["lint", str(rb)]) == 1
    out = capsys.readouterr().out
    assert "L028 facts.health has no field 'staus'; did you mean 'status'?" in out
    assert "lastest" in out and "did you mean 'latest'?" in out
    assert "did you mean 'gpus'?" in out
    assert "free_gib" in out
    assert out.count("L028") == 4  # body.json is any JSON: its fields are not checked


def test_http_never_writes_a_password_in_the_url(tmp_path: Path) -> None:
    err = _error(HttpProbe(), tmp_path, {"url": f"http://user:s3cretpassword@127.0.0.1:{_free_port()}/x"})
    assert "s3cret" not in err.message and "user:***@127.0.0.1" in err.message
    assert all("s3cret" not in c for c in err.commands)


def test_python_index_credentials_go_to_their_host_only_and_are_never_written(tmp_path: Path, server: Any) -> None:
    import base64

    base, routes, seen = server
    port = base.rsplit(":", 1)[1]
    routes["/simple/vllm/"] = _json(200, PEP691, "application/vnd.pypi.simple.v1+json")
    # A redirect to another host name (localhost is not 127.0.0.1 to a client): the token stays behind.
    routes["/simple/flash-attn/"] = lambda h: (302, {"Location": f"http://localhost:{port}/cdn/flash-attn/"}, b"")
    routes["/cdn/flash-attn/"] = lambda h: (200, {"Content-Type": "text/html"}, PEP503.encode())
    index = f"http://__token__:pypi-s3cretvalue@127.0.0.1:{port}/simple/"
    result = PythonIndexProbe().run({"packages": ["vllm", "flash-attn"], "index_url": index},
                                    ProbeContext(base_dir=tmp_path, timeout_s=30))
    expected = "Basic " + base64.b64encode(b"__token__:pypi-s3cretvalue").decode()
    assert seen[0][2]["authorization"] == expected and seen[1][2]["authorization"] == expected
    assert seen[2][1] == "/cdn/flash-attn/" and "authorization" not in seen[2][2]
    assert result.value["packages"]["flash-attn"]["latest"] == "2.7.0.post2"
    written = json.dumps([result.value, result.commands, result.sources])
    assert "s3cret" not in written and "__token__:***@127.0.0.1" in written
