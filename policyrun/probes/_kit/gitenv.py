"""What every git command runs with: the environment and the configuration overrides that keep git
read-only and keep a repository from making it run anything (docs/security.md lists them and why).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

# Environment for every git command: no optional locks (no index refresh), no prompts, English
# messages (errors are classified by their text), no pager, no transport of any kind (an empty
# allow-list: a partial clone would otherwise fetch missing objects through the repository's
# remote URL, `ext::` commands and core.sshCommand included), no replace refs (a repository
# could otherwise substitute what a commit, tree or blob reads as).
READ_ONLY_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "LC_ALL": "C.UTF-8",
    "LANGUAGE": "",
    "GIT_ALLOW_PROTOCOL": "",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
}
# Configuration overridden on every command, whatever the repository (or an included file) says.
NEUTRALISED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # a hook program, or a daemon started on demand
    ("core.hooksPath", os.devnull),  # no hook can be found (none of the commands used runs one anyway)
    ("core.pager", "cat"),
    ("log.showSignature", "false"),  # would run gpg.program on every signed commit git log prints
    ("gpg.program", os.devnull), ("gpg.openpgp.program", os.devnull), ("gpg.x509.program", os.devnull),
    ("gpg.ssh.program", os.devnull),
    ("credential.helper", ""),  # an empty value resets the list of helpers
    ("core.askPass", ""),
    ("core.sshCommand", os.devnull),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("core.useReplaceRefs", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("core.warnAmbiguousRefs", "true"),
    ("grep.fullName", "false"),
    ("grep.column", "false"),
    ("color.ui", "false"),
    # What `git status` reports about the work tree. A repository could otherwise hide an edit
    # (`core.checkStat=minimal` + `core.trustctime=false`: a same-size edit with its mtime put back
    # compares equal; `core.ignoreStat`: edits are not looked for), an untracked file (a forged
    # untracked cache in the index; `core.ignoreCase` on a case-sensitive file system), or a
    # `chmod +x` (`core.fileMode=false`). Overriding errs towards a false alarm on an unusual file
    # system (no executable bits, case-insensitive), never towards a false clean.
    ("core.checkStat", "default"),
    ("core.trustctime", "true"),
    ("core.ignoreStat", "false"),
    ("core.untrackedCache", "false"),
    ("core.fileMode", "true"),
    ("core.ignoreCase", "false"),
)
READ_ONLY_CONFIG = tuple(arg for key, value in NEUTRALISED_CONFIG for arg in ("-c", f"{key}={value}"))
# A filter driver's programs run when git converts a working-tree file (`git status` compares a
# stale entry's content through its clean filter). Every driver the configuration declares gets
# these, so no clean, smudge or long-running process filter is ever started.
FILTER_OVERRIDES = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
# Inherited GIT_* variables that may stay; the rest (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_SSH,
# GIT_EXTERNAL_DIFF, GIT_TRACE2*, ...) would point git at another repository or run something.
_KEEP_GIT_ENV = frozenset({
    "GIT_EXEC_PATH", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT", "GIT_SSL_CAINFO", "GIT_ASKPASS",
})


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") or k in _KEEP_GIT_ENV or k.startswith("GIT_CONFIG_")}
    env.update(extra or {})
    env.update(READ_ONLY_ENV)
    return env


def with_config(env: Mapping[str, str], pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`env` plus `pairs` as GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n, after any inherited ones (later wins).

    The environment carries keys and values separately, so a driver name git would mis-split on
    the command line (one holding `=`) is still overridden exactly.
    """
    out = dict(env)
    try:
        count = int(out.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    for key, value in pairs:
        out[f"GIT_CONFIG_KEY_{count}"] = key
        out[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    out["GIT_CONFIG_COUNT"] = str(count)
    return out


def declared_filters(config_listing: bytes) -> list[str]:
    """Filter driver names declared in `git config -z --list` output (every scope, includes followed)."""
    names = set()
    for record in config_listing.split(b"\0"):
        key = record.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        if key.lower().startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter."):key.rindex(".")])
    return sorted(names)


def partial_clone(config_listing: bytes) -> bool:
    """Whether git would fetch an absent object lazily: `extensions.partialClone`, or any
    `remote.<name>.promisor` set true (either makes a promisor remote)."""
    for record in config_listing.split(b"\0"):
        key, _, raw = record.partition(b"\n")
        name = key.decode("utf-8", "replace").lower()
        if name == "extensions.partialclone" and raw.strip():
            return True
        if name.startswith("remote.") and name.endswith(".promisor") and raw.strip().lower() in (
                b"true", b"yes", b"on", b"1", b""):
            return True
    return False


def config_value(config_listing: bytes, wanted: str) -> str | None:
    value = None
    for record in config_listing.split(b"\0"):
        key, _, raw = record.partition(b"\n")
        if key.decode("utf-8", "replace").lower() == wanted:
            value = raw.decode("utf-8", "replace")
    return value
