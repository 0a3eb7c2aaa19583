"""Run by `python.modules` inside the *target* interpreter; prints one JSON object on stdout.

Like `_stack_script.py`, this file is never imported by policyrun: its text runs with
`<python> -I -B -c`, so it must work on Python 3.9+ with the standard library only. Arguments come
as one JSON object in argv[1]: {"modules": [names], "budget_s": seconds}. In a child shared with
`python.stack` (`_session_script.py`) the same work is `answer(args, reply)`.

Each module is imported in the main thread (some modules install signal handlers on import, which
only the main thread may do). A watchdog thread writes what is known when the budget runs out —
the module being imported as timed out, the rest as not attempted — and ends the process, so a
hanging import still yields a result for the others. The result is written straight to the saved
stdout descriptor and the process ends with os._exit: a module's non-daemon threads or atexit
handlers cannot hold the interpreter open, and its prints went to stderr (fd 1 is pointed there).
"""

from __future__ import annotations

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

import importlib  # noqa: E402
import importlib.metadata as metadata  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: E402

_packages: Optional[Dict[str, List[str]]] = None


def _text(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _first_line(exc: BaseException) -> str:
    lines = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _distributions(top: str) -> List[str]:
    global _packages
    if _packages is None:
        finder = getattr(metadata, "packages_distributions", None)  # Python 3.10+
        try:
            _packages = dict(finder()) if finder else {}
        except Exception:
            _packages = {}
    return sorted(set(_packages.get(top, [])))


def _owner(dists: List[str], location: Optional[str]) -> Optional[str]:
    """The one distribution among several (a namespace package) whose files hold `location`."""
    if not location:
        return None
    target = os.path.realpath(location)
    for name in dists:
        try:
            files = metadata.distribution(name).files or []
        except Exception:
            continue
        for f in files:
            if os.path.realpath(str(f.locate())) == target:
                return name
    return None


def _version(name: str, module: Any, location: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    top = name.split(".")[0]
    dists = _distributions(top)
    dist = dists[0] if len(dists) == 1 else _owner(dists, location) if dists else top
    if dist is not None:
        try:
            return metadata.version(dist), dist
        except Exception:
            pass
    version = getattr(module, "__version__", None)
    return (version if isinstance(version, str) else None), None


def _location(module: Any) -> Optional[str]:
    path = getattr(module, "__file__", None)
    if isinstance(path, str):
        return _text(os.path.abspath(path))
    paths = list(getattr(module, "__path__", None) or [])  # a namespace package has no __file__
    return _text(os.path.abspath(paths[0])) if paths and isinstance(paths[0], str) else None


def _inspect(name: str) -> Dict[str, Any]:
    try:
        module = importlib.import_module(name)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt raised by a module's code included
        return {"importable": False, "version": None, "distribution": None, "location": None,
                "error": _first_line(exc), "error_type": type(exc).__name__}
    location = _location(module)
    try:
        version, dist = _version(name, module, location)
    except Exception:
        version, dist = None, None
    return {"importable": True, "version": version, "distribution": dist, "location": location,
            "error": None, "error_type": None}


def answer(args: Dict[str, Any], reply: Callable[[Dict[str, Any]], None]) -> None:
    """Import each module and `reply` with the result once. When the budget runs out, the watchdog
    replies with what is known and ends the process (a hanging import cannot be abandoned)."""
    names: List[str] = list(args["modules"])
    budget = float(args["budget_s"])
    results: Dict[str, Any] = {}
    state: Dict[str, Any] = {"current": None, "done": False}
    lock = threading.Lock()

    def result() -> Dict[str, Any]:
        return {"python_version": platform.python_version(), "modules": results}

    def watchdog() -> None:
        time.sleep(budget)
        lock.acquire()
        if state["done"]:  # answered in time; the process may be answering another request now
            lock.release()
            return
        current = state["current"]
        for name in names:
            if name in results:
                continue
            why = ("TimeoutError: import did not finish within %gs" % budget if name == current
                   else "TimeoutError: not attempted: the import of %r did not finish" % current)
            results[name] = {"importable": False, "version": None, "distribution": None, "location": None,
                             "error": why, "error_type": "TimeoutError"}
        reply(result())
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    for name in names:
        with lock:
            state["current"] = name
        found = _inspect(name)
        with lock:
            results[name] = found
    with lock:
        state["done"] = True
        reply(result())


def main() -> None:
    args = json.loads(sys.argv[1])
    result_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)  # anything a module prints goes to stderr

    def reply(out: Dict[str, Any]) -> None:  # the one answer; never returns
        data = (json.dumps(out, sort_keys=True) + "\n").encode("utf-8")
        while data:
            data = data[os.write(result_fd, data):]
        os._exit(0)

    answer(args, reply)


if __name__ == "__main__":
    main()
