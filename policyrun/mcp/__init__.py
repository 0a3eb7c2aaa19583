"""`policyrun mcp`: the commands as Model Context Protocol tools for coding agents.

`tools` and `results` are plain functions and pydantic models with no SDK import (usable and
testable without the `mcp` extra); each tool calls the use case its command calls (policyrun.app);
`server` wires them into the SDK's `MCPServer`.
"""
