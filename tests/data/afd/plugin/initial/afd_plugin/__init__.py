# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the AFD plugin project
"""AFD plugin for vLLM, registered through the vllm.general_plugins entry point."""

from __future__ import annotations


def register_afd() -> None:
    from afd_plugin.compat import assert_vllm_version_supported

    assert_vllm_version_supported(strict=False)
    import afd_plugin.compat.patches.engine_core  # noqa: F401
    import afd_plugin.compat.patches.forward_context  # noqa: F401
