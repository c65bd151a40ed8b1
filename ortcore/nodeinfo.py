"""Build the :class:`ep_sdk.NodeInfo` a kernel builder receives."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx_ir as ir

from ep_sdk import ExecutionProvider, KernelRegistry, NodeInfo, attribute_defaults
from ep_sdk.graph import node_reads, outer_values, subgraphs

from .errors import EPFail

__all__ = [
    "attr_value",
    "make_node_info",
    "node_reads",
    "outer_values",
    "registry_of",
    "static_shape",
    "subgraphs",
]

SubgraphFactory = Callable[[ir.Graph], Any]


def static_shape(value: ir.Value | None) -> tuple[int | None, ...] | None:
    """The value's shape with unknown or symbolic dims as ``None`` (``None`` if rank unknown)."""
    if value is None or value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in value.shape)


def attr_value(attr: ir.Attr, subgraph: SubgraphFactory | None) -> Any:
    """Convert one onnx-ir attribute to the plain Python value kernels see."""
    t = attr.type
    v = attr.value
    A = ir.AttributeType
    if t == A.TENSOR:
        return v.numpy()
    if t == A.TENSORS:
        return [x.numpy() for x in v]
    if t == A.GRAPH:
        return subgraph(v) if subgraph is not None else v
    if t == A.GRAPHS:
        return [subgraph(g) if subgraph is not None else g for g in v]
    if t in (A.INTS, A.FLOATS, A.STRINGS):
        return list(v)
    return v


def implicit_inputs(node: ir.Node) -> list[ir.Value]:
    """Outer values the node's subgraphs read (the node's implicit inputs)."""
    out: list[ir.Value] = []
    for g in subgraphs(node):
        for v in outer_values(g):
            if v not in out:
                out.append(v)
    return out


def make_node_info(
    node: ir.Node,
    opsets: Mapping[str, int],
    provider: ExecutionProvider | None,
    subgraph: SubgraphFactory | None = None,
    implicit: Sequence[ir.Value] = (),
) -> NodeInfo:
    """Collect what a kernel builder needs to know about ``node``."""
    opset = opsets.get(node.domain, 1)
    attrs: dict[str, Any] = attribute_defaults(node.op_type, node.domain, opset)
    for name, attr in node.attributes.items():
        attrs[name] = attr_value(attr, subgraph)
    return NodeInfo(
        node,
        opset=opset,
        attrs=attrs,
        input_types=[v.dtype if v is not None else None for v in node.inputs],
        input_shapes=[static_shape(v) for v in node.inputs],
        output_types=[v.dtype for v in node.outputs],
        output_shapes=[static_shape(v) for v in node.outputs],
        implicit_inputs=[v.name or "" for v in implicit],
        provider=provider,
    )


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
