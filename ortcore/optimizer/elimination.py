"""Remove Identity nodes and Dropout nodes that do nothing at inference."""

from __future__ import annotations

from collections.abc import Mapping, Set

import onnx_ir as ir

from ._common import constant
from ._pass import OptimizerPass, has_op

__all__ = ["IdentityEliminationPass", "bypass", "eliminate_identities"]


def _is_inference_dropout(node: ir.Node, overridable: Set[ir.Value]) -> bool:
    if len(node.outputs) > 1 and (node.outputs[1].uses() or node.outputs[1].is_graph_output()):
        return False  # the mask is read
    if len(node.inputs) >= 3 and node.inputs[2] is not None:
        mode = constant(node.inputs[2], overridable)
        if mode is None or mode.size != 1 or bool(mode.reshape(-1)[0]):
            return False  # training mode on, or not known until run time
    return True


def eliminate_identities(
    graph: ir.Graph, opsets: Mapping[str, int], overridable: Set[ir.Value] = frozenset()
) -> int:
    """Bypass Identity and inference Dropout nodes of ``graph`` (not subgraphs).

    A node whose output is a graph output is kept when its input is a graph
    input or another output, so the model's signature never changes.

    Args:
        opsets: the model's opset imports.
        overridable: initializers a feed may replace: a ``training_mode``
            read from one is not known until run time.

    Returns:
        the number of nodes removed.
    """
    removed = 0
    for node in list(graph):
        if node.domain != "" or node.op_type not in ("Identity", "Dropout"):
            continue
        if node.op_type == "Dropout" and not _is_inference_dropout(node, overridable):
            continue
        src = node.inputs[0] if node.inputs else None
        if src is not None and bypass(graph, node, src):
            removed += 1
    return removed


def bypass(graph: ir.Graph, node: ir.Node, src: ir.Value) -> bool:
    """Make the readers of ``node``'s first output read ``src``, and remove ``node``.

    When that output is a graph output, ``src`` takes its name so the model's
    signature never changes; the node is then kept (``False``) if ``src`` is a
    graph input, an initializer or another graph output, whose names must stay.
    """
    dst = node.outputs[0]
    if dst in graph.outputs:
        if src in graph.outputs or src.is_graph_input() or src.is_initializer():
            return False
        ir.convenience.replace_all_uses_with(dst, src, replace_graph_outputs=True)
        name = dst.name
        graph.remove(node, safe=True)
        src.name = name
    else:
        ir.convenience.replace_all_uses_with(dst, src)
        graph.remove(node, safe=True)
    return True


class IdentityEliminationPass(OptimizerPass):
    """Bypass Identity and inference-time Dropout (:func:`eliminate_identities`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`eliminate_identities` on the main graph (if it has one of the ops)."""
        if not has_op(model.graph, ("Identity", "Dropout")):
            return 0
        return eliminate_identities(model.graph, dict(model.opset_imports), self.overridable)
