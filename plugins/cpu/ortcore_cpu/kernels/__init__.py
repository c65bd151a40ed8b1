"""The CPU provider's kernels.

``registry`` holds every kernel. Each public module of this package is one op
family and registers its kernels into ``registry`` when imported. Importing
this package imports none of them: ``registry`` knows from ``_index.INDEX``
which family registers each op and imports it the first time a lookup needs
that op (``KernelRegistry.defer``), so a session imports only the families its
model uses; listing the registry (``len``, iteration) imports them all.
Modules whose name starts with ``_`` are helpers. After adding or moving a
kernel, regenerate the index: ``python -m ortcore_cpu.kernels._make_index``.
"""

import pkgutil

from ep_sdk import KernelRegistry

from ._index import INDEX

registry = KernelRegistry()
"""All kernels of the CPU provider."""

FAMILIES: tuple[str, ...] = tuple(
    sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
)
"""The op-family modules, one per file."""

registry.defer(
    {key: tuple(f"{__name__}.{family}" for family in families) for key, families in INDEX.items()}
)

__all__ = ["FAMILIES", "registry"]
