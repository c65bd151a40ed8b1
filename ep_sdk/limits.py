"""How big a tensor may be: :func:`check_tensor_size`, called before allocating.

A model decides the size of some outputs with *data*: ``ConstantOfShape``'s
shape input, ``Expand``'s target shape, ``Tile``'s repeats, ``Range``'s
bounds, ``Resize``'s scales. Ten bytes of model can ask for terabytes, and
the operating system answers an allocation it cannot back by killing the
process (or the machine's other processes). Kernels whose output size comes
from values check it first::

    def compute(x, shape):
        out_shape = tuple(int(d) for d in shape)
        ep_sdk.check_tensor_size(out_shape, x.dtype, info.describe())
        return (np.full(out_shape, ...),)

The limit is, in order: the run's :attr:`RunContext.max_tensor_bytes` (the
session sets it from the config entry ``session.max_tensor_bytes``; constant
folding sets its own, smaller cap), the environment variable
``ORTCORE_MAX_TENSOR_BYTES``, or the machine's physical memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .terminate import current_run

__all__ = [
    "MAX_TENSOR_BYTES_CONFIG",
    "MAX_TENSOR_BYTES_ENV",
    "TensorTooLarge",
    "check_tensor_size",
    "parse_byte_limit",
    "tensor_byte_limit",
]

MAX_TENSOR_BYTES_ENV = "ORTCORE_MAX_TENSOR_BYTES"
"""Environment variable: the largest tensor, in bytes, a kernel may allocate."""

MAX_TENSOR_BYTES_CONFIG = "session.max_tensor_bytes"
"""Session config entry: the same limit for one session's runs."""

_physical: int | None = None


class TensorTooLarge(MemoryError):
    """A kernel was asked for a tensor larger than the limit.

    A ``MemoryError``: the executor reports it as ``ortcore.AllocationError``,
    as it does an allocation the system refused.
    """


def parse_byte_limit(text: str, where: str) -> int:
    """A positive byte count from ``text`` (an integer, ``1e9`` forms allowed).

    Raises:
        ValueError: naming ``where`` and the text.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{where} must be a positive number of bytes, not {text!r}")
    return int(value)


def _physical_memory() -> int:
    global _physical
    if _physical is None:
        try:
            _physical = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
        except (AttributeError, ValueError, OSError):
            _physical = 1 << 40
    return _physical


def tensor_byte_limit() -> int:
    """The largest tensor, in bytes, a kernel running on this thread may allocate."""
    ctx = current_run()
    if ctx is not None and ctx.max_tensor_bytes is not None:
        return ctx.max_tensor_bytes
    env = os.environ.get(MAX_TENSOR_BYTES_ENV, "").strip()
    if env:
        return parse_byte_limit(env, MAX_TENSOR_BYTES_ENV)
    return _physical_memory()


def _itemsize(dtype: Any) -> tuple[int, str]:
    """Bytes per element (at least 1) and a name for messages."""
    if isinstance(dtype, (int, float)):
        return max(math.ceil(dtype), 1), f"{dtype}-byte elements"
    dt = np.dtype(dtype)
    # Strings and other objects: at least a pointer per element.
    return (8 if dt.kind in "OUS" else max(dt.itemsize, 1)), dt.name


def check_tensor_size(
    shape: Sequence[Any], dtype: Any, what: str, *, limit: int | None = None
) -> None:
    """Refuse a tensor of ``shape`` and ``dtype`` before it is allocated.

    Args:
        shape: the dims (ints, or anything ``int()`` accepts).
        dtype: a numpy dtype or anything ``np.dtype`` accepts, or the size of
            one element in bytes.
        what: the node or value at fault, for the message (``info.describe()``).
        limit: the byte limit to apply (default :func:`tensor_byte_limit`).

    Raises:
        ValueError: a dim is negative.
        TensorTooLarge: the tensor needs more bytes than :func:`tensor_byte_limit`.
    """
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ValueError(f"{what}: output shape {dims} has a negative dimension")
    itemsize, type_name = _itemsize(dtype)
    nbytes = math.prod(dims) * itemsize
    if limit is None:
        limit = tensor_byte_limit()
    if nbytes > limit:
        raise TensorTooLarge(
            f"{what}: an output of shape {dims} ({type_name}) needs {nbytes:,} "
            f"bytes, more than the limit of {limit:,} (set it with the session config entry "
            f"{MAX_TENSOR_BYTES_CONFIG!r} or ${MAX_TENSOR_BYTES_ENV})"
        )
