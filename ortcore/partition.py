"""Capability negotiation: ask providers in priority order, validate claims.

Each provider sees the nodes still free and answers with claims (single nodes,
or groups to fuse and compile) and reasons for the nodes it declines. The core
checks every claim: the nodes belong to this graph, are free, and a fused group
creates no cycle when contracted to one node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import onnx
import onnx_ir as ir

from ep_sdk import Claim, ExecutionProvider, GraphContext, node_types, type_string
from ep_sdk.graph import consumers_of, creates_cycle

from .errors import EPFail, NotImplementedOp

__all__ = ["PartitionResult", "describe_node", "partition_graph"]


@dataclass
class PartitionResult:
    """Where every node of one graph goes.

    Attributes:
        provider_of: node -> index into the session's provider list.
        groups: fused claims accepted, with the provider index.
        declined: node -> {provider name: reason} for every provider that
            declined it (kept also for nodes another provider took).
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
            raise EPFail(f"{who} claimed {node.op_type} node {node.name!r} twice")
        if node not in free:
            raise EPFail(
                f"{who} claimed {node.op_type} node {node.name!r}, which another "
                "provider already took"
            )
    if claim.fused and creates_cycle(claim.nodes, consumers):
        names = ", ".join(repr(n.name) for n in claim.nodes[:5])
        raise EPFail(
            f"{who} claimed a fused group ({names}, ...) that would create a cycle; "
            "a group must not have a path that leaves it and comes back"
        )


def partition_graph(
    graph: ir.Graph,
    providers: Sequence[ExecutionProvider],
    opsets: Mapping[str, int],
) -> PartitionResult:
    """Assign every node of ``graph`` to one of ``providers`` (in order).

    Raises:
        EPFail: a provider's claim is invalid, or its ``get_capability`` raised.
        NotImplementedOp: a node no provider claimed; the message names the
            op, domain, opset, input types and each provider's reason.
    """
    result = PartitionResult()
    order = list(graph)
    consumers = consumers_of(graph)
    free = set(order)
    for index, provider in enumerate(providers):
        if not free:
            break
        ctx = GraphContext(graph, [n for n in order if n in free], opsets)
        try:
            cap = provider.get_capability(ctx)
        except Exception as exc:
            raise EPFail(
                f"Execution provider {provider.name!r} failed in get_capability: {exc!r}"
            ) from exc
        taken: set[ir.Node] = set()
        for claim in cap.claims:
            _validate(claim, provider, graph, free, taken, consumers)
            taken.update(claim.nodes)
            for node in claim.nodes:
                result.provider_of[node] = index
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
    return result


_ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})


def _what_to_do(node: ir.Node, opsets: Mapping[str, int]) -> str:
    """The advice that ends a "no implementation" error."""
    if node.domain in _ONNX_DOMAINS:
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
