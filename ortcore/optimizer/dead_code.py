"""Remove nodes whose outputs nobody reads, and unused initializers."""

from __future__ import annotations

from collections.abc import Hashable

import onnx_ir as ir

from ._pass import OptimizerPass, knows

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
    """Remove unread nodes and initializers (:func:`remove_dead_code`).

    One run leaves none (a node is removed after its readers: the walk is
    backwards), so a run with no pass changing the model since the last
    one's returns at once (:meth:`establishes`)."""

    def apply(self, model: ir.Model) -> int:
        """Run :func:`remove_dead_code` on the main graph, unless the last
        run's result still holds."""
        if knows(self.establishes(model)):
            return 0
        return remove_dead_code(model.graph)

    def establishes(self, model: ir.Model) -> Hashable:
        """No dead code in the main graph."""
        return ("no dead code", model.graph)
