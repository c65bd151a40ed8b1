"""Helpers for answering ``get_capability``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from .provider import Capability, Claim
from .registry import KernelDef, KernelMiss, KernelRegistry

__all__ = ["GraphContext", "claim_registered_nodes", "node_types"]


def node_types(
    node: ir.Node,
) -> tuple[list[ir.DataType | None], list[ir.DataType | None]]:
    """Return the static element types of a node's inputs and outputs."""
    ins = [v.dtype if v is not None else None for v in node.inputs]
    outs = [v.dtype for v in node.outputs]
    return ins, outs


class GraphContext:
    """The view of a graph a provider gets in ``get_capability``.

    Attributes:
        graph: the whole (sub)graph, for reading; never mutate it.
        nodes: the nodes still free, in topological order.
        opsets: opset version per domain.
    """

    __slots__ = ("graph", "nodes", "opsets")

    def __init__(
        self, graph: ir.Graph, nodes: Sequence[ir.Node], opsets: Mapping[str, int]
    ) -> None:
        self.graph = graph
        self.nodes = list(nodes)
        self.opsets = dict(opsets)

    def opset(self, domain: str) -> int:
        """Return the model's opset version for ``domain`` (``ai.onnx`` is ``""``)."""
        if domain == "ai.onnx":
            domain = ""
        return self.opsets.get(domain, 1)

    def lookup(self, registry: KernelRegistry, node: ir.Node) -> KernelDef | KernelMiss:
        """Look ``node`` up in ``registry`` with its static types."""
        ins, outs = node_types(node)
        return registry.lookup(node.op_type, node.domain, self.opset(node.domain), ins, outs)


def claim_registered_nodes(graph: GraphContext, registry: KernelRegistry) -> Capability:
    """Claim every free node that ``registry`` has a kernel for.

    Nodes without a kernel are declined with the registry's reason.
    """
    cap = Capability()
    for node in graph.nodes:
        found = graph.lookup(registry, node)
        if isinstance(found, KernelMiss):
            cap.declined[node] = str(found)
        else:
            cap.claims.append(Claim.node(node))
    return cap
