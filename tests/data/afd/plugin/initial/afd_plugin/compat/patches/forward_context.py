# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""Patches for AFD async-DP forward-context coordination.

This module patches:
1. ``vllm.forward_context.set_forward_context``

Why:
    Upstream builds data-parallel metadata whenever DP size is greater than
    one. AFD async-DP coordinates through the connector instead.

How:
    Importing this module replaces ``set_forward_context`` in place when the
    installed vLLM is the one the plugin targets.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import vllm.forward_context as forward_context_module
from vllm.config import (
    CUDAGraphMode,
    VllmConfig,
)

from afd_plugin.compat.vllm import TARGET_VLLM_VERSION
from afd_plugin.config import is_afd_async_dp

_GRAPH_MODES = (CUDAGraphMode.NONE, CUDAGraphMode.FULL_DECODE_ONLY)


# Patch reason: upstream set_forward_context always creates DP metadata for
# data-parallel ranks, but AFD async-DP uses connector-driven coordination.
# Patch functionality: preserves the upstream forward-context setup and
# skips DP metadata creation only for AFD async-DP configs.
# Signature: matches upstream; no added parameters.
@contextmanager
def set_forward_context(
    attn_metadata: Any,
    vllm_config: VllmConfig,
    virtual_engine: int = 0,
    num_tokens: int | None = None,
):
    prev = forward_context_module._forward_context
    # ### PATCH START: skip DP metadata for AFD async-DP
    dp_metadata = None
    if not is_afd_async_dp(vllm_config):
        dp_metadata = forward_context_module.DPMetadata.make(vllm_config, num_tokens)
    # ### PATCH END: skip DP metadata for AFD async-DP
    forward_context_module._forward_context = forward_context_module.ForwardContext(
        attn_metadata, virtual_engine, dp_metadata
    )
    try:
        yield
    finally:
        forward_context_module._forward_context = prev


def _is_target_vllm_compatible() -> bool:
    try:
        import vllm

        version_value = vllm.__version__
    except (AttributeError, ImportError):
        return True
    version_text = str(version_value)
    if "dev" in version_text:
        return True
    return version_text.startswith(TARGET_VLLM_VERSION)


if _is_target_vllm_compatible():
    forward_context_module.set_forward_context = set_forward_context
