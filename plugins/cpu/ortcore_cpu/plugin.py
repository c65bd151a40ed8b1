"""Plugin module named by the ``ortcore.providers`` entry point.

Importing it is cheap: the provider class is imported only when the hook runs,
and kernels only when a session first asks for the registry.
"""

from __future__ import annotations

import ep_sdk


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    """Return the provider classes this plugin adds: the CPU provider."""
    from .provider import CPUExecutionProvider

    return [CPUExecutionProvider]
