"""Collection: a rulebook's probes planned as a graph, run, and replayed against a snapshot.

One module per job, so each reads on its own: `plan` (which probes, what each waits for),
`params` (a probe's parameters: templates, derived values, `when`, `for_each` and `key`),
`timeout` (the thread that keeps a hanging probe from hanging collection), `progress` (what the
terminal shows), `run` (the scheduler: `collect()`), `stale` (is a snapshot what this rulebook
would collect now?) and `cluster` (`collect --cluster ray`). Nothing is re-exported here: callers
import each name from the module that defines it.
"""
