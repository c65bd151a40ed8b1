"""Where the provider's kernel registry and the element-type tables used to live.

The registry is :mod:`ortcore_cuda.registry`; the op families are the
``ops_*`` modules (:mod:`~ortcore_cuda.ops_elementwise`,
:mod:`~ortcore_cuda.ops_reduce`, :mod:`~ortcore_cuda.ops_nn`,
:mod:`~ortcore_cuda.ops_shape`, ...), over the helpers they share
(:mod:`~ortcore_cuda.ops_common`, :mod:`~ortcore_cuda.ops_window`). This
module re-exports the public names it had, so that imports of them keep
working; nothing in the plugin imports it.
"""

from __future__ import annotations

from . import registry
from .ops_common import FLOATS, FLOATS64, INT_TYPES, MOVABLE, SIGNED, UNSIGNED
from .ops_elementwise import BINARY_SINCE, BROADCASTING, CASTABLE, PARAM_SINCE, UNARY_SINCE
from .registry import build_registry, decline_reason

__all__ = [
    "BINARY_SINCE",
    "BROADCASTING",
    "CASTABLE",
    "FAMILIES",
    "FLOATS",
    "FLOATS64",
    "INT_TYPES",
    "MOVABLE",
    "PARAM_SINCE",
    "SIGNED",
    "UNARY_SINCE",
    "UNSIGNED",
    "build_registry",
    "decline_reason",
]

FAMILIES = tuple(m.__name__.rpartition(".")[2] for m in registry.FAMILIES)
"""Names of the op family modules (:data:`ortcore_cuda.registry.FAMILIES`)."""
