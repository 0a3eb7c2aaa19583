"""One module per command; each exposes `add_parser(sub)` and `run(args) -> int`.

`run` is thin: its arguments become the request of a use case (policyrun.app), and the result is
printed with an exit code. What the command does lives there, shared with the MCP tools.
"""
