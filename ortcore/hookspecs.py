"""The hooks an ortcore plugin may implement.

This module is the reference for plugin authors. A plugin is any module (or
object) whose functions carry the ``ep_sdk.hookimpl`` marker and whose names
match hooks below (``ortcore_providers``, ``ortcore_custom_ops``); it is
announced by an entry point in group ``ortcore.providers``::

    [project.entry-points."ortcore.providers"]
    myep = "my_package.plugin"

Entry points are loaded once per process, in sorted order of their names, the
first time ortcore needs a provider. ``ORTCORE_DISABLE_PLUGIN_AUTOLOAD=1`` turns
that off; plugins can then be added with ``ortcore.register_plugin(module)``.
A plugin that fails to import, or whose hooks do not match these
specifications, is listed by ``ortcore providers`` as unavailable with the
error, and never prevents other plugins from loading.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from ep_sdk import ExecutionProvider

from .custom_ops import CustomOp

hookspec = pluggy.HookspecMarker("ortcore")

# ---------------------------------------------------------------------------
# Providers
# ---------------------------------------------------------------------------


@hookspec
def ortcore_providers() -> Sequence[type[ExecutionProvider]]:
    """Return the execution-provider classes this plugin offers.

    Called once, when plugins are loaded. Every implementation is called and
    all the classes returned are collected; a provider name already offered
    by an earlier plugin (in entry-point order) is refused and listed as
    unavailable.

    Returning a class must be cheap: do not import device libraries or create
    device contexts here. Whether the provider can run on this machine is asked
    later through ``ExecutionProvider.unavailable_reason()``, and kernels are
    loaded through ``ExecutionProvider.kernel_registry()`` when a session first
    uses the provider.

    Returns:
        a sequence of ``ep_sdk.ExecutionProvider`` subclasses (may be empty).
    """
    raise NotImplementedError  # pragma: no cover - specification only


# ---------------------------------------------------------------------------
# Custom operators
# ---------------------------------------------------------------------------


@hookspec
def ortcore_custom_ops() -> Sequence[CustomOp]:
    """Return custom operators every session of this process knows.

    Called once, when plugins are loaded. Every implementation is called and
    all the operators returned are collected. Each session registers their
    schemas with onnx (so ``onnx.checker`` and shape inference accept models
    that use them) and gives their kernels to the session's provider
    instances, as ``SessionOptions.register_custom_ops`` does; an operator a
    session registers itself replaces a plugin's one of the same
    ``domain::name`` and ``since``.

    A plugin may implement this hook alone (an operator library with kernels
    for existing providers) or next to ``ortcore_providers`` (a provider with
    its own operators). Build the operators with ``ortcore.custom_op``.

    Returns:
        a sequence of ``ortcore.CustomOp`` (may be empty).
    """
    raise NotImplementedError  # pragma: no cover - specification only
