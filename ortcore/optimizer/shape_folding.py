"""Shape folding: ``Shape`` and ``Size`` of statically shaped values become constants.

The shapes are those shape inference found when the model was loaded. A graph
input's declared dims are enforced on every feed, so a static dim there (and
whatever shape inference derived from it) holds at run time. One exception:
shape inference reads the *contents* of initializers, including those a feed
may replace (``overridable``), so shapes derived downstream of such an
initializer are never trusted (see :func:`derived_from`).

Only nodes of the main graph are folded; the ``Gather``/``Concat``/
``Unsqueeze`` chains over the folded shapes are left to constant folding.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

import numpy as np
import onnx_ir as ir

from ..nodeinfo import static_shape
from ._common import attr_int, known_shape
from ._pass import OptimizerPass, has_op
from .constant_folding import const_tensor

__all__ = ["ShapeFoldingPass", "derived_from", "fold_shapes"]

_DEFAULT_DOMAINS = ("", "ai.onnx")


def derived_from(graph: ir.Graph, roots: Iterable[ir.Value]) -> set[ir.Value]:
    """Outputs of the nodes of ``graph`` that depend on any of ``roots``.

    A node depends on what it reads, including outer-scope values its
    subgraphs read. The roots themselves are not in the result.
    """
    reached = set(roots)
    if not reached:
        return set()
    found: set[ir.Value] = set()
    for node in graph:
        if any(v in reached for v in _reads(node)):
            for out in node.outputs:
                reached.add(out)
                found.add(out)
    return found


def _reads(node: ir.Node) -> Iterable[ir.Value | None]:
    yield from node.inputs
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            subs = [attr.value]
        elif attr.type == ir.AttributeType.GRAPHS:
            subs = list(attr.value)
        else:
            continue
        for sub in subs:
            for inner in ir.traversal.RecursiveGraphIterator(sub):
                yield from inner.inputs


def _shape_slice(node: ir.Node, rank: int) -> tuple[int, int]:
    """The ``[start, end)`` dims a Shape node selects (opset 15 ``start``/``end``)."""
    start = attr_int(node, "start", 0)
    end = attr_int(node, "end", rank)
    if start < 0:
        start += rank
    if end < 0:
        end += rank
    start = min(max(start, 0), rank)
    end = min(max(end, 0), rank)
    return start, end


def _folded_value(node: ir.Node, untrusted: Set[ir.Value]) -> np.ndarray | None:
    if node.domain not in _DEFAULT_DOMAINS or node.op_type not in ("Shape", "Size"):
        return None
    if len(node.inputs) != 1 or node.inputs[0] is None or len(node.outputs) != 1:
        return None
    src = node.inputs[0]
    if src in untrusted:
        return None
    dims = static_shape(src)
    if dims is None:
        return None
    if node.op_type == "Size":
        shape = known_shape(src)
        return None if shape is None else np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
    start, end = _shape_slice(node, len(dims))
    selected = dims[start:end]
    if any(d is None for d in selected):
        return None
    return np.array(selected, dtype=np.int64)


def fold_shapes(graph: ir.Graph, overridable: Set[ir.Value] = frozenset()) -> int:
    """Replace ``Shape``/``Size`` nodes of ``graph`` (not subgraphs) whose answer is static.

    ``Shape`` folds when the dims it selects (``start``/``end``) are all
    known ints, even if other dims of its input are symbolic; ``Size`` when
    the whole input shape is static. The new int64 initializer keeps the
    node's output name, so graph outputs keep their names.

    Args:
        overridable: initializers a feed may replace; shapes derived from
            their contents are not trusted.

    Returns:
        the number of nodes folded.
    """
    untrusted = derived_from(graph, overridable)
    folded = 0
    for node in list(graph):
        array = _folded_value(node, untrusted)
        if array is None:
            continue
        _replace_with_constant(graph, node, array)
        folded += 1
    return folded


def _replace_with_constant(graph: ir.Graph, node: ir.Node, array: np.ndarray) -> None:
    old = node.outputs[0]
    name = old.name or ""
    new = ir.Value(
        name=f"{name}__shape",
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.INT64),
        const_value=const_tensor(array),
    )
    ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=old in graph.outputs)
    graph.remove(node, safe=True)
    new.name = name
    graph.register_initializer(new)


class ShapeFoldingPass(OptimizerPass):
    """Fold ``Shape``/``Size`` of statically shaped values (:func:`fold_shapes`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`fold_shapes` on the main graph (if it has a Shape or Size)."""
        if not has_op(model.graph, ("Shape", "Size")):
            return 0
        return fold_shapes(model.graph, self.overridable)
