"""The MCP server: policyrun's tools, with JSON-schema'd arguments and structured results, on the
official SDK's `MCPServer` (mcp >= 2). Imported only by `policyrun mcp` and tests.

Tools are synchronous functions: the SDK runs each in a worker thread, so a collection that takes
seconds blocks only its own call, and reports per-probe progress when the client asks for it.
Calls run one at a time: evaluation forks (policyrun.language.guard) and collection changes nothing the
next call reads mid-flight, which is simplest to keep true without concurrency.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio.from_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import FileResource
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from policyrun import __version__
from policyrun.facts import Fact
from policyrun.language.locate import shipped_dir
from policyrun.mcp import tools
from policyrun.mcp.roots import Roots
from policyrun.mcp.results import (CollectResult, EvaluateResult, ExplainResult, LintResult, NextActionsResult,
                                   ProbesResult, ToolResult)

INSTRUCTIONS = """\
policyrun evaluates gated engineering workflows (YAML rulebooks) against collected facts.
Every tool answers JSON with `exit_code` as the CLI: 0 ok, 1 FAIL, 2 BLOCKED/STOPPED, 3 the call or
the rulebook is wrong (`error` names code, file, line, column), 4 internal error.
Typical loop: lint the rulebook; evaluate (collects facts unless facts_files is given; writes a
trace); next_actions on the trace for each phase's one next allowed action; explain a phase for
the checks and values behind its status; fix; evaluate again. Relative paths resolve against the
server's working directory; every path must lie under the server's roots (its working directory
and any folder it was started with --root). A rulebook name without `/` or a .yaml suffix is
always a shipped rulebook; write a file of the checkout as a path (./NAME)."""

_ONE_AT_A_TIME = threading.Lock()
# Set by build_server: where the tools may read and write (policyrun.mcp.roots).
_roots = Roots.of()

_READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# evaluate and collect write their trace / facts file (never into the repositories they read).
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

Rulebook = Annotated[str, Field(description="The name of a shipped rulebook (e.g. `upgrade-gpu-version`; a bare "
                                            "name is always the shipped one), or a path with a `/` or a .yaml "
                                            "suffix (`./policy`, `policy.yaml`).")]
Mode = Annotated[str | None, Field(description="The mode to run; required when the rulebook has several.")]
Inputs = Annotated[dict[str, Any] | None, Field(description="Input values by name, typed as JSON "
                                                            "(like `--set`, highest precedence).")]
InputsFile = Annotated[str | None, Field(description="A YAML or JSON file of inputs (like `--inputs`).")]
TracePath = Annotated[str, Field(description="A trace.json written by evaluate (its `trace_path`).")]
Force = Annotated[bool, Field(description="Read a trace that contradicts its own checks (reported in the result).")]
FactsFiles = Annotated[list[str] | None, Field(
    description="Facts snapshots to replay (merged). Without them the rulebook's probes run first: read-only, but "
                "it can take seconds to minutes on large repositories.")]
OutDir = Annotated[str, Field(description="Where trace.json (and reports, manifest.json) are written.")]
Formats = Annotated[list[str] | None, Field(description="Reports to write beside the trace: md, html, junit, sarif, "
                                                        "json, or a report the rulebook declares.")]
AllowStale = Annotated[bool, Field(description="Evaluate facts collected with other parameters (recorded in the "
                                               "trace) instead of refusing them (F005).")]
FailOnWarn = Annotated[bool, Field(description="A WARN phase makes exit_code 1.")]


def _reply(result: ToolResult) -> CallToolResult:
    data = result.model_dump(mode="json")
    # Text content too, for clients that read only that (the spec's SHOULD for structured results).
    return CallToolResult(content=[TextContent(type="text", text=result.model_dump_json(indent=2))],
                          structured_content=data, is_error=result.exit_code >= 3)


class _Progress:
    """collect's Progress protocol as MCP progress notifications (a no-op unless the client sent a
    progress token). Called on the tool's worker thread, which the SDK started from its loop."""

    def __init__(self, ctx: Context) -> None:
        self.ctx, self.total, self.done = ctx, 0, 0

    def _send(self, message: str) -> None:
        try:
            anyio.from_thread.run(self.ctx.report_progress, self.done, self.total or None, message)
        except Exception:  # noqa: BLE001 — progress is a courtesy; it never fails a collection
            pass

    def begin(self, total: int) -> None:
        self.total = total
        self._send(f"collecting {total} probe(s)")

    def started(self, probe_id: str) -> None:
        pass

    def finished(self, probe_id: str, fact: Fact) -> None:
        self.done += 1
        self._send(f"{probe_id}: " + ("ok" if fact.error is None else f"error {fact.error.code}"))

    def end(self) -> None:
        pass


def lint(paths: Annotated[list[str], Field(min_length=1, description="Rulebook files, folders (their *.yaml, not "
                                                                     "recursive; *.test.yaml excluded) or shipped "
                                                                     "rulebook names.")]
         ) -> Annotated[CallToolResult, LintResult]:
    """Check rulebooks for errors. Findings are located (file, line, column) and sorted; exit_code 1 when any
    finding is an error."""
    with _ONE_AT_A_TIME:
        return _reply(tools.lint(paths, roots=_roots))


def evaluate(ctx: Context, rulebook: Rulebook, mode: Mode = None, inputs: Inputs = None,
             inputs_file: InputsFile = None, facts_files: FactsFiles = None, out_dir: OutDir = tools.DEFAULT_OUT,
             formats: Formats = None, allow_stale_facts: AllowStale = False, fail_on_warn: FailOnWarn = False,
             ) -> Annotated[CallToolResult, EvaluateResult]:
    """Evaluate a rulebook in one mode and write the trace. Returns every phase's status, blocker and next allowed
    action, the verdict and the exit code (0 every required phase passed, 1 FAIL, 2 BLOCKED/STOPPED). Collects facts
    first unless facts_files is given; the call returns when collection and evaluation are done."""
    with _ONE_AT_A_TIME:
        return _reply(tools.evaluate(rulebook, mode, inputs, inputs_file, facts_files, out_dir, formats,
                                     allow_stale_facts, fail_on_warn, progress=_Progress(ctx), roots=_roots))


def collect(ctx: Context, rulebook: Rulebook, mode: Mode = None, inputs: Inputs = None,
            inputs_file: InputsFile = None,
            only: Annotated[list[str] | None, Field(description="Collect only these probes and the probes their "
                                                                "parameters read.")] = None,
            out: Annotated[str, Field(description="Where the facts snapshot is written.")] = tools.DEFAULT_FACTS,
            ) -> Annotated[CallToolResult, CollectResult]:
    """Run a rulebook's probes for one mode (read-only; may take seconds to minutes) and write a facts snapshot.
    A probe that fails is recorded as an error fact, not a failed call: see each probe's ok/error."""
    with _ONE_AT_A_TIME:
        return _reply(tools.collect(rulebook, mode, inputs, inputs_file, only, out, progress=_Progress(ctx),
                                    roots=_roots))


def explain(trace: TracePath = tools.DEFAULT_TRACE,
            phase: Annotated[str | None, Field(description="Explain only this phase.")] = None,
            failures_only: Annotated[bool, Field(description="Only FAIL, BLOCKED and STOPPED phases, and in them only "
                                                             "the checks that decided or were not satisfied.")] = False,
            force: Force = False) -> Annotated[CallToolResult, ExplainResult]:
    """Why each phase of a trace got its status: the checks that decided it, the values they read and the probes
    behind them, as text (what `policyrun explain` prints) and as structured checks. Evaluates nothing again."""
    with _ONE_AT_A_TIME:
        return _reply(tools.explain(trace, phase, failures_only, force, roots=_roots))


def next_actions(trace: TracePath = tools.DEFAULT_TRACE, force: Force = False
                 ) -> Annotated[CallToolResult, NextActionsResult]:
    """Per phase of a trace: its status and the one next allowed action; `now` is the action to take first (the
    first FAIL, BLOCKED or STOPPED phase, else the last phase that ran)."""
    with _ONE_AT_A_TIME:
        return _reply(tools.next_actions(trace, force, roots=_roots))


def probes(kind: Annotated[str | None, Field(description="One probe kind, in full (with its JSON Schemas).")] = None
           ) -> Annotated[CallToolResult, ProbesResult]:
    """Probe kinds a rulebook can use: parameters (`with:`), the fields of the fact each produces, side effects."""
    with _ONE_AT_A_TIME:
        return _reply(tools.probes(kind))


def _resources(server: MCPServer) -> None:
    """Shipped rulebooks and the references they cite; the docs too in a source checkout (a wheel
    does not install them)."""
    folders = [("rulebooks", shipped_dir("rulebooks"), "*.yaml", "application/yaml"),
               ("references", shipped_dir("references"), "*.md", "text/markdown"),
               ("docs", Path(__file__).resolve().parents[2] / "docs", "*.md", "text/markdown")]
    for family, folder, pattern, mime in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob(pattern)):
            server.add_resource(FileResource(uri=f"policyrun://{family}/{path.name}", name=f"{family}/{path.name}",
                                             path=path.resolve(), mime_type=mime, encoding="utf-8"))


class _Server(MCPServer):
    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport behind a filter that answers every malformed line (policyrun.mcp.wire)."""
        from policyrun.mcp.wire import serve_stdio

        await serve_stdio(self._lowlevel_server)


def build_server(roots: Sequence[Path] = ()) -> MCPServer:
    """The server; its tools read and write only under the working directory and `roots`, and read
    the shipped rulebooks."""
    global _roots
    _roots = Roots.of(roots)
    server: MCPServer = _Server("policyrun", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    for fn, hints in ((lint, _READS), (evaluate, _WRITES), (collect, _WRITES), (explain, _READS),
                      (next_actions, _READS), (probes, _READS)):
        # One line per description: docstring indentation is noise in a client's tool list.
        server.add_tool(fn, description=" ".join((fn.__doc__ or "").split()), annotations=hints)
    _resources(server)
    return server
