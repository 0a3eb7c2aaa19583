# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""The FFN worker: owns the expert weights and serves the Attention workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm.distributed import parallel_state
from vllm.v1.worker.gpu_worker import Worker

if TYPE_CHECKING:
    from vllm.v1.outputs import IntermediateTensors


class AFDFFNWorker(Worker):
    def init_device(self) -> None:
        self.device = "cuda"
        self.tp_group = parallel_state.get_tp_group()

    def load_model(self) -> None:
        self.model = None

    def receive(self) -> IntermediateTensors | None:
        return None
