"""The package's layers, lowest first: a module imports only from its own layer or those below it.

Declared here, once, and checked by tests/test_import_graph.py (no cycles, no import from a lower
layer into a higher one; a module no layer claims fails the test, so a new module is placed on
purpose). docs/architecture.md describes what each layer is for. Imports under
`if TYPE_CHECKING:` do not count: they name types and run nothing.

Patterns are module names; `x.*` claims every module under the package `x`. The first layer
whose pattern matches claims the module.
"""

from __future__ import annotations

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Plain data and text, errors, bounds: what every stage shares.
    ("foundation", ("policyrun", "policyrun.errors", "policyrun.checkid", "policyrun.lintcodes", "policyrun.limits",
                    "policyrun.jsonfile", "policyrun.yamlsource", "policyrun.model", "policyrun.globs",
                    "policyrun.masking", "policyrun.gcpause", "policyrun.didyoumean", "policyrun.safetext",
                    "policyrun.outfiles", "policyrun.layers")),
    # What every probe family shares: the probe contract, the git client, bounded files and
    # children, line scanning, path filters (policyrun/probes/_kit/).
    ("probe kit", ("policyrun.probes.base", "policyrun.probes._kit", "policyrun.probes._kit.*")),
    # The probe families, side by side (tests/test_import_graph.py: no family imports another's
    # private names, and a public import across families is listed there on purpose).
    ("probe families", ("policyrun.probes.const", "policyrun.probes.repo", "policyrun.probes.repo.*",
                        "policyrun.probes.python", "policyrun.probes.python.*", "policyrun.probes.host",
                        "policyrun.probes.host.*", "policyrun.probes.gpu", "policyrun.probes.gpu.*",
                        "policyrun.probes.results", "policyrun.probes.results.*")),
    # The one list of probe kinds (which knows every family), lint's table of their schemas, and
    # the snapshot probes fill.
    ("facts", ("policyrun.facts", "policyrun.evidencekinds", "policyrun.hosts", "policyrun.probes",
               "policyrun.probes.registry", "policyrun.probes.declared")),
    # The rulebook language and the files written in it: load, overlay, CEL and its functions and
    # the guard its expressions run under, report templates, inputs, waivers and test files, static
    # checks, lint (which runs expressions and compiles templates, so both sit here rather than
    # with evaluation and the renderers).
    ("language", ("policyrun.language", "policyrun.language.*", "policyrun.render.templatefiles",
                  "policyrun.render.templating", "policyrun.render.sandbox")),
    # The trace every consumer reads, what is said about one, and the envelopes that sign it.
    ("trace", ("policyrun.trace", "policyrun.trace.*")),
    # Evaluation: derived values, the interpreter in its guarded worker, baselines, the
    # values a trace summarises kept whole, the engine's glue.
    ("evaluate", ("policyrun.evaluate", "policyrun.evaluate.*")),
    # Collection: probes planned as a graph whose parameters may read derived values.
    ("collect", ("policyrun.collection", "policyrun.collection.*")),
    # Reports, from the trace only.
    ("render", ("policyrun.render", "policyrun.render.*")),
    # Re-evaluating a claim and signing statements about it; running a rulebook's own tests.
    ("audit", ("policyrun.audit", "policyrun.audit.*")),
    # The use cases both interfaces call, with typed requests and results: lint, collect, evaluate,
    # explain, next actions, probe descriptions, expressions, evidence files, reports, verify.
    # Never imports an interface: the CLI and the MCP server share this, not each other's helpers.
    ("application", ("policyrun.app", "policyrun.app.*")),
    # What users and agents call: the CLI, its commands, the MCP server, generated schemas.
    ("interfaces", ("policyrun.__main__", "policyrun.cli", "policyrun.commands", "policyrun.commands.*",
                    "policyrun.mcp", "policyrun.mcp.*", "policyrun.schemas")),
)
