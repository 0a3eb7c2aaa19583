"""Run by `python.stack` inside the *target* interpreter; prints one JSON object on stdout.

This file is never imported by policyrun: `policyrun.probes.python.stack` reads its text and
runs it with `<python> -c`, so it must work on Python 3.9+ with the standard library only and
must not assume policyrun is installed there. Arguments come as one JSON object in argv[1]:
{"init_cuda": bool}. In a child shared with `python.modules` (`_session_script.py`) the same
work is `answer(args, reply)`.

stdout is reserved for the result: file descriptor 1 is pointed at stderr while torch loads
(native libraries print banners and warnings through fd 1) and restored for the final write.

Without init_cuda nothing here touches a GPU: versions come from the libraries' version calls,
the arch list from the compile-time flags, and vLLM is located and hashed without importing it.

policyrun runs it with `-I` from an empty directory, so neither the directory under audit nor
PYTHONPATH is on sys.path. The path is cleaned again below before any other import, in case
someone runs the script by hand: a `json.py` or a `vllm/` checkout in the working directory must
not be what gets imported.
"""

from __future__ import annotations

import os  # already loaded by the interpreter's startup, like sys: nothing is looked up on sys.path
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

import hashlib  # noqa: E402
import importlib.metadata as metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import traceback  # noqa: E402
from typing import Any, Callable, Optional  # noqa: E402


def _error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _dist_version(name: str) -> Optional[str]:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _direct_url(name: str) -> Optional[dict[str, Any]]:
    """PEP 610 direct_url.json: how the package was installed (editable, from a path, a VCS)."""
    try:
        text = metadata.distribution(name).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return {"url": data.get("url"), "editable": bool((data.get("dir_info") or {}).get("editable", False)),
            "commit": (data.get("vcs_info") or {}).get("commit_id")}


def _cudnn_text(v: Any) -> Optional[str]:
    if not isinstance(v, int) or v <= 0:
        return None
    # cuDNN 9 encodes major*10000+minor*100+patch; cuDNN 8 and older major*1000+minor*100+patch.
    if v >= 90000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def _nccl_text(v: Any) -> Optional[str]:
    if isinstance(v, (tuple, list)):
        # torch.cuda.nccl.version(): (major, minor, patch) or (major, minor, patch, suffix)
        text = ".".join(str(p) for p in v[:3])
        suffix = v[3] if len(v) > 3 else ""
        if isinstance(suffix, bytes):
            suffix = suffix.decode("utf-8", "replace")
        return text + ("-" + suffix if suffix else "")
    if isinstance(v, int) and v > 0:
        # NCCL_VERSION_CODE: major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before.
        if v >= 20900:
            return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
        return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)
    return None


def _torch(out: dict[str, Any], init_cuda: bool) -> None:
    try:
        import torch  # type: ignore[import-not-found]
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            out["missing"].append("torch")
            return
        out["import_errors"]["torch"] = _error_text(exc)
        return
    except Exception as exc:  # a broken install (e.g. a missing libcudnn) is a finding, not a crash
        out["import_errors"]["torch"] = _error_text(exc)
        return

    t: dict[str, Any] = {"version": getattr(torch, "__version__", None),
                         "path": os.path.dirname(os.path.abspath(torch.__file__))}
    version = getattr(torch, "version", None)
    t["cuda"] = getattr(version, "cuda", None)
    t["hip"] = getattr(version, "hip", None)
    t["git_version"] = getattr(version, "git_version", None)
    t["debug"] = getattr(version, "debug", None)
    warnings = out["warnings"]

    def attempt(key: str, fn: Callable[[], Any], convert: Optional[Callable[[Any], Any]] = None) -> Any:
        try:
            value = fn()
        except Exception as exc:
            t[key] = None
            warnings.append("torch %s: %s" % (key, _error_text(exc)))
            return None
        t[key] = convert(value) if convert else value
        return value

    attempt("cxx11_abi", lambda: bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    raw = attempt("cudnn", lambda: torch.backends.cudnn.version(), _cudnn_text)
    t["cudnn_version_int"] = raw if isinstance(raw, int) else None
    attempt("nccl", lambda: torch.cuda.nccl.version(), _nccl_text)
    # torch.cuda.get_arch_list() first calls is_available(), which initialises the CUDA driver;
    # the compile-time flags it then reads are available without that.
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    if flags is not None:
        attempt("arch_list", lambda: (flags() or "").split())
    else:
        t["arch_list"] = []
    t["cuda_initialized"] = None

    if init_cuda:
        cuda: dict[str, Any] = {"available": None, "device_count": None, "devices": [], "arch_list": None}
        try:
            cuda["available"] = bool(torch.cuda.is_available())
            cuda["device_count"] = int(torch.cuda.device_count())
            for i in range(cuda["device_count"]):
                major, minor = torch.cuda.get_device_capability(i)
                cuda["devices"].append({"index": i, "name": torch.cuda.get_device_name(i),
                                        "capability": "%d.%d" % (major, minor)})
            cuda["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as exc:
            cuda["error"] = _error_text(exc)
        out["cuda"] = cuda
    try:
        t["cuda_initialized"] = bool(torch.cuda.is_initialized())
    except Exception:
        pass
    out["torch"] = t


def _vllm(out: dict[str, Any]) -> None:
    version = _dist_version("vllm")
    try:
        spec = importlib.util.find_spec("vllm")  # locates the package without running __init__
    except (ImportError, ValueError) as exc:
        spec = None
        out["warnings"].append("vllm find_spec: %s" % _error_text(exc))
    if version is None and spec is None:
        out["missing"].append("vllm")
        return
    path = None
    if spec is not None and spec.submodule_search_locations:
        path = os.path.abspath(list(spec.submodule_search_locations)[0])
    v: dict[str, Any] = {"version": version, "path": path, "direct_url": _direct_url("vllm"),
         "commit": None, "extension": None, "extensions": []}
    if version and "+g" in version:  # setuptools-scm: 0.9.2.dev123+g1a2b3c4d.cu128
        v["commit"] = version.split("+g", 1)[1].split(".", 1)[0]
    if path and os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.startswith("_C") and n.endswith(".so"))
        for n in names:
            p = os.path.join(path, n)
            try:
                v["extensions"].append({"name": n, "path": p, "size": os.path.getsize(p), "sha256": _sha256(p)})
            except OSError as exc:
                out["warnings"].append("vllm %s: %s" % (n, _error_text(exc)))
        main = [e for e in v["extensions"] if e["name"] == "_C.abi3.so"] or v["extensions"][:1]
        v["extension"] = main[0] if main else None
    out["vllm"] = v


def stack(args: dict[str, Any]) -> dict[str, Any]:
    """The stack as one JSON-ready object."""
    out: dict[str, Any] = {
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
            "prefix": sys.prefix,
            "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "platform": sys.platform,
            "machine": platform.machine(),
            "libc": "-".join(p for p in platform.libc_ver() if p) or None,
        },
        "torch": None,
        "vllm": None,
        "cuda": None,
        "missing": [],
        "import_errors": {},
        "warnings": [],
    }
    _torch(out, bool(args.get("init_cuda")))
    _vllm(out)
    return out


def answer(args: dict[str, Any], reply: Callable[[dict[str, Any]], None]) -> None:
    """One request of a child shared with other probes (`_session_script.py`)."""
    reply(stack(args))


def main() -> None:
    args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    result_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)  # anything printed while libraries load goes to stderr
    out = stack(args)
    sys.stdout.flush()
    data = (json.dumps(out, sort_keys=True) + "\n").encode("utf-8")
    while data:
        data = data[os.write(result_fd, data):]
    os.close(result_fd)


if __name__ == "__main__":
    main()
