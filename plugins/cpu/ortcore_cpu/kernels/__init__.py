"""The CPU provider's kernels.

``registry`` holds every kernel; importing this package imports one module per
op family, each of which registers its kernels into it.
"""

from ep_sdk import KernelRegistry

registry = KernelRegistry()
"""All kernels of the CPU provider."""

from . import (  # noqa: E402  (the modules register into ``registry``)
    conv,
    elementwise,
    gemm,
    generators,
    indexing,
    logical,
    normalization,
    pool,
    reduce,
    resize,
    shape_ops,
    unary,
)

__all__ = [
    "conv",
    "elementwise",
    "gemm",
    "generators",
    "indexing",
    "logical",
    "normalization",
    "pool",
    "reduce",
    "registry",
    "resize",
    "shape_ops",
    "unary",
]
