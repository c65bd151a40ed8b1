"""Common-subexpression elimination: a node equal to an earlier one is dropped.

Two nodes are equal when they have the same op, domain, attributes and the
very same input values. Only deterministic default-domain ops without
subgraphs are merged: two RandomNormal nodes are two draws, and a custom op
may have effects the core cannot see.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import onnx_ir as ir

from ._pass import OptimizerPass
from .constant_folding import NONDETERMINISTIC_OPS

__all__ = ["CommonSubexpressionEliminationPass", "eliminate_common_subexpressions"]


def _attr_key(attr: ir.Attr) -> Hashable:
    value = attr.value
    if attr.type == ir.AttributeType.TENSOR:
        if isinstance(value, ir.ExternalTensor):
            # Keyed by where its bytes lie, so that none of them is read.
            where = (value.path, value.offset, value.length)
            return ("external", *where, value.dtype, tuple(value.shape))
        array = np.asarray(value.numpy())
        return (str(array.dtype), array.shape, array.tobytes())
    if attr.type in (ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS):
        return tuple(value)
    return value  # int, float, str


def _key(node: ir.Node) -> Hashable | None:
    op_type = node.op_type
    if node.domain != "" or op_type in NONDETERMINISTIC_OPS:
        return None
    inputs = tuple([id(v) if v is not None else None for v in node.inputs])
    attributes = node.attributes
    if not attributes:  # most nodes of a large graph: no attribute to key
        return (op_type, inputs, len(node.outputs), ())
    attrs = []
    for name in sorted(attributes):
        attr = attributes[name]
        if attr.type not in (
            ir.AttributeType.INT,
            ir.AttributeType.FLOAT,
            ir.AttributeType.STRING,
            ir.AttributeType.INTS,
            ir.AttributeType.FLOATS,
            ir.AttributeType.STRINGS,
            ir.AttributeType.TENSOR,
        ):
            return None  # graphs and other kinds: never merged
        attrs.append((name, _attr_key(attr)))
    return (op_type, inputs, len(node.outputs), tuple(attrs))


def eliminate_common_subexpressions(graph: ir.Graph) -> int:
    """Merge equal nodes of ``graph`` (not its subgraphs); returns nodes removed.

    A duplicate whose output is a graph output is kept, so output names stay.
    """
    outputs = set(graph.outputs)
    seen: dict[Hashable, ir.Node] = {}
    removed = 0
    for node in list(graph):
        key = _key(node)
        if key is None:
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        if any(v in outputs for v in node.outputs):
            continue
        for dup, keep in zip(node.outputs, first.outputs, strict=True):
            ir.convenience.replace_all_uses_with(dup, keep)
        graph.remove(node, safe=True)
        removed += 1
    return removed


class CommonSubexpressionEliminationPass(OptimizerPass):
    """Merge equal nodes (:func:`eliminate_common_subexpressions`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`eliminate_common_subexpressions` on the main graph."""
        return eliminate_common_subexpressions(model.graph)
