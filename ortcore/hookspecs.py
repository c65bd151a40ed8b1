"""The hooks an ortcore plugin may implement.

This module is the reference for plugin authors. A plugin is any module (or
object) whose functions carry the ``ep_sdk.hookimpl`` marker and whose names
match hooks below (``ortcore_providers``, ``ortcore_custom_ops``); it is
announced by an entry point in group ``ortcore.providers``::

    [project.entry-points."ortcore.providers"]
    myep = "my_package.plugin"

Each entry point is imported at most once per process, when ortcore first
needs it (a session imports only the entry points of the providers it names;
listing providers imports them all); how plugins are found and ordered, and
which plugin owns a provider name offered twice, is described in the
:mod:`ortcore.plugins` module docstring. ``ORTCORE_DISABLE_PLUGIN_AUTOLOAD=1``
turns entry-point loading off; plugins can then be added with
``ortcore.register_plugin(module)``. A plugin that fails to import, or whose
hooks do not match these specifications, is listed by ``ortcore providers``
as unavailable with the error, and never prevents other plugins from loading.

The plugin's distribution declares the provider-SDK releases it is written
for (``ortcore-ep-sdk>=1.1,<2``) and depends on nothing else of ortcore's;
a plugin whose range excludes the installed SDK is listed as incompatible,
with the fix, and never imported (docs/provider-contract.md). A hook is
deprecated through pluggy (``warn_on_impl``) and removed no earlier than the
next major SDK release; none is deprecated today.

Each hook below is a specification only: its signature and its docstring,
which this reference is generated from.
"""

# A specification's body is its docstring alone: there is nothing to return.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ep_sdk import CustomOp, ExecutionProvider

hookspec = pluggy.HookspecMarker("ortcore")

# ---------------------------------------------------------------------------
# Providers
# ---------------------------------------------------------------------------


@hookspec
def ortcore_providers() -> Sequence[type[ExecutionProvider]]:
    """Return the execution-provider classes this plugin offers.

    Called once per plugin, when the plugin is loaded; all the classes
    returned are collected. When several plugins offer the same provider
    name, one of them owns it and the others are listed as unavailable, with
    a reason naming the owner. Which one owns it does not depend on the order
    plugins happen to load in: the rule is in the :mod:`ortcore.plugins`
    module docstring ("A provider name has one owner").

    Returning a class must be cheap: do not import device libraries or create
    device contexts here. Whether the provider can run on this machine is asked
    later through ``ExecutionProvider.unavailable_reason()``, and kernels are
    loaded through ``ExecutionProvider.kernel_registry()`` when a session first
    uses the provider.

    Returns:
        a sequence of ``ep_sdk.ExecutionProvider`` subclasses (may be empty).
    """


# ---------------------------------------------------------------------------
# Custom operators
# ---------------------------------------------------------------------------


@hookspec
def ortcore_custom_ops() -> Sequence[CustomOp]:
    """Return custom operators every session of this process knows.

    Called once per plugin, when the plugin is loaded; all the operators
    returned are collected. Each session registers their schemas with onnx
    (so ``onnx.checker`` and shape inference accept models that use them)
    and gives their kernels to the session's provider instances, as
    ``SessionOptions.register_custom_ops`` does; an operator a session
    registers itself replaces a plugin's one of the same ``domain::name``
    and ``since``.

    A plugin may implement this hook alone (an operator library with kernels
    for existing providers) or next to ``ortcore_providers`` (a provider with
    its own operators). Build the operators with ``ep_sdk.custom_op``: a
    plugin imports the SDK only (``ortcore.custom_op`` is the same function,
    for programs).

    Returns:
        a sequence of ``ep_sdk.CustomOp`` (may be empty).
    """
