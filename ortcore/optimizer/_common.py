"""What every pass may know about a value or a node, each rule written once.

- :func:`constant`: the contents of a value, if they are fixed at session
  creation. An initializer a feed may replace (an *overridable* one: listed
  also as a graph input) is not: reading it as a constant bakes in numbers
  the user may change at run time.
- :func:`known_shape`: a value's shape when every dim is a known int.
- :func:`attr` and :func:`attr_int`: a node's attribute values.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
import onnx_ir as ir

from ep_sdk.dtypes import constant_array

from ..nodeinfo import static_shape

__all__ = ["attr", "attr_int", "constant", "known_shape", "reshaped"]


def is_constant(value: ir.Value | None, overridable: Set[ir.Value]) -> bool:
    """Whether ``value`` is an initializer no feed may replace (:func:`constant`
    gives its contents), without reading them."""
    return (
        value is not None
        and value not in overridable
        and value.is_initializer()
        and value.const_value is not None
    )


def constant(value: ir.Value | None, overridable: Set[ir.Value]) -> np.ndarray | None:
    """The contents of ``value`` if it is an initializer no feed may replace, else ``None``.

    Args:
        overridable: the initializers a feed may replace (graph inputs that
            also have an initializer); never read.
    """
    if value is None or not is_constant(value, overridable):
        return None
    tensor = value.const_value
    return None if tensor is None else np.asarray(constant_array(tensor))


def known_shape(value: ir.Value | None) -> tuple[int, ...] | None:
    """``value``'s inferred shape when every dim is a known int, else ``None``.

    (:func:`ortcore.nodeinfo.static_shape` gives the dims with ``None`` for
    each one not known.)
    """
    dims = static_shape(value)
    if dims is None or any(d is None for d in dims):
        return None
    return tuple(d for d in dims if d is not None)


def attr(node: ir.Node, name: str, default: object = None) -> object:
    """The value of ``node``'s attribute ``name`` (``default`` if absent)."""
    a = node.attributes.get(name)
    return default if a is None else a.value


def attr_int(node: ir.Node, name: str, default: int) -> int:
    """The int attribute ``name`` of ``node`` (``default`` if absent)."""
    a = node.attributes.get(name)
    return default if a is None else int(a.value)


def reshaped(shape: tuple[int, ...], target: np.ndarray, allowzero: bool) -> tuple[int, ...] | None:
    """Reshape's output shape for an input of ``shape`` and a constant
    ``target`` (onnx's rules: 0 copies the input's dim unless ``allowzero``,
    one -1 takes what is left), or ``None`` if invalid."""
    dims = [int(d) for d in target]
    out: list[int] = []
    infer = -1
    for i, d in enumerate(dims):
        if d == 0 and not allowzero:
            if i >= len(shape):
                return None
            out.append(shape[i])
        elif d == -1:
            if infer >= 0:
                return None
            infer = i
            out.append(1)
        elif d < 0:
            return None
        else:
            out.append(d)
    total = int(np.prod(shape, dtype=np.int64))
    known = int(np.prod(out, dtype=np.int64))
    if infer >= 0:
        if known == 0 or total % known:
            return None
        out[infer] = total // known
    elif known != total:
        return None
    return tuple(out)
