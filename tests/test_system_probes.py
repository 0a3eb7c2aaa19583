"""system.processes / system.ports / system.shm on fake /proc and /dev/shm trees, then on the
real ones with a process, a socket and a segment the test creates."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from policyrun.probes import registry
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.host.system import PortsProbe, ProcessesProbe, ShmProbe

TCP_HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
              "inode\n")
TCP6_HEADER = ("  sl  local_address                         remote_address                        st tx_queue "
               "rx_queue tr tm->when retrnsmt   uid  timeout inode\n")


def _tcp_line(n: int, local: str, remote: str, state: str, uid: int, inode: int) -> str:
    return (f"  {n:2d}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 {uid:5d}        0 "
            f"{inode} 1 0000000000000000 100 0 0 10 0\n")


def _proc(root: Path, pid: int, argv: list[str], ppid: int = 1, uid: int = 0, comm: str = "x") -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0\n")
    (d / "status").write_text(f"Name:\t{comm}\nState:\tS (sleeping)\nPid:\t{pid}\nPPid:\t{ppid}\n"
                              f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n")


@pytest.fixture
def fake_proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    me = os.getpid()
    _proc(root, 100, ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--port", "8000"], uid=0, comm="vllm")
    _proc(root, 101, ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8001"])
    _proc(root, 102, [], comm="kworker/0:1")  # kernel thread: empty cmdline
    (root / "102" / "cmdline").write_bytes(b"")
    _proc(root, me, ["policyrun", "evaluate", "--set", "pattern=vllm serve"], comm="policyrun")
    _proc(root, 103, ["bash", "-c", "vllm serve x"], ppid=me, comm="bash")  # our child
    _proc(root, 104, ["python", "-c", "vllm serve"], ppid=103, comm="py (we) ird)")  # grandchild
    _proc(root, 105, ["ray::RayWorkerWrapper", "vllm serve worker"], ppid=100, uid=4242, comm="ray::Wor")
    (root / "self").mkdir()
    (root / "net").mkdir()
    (root / "net" / "tcp").write_text(
        TCP_HEADER
        + _tcp_line(0, "0100007F:1F40", "00000000:0000", "0A", 1000, 424242)  # 127.0.0.1:8000 LISTEN
        + _tcp_line(1, "00000000:733C", "00000000:0000", "0A", 0, 424243)  # 0.0.0.0:29500 LISTEN
        + _tcp_line(2, "0100007F:1F40", "0100007F:C350", "01", 1000, 0)  # established, not listening
        + _tcp_line(3, "00000000:0016", "00000000:0000", "0A", 0, 1111))  # :22
    (root / "net" / "tcp6").write_text(
        TCP6_HEADER
        + _tcp_line(0, "00000000000000000000000000000000:1F40", "00000000000000000000000000000000:0000", "0A",
                    1000, 515151)  # [::]:8000
        + _tcp_line(1, "00000000000000000000000001000000:1F42", "00000000000000000000000000000000:0000", "0A",
                    1000, 515152)  # [::1]:8002
        + _tcp_line(2, "0000000000000000FFFF00000100007F:1F43", "00000000000000000000000000000000:0000", "0A",
                    1000, 515153))  # [::ffff:127.0.0.1]:8003
    return root


def _ctx(tmp_path: Path) -> ProbeContext:
    return ProbeContext(base_dir=tmp_path, timeout_s=10)


def test_registered() -> None:
    for kind in ("system.processes", "system.ports", "system.shm"):
        probe = registry.get(kind)
        assert probe is not None and probe.side_effects({}) == frozenset()


def test_processes_fake_tree(fake_proc: Path, tmp_path: Path) -> None:
    v = ProcessesProbe().run({"pattern": "vllm serve", "proc_root": str(fake_proc)}, _ctx(tmp_path)).value
    # policyrun itself (its command line holds the pattern) and its descendants are left out
    assert [m["pid"] for m in v["matches"]] == [100, 105] and v["count"] == 2
    assert v["matches"][0] == {"pid": 100, "ppid": 1, "cmdline": "vllm serve meta-llama/Llama-3.1-8B --port 8000",
                               "user": "root", "uid": 0}
    assert v["matches"][1]["ppid"] == 100 and v["matches"][1]["uid"] == 4242


def test_processes_include_self_and_weird_comm(fake_proc: Path, tmp_path: Path) -> None:
    v = ProcessesProbe().run({"pattern": r"vllm\s+serve", "proc_root": str(fake_proc), "exclude_self": False},
                             _ctx(tmp_path)).value
    assert [m["pid"] for m in v["matches"]] == sorted([100, 103, 104, 105, os.getpid()])
    assert next(m for m in v["matches"] if m["pid"] == 104)["ppid"] == 103  # comm with ") " parsed


def test_processes_bad_pattern(fake_proc: Path, tmp_path: Path) -> None:
    with pytest.raises(ProbeError) as info:
        ProcessesProbe().run({"pattern": "vllm (serve", "proc_root": str(fake_proc)}, _ctx(tmp_path))
    assert info.value.code == "system.bad_pattern"


def test_missing_proc_root(tmp_path: Path) -> None:
    with pytest.raises(ProbeError) as info:
        PortsProbe().run({"proc_root": str(tmp_path / "nope")}, _ctx(tmp_path))
    assert info.value.code == "system.unsupported"


@pytest.mark.skipif(sys.byteorder != "little", reason="fake /proc/net/tcp is written for a little-endian host")
def test_ports_fake_tree(fake_proc: Path, tmp_path: Path) -> None:
    v = PortsProbe().run({"range": [8000, 8999], "proc_root": str(fake_proc)}, _ctx(tmp_path)).value
    assert v["ports"] == [8000, 8002, 8003] and v["count"] == 4
    assert v["listening"] == [
        {"port": 8000, "address": "127.0.0.1", "family": "ipv4", "inode": 424242, "uid": 1000},
        {"port": 8000, "address": "::", "family": "ipv6", "inode": 515151, "uid": 1000},
        {"port": 8002, "address": "::1", "family": "ipv6", "inode": 515152, "uid": 1000},
        {"port": 8003, "address": "::ffff:7f00:1", "family": "ipv6", "inode": 515153, "uid": 1000},
    ]
    everything = PortsProbe().run({"proc_root": str(fake_proc)}, _ctx(tmp_path)).value
    assert everything["ports"] == [22, 8000, 8002, 8003, 29500]


def test_ports_without_tcp6(fake_proc: Path, tmp_path: Path) -> None:
    (fake_proc / "net" / "tcp6").unlink()
    v = PortsProbe().run({"range": [29500, 29500], "proc_root": str(fake_proc)}, _ctx(tmp_path)).value
    assert v["listening"] == [{"port": 29500, "address": "0.0.0.0", "family": "ipv4", "inode": 424243, "uid": 0}]


def test_ports_bad_range(fake_proc: Path, tmp_path: Path) -> None:
    with pytest.raises(ProbeError) as info:
        PortsProbe().run({"range": [9000, 8000], "proc_root": str(fake_proc)}, _ctx(tmp_path))
    assert info.value.code == "system.bad_range"


def test_shm_fake_tree(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    (shm / "nccl-a1b2c3").write_bytes(b"\0" * 4096)
    (shm / "nccl-d4e5f6").write_bytes(b"\0" * 100)
    (shm / "psm_0f3c9a1e").write_bytes(b"\0" * 10)
    (shm / "sem.mp-1234").write_bytes(b"\0" * 32)
    (shm / "vllm-dir").mkdir()
    ctx = _ctx(tmp_path)
    v = ShmProbe().run({"pattern": "nccl-*", "shm_root": str(shm)}, ctx).value
    assert [e["name"] for e in v["entries"]] == ["nccl-a1b2c3", "nccl-d4e5f6"]
    assert v["count"] == 2 and v["total_size"] == 4196 and v["entries"][0]["type"] == "file"
    v = ShmProbe().run({"regex": r"^(psm_|vllm)", "shm_root": str(shm)}, ctx).value
    assert [(e["name"], e["type"]) for e in v["entries"]] == [("psm_0f3c9a1e", "file"), ("vllm-dir", "dir")]
    assert ShmProbe().run({"shm_root": str(shm)}, ctx).value["count"] == 5
    with pytest.raises(ProbeError) as info:
        ShmProbe().run({"shm_root": str(tmp_path / "none")}, ctx)
    assert info.value.code == "system.unsupported"


# --- the real system ----------------------------------------------------------------------------
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
def test_processes_real(tmp_path: Path) -> None:
    marker = f"policyrun-test-marker-{uuid.uuid4().hex}"
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60)", marker])
    try:
        ctx = _ctx(tmp_path)
        own = ProcessesProbe().run({"pattern": marker}, ctx).value
        assert own["count"] == 0  # our own child: excluded by default
        v = ProcessesProbe().run({"pattern": marker, "exclude_self": False}, ctx).value
        assert [m["pid"] for m in v["matches"]] == [child.pid]
        assert v["matches"][0]["ppid"] == os.getpid() and marker in v["matches"][0]["cmdline"]
        assert v["matches"][0]["uid"] == os.getuid()
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_ports_real(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        before = PortsProbe().run({"range": [port, port]}, _ctx(tmp_path)).value
        assert before["count"] == 0  # bound, not listening
        s.listen()
        v = PortsProbe().run({"range": [port, port]}, _ctx(tmp_path)).value
        assert v["ports"] == [port]
        assert v["listening"][0]["address"] == "127.0.0.1" and v["listening"][0]["uid"] == os.getuid()


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_shm_real(tmp_path: Path) -> None:
    name = f"policyrun-test-{uuid.uuid4().hex}"
    path = Path("/dev/shm") / name
    path.write_bytes(b"x" * 123)
    try:
        v = ShmProbe().run({"pattern": "policyrun-test-*"}, _ctx(tmp_path)).value
        assert {"name": name, "size": 123, "type": "file"}.items() <= next(
            e for e in v["entries"] if e["name"] == name).items()
    finally:
        path.unlink()
    assert name not in [e["name"] for e in ShmProbe().run({"pattern": "policyrun-test-*"}, _ctx(tmp_path)).value["entries"]]
