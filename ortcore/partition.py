"""Capability negotiation: ask providers in priority order, validate claims.

Each provider sees the nodes still free and answers with claims (single nodes,
or groups to fuse and compile) and reasons for the nodes it declines. The core
checks every claim: the nodes belong to this graph, are free, and a fused group
creates no cycle when contracted to one node.

Where each node goes is also recorded on the node (:class:`Assignment`, in
``node.meta``), so that the partition survives the extended-level fusions
that run after it: a fused node inherits the assignment of the nodes it
replaced, and partitioning the graph again (the planner does) asks the
providers only about nodes that have no assignment yet.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import onnx
import onnx_ir as ir

from ep_sdk import Claim, ExecutionProvider, GraphContext, node_types, type_string
from ep_sdk.graph import consumers_of, creates_cycle, subgraphs

from .custom_ops import ONNX_DOMAINS
from .errors import EPFail, NotImplementedOp

__all__ = [
    "ASSIGNMENTS_KEY",
    "ASSIGNMENT_KEY",
    "Assignment",
    "NO_REASONS",
    "PartitionResult",
    "assign",
    "assignment_of",
    "decline_lines",
    "describe_node",
    "partition_graph",
    "partition_model",
]

log = logging.getLogger("ortcore.partition")

ASSIGNMENTS_KEY = "ortcore.assignments"
"""The key, in ``graph.meta``, of the table node -> :class:`Assignment` of
the graph's nodes. One table a graph rather than an entry in each node's
``meta``: a node's metadata store costs about 600 bytes, a table entry 50."""

ASSIGNMENT_KEY = ASSIGNMENTS_KEY  # its name when each node's meta held its own

NO_REASONS: Mapping[str, str] = MappingProxyType({})
"""The ``declined`` of a node no provider declined (shared: most nodes)."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one node runs, as partitioning decided it.

    Attributes:
        provider: the provider that runs the node.
        claim: the fused claim the node belongs to (the provider compiles
            it with the rest of the group), or ``None`` for a node run by a
            kernel of the provider's registry.
        declined: provider name -> reason, for each provider that declined it.
    """

    provider: ExecutionProvider
    claim: Claim | None = None
    declined: Mapping[str, str] = field(default_factory=lambda: NO_REASONS)


def _table(graph: ir.Graph) -> dict[ir.Node, Assignment]:
    """``graph``'s table of assignments (made empty on first use)."""
    table: dict[ir.Node, Assignment] | None = graph.meta.get(ASSIGNMENTS_KEY)
    if table is None:
        table = graph.meta[ASSIGNMENTS_KEY] = {}
    return table


def assignment_of(node: ir.Node) -> Assignment | None:
    """The :class:`Assignment` recorded for ``node`` in its graph, or ``None``
    if it has none (or is in no graph)."""
    graph = node.graph
    if graph is None:
        return None
    table = graph.meta.get(ASSIGNMENTS_KEY)
    return table.get(node) if table else None


def assign(node: ir.Node, assignment: Assignment) -> None:
    """Record where ``node``, a node of a graph, runs (e.g. on a fused node,
    the assignment of the nodes it replaced), so that partitioning keeps it.

    Raises:
        ValueError: ``node`` is in no graph.
    """
    graph = node.graph
    if graph is None:
        raise ValueError(f"node {node.name!r} ({node.op_type}) is in no graph: insert it first")
    _table(graph)[node] = assignment


@dataclass
class PartitionResult:
    """Where every node of one graph goes.

    Attributes:
        provider_of: node -> index into the session's provider list.
        groups: fused claims accepted, with the provider index.
        declined: node -> {provider name: reason} for every provider that
            declined it (kept also for nodes another provider took).
        group_of: node -> the fused claim it belongs to.
    """

    provider_of: dict[ir.Node, int] = field(default_factory=dict)
    groups: list[tuple[int, Claim]] = field(default_factory=list)
    declined: dict[ir.Node, dict[str, str]] = field(default_factory=dict)
    group_of: dict[ir.Node, Claim] = field(default_factory=dict)


def describe_node(node: ir.Node, opsets: Mapping[str, int]) -> str:
    """``Op(domain, opset N) node 'name'`` with input types, for error messages."""
    domain = node.domain or "ai.onnx"
    ins, _ = node_types(node)
    types = ", ".join(type_string(t) if t is not None else "-" for t in ins)
    return (
        f"{node.op_type}({domain}, opset {opsets.get(node.domain, 1)}) node "
        f"{node.name!r} with inputs ({types})"
    )


def _validate(
    claim: Claim,
    provider: ExecutionProvider,
    graph: ir.Graph,
    free: set[ir.Node],
    taken: set[ir.Node],
    consumers: Mapping[ir.Value, list[ir.Node]],
) -> None:
    who = f"Execution provider {provider.name!r}"
    if not claim.nodes:
        raise EPFail(f"{who} returned an empty claim")
    for node in claim.nodes:
        if not isinstance(node, ir.Node) or node.graph is not graph:
            raise EPFail(f"{who} claimed a node that is not in graph {graph.name!r}: {node!r}")
        if node in taken:
            raise EPFail(f"{who} claimed node {_node_label(node, graph)} twice")
        if node not in free:
            raise EPFail(
                f"{who} claimed node {_node_label(node, graph)}, which another "
                "provider already took"
            )
    if claim.fused and creates_cycle(claim.nodes, consumers):
        shown = ", ".join(_node_label(n, graph) for n in claim.nodes[:8])
        more = f" and {len(claim.nodes) - 8} more" if len(claim.nodes) > 8 else ""
        back = _comes_back_through(claim.nodes, consumers)
        through = f" through {_node_label(back, graph)}" if back is not None else ""
        raise EPFail(
            f"{who} claimed a fused group of {len(claim.nodes)} nodes ({shown}{more}) that "
            f"would create a cycle{through}; a group must not have a path that leaves it "
            "and comes back"
        )


def _valid_single(claim: Claim, graph: ir.Graph, free: set[ir.Node], taken: set[ir.Node]) -> bool:
    """Whether ``claim`` is a valid claim of one node for a kernel (most
    claims): a free node of ``graph`` not claimed before. ``False`` leaves
    it to :func:`_validate`, which says what is wrong or checks a group."""
    if claim.fused or len(claim.nodes) != 1:
        return False
    node = claim.nodes[0]
    return isinstance(node, ir.Node) and node in free and node not in taken and node.graph is graph


def _node_label(node: ir.Node, graph: ir.Graph) -> str:
    """A node for messages: ``Op 'name'``, or ``Op #i`` (its position in
    ``graph``) when it has no name."""
    if node.name:
        return f"{node.op_type} {node.name!r}"
    index = next((i for i, n in enumerate(graph) if n is node), None)
    return f"{node.op_type} #{index}" if index is not None else f"unnamed {node.op_type}"


def _comes_back_through(
    group: Sequence[ir.Node], consumers: Mapping[ir.Value, list[ir.Node]]
) -> ir.Node | None:
    """A node outside ``group`` on a path that leaves the group and comes back."""
    members = set(group)
    frontier = [
        u for n in group for v in n.outputs for u in consumers.get(v, ()) if u not in members
    ]
    seen: set[ir.Node] = set()
    while frontier:
        node = frontier.pop()
        if node in seen:
            continue
        seen.add(node)
        for v in node.outputs:
            for user in consumers.get(v, ()):
                if user in members:
                    return node
                frontier.append(user)
    return None


def partition_graph(
    graph: ir.Graph,
    providers: Sequence[ExecutionProvider],
    opsets: Mapping[str, int],
) -> PartitionResult:
    """Assign every node of ``graph`` to one of ``providers`` (in order).

    Nodes that carry an :class:`Assignment` to one of ``providers`` keep it;
    only the others (e.g. nodes a provider's graph pass added) are offered
    to the providers, and every node's assignment is recorded on it. Should
    a recorded fused group have lost a node since, the whole graph is
    partitioned afresh.

    Raises:
        EPFail: a provider's claim is invalid, or its ``get_capability`` raised.
        NotImplementedOp: a node no provider claimed; the message names the
            op, domain, opset, input types and each provider's reason.
    """
    result = PartitionResult()
    order = list(graph)
    free = set(order) - _recorded(graph, order, providers, result)
    if not free:
        return result
    consumers: dict[ir.Value, list[ir.Node]] = {}  # made for the first fused claim
    new: list[tuple[ir.Node, int, Claim]] = []
    for index, provider in enumerate(providers):
        if not free:
            break
        later = [p.name for p in providers[index + 1 :]]
        ctx = GraphContext(graph, [n for n in order if n in free], opsets, later)
        try:
            cap = provider.get_capability(ctx)
        except Exception as exc:
            raise EPFail(
                f"Execution provider {provider.name!r} failed in get_capability: {exc!r}"
            ) from exc
        taken: set[ir.Node] = set()
        for claim in cap.claims:
            if claim.fused and not consumers:
                consumers = consumers_of(graph)
            if not _valid_single(claim, graph, free, taken):
                _validate(claim, provider, graph, free, taken, consumers)
            taken.update(claim.nodes)
            for node in claim.nodes:
                result.provider_of[node] = index
                new.append((node, index, claim))
                if claim.fused:
                    result.group_of[node] = claim
            if claim.fused:
                result.groups.append((index, claim))
        free -= taken
        for node, reason in cap.declined.items():
            result.declined.setdefault(node, {})[provider.name] = reason
        for node in ctx.nodes:
            if node not in taken and node not in cap.declined:
                result.declined.setdefault(node, {})[provider.name] = "not claimed"
    if free:
        node = next(n for n in order if n in free)
        reasons = result.declined.get(node, {})
        why = "; ".join(f"{p}: {r}" for p, r in reasons.items()) or "no providers"
        raise NotImplementedOp(
            f"Could not find an implementation for {describe_node(node, opsets)}. "
            f"Providers asked: {why}. {_what_to_do(node, opsets)}"
        )
    if new and log.isEnabledFor(logging.INFO):
        for line in decline_lines(result.declined.get(n, NO_REASONS) for n, _, _ in new):
            log.info("%s", line)
    table = _table(graph)
    # One Assignment per provider for the nodes it runs with a kernel and no
    # other provider declined (most nodes): it is immutable, so shared.
    plain: dict[int, Assignment] = {}
    for node, index, claim in new:
        declined = result.declined.get(node)
        if not claim.fused and not declined:
            shared = plain.get(index)
            if shared is None:
                shared = plain[index] = Assignment(providers[index])
            table[node] = shared
            continue
        group = claim if claim.fused else None
        table[node] = Assignment(
            providers[index], group, dict(declined) if declined else NO_REASONS
        )
    return result


def decline_lines(declined: Iterable[Mapping[str, str]], most: int = 4) -> list[str]:
    """One line per provider that declined nodes: how many, and its reasons
    with their counts, most frequent first (at most ``most``, then how many
    more), e.g. ``TensorrtExecutionProvider declined 37 nodes: TensorRT has
    no NonZero (12), ...``.

    ``declined`` holds, for each node, provider name -> reason (a node
    record's ``declined``; a provider's "not claimed" counts too)."""
    reasons: dict[str, Counter[str]] = {}
    for one in declined:
        for provider, why in one.items():
            reasons.setdefault(provider, Counter())[why] += 1
    lines = []
    for provider, counts in reasons.items():
        total = sum(counts.values())
        shown = [f"{why} ({n})" for why, n in counts.most_common(most)]
        if len(counts) > most:
            shown.append(f"and {len(counts) - most} other reason(s)")
        noun = "node" if total == 1 else "nodes"
        lines.append(f"{provider} declined {total} {noun}: " + ", ".join(shown))
    return lines


def _recorded(
    graph: ir.Graph,
    order: Sequence[ir.Node],
    providers: Sequence[ExecutionProvider],
    result: PartitionResult,
) -> set[ir.Node]:
    """Fill ``result`` from the assignments (to one of ``providers``) recorded
    on the nodes of ``order`` and return those nodes; return none, and fill
    nothing, if a recorded fused group no longer matches the graph."""
    index = {id(p): i for i, p in enumerate(providers)}
    found: dict[ir.Node, tuple[int, Assignment]] = {}
    table = graph.meta.get(ASSIGNMENTS_KEY)
    if not table:
        return set()
    kept: dict[ir.Node, Assignment] = {}  # nodes since removed from the graph drop out
    for node in order:
        a = table.get(node)
        if a is None:
            continue
        kept[node] = a
        if id(a.provider) in index:
            found[node] = (index[id(a.provider)], a)
    graph.meta[ASSIGNMENTS_KEY] = kept
    groups: dict[Claim, int] = {}
    for i, a in found.values():
        if a.claim is None or a.claim in groups:
            continue
        for member in a.claim.nodes:
            got = found.get(member)
            if got is None or got[1].claim is not a.claim:
                return set()  # a member left the graph, or was reassigned
        groups[a.claim] = i
    for node, (i, a) in found.items():
        result.provider_of[node] = i
        if a.claim is not None:
            result.group_of[node] = a.claim
        if a.declined:
            result.declined[node] = dict(a.declined)
    result.groups.extend(sorted(((i, c) for c, i in groups.items()), key=lambda g: g[0]))
    return set(found)


def partition_model(
    model: ir.Model,
    providers: Sequence[ExecutionProvider],
    opsets: Mapping[str, int],
) -> None:
    """Partition ``model.graph`` and, in turn, the bodies (If branches, Loop
    and Scan bodies) of the nodes a provider runs with a kernel: the graphs
    the planner plans. Every node's :class:`Assignment` is recorded on it.

    The bodies of a node in a fused group are left alone: they go to the
    group's provider with the node.

    Raises:
        EPFail, NotImplementedOp: as :func:`partition_graph`.
    """
    _partition_nested(model.graph, providers, opsets)


def _partition_nested(
    graph: ir.Graph, providers: Sequence[ExecutionProvider], opsets: Mapping[str, int]
) -> None:
    part = partition_graph(graph, providers, opsets)
    for node in graph:
        if node not in part.group_of:
            for body in subgraphs(node):
                _partition_nested(body, providers, opsets)


def _what_to_do(node: ir.Node, opsets: Mapping[str, int]) -> str:
    """The advice that ends a "no implementation" error."""
    if node.domain in ONNX_DOMAINS:
        return "Install or enable a provider that supports it, or allow the CPU fallback."
    op = f"{node.domain}::{node.op_type}"
    if not onnx.defs.has(node.op_type, node.domain):
        return (
            f"Domain {node.domain!r} is not an ONNX domain and no custom operator {op} is "
            f"registered: define it with ortcore.custom_op(domain={node.domain!r}, "
            f"name={node.op_type!r}, ...), give it a kernel with @op.kernel(provider), and "
            "register it with SessionOptions.register_custom_ops(op) or a plugin's "
            "ortcore_custom_ops hook; or ship it in the model as a model-local function."
        )
    # onnx's schema table is per process: the schema may come from another
    # session's registration, so the advice covers both missing steps.
    return (
        f"Custom operator {op} has a schema in this process, but no provider of this "
        "session has a kernel for it: register the op for this session with "
        "SessionOptions.register_custom_ops(op) (or a plugin's ortcore_custom_ops hook), "
        "and make sure it has a kernel for one of the session's providers "
        "(@op.kernel('<provider name>'))."
    )
