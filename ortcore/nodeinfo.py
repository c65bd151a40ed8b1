"""The core's side of building a kernel: its provider's registry, its NodeInfo.

How a :class:`ep_sdk.NodeInfo` is built from a node is part of the provider
contract and lives in :mod:`ep_sdk.nodeinfo`; the core only supplies the
subgraph planning (each graph attribute becomes a partitioned plan). The
graph helpers the planner and the optimizer use are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx_ir as ir

from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo
from ep_sdk.graph import node_reads, outer_values, subgraphs
from ep_sdk.nodeinfo import SubgraphFactory, implicit_inputs, static_shape
from ep_sdk.nodeinfo import make_node_info as _make_node_info

from .errors import EPFail

__all__ = [
    "implicit_inputs",
    "make_node_info",
    "node_reads",
    "outer_values",
    "registry_of",
    "static_shape",
    "subgraphs",
]


def make_node_info(
    node: ir.Node,
    opsets: Mapping[str, int],
    provider: ExecutionProvider | None,
    subgraph: SubgraphFactory | None = None,
    implicit: Sequence[ir.Value] = (),
) -> NodeInfo:
    """Collect what a kernel builder needs to know about ``node``
    (:func:`ep_sdk.make_node_info`, with the planner's ``subgraph`` factory)."""
    return _make_node_info(node, opsets, provider, subgraph=subgraph, implicit=implicit)


def registry_of(provider: ExecutionProvider) -> KernelRegistry | None:
    """The provider's kernel registry.

    Raises:
        EPFail: loading the kernels failed (e.g. a compiled module is missing).
    """
    try:
        return provider.registry()
    except Exception as exc:
        raise EPFail(
            f"Execution provider {provider.name!r} failed to load its kernels: {exc!r}"
        ) from exc
