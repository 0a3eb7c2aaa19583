# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""P2P NCCL connector between the Attention and the FFN GPUs."""

from __future__ import annotations

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class P2pNcclAFDConnector(KVConnectorBase_V1):
    def start_load_kv(self, forward_context, **kwargs):
        return None

    def send(self, metadata) -> None:
        return None
