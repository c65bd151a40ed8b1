"""Which code runs a kernel's float32 work: the declared path of each kernel
builder, so that a test can list them and a slow numpy fallback can't hide.

A builder is marked where it is defined::

    @by_schema("Sigmoid")
    @float32_path(NATIVE)
    def sigmoid(info): ...

``plugins/cpu/tests/test_activation_paths.py`` reads the marks of every
activation and every fused op, requires the activations to be
:data:`NATIVE`, and checks each mark against what the kernel does: a
native or mixed kernel must call into ``ortcore_cpu._ext``, a numpy one
must not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

__all__ = ["MIXED", "NATIVE", "NUMPY", "PATHS", "float32_path", "float32_path_of"]

NATIVE: Final = "native"
"""Every pass over the data in the provider's Cython kernels (nogil, OpenMP
threads); a matrix product, if any, through BLAS."""
MIXED: Final = "mixed"
"""Cython kernels for part of the work, numpy ufuncs (one thread, a
temporary per step) for the rest."""
NUMPY: Final = "numpy"
"""numpy calls only (a matrix product through BLAS; the rest ufuncs)."""
PATHS: Final = (NATIVE, MIXED, NUMPY)
"""Every path, fastest first."""

_B = TypeVar("_B", bound=Callable[..., object])
_marks: dict[Callable[..., object], str] = {}


def float32_path(path: str) -> Callable[[_B], _B]:
    """Decorator recording that ``builder``'s kernels run float32 inputs on ``path``.

    Raises:
        ValueError: ``path`` is not one of :data:`PATHS`.
    """
    if path not in PATHS:
        raise ValueError(f"unknown float32 path {path!r}; one of {', '.join(PATHS)}")

    def mark(builder: _B) -> _B:
        _marks[builder] = path
        return builder

    return mark


def float32_path_of(builder: Callable[..., object]) -> str | None:
    """The path :func:`float32_path` recorded for ``builder``, or None if unmarked."""
    return _marks.get(builder)
