"""One rule for what counts as a secret, for every value that comes from the environment.

A value read from the environment can reach a fact (`env`, `python.stack`'s `env`), a command's
captured output (`printenv HF_TOKEN` run by the `command` probe), an input bound with `env:`
and from there the trace, every report and error messages. All of them ask this module, so a
token masked in one place is masked in all.

A value is secret when
- its variable's name contains a secret word (`secret_name`: PASS, PWD, SECRET, TOKEN, KEY, DSN,
  CREDENTIAL, ..., a superset of the keywords detect-secrets' KeywordDetector looks for), or
- one of the value-based detectors of detect-secrets (Yelp's maintained secret scanner: AWS,
  Stripe, Slack tokens and webhooks, GitHub, GitLab, PyPI, npm, private keys, JWTs, basic-auth
  URLs, ...) finds a secret in it, or one of policyrun's token shapes that detect-secrets lacks
  (Hugging Face `hf_`, Google `AIza`, bare `npm_`, `sk-` keys, ...), or it holds a long opaque
  run of mixed-case letters and digits; or
- it is longer than MAX_CHECKED characters (too long to vouch for).

A URL with a password (`postgres://app:hunter2@db/prod`) keeps everything but the password
(`postgres://app:***@db/prod`), unless something else in it is secret too.

detect-secrets is imported on first use (about 0.1 s), never at start-up. Only its regex
detectors' `analyze_string` is called: no plugin verifies a secret over the network.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

MASK = "***"
# Names: deliberately broad, a masked path costs one `unmask` entry, a leaked token a rotation.
# Covers every keyword of detect-secrets' KeywordDetector (api_?key, db_?pass, pwd, secret,
# contraseña...); tests/test_masking.py checks that it stays a superset.
NAME_PATTERN = ("(?i)(TOKEN|SECRET|PASS|PWD|KEY|DSN|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|"
                "CONTRASE)")
# The shell's working directories: their names contain PWD, their values are paths.
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
# detect-secrets' regex detectors used on values. Left out: IPPublicDetector (an address is not a
# secret). Its KeywordDetector and high-entropy plugins read source lines (`password = "..."`,
# quoted strings) and are replaced here by the name rule and the opaque-run rule.
DETECTORS = (
    "artifactory.ArtifactoryDetector", "aws.AWSKeyDetector", "azure_storage_key.AzureStorageKeyDetector",
    "basic_auth.BasicAuthDetector", "cloudant.CloudantDetector", "discord.DiscordBotTokenDetector",
    "github_token.GitHubTokenDetector", "gitlab_token.GitLabTokenDetector", "ibm_cloud_iam.IbmCloudIamDetector",
    "ibm_cos_hmac.IbmCosHmacDetector", "jwt.JwtTokenDetector", "mailchimp.MailchimpDetector", "npm.NpmDetector",
    "openai.OpenAIDetector", "private_key.PrivateKeyDetector", "pypi_token.PypiTokenDetector",
    "sendgrid.SendGridDetector", "slack.SlackDetector", "softlayer.SoftlayerDetector",
    "square_oauth.SquareOAuthDetector", "stripe.StripeDetector", "telegram_token.TelegramBotTokenDetector",
    "twilio.TwilioKeyDetector",
)
EXCLUDED_DETECTORS = ("ip_public.IPPublicDetector",)
# Token shapes detect-secrets does not know (or knows only in a config-file context), anywhere in
# the value, not preceded by a letter or digit.
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{22,}|gh[pousr]_[A-Za-z0-9]{16,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9_-]{20,}|[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"
    r"|AIza[0-9A-Za-z_-]{35}|npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_-]{50,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")
# A long opaque run of mixed-case letters and digits (base64 or random tokens). Hex digests are
# single-case and GPU UUIDs come in short dash-separated groups, so commit pins and
# CUDA_VISIBLE_DEVICES=GPU-... stay readable; `/` ends a run, so a path (`/models/Qwen2/Qwen2_5_7B`)
# is read component by component.
_OPAQUE_RUN = re.compile(r"[A-Za-z0-9+=_]{24,}")
# `scheme://user:password@host`: the password runs to the last `@` before the host (an unencoded
# `@` in a password is common); the user part holds no `:` or `@`.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)(?P<password>[^\s/]*)@"
                           r"(?=[^\s/@]*(?:[/?#\s]|$))")
# Longer values are masked whole: some detectors' regular expressions are quadratic, and 8 KiB
# holds any private key or token while costing each detector at most a fraction of a second.
MAX_CHECKED = 8192
# Output is scanned for secret values at least this long; a shorter one (a PIN, `TOKENIZERS_PARALLELISM=false`)
# would turn ordinary words of the output into masks.
MIN_REDACTED = 6
# At a cut (a head or tail of captured output), this many characters of a secret are masked too.
MIN_PARTIAL = 4

_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class Masked:
    """What may be shown of a value: `shown` is None when nothing may be."""

    shown: str | None
    masked: bool
    fragments: tuple[str, ...] = ()  # the secret parts, to mask wherever else they appear


def secret_name(name: str) -> bool:
    return name not in NOT_SECRET_NAMES and _NAME.search(name) is not None


@cache
def _detectors() -> tuple[Any, ...]:
    from importlib import import_module

    out = []
    for spec in DETECTORS:
        module, _, cls = spec.rpartition(".")
        out.append(getattr(import_module(f"detect_secrets.plugins.{module}"), cls)())
    return tuple(out)


def secret_in(value: str) -> bool:
    """Whether a detector finds a secret in `value` (the name plays no part)."""
    if len(value) > MAX_CHECKED:
        return True
    if _TOKEN_SHAPES.search(value):
        return True
    if any(any(c.islower() for c in run) and any(c.isupper() for c in run) and any(c.isdigit() for c in run)
           for run in _OPAQUE_RUN.findall(value)):
        return True
    return any(next(iter(d.analyze_string(value)), None) is not None for d in _detectors())


def mask_value(value: str, *, name: str | None = None, name_secret: bool | None = None) -> Masked:
    """The one masking rule. `name_secret` overrides the name rule (the env probe's `mask_pattern`)."""
    if name_secret is None:
        name_secret = name is not None and secret_name(name)
    if name_secret:
        return Masked(None, True, (value,))
    passwords = [m.group("password") for m in _URL_PASSWORD.finditer(value) if m.group("password")]
    shown = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{MASK if m.group('password') else ''}@", value)
    if secret_in(shown):
        return Masked(None, True, (value,))
    return Masked(shown, True, tuple(passwords)) if passwords else Masked(value, False)


def shown(value: str, *, name: str | None = None) -> str:
    """`value` as it may be written: MASK in place of what may not be shown."""
    m = mask_value(value, name=name)
    return m.shown if m.shown is not None else MASK


def masked_mapping(env: Mapping[str, str]) -> dict[str, str]:
    return {k: shown(v, name=k) for k, v in env.items()}


def secret_fragments(env: Mapping[str, str]) -> list[str]:
    """The secret values (or URL passwords) of `env` worth looking for in other text, longest first."""
    found = {f for k, v in env.items() for f in mask_value(v, name=k).fragments if len(f) >= MIN_REDACTED}
    return sorted(found, key=lambda f: (-len(f), f))


def redact(text: str, fragments: Iterable[str], *, cut_start: bool = False, cut_end: bool = False) -> str:
    """`text` with every occurrence of a fragment replaced by MASK; with `cut_start`/`cut_end` (the
    text is a piece of something longer), a fragment's end at the start or its beginning at the end
    is masked too (at least MIN_PARTIAL characters of it)."""
    frags = [f for f in fragments if f]
    if not frags or not text:
        return text
    text = re.sub("|".join(re.escape(f) for f in frags), MASK, text)
    if cut_end:
        text = _cut(text, frags, at_end=True)
    if cut_start:
        text = _cut(text, frags, at_end=False)
    return text


def _cut(text: str, frags: list[str], *, at_end: bool) -> str:
    best = 0
    for f in frags:
        for k in range(min(len(f) - 1, len(text)), MIN_PARTIAL - 1, -1):
            if k <= best:
                break
            if (text.endswith(f[:k]) if at_end else text.startswith(f[-k:])):
                best = k
                break
    if not best:
        return text
    return text[:-best] + MASK if at_end else MASK + text[best:]


def redact_tree(value: Any, fragments: Iterable[str], exact: Iterable[str] = ()) -> Any:
    """A JSON-like value with every string equal to one of `exact` (any length) replaced by MASK and
    every fragment (MIN_REDACTED characters or more) inside a string masked, keys included."""
    frags = sorted({f for f in fragments if len(f) >= MIN_REDACTED}, key=lambda f: (-len(f), f))
    whole = set(exact) | set(frags)
    if not whole:
        return value
    rx = re.compile("|".join(re.escape(f) for f in frags)) if frags else None

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            if v in whole:
                return MASK
            return rx.sub(MASK, v) if rx is not None else v
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if hasattr(v, "model_dump"):  # a pydantic record (a fact's provenance) inside the tree
            return walk(v.model_dump())
        return v

    return walk(value)
