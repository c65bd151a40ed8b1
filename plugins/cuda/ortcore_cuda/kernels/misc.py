"""CUDA kernels of :mod:`ortcore_cuda.ops_misc`."""

from __future__ import annotations

from .spec import Kernel

__all__ = ["all_kernels"]


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    return []
