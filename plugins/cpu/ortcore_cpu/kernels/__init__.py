"""The CPU provider's kernels.

``registry`` holds every kernel. Each public module of this package is one op
family and registers its kernels into ``registry`` when imported; importing
this package imports them all (modules whose name starts with ``_`` are
helpers and are not imported here).
"""

import importlib
import pkgutil

from ep_sdk import KernelRegistry

registry = KernelRegistry()
"""All kernels of the CPU provider."""

FAMILIES: tuple[str, ...] = tuple(
    sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
)
"""The op-family modules, one per file."""

for _family in FAMILIES:
    importlib.import_module(f"{__name__}.{_family}")

__all__ = ["FAMILIES", "registry"]
