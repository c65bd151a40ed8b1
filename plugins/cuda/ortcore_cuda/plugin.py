"""Plugin module named by the ``ortcore.providers`` entry point.

Importing it is cheap: the provider class is imported only when the hook
runs, and pycuda only when the provider is asked whether it can run.
"""

from __future__ import annotations

import ep_sdk


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    """Return the provider classes this plugin adds: the CUDA provider."""
    from .provider import CUDAExecutionProvider

    return [CUDAExecutionProvider]
