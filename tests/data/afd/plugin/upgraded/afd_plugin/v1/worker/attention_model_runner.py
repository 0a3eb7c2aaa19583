# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""The Attention-side model runner: runs the attention layers, hands hidden states to the FFN side."""

from __future__ import annotations

from typing import Any

from vllm.attention.layers.attention import Attention
from vllm.config import CUDAGraphMode
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class AFDAttentionModelRunner(GPUModelRunner):
    """GPUModelRunner with the AFD connector between the attention and FFN halves."""

    def attention_layers(self) -> list[Attention]:
        return [m for m in self.model.modules() if isinstance(m, Attention)]

    # Patch reason: native capture does not publish AFD warmup/capture metadata.
    # Patch functionality: preserve the upstream warmup/capture flow while
    # publishing replayable connector state before formal graph capture.
    # Signature: matches upstream; no added parameters.
    # Upstream: vLLM v0.27.0, vllm/v1/worker/gpu_model_runner.py
    def _warmup_and_capture(
        self,
        desc: Any,
        cudagraph_runtime_mode: CUDAGraphMode,
        num_warmups: int | None = None,
    ):
        if num_warmups is None:
            num_warmups = self.compilation_config.cudagraph_num_of_warmups
        # ### PATCH START: AFD warmup metadata
        self._afd_is_warmup = True
        # ### PATCH END: AFD warmup metadata
        for _ in range(num_warmups):
            self._dummy_run(desc)
        self._afd_is_warmup = False
        self._dummy_run(desc, cudagraph_runtime_mode)
