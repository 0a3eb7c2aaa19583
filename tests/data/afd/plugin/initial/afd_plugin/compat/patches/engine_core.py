# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""EngineCore compatibility patch for AFD FFN daemon mode.

This module patches:
1. ``vllm.v1.engine.core.EngineCore.__init__``
2. ``vllm.v1.engine.core.EngineCore.shutdown``

Why:
    The AFD FFN side runs as a connector daemon, not as a request-scheduling
    EngineCore, so it returns before KV cache and scheduler setup.

Future plan:
    Remove this patch when vLLM exposes a role hook in EngineCore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import vllm.v1.engine.core as core_module

from afd_plugin.config import is_afd_ffn_config

if TYPE_CHECKING:
    from vllm.config import VllmConfig


# Patch reason: AFD FFN ranks run as connector daemons instead of normal
# request-scheduling EngineCore instances.
# Patch functionality: returns after model executor construction for AFD FFN
# configs while preserving the upstream startup for non-AFD configs.
# Signature: matches upstream; no added parameters.
def __init__(
    self,
    vllm_config: VllmConfig,
    executor_class: type[Any],
    log_stats: bool,
    executor_fail_callback: Any = None,
):
    # ### PATCH START: AFD FFN EngineCore daemon initialization
    # FFN ranks are connector daemons: stop after executor construction.
    if is_afd_ffn_config(vllm_config):
        self.vllm_config = vllm_config
        self.model_executor = executor_class(vllm_config)
        return
    # ### PATCH END: AFD FFN EngineCore daemon initialization

    self.vllm_config = vllm_config
    self.log_stats = log_stats
    self.model_executor = executor_class(vllm_config)
    self.scheduler = None


# Patch reason: FFN daemon engines never build a scheduler, so the upstream
# shutdown would fail on it.
# Patch functionality: shuts down the model executor and skips the scheduler
# for AFD FFN engines.
# Signature: matches upstream; no added parameters.
def shutdown(self):
    # ### PATCH START: AFD FFN EngineCore shutdown
    if getattr(self, "scheduler", None) is None:
        self.model_executor.shutdown()
        return
    # ### PATCH END: AFD FFN EngineCore shutdown
    self.model_executor.shutdown()
    self.scheduler.shutdown()


core_module.EngineCore.__init__ = __init__
core_module.EngineCore.shutdown = shutdown
