# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""Dual-batch overlap for AFD: two micro-batches in flight between Attention and FFN."""

from __future__ import annotations

import threading
from typing import Any


class AFDUBatchWrapper:
    """Mirrors upstream's UBatchWrapper around the AFD connector."""

    def __init__(self, runnable: Any, connector: Any) -> None:
        self.runnable = runnable
        self.connector = connector
        self.ready = threading.Event()

    # Patch reason: upstream ubatch threads assume both micro-batches run the
    # whole model; AFD splits them across devices.
    # Patch functionality: keep the upstream thread hand-off and insert the
    # connector send/receive between the attention and FFN halves.
    # Signature: matches upstream; no added parameters.
    # Upstream: vLLM v0.27.0, vllm/v1/worker/gpu_ubatch_wrapper.py
    def _run_ubatches(self, ubatch_metadata: list[Any], model: Any) -> list[Any]:
        results = []
        for metadata in ubatch_metadata:
            # ### PATCH START: AFD connector hand-off
            self.connector.send(metadata)
            # ### PATCH END: AFD connector hand-off
            results.append(model(metadata))
        return results
