"""Remove nodes whose outputs nobody reads, and unused initializers."""

from __future__ import annotations

import onnx_ir as ir

from ._pass import OptimizerPass

__all__ = ["DeadCodeEliminationPass", "remove_dead_code"]

# Ops kept even when unread: none of the default domain has side effects, but
# a custom op might; only default-domain nodes are removed.


def remove_dead_code(graph: ir.Graph) -> int:
    """Remove dead default-domain nodes and unread initializers of ``graph``.

    Returns:
        the number of nodes removed.
    """
    outputs = set(graph.outputs)
    removed = 0
    for node in reversed(list(graph)):
        if node.domain not in ("", "ai.onnx"):
            continue
        if any(v in outputs or v.uses() for v in node.outputs):
            continue
        graph.remove(node, safe=True)
        removed += 1
    inputs = set(graph.inputs)
    for name, v in list(graph.initializers.items()):
        if not v.uses() and v not in outputs and v not in inputs:
            del graph.initializers[name]
    return removed


class DeadCodeEliminationPass(OptimizerPass):
    """Remove unread nodes and initializers (:func:`remove_dead_code`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`remove_dead_code` on the main graph."""
        return remove_dead_code(model.graph)
