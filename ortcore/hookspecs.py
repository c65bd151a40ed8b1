"""The hooks an ortcore plugin may implement.

This module is the reference for plugin authors. A plugin is any module (or
object) whose functions carry the ``ep_sdk.hookimpl`` marker and whose name
matches a hook below; it is announced by an entry point in group
``ortcore.providers``::

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
