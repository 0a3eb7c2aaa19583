"""Run inside the *target* interpreter when one collection asks it several questions.

`python.stack` and `python.modules` both import torch in the interpreter they inspect (seconds
each). Within one collection they share this one child (policyrun.probes.python.session): it reads
requests from stdin, one JSON object a line, {"name": file name, "script": source of
`_stack_script.py` or `_modules_script.py`, "args": {...}}, runs the script's `answer(args, reply)`
in a fresh namespace, and each answer is one JSON line on stdout. It ends when stdin closes.

Like the scripts it runs, this file is never imported by policyrun: its text runs with
`<python> -I -B -c`, so it must work on Python 3.9+ with the standard library only. stdout is
reserved for answers: file descriptor 1 is pointed at stderr (native libraries print banners
through it) and the answers are written to the saved descriptor.
"""

from __future__ import annotations

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

import json  # noqa: E402
from typing import Any, Dict  # noqa: E402


def main() -> None:
    result_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)

    def reply(answer: Dict[str, Any]) -> None:
        data = (json.dumps(answer, sort_keys=True) + "\n").encode("utf-8")
        while data:
            data = data[os.write(result_fd, data):]

    for line in sys.stdin:
        request = json.loads(line)
        namespace: Dict[str, Any] = {"__name__": "policyrun_request", "__builtins__": __builtins__}
        exec(compile(request["script"], request["name"], "exec"), namespace)
        namespace["answer"](request["args"], reply)
    # A module's non-daemon threads or atexit handlers must not hold the interpreter open.
    os._exit(0)


if __name__ == "__main__":
    main()
