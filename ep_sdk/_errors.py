"""The SDK's exception classes, in a leaf module.

The host's own exceptions derive from them (``ortcore.errors``), and ``import
ortcore`` must not import onnx, onnx-ir or numpy to define its exceptions; so
they live here, and ``ep_sdk.kernel`` and ``ep_sdk.provider``, where providers
import them from, re-export them (each class keeps the module it is documented
under as its ``__module__``).
"""

from __future__ import annotations

__all__ = ["ProviderOptionError", "RunTerminated"]


class RunTerminated(RuntimeError):
    """Raised inside a run when ``RunOptions.terminate`` was set."""

    __module__ = "ep_sdk.kernel"


class ProviderOptionError(ValueError):
    """A provider was given an option it does not know or a bad value."""

    __module__ = "ep_sdk.provider"
