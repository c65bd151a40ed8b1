"""Build the :class:`~ep_sdk.NodeInfo` a kernel builder receives from its node.

The core builds every kernel's ``NodeInfo`` with :func:`make_node_info`, and
so does the test kit (``ep_sdk.testing.KernelKit``): a kernel tested on its
own sees exactly what it sees in a session. Only the graph attributes differ
by caller: the core turns each into a prepared, partitioned subgraph; the
kit into a runner of the same provider's kernels. Both are
:class:`~ep_sdk.SubgraphRunner` objects made by the ``subgraph`` function
the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx_ir as ir

from .dtypes import constant_array
from .graph import outer_values, subgraphs
from .kernel import NodeInfo, ProviderView, SubgraphRunner
from .registry import attribute_defaults

__all__ = [
    "SubgraphFactory",
    "attribute_value",
    "implicit_inputs",
    "make_node_info",
    "static_shape",
]

SubgraphFactory = Callable[[ir.Graph], SubgraphRunner]
"""Turns a graph attribute (an ``If`` branch, a ``Loop`` body) into its runner."""


def static_shape(value: ir.Value | None) -> tuple[int | None, ...] | None:
    """Return the value's shape with unknown or symbolic dims as ``None``
    (``None`` for an omitted value or an unknown rank)."""
    if value is None:
        return None
    shape = value.shape
    if shape is None:
        return None
    return tuple([d if isinstance(d, int) else None for d in shape.dims])


def attribute_value(attr: ir.Attr, subgraph: SubgraphFactory | None = None) -> Any:
    """Convert one onnx-ir attribute to the plain Python value kernels see.

    Tensors become numpy arrays, repeated attributes lists, strings ``str``;
    a graph becomes ``subgraph(graph)`` (left an ``ir.Graph`` without
    ``subgraph``).
    """
    t = attr.type
    v = attr.value
    A = ir.AttributeType
    if t == A.TENSOR:
        return constant_array(v)
    if t == A.TENSORS:
        return [constant_array(x) for x in v]
    if t == A.GRAPH:
        return subgraph(v) if subgraph is not None else v
    if t == A.GRAPHS:
        return [subgraph(g) if subgraph is not None else g for g in v]
    if t in (A.INTS, A.FLOATS, A.STRINGS):
        return list(v)
    return v


def implicit_inputs(node: ir.Node) -> list[ir.Value]:
    """Return the outer values the node's subgraphs read (its implicit inputs),
    in first-use order: the values a kernel receives after the explicit inputs."""
    out: list[ir.Value] = []
    for g in subgraphs(node):
        for v in outer_values(g):
            if v not in out:
                out.append(v)
    return out


def make_node_info(
    node: ir.Node,
    opsets: Mapping[str, int],
    provider: ProviderView | None = None,
    *,
    subgraph: SubgraphFactory | None = None,
    implicit: Sequence[ir.Value] = (),
) -> NodeInfo:
    """Collect what a kernel builder needs to know about ``node``.

    Args:
        node: the node, its inputs and outputs typed and shaped by shape
            inference (what is unknown stays ``None``).
        opsets: the model's opset version per domain (``""`` for ai.onnx);
            a domain missing counts as version 1.
        provider: the provider instance that will run the kernel.
        subgraph: turns each graph attribute into its
            :class:`~ep_sdk.SubgraphRunner`; without it graph attributes stay
            ``ir.Graph`` objects (enough for a kernel that is only looked at,
            never for control flow).
        implicit: the node's implicit inputs (:func:`implicit_inputs`), whose
            values the kernel receives after its explicit inputs.

    Returns:
        the node's :class:`~ep_sdk.NodeInfo`: attributes with the schema's
        defaults applied and converted (:func:`attribute_value`), static
        element types and shapes (:func:`static_shape`) of every input and
        output.
    """
    domain = node.domain
    opset = opsets.get(domain, 1)
    attrs: dict[str, Any] = attribute_defaults(node.op_type, domain, opset)
    attributes = node.attributes
    if attributes:  # most nodes of a large graph have none: no walk of an empty view
        for name, attr in attributes.items():
            attrs[name] = attribute_value(attr, subgraph)
    inputs, outputs = node.inputs, node.outputs
    return NodeInfo(
        node,
        opset=opset,
        attrs=attrs,
        input_types=[v.dtype if v is not None else None for v in inputs],
        input_shapes=[static_shape(v) for v in inputs],
        output_types=[v.dtype for v in outputs],
        output_shapes=[static_shape(v) for v in outputs],
        implicit_inputs=[v.name or "" for v in implicit],
        provider=provider,
    )
