"""Every probe kind's fact schema against what the probe really emits (issue 21, item 1).

Type-aware lint (L028/L029) reads the fact schemas, and an object that lists `properties` is closed
to it. A field the probe emits but the schema does not list makes lint reject a rulebook written
from the docs (`L028 facts.target.python has no field 'prefix'`). So each kind that can run here
runs on fixtures (repository probes on the flagship's fixture repositories, NVML on the faithful
fakes, python.stack on a fake torch/vLLM site and the recorded H200 output) and every stored
snapshot under examples/ and rulebooks/tests/ (real H200 facts among them) is validated the same
way (tests/factschema.py). The real-corpus tier does the same on the real afd-plugin
(tests/real/test_fact_schemas_real.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policyrun.probes.base import ProbeError
from policyrun.probes.registry import registry
from tests import afdfixtures as fx
from tests.factschema import problems, snapshot_problems
from tests.gitfixtures import history_repo, run_probe

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = sorted(p for p in [*ROOT.glob("examples/**/*.json"), *ROOT.glob("rulebooks/tests/*.json")]
                   if "expected" not in p.parts and "runner" not in p.parts)


@pytest.mark.parametrize("path", SNAPSHOTS, ids=[str(p.relative_to(ROOT)) for p in SNAPSHOTS])
def test_stored_snapshots_fit_their_kinds_fact_schemas(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or "policyrun_facts" not in doc:
        pytest.skip("not a facts file")
    assert snapshot_problems(doc["facts"]) == []


def test_the_real_h200_snapshots_are_among_them() -> None:
    names = {str(p.relative_to(ROOT)) for p in SNAPSHOTS}
    assert {"examples/h200/facts.json", "examples/gpu-node-preflight-h200/facts.json"} <= names


# --- live runs --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flagship_values(tmp_path_factory: pytest.TempPathFactory, afd_repos: fx.FixtureRepos) -> dict[str, list[Any]]:
    """Every value the flagship's probes collect on the fixture repositories, in planning and final
    validation (the machine probes run on this machine; NVML fails here and is checked on fakes)."""
    out: dict[str, list[Any]] = {}
    for name in ("planning", "final"):
        sc = fx.SNAPSHOTS[name]
        ws = fx.workspace(tmp_path_factory.mktemp(name), post=sc.post, repos=afd_repos)
        fx.write_evidence(sc, ws, ws.evidence, fx.machine_facts(sc.gpus)["gpu"])
        snap = fx.collect_facts(sc.mode, fx.scenario_inputs(sc, ws, str(ws.evidence), sys.executable),
                                cwd=ws.plugin.path)
        for fact in snap.facts.values():
            if fact.ok:
                out.setdefault(fact.provenance.kind, []).append(fact.value)
    return out


Value = tuple[str, Any]  # (probe kind, a value it emitted)


def _run(kind: str, params: dict[str, Any], base: Path, timeout_s: float = 30) -> Value:
    return kind, run_probe(kind, params, base, timeout_s).value


def _git(tmp: Path) -> list[Value]:
    repo = history_repo(tmp / "repo")
    (repo.path / "README.md").write_text("changed in the work tree\n")
    (repo.path / "untracked.txt").write_text("new\n")
    workflows = repo.path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text(
        "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - uses: actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065\n"
        "      - run: |\n          pip install .\n          pytest\n")
    return [_run("git.show", {"path": str(repo.path), "rev": "v1", "file": "README.md"}, tmp),
            _run("git.worktrees", {"path": str(repo.path)}, tmp),
            _run("git.worktree_diff", {"path": str(repo.path)}, tmp),
            _run("ci.workflows", {"root": str(repo.path)}, tmp)]


def _files(tmp: Path) -> list[Value]:
    (tmp / "doc.yaml").write_text("a: 1\nb: [x]\n")
    (tmp / "results.json").write_text(json.dumps({"results": {"gsm8k": {"acc": 0.5}}}))
    (tmp / "consts.py").write_text('TARGET: str = "1.2.3"\n')
    return [_run("file.read", {"path": "doc.yaml"}, tmp), _run("results", {"path": "results.json"}, tmp),
            _run("pins.constant", {"file": "consts.py", "name": "TARGET"}, tmp)]


def _host(tmp: Path) -> list[Value]:
    (tmp / "dir").mkdir()
    (tmp / "dir" / "f.txt").write_text("x")
    (tmp / "link").symlink_to("dir")
    return [_run("command", {"argv": [sys.executable, "-c", "print('hi')"]}, tmp),
            _run("command", {"argv": [sys.executable, "-c", "import sys; sys.exit(3)"], "ok_exit_codes": [3]}, tmp),
            _run("env", {"names": ["PATH", "POLICYRUN_NOT_SET_X"]}, tmp),
            _run("path", {"paths": ["dir", "link", "nope"], "root": str(tmp), "list": ["dir/*"]}, tmp)]


def _search(tmp: Path) -> list[Value]:
    (tmp / "a.txt").write_text("vllm==0.9.1\nnothing\n")
    return [_run("search.literal", {"root": str(tmp), "pattern": "vllm=="}, tmp),
            _run("search.regex", {"root": str(tmp), "pattern": r"vllm==([0-9.]+)", "group": 1}, tmp)]


def _junit(tmp: Path) -> list[Value]:
    (tmp / "skips.xml").write_text(fx.junit_xml(fx.E2E_UNEXPLAINED_SKIP))
    out = []
    for sample in [*sorted((ROOT / "tests" / "data" / "junit").iterdir()), tmp / "skips.xml"]:
        try:
            out.append(_run("tests.junit", {"path": str(sample)}, tmp))
        except ProbeError:
            continue  # the hostile samples are refused: a refusal has no value to check
    return out


def _nvml(tmp: Path) -> list[Value]:
    from tests.fakes import fake_pynvml as fake

    out = []
    saved = sys.modules.get("pynvml")
    try:
        for machine in (fake.one_h200(), fake.h200_passthrough(), fake.hgx_h200(), fake.h100_nvl_pair(),
                        fake.workstation_card()):
            sys.modules["pynvml"] = fake.make_module(machine)
            out.append(_run("gpu.nvml", {}, tmp))
    finally:
        if saved is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved
    return out


def _stack(tmp: Path) -> list[Value]:
    from tests.fakes import stack_site

    site = stack_site.write_site(tmp / "site", tmp / "marker")
    python = str(stack_site.make_venv(tmp / "venv", site, with_pip=False))
    return [_run("python.stack", {"python": python, "pip_check": False}, tmp, 120),
            _run("python.stack", {"python": python, "pip_check": False, "init_cuda": True}, tmp, 120),
            _run("python.modules", {"python": python, "modules": ["json", "vllm", "torch", "no_such_module_x"]},
                 tmp, 120)]


def _const(tmp: Path) -> list[Value]:
    return [_run("const", {"value": {"any": ["thing"]}}, tmp)]


def _bindings(tmp: Path) -> list[Value]:
    """python.bindings (and python.imports' fallbacks) over tests/test_pybindings.py's fixture."""
    from tests import test_pybindings as tb
    from tests.gitfixtures import init_repo

    up = init_repo(tmp / "up")
    for rel, text in tb.UP_V1.items():
        up.write(rel, text)
    up.commit("v1")
    up.git("tag", "v1")
    up.git("rm", "-q", "up/old_place.py")
    for rel, text in tb._v2(tb.UP_V1).items():
        up.write(rel, text)
    up.commit("v2")
    up.git("tag", "v2")
    plugin = init_repo(tmp / "plugin")
    plugin.write("plug/main.py", tb.PLUGIN)
    plugin.commit("init")
    resolve = {"path": str(up.path), "rev": "v1", "compare_rev": "v2"}
    return [(kind, run_probe(kind, {"root": str(plugin.path), "resolve": resolve}, tmp).value)
            for kind in ("python.bindings", "python.imports")]


def _serving(tmp: Path) -> list[Value]:
    """The serving kinds against what tests/test_serving_probes.py serves them: a loopback HTTP
    server and package index, a fake `docker` printing Docker's JSON shapes."""
    import socket
    import threading
    from http.server import ThreadingHTTPServer

    from policyrun.probes.base import ProbeContext
    from policyrun.probes.registry import get
    from tests import test_serving_probes as serving

    routes: dict[str, Any] = {"/health": serving._json(200, {"status": "ok", "models": ["m"]})}
    serving._index(routes)
    handler = serving.handler_for(routes, [])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    docker = serving._fake_docker(tmp)
    try:
        docker_probe = get("docker")
        assert docker_probe is not None
        docker_value = docker_probe.run({}, ProbeContext(base_dir=tmp, timeout_s=30,
                                                         env={"PATH": f"{docker.parent}:/usr/bin:/bin"})).value
        return [_run("http", {"url": f"{base}/health"}, tmp),
                _run("python.index", {"packages": ["vllm", "flash-attn", "nope"], "index_url": f"{base}/simple"}, tmp),
                _run("net.ports", {"ports": [listening.getsockname()[1]], "host": "127.0.0.1"}, tmp),
                _run("system.disk", {"paths": [str(tmp), "not/yet"]}, tmp), ("docker", docker_value)]
    finally:
        listening.close()
        httpd.shutdown()
        httpd.server_close()


def _record(tmp: Path) -> list[Value]:
    """python.record over a distribution written the way tests/test_record_probe.py installs one."""
    import subprocess

    from tests import test_record_probe as rec
    from tests.gitfixtures import init_repo

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    rec.install(venv, rec.SOURCES, direct_url='{"url": "https://example.invalid/vllm.whl", "archive_info": {}}')
    repo = init_repo(tmp / "vllm-src")
    for rel, text in rec.SOURCES.items():
        repo.write(rel, text)
    repo.commit("v0.27.0")
    repo.git("tag", "v0.27.0")
    return [("python.record", rec.record(venv, repo.path)),
            ("python.record", rec.record(venv, repo.path, distribution="not-installed-dist"))]


EXTRA: dict[str, Callable[[Path], list[Value]]] = {"record": _record, "git": _git, "files": _files, "host": _host, "search": _search,
                                                   "junit": _junit, "nvml": _nvml, "stack": _stack, "const": _const,
                                                   "serving": _serving, "bindings": _bindings}


@pytest.fixture(scope="module")
def kinds_values(flagship_values: dict[str, list[Any]], tmp_path_factory: pytest.TempPathFactory
                 ) -> dict[str, list[Any]]:
    out = {k: list(v) for k, v in flagship_values.items()}
    for name, run in EXTRA.items():
        for kind, value in run(tmp_path_factory.mktemp(name)):
            out.setdefault(kind, []).append(value)
    return out


@pytest.mark.parametrize("kind", sorted(registry()))
def test_every_emitted_field_is_in_the_kinds_fact_schema(kind: str, kinds_values: dict[str, list[Any]]) -> None:
    values = kinds_values.get(kind)
    assert values, f"no probe run produced a {kind} value to check; add one to tests/test_fact_schemas.py"
    found = [p for v in values for p in problems(kind, v)]
    assert found == []


def test_the_flagship_collection_ran_its_repository_probes(flagship_values: dict[str, list[Any]]) -> None:
    """The live check above is only as good as what ran: the repository probes all produced values."""
    for kind in ("git.repo", "git.resolve", "git.diff", "git.log", "git.ancestry", "search.regex", "pins.package",
                 "markers", "docs.claims", "python.imports", "python.symbols", "python.constants", "attestation",
                 "tests.junit", "python.stack", "system.ports", "system.processes", "system.shm", "toolchain"):
        assert flagship_values.get(kind), kind


def test_a_closed_object_is_checked_field_by_field() -> None:
    """The helper itself: a field the schema does not list is reported, as lint would (L028)."""
    stack = {"python": {"version": "3.12.1", "prefixx": "/usr"}}
    assert problems("python.stack", stack) == [
        "python.stack python: Additional properties are not allowed ('prefixx' was unexpected)"]
    assert problems("results", {"results": {"gsm8k": {}}, "_file": {"path": "r.json"}}) == []
