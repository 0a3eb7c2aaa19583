# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""AFD configuration read from --additional-config."""

from __future__ import annotations

from typing import Any


def _afd(vllm_config: Any) -> dict[str, Any]:
    return dict(getattr(vllm_config, "additional_config", {}).get("afd", {}))


def is_afd_ffn_config(vllm_config: Any) -> bool:
    return _afd(vllm_config).get("role") == "ffn"


def is_afd_async_dp(vllm_config: Any) -> bool:
    return bool(_afd(vllm_config).get("async_dp"))
