"""The application layer: what policyrun does for a caller, whoever the caller is.

The CLI (policyrun.commands) and the MCP server (policyrun.mcp) are two faces of the same use
cases: lint, collect, evaluate, explain, next actions, probe descriptions, expression evaluation,
evidence files, reports, verification. Each use case is one module here with a typed request in
and a typed result out; the interfaces turn their arguments into a request, call it, and print or
answer the result. Nothing here prints to stdout (the MCP wire) or reads an argparse Namespace,
and nothing here imports policyrun.cli, policyrun.commands or policyrun.mcp (policyrun.layers).

Requests and results are frozen stdlib dataclasses, not pydantic models: they hold live objects
(a loaded rulebook, a facts snapshot, a trace) that are never serialised as such, their fields are
already typed by argparse or by the MCP tool schema before they get here, and importing pydantic
would cost `policyrun lint`'s cold start what it has avoided so far (docs/lint.md). The MCP
results, which are a wire format with a JSON Schema, stay pydantic (policyrun.mcp.results).

Imports below module level are deliberate: the commands imported lazily to keep start-up cheap,
and the use cases keep that.
"""
