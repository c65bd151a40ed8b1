"""Graph helpers for providers: reads, cycles, fusable groups, group export.

A provider that fuses nodes answers ``get_capability`` with
:meth:`Claim.group <ep_sdk.Claim.group>` claims. :func:`group_nodes` finds
the groups (maximal connected sets of nodes a predicate accepts whose
contraction to one node creates no cycle), :func:`group_io` says what a group
reads and produces, and :func:`group_model` exports it as a standalone ONNX
model for providers that hand it to another runtime::

    def get_capability(self, graph):
        claims = ep_sdk.group_nodes(graph, lambda n: n.op_type in {"Add", "Relu"})
        return ep_sdk.Capability(claims=claims)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import onnx
import onnx_ir as ir

from .capability import Claim, GraphContext

__all__ = [
    "consumers_of",
    "creates_cycle",
    "group_digest",
    "group_io",
    "group_model",
    "group_nodes",
    "is_constant",
    "node_reads",
    "outer_values",
    "subgraphs",
]


def is_constant(value: ir.Value) -> bool:
    """Whether ``value`` is a constant: an initializer with content that no
    feed may replace (it is not also a graph input).

    A fused group's constants go into :attr:`FusedGroup.model
    <ep_sdk.FusedGroup.model>` as initializers. (A model of IR version < 4
    lists its initializers as graph inputs too, but no feed may replace them
    there: ortcore takes them out of the inputs when it loads such a model,
    so they are constants here.)
    """
    return value.const_value is not None and value.is_initializer() and not value.is_graph_input()


def subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs held in the node's attributes (``If`` branches, ``Loop`` bodies)."""
    out: list[ir.Graph] = []
    attributes = node.attributes
    if not attributes:  # most nodes: no walk of an empty mapping's view
        return out
    for attr in attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            out.append(attr.value)
        elif attr.type == ir.AttributeType.GRAPHS:
            out.extend(attr.value)
    return out


def outer_values(graph: ir.Graph) -> list[ir.Value]:
    """Values ``graph`` (or its subgraphs) reads from enclosing scopes, in first-use order."""
    defined: set[ir.Value] = set(graph.inputs) | set(graph.initializers.values())
    for node in graph:
        defined.update(node.outputs)
    seen: dict[ir.Value, None] = {}
    for node in graph:
        for v in node_reads(node):
            if v not in defined:
                seen.setdefault(v, None)
    return list(seen)


def node_reads(node: ir.Node) -> list[ir.Value]:
    """Explicit inputs of ``node`` followed by the outer values its subgraphs read."""
    reads = [v for v in node.inputs if v is not None]
    for g in subgraphs(node):
        for v in outer_values(g):
            if v not in reads:
                reads.append(v)
    return reads


def consumers_of(graph: ir.Graph) -> dict[ir.Value, list[ir.Node]]:
    """Nodes of ``graph`` reading each value, counting reads inside their subgraphs."""
    out: dict[ir.Value, list[ir.Node]] = {}
    for node in graph:
        for v in node_reads(node):
            out.setdefault(v, []).append(node)
    return out


def creates_cycle(
    group: Iterable[ir.Node],
    consumers: Mapping[ir.Value, Sequence[ir.Node]],
    contracted: Mapping[ir.Node, Sequence[ir.Node]] | None = None,
) -> bool:
    """Would contracting ``group`` into one node create a cycle?

    It would if a path leaves the group and comes back into it.

    Args:
        group: the nodes to contract.
        consumers: the graph's readers of each value (:func:`consumers_of`).
        contracted: other groups already contracted (node -> its group's
            nodes); a path reaching one member continues from all of them.
    """
    members = set(group)
    others = contracted or {}
    frontier = [
        user
        for n in members
        for out in n.outputs
        for user in consumers.get(out, ())
        if user not in members
    ]
    seen: set[ir.Node] = set()
    while frontier:
        n = frontier.pop()
        if n in seen:
            continue
        seen.update(others.get(n, (n,)))
        for m in others.get(n, (n,)):
            for out in m.outputs:
                for user in consumers.get(out, ()):
                    if user in members:
                        return True
                    frontier.append(user)
    return False


def group_nodes(
    graph: GraphContext,
    predicate: Callable[[ir.Node], bool],
    *,
    min_size: int = 1,
    name: str = "",
) -> list[Claim]:
    """Group the free nodes ``predicate`` accepts into fusable claims.

    Nodes are visited in topological order; each accepted node joins the
    groups of the accepted nodes it reads from, as long as contracting the
    result creates no cycle (a path that leaves the group and comes back).
    Every group is connected through data edges and is as large as this
    greedy merge allows; every returned claim passes the core's validation.

    Args:
        graph: the view ``get_capability`` received.
        predicate: which nodes may be fused (e.g. by op type and dtype).
        min_size: drop groups with fewer nodes (the provider may then claim
            those nodes one by one, or decline them).
        name: prefix of the claims' names (``""``: the core names them).

    Returns:
        one :class:`~ep_sdk.Claim` with ``fused=True`` per group, in
        topological order of their first nodes.
    """
    consumers = consumers_of(graph.graph)
    rank = _topological_rank(graph.graph, consumers)
    group_of: dict[ir.Node, list[ir.Node]] = {}
    exits: dict[int, set[ir.Node]] = {}  # id(group) -> nodes outside it reading it
    groups: dict[int, list[ir.Node]] = {}
    horizon = -1  # the highest rank visited: nothing above it is in a group
    for node in graph.nodes:
        horizon = max(horizon, rank.get(node, horizon)) if rank else horizon
        if not predicate(node):
            continue
        current: list[ir.Node] = [node]
        current_exits = {u for out in node.outputs for u in consumers.get(out, ())}
        candidates: list[list[ir.Node]] = []
        for v in node_reads(node):
            producer = v.producer()
            g = group_of.get(producer) if producer is not None else None
            if g is not None and all(g is not c for c in candidates):
                candidates.append(g)
        for g in candidates:
            merged = g + current
            members = set(merged)
            merged_exits = (exits[id(g)] | current_exits) - members
            # Check against every group formed so far contracted, so that two
            # groups never end up reading each other.
            if not _comes_back(members, merged_exits, consumers, group_of, exits, rank, horizon):
                current, current_exits = merged, merged_exits
                del groups[id(g)], exits[id(g)]
        groups[id(current)] = current
        exits[id(current)] = current_exits
        for n in current:
            group_of[n] = current
    order = {n: i for i, n in enumerate(graph.nodes)}
    out: list[Claim] = []
    for g in sorted(groups.values(), key=lambda g: min(order[n] for n in g)):
        if len(g) < min_size:
            continue
        nodes = sorted(g, key=order.__getitem__)
        out.append(Claim.group(nodes, name=f"{name}_{len(out)}" if name else ""))
    return out


def _topological_rank(
    graph: ir.Graph, consumers: Mapping[ir.Value, Sequence[ir.Node]]
) -> dict[ir.Node, int]:
    """Each node's place in a topological order of ``graph`` (Kahn's), or ``{}``
    when the graph has a cycle."""
    waiting: dict[ir.Node, int] = {n: 0 for n in graph}
    for v, users in consumers.items():
        if v.producer() in waiting:
            for u in users:
                waiting[u] += 1
    ready = [n for n, count in waiting.items() if count == 0]
    rank: dict[ir.Node, int] = {}
    while ready:
        n = ready.pop()
        rank[n] = len(rank)
        for out in n.outputs:
            for u in consumers.get(out, ()):
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
    return rank if len(rank) == len(waiting) else {}


def _comes_back(
    members: set[ir.Node],
    leaving: Iterable[ir.Node],
    consumers: Mapping[ir.Value, Sequence[ir.Node]],
    group_of: Mapping[ir.Node, list[ir.Node]],
    exits: Mapping[int, set[ir.Node]],
    rank: Mapping[ir.Node, int],
    horizon: int,
) -> bool:
    """:func:`creates_cycle` for :func:`group_nodes`: whether a path from
    ``leaving`` (the nodes outside ``members`` that read them) reaches a
    member, other groups contracted (a path reaching a group continues from
    the nodes reading it). A node ranked above ``horizon`` is skipped: it is
    in no group and every path from it climbs in rank, so it never returns."""
    frontier = [u for u in leaving if not rank or rank[u] <= horizon]
    seen: set[ir.Node] = set()
    while frontier:
        n = frontier.pop()
        if n in seen:
            continue
        if n in members:
            return True
        group = group_of.get(n)
        if group is None:
            seen.add(n)
            nexts: Iterable[ir.Node] = (u for out in n.outputs for u in consumers.get(out, ()))
        else:
            seen.update(group)
            nexts = exits[id(group)]
        frontier.extend(u for u in nexts if u not in seen and (not rank or rank[u] <= horizon))
    return False


def group_io(
    graph: ir.Graph, nodes: Iterable[ir.Node]
) -> tuple[list[ir.Node], list[ir.Value], list[ir.Value]]:
    """What a group of nodes of ``graph`` reads and produces.

    Returns:
        the nodes in graph order; the values it reads from outside (graph
        inputs, initializers, other nodes' outputs) in first-use order; and
        the values it produces that are read outside it or are graph
        outputs, in production order.
    """
    members = set(nodes)
    ordered = [n for n in graph if n in members]
    produced = [v for n in ordered for v in n.outputs]
    produced_set = set(produced)
    inputs: list[ir.Value] = []
    for n in ordered:
        for v in n.inputs:
            if v is not None and v not in produced_set and v not in inputs:
                inputs.append(v)
    graph_outputs = set(graph.outputs)
    outputs = [
        v for v in produced if v in graph_outputs or any(u.node not in members for u in v.uses())
    ]
    return ordered, inputs, outputs


def group_model(
    name: str,
    nodes: Sequence[ir.Node],
    inputs: Sequence[ir.Value],
    outputs: Sequence[ir.Value],
    opsets: Mapping[str, int],
    constants: Sequence[ir.Value] = (),
) -> onnx.ModelProto:
    """Export a group of nodes as a standalone ONNX model.

    This is what :attr:`FusedGroup.model <ep_sdk.FusedGroup.model>` holds;
    call it yourself (with :func:`group_io` and :func:`is_constant`) to try a
    group on another runtime already in ``get_capability``.

    Args:
        name: the graph's name.
        nodes: the nodes, in topological order.
        inputs: the model's inputs (the values the group reads, less the
            constants).
        outputs: the model's outputs.
        opsets: opset version per domain.
        constants: values whose ``const_value`` becomes an initializer of the
            model (in memory: external data is read in).
    """

    def info(v: ir.Value) -> onnx.ValueInfoProto:
        elem = int(v.dtype) if v.dtype is not None else 0
        dims = None if v.shape is None else [_dim(d) for d in v.shape]
        return onnx.helper.make_tensor_value_info(v.name or "", elem, dims)

    graph = onnx.helper.make_graph(
        [ir.serde.serialize_node(n) for n in nodes],
        name,
        [info(v) for v in inputs],
        [info(v) for v in outputs],
        [_initializer(v) for v in constants],
    )
    return onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opsets.items()],
    )


def group_digest(
    name: str,
    nodes: Sequence[ir.Node],
    inputs: Sequence[ir.Value],
    outputs: Sequence[ir.Value],
    opsets: Mapping[str, int],
    constants: Sequence[ir.Value] = (),
    node_names: Sequence[str] | None = None,
) -> str:
    """SHA-256 of what :func:`group_model` would export, less the constants'
    content, computed on the graph without exporting anything.

    It covers the graph's name, the opsets, each input, output and constant
    (its name, type and shape: hash the constants' bytes beside it), and each
    node (its name, or ``node_names``' entry for it, op, overload, inputs,
    outputs and every attribute's value, subgraphs included).
    """
    h = hashlib.sha256(f"group {name}\n".encode())
    for domain, version in sorted(opsets.items()):
        h.update(f"opset {domain}:{version}\n".encode())
    for tag, values in (("in", inputs), ("out", outputs), ("const", constants)):
        for v in values:
            h.update(f"{tag} {v.name}:{v.dtype}:{v.shape}\n".encode())
    names = [n.name or "" for n in nodes] if node_names is None else node_names
    for node, node_name in zip(nodes, names, strict=True):
        ins = ",".join((v.name or "") if v is not None else "" for v in node.inputs)
        outs = ",".join(v.name or "" for v in node.outputs)
        h.update(
            f"node {node_name}:{node.domain}:{node.op_type}:{node.overload}:"
            f"{ins}->{outs}\n".encode()
        )
        for attr in node.attributes.values():
            h.update(f"  {attr.name}:{attr.type}:".encode())
            h.update(_attribute_bytes(attr))
    return h.hexdigest()


def _attribute_bytes(attr: Any) -> bytes:
    kind = attr.type
    if attr.is_ref():
        return f"ref {attr.ref_attr_name}".encode()
    value = attr.value
    if kind == ir.AttributeType.TENSOR:
        return _tensor_bytes(value)
    if kind == ir.AttributeType.TENSORS:
        return b"".join(_tensor_bytes(t) for t in value)
    if kind in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        graphs = [value] if kind == ir.AttributeType.GRAPH else list(value)
        return b"".join(
            ir.serde.serialize_graph(g).SerializeToString(deterministic=True) for g in graphs
        )
    return repr(value).encode()


def _tensor_bytes(value: ir.TensorProtocol) -> bytes:
    head = f"{value.dtype}:{value.shape}:".encode()
    if value.dtype == ir.DataType.STRING:  # string tensors have no tobytes()
        strings = [bytes(s) for s in value.numpy().reshape(-1)]
        return head + b"".join(len(s).to_bytes(8, "little") + s for s in strings)
    data = value.tobytes()
    return head + len(data).to_bytes(8, "little") + data


def _dim(d: object) -> int | str | None:
    """A dimension as the model has it: a number, a symbolic name, or unknown."""
    if isinstance(d, int):
        return d
    return getattr(d, "value", None) or None


def _initializer(value: ir.Value) -> onnx.TensorProto:
    tensor = value.const_value
    if tensor is None:
        raise ValueError(f"value {value.name!r} has no constant content to export")
    if isinstance(tensor, ir.ExternalTensor):
        # The exported model travels as bytes: it cannot point at a file.
        tensor = ir.Tensor(tensor.numpy(), dtype=tensor.dtype)
    proto = ir.serde.serialize_tensor(tensor)
    proto.name = value.name or ""
    return proto
