"""Remove Identity nodes and Dropout nodes that do nothing at inference."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

__all__ = ["bypass", "eliminate_identities"]


def _is_inference_dropout(node: ir.Node) -> bool:
    if len(node.outputs) > 1 and node.outputs[1].uses():
        return False  # the mask is read
    if len(node.inputs) >= 3 and node.inputs[2] is not None:
        mode = node.inputs[2].const_value
        if mode is None or bool(np.asarray(mode.numpy()).item()):
            return False  # training mode on, or not known
    return True


def eliminate_identities(graph: ir.Graph, opsets: Mapping[str, int]) -> int:
    """Bypass Identity and inference Dropout nodes of ``graph`` (not subgraphs).

    A node whose output is a graph output is kept when its input is a graph
    input or another output, so the model's signature never changes.

    Returns:
        the number of nodes removed.
    """
    removed = 0
    for node in list(graph):
        if node.domain != "" or node.op_type not in ("Identity", "Dropout"):
            continue
        if node.op_type == "Dropout" and not _is_inference_dropout(node):
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
