"""Placeholder: probes of this module are not implemented yet."""

from __future__ import annotations

PROBES: list[object] = []
