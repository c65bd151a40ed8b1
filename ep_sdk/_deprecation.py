"""Deprecated names of the SDK: still importable, with a warning, until the next major.

The rule (docs/provider-contract.md, "Deprecations"): a name or hook the SDK
deprecates in minor release N keeps working, with a warning, through every
release of that major version; it is removed no earlier than the next major,
and the warning names that release and the replacement.

* A name (a class, a function, an import path) is served by a module-level
  ``__getattr__`` (PEP 562) built by :func:`deprecated_names`: the name is no
  longer in the module's namespace or ``__all__``, and each access warns with
  :class:`DeprecationWarning` (shown by pytest and ``python -W default``,
  attributed to the provider's line that uses it).
* A hook specification is deprecated through pluggy's own mechanism:
  ``HookspecMarker("ortcore")(warn_on_impl=DeprecationWarning(...))`` for the
  whole hook, ``warn_on_impl_args={"arg": DeprecationWarning(...)}`` for one
  argument; pluggy warns when a plugin implementing it is registered.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["deprecated_names"]


def deprecated_names(
    module: str, moved: Mapping[str, str], *, since: str, removed_in: str
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves names moved elsewhere, with a warning.

    Args:
        module: the module that used to hold the names (its ``__name__``).
        moved: old name -> its home, as ``"package.module"`` (same name) or
            ``"package.module:name"``.
        since: the SDK release that deprecated them (``"1.1"``).
        removed_in: the first release without them (the next major, ``"2.0"``).

    Example::

        __getattr__ = deprecated_names(
            __name__, {"Claim": "ep_sdk"}, since="1.1", removed_in="2.0"
        )
    """

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, _, attr = home.partition(":")
        attr = attr or name
        warnings.warn(
            f"{module}.{name} is deprecated since ep_sdk {since} and is removed in "
            f"ep_sdk {removed_in}: use `from {where} import {attr}`",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(where), attr)

    return __getattr__
