"""The one masking rule (policyrun/masking.py): its detector set stays the maintained one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import detect_secrets.plugins
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.keyword import DENYLIST

from policyrun import masking


def test_every_regex_detector_of_detect_secrets_is_used_or_left_out_on_purpose() -> None:
    found = set()
    for info in pkgutil.iter_modules(detect_secrets.plugins.__path__):
        module = importlib.import_module(f"detect_secrets.plugins.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (cls.__module__ == module.__name__ and issubclass(cls, RegexBasedDetector)
                    and not inspect.isabstract(cls)):
                found.add(f"{info.name}.{name}")
    # A new detect-secrets release with a new detector fails here until it is listed in one of the two.
    assert found == set(masking.DETECTORS) | set(masking.EXCLUDED_DETECTORS)


def test_the_name_rule_covers_every_keyword_detect_secrets_looks_for() -> None:
    rule = re.compile(masking.NAME_PATTERN)
    for keyword in DENYLIST:
        for name in {keyword.replace("_?", "_"), keyword.replace("_?", "")}:
            assert rule.search(name.upper().replace("Ñ", "N")), keyword


def test_url_passwords_are_masked_alone() -> None:
    m = masking.mask_value("mysql://root:p@ss:w0rd@db:3306/app")
    assert (m.shown, m.masked, m.fragments) == ("mysql://root:***@db:3306/app", True, ("p@ss:w0rd",))
    assert masking.mask_value("https://user@example.com/x").shown == "https://user@example.com/x"
    # Something else secret in the URL: the whole value is hidden.
    assert masking.mask_value("https://u:pw@host/?token=hf_AbCdEfGhIjKlMnOpQrStUv").shown is None


def test_values_too_long_to_check_are_masked() -> None:
    assert masking.mask_value("a" * masking.MAX_CHECKED).masked is False
    assert masking.mask_value("a" * (masking.MAX_CHECKED + 1)).shown is None
