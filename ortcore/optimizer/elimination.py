"""Remove Identity nodes and Dropout nodes that do nothing at inference."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

__all__ = ["eliminate_identities"]


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
    outputs = set(graph.outputs)
    for node in list(graph):
        if node.domain != "" or node.op_type not in ("Identity", "Dropout"):
            continue
        if node.op_type == "Dropout" and not _is_inference_dropout(node):
            continue
        src = node.inputs[0] if node.inputs else None
        dst = node.outputs[0]
        if src is None:
            continue
        if dst in outputs:
            if src in outputs or src.is_graph_input() or src.is_initializer():
                continue
            ir.convenience.replace_all_uses_with(dst, src, replace_graph_outputs=True)
            name = dst.name
            graph.remove(node, safe=True)
            src.name = name
        else:
            ir.convenience.replace_all_uses_with(dst, src)
            graph.remove(node, safe=True)
        outputs = set(graph.outputs)
        removed += 1
    return removed
