"""Plugin module named by the ``ortcore.providers`` entry point.

Importing it is cheap: the provider class is imported only when the hook
runs, and ``openvino`` only when a session uses the provider.
"""

from __future__ import annotations

import ep_sdk


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    """Return the provider classes this plugin adds: the OpenVINO provider."""
    from .provider import OpenVINOExecutionProvider

    return [OpenVINOExecutionProvider]
