"""``ep_sdk.group_nodes`` finds the groups of the plain greedy merge.

The fast version keeps each group's outside readers and skips nodes above
the visited horizon; on random graphs, visited in random topological orders,
it must give exactly the groups of the direct statement of the rule below
(every merge checked with :func:`ep_sdk.graph.creates_cycle` against all
groups so far), and no claim may come back into itself.
"""

from __future__ import annotations

import random

import onnx_ir as ir
import pytest

from ep_sdk import GraphContext
from ep_sdk.graph import consumers_of, creates_cycle, group_nodes, node_reads


def greedy(graph: GraphContext, accept: set[ir.Node]) -> list[list[str]]:
    """The rule as the docstring of group_nodes states it, without shortcuts."""
    consumers = consumers_of(graph.graph)
    group_of: dict[ir.Node, list[ir.Node]] = {}
    groups: list[list[ir.Node]] = []
    for node in graph.nodes:
        if node not in accept:
            continue
        current = [node]
        candidates: list[list[ir.Node]] = []
        for v in node_reads(node):
            g = group_of.get(v.producer()) if v.producer() is not None else None
            if g is not None and all(g is not c for c in candidates):
                candidates.append(g)
        for g in candidates:
            if not creates_cycle(g + current, consumers, group_of):
                current = g + current
                groups = [x for x in groups if x is not g]
        groups.append(current)
        for n in current:
            group_of[n] = current
    order = {n: i for i, n in enumerate(graph.nodes)}
    groups.sort(key=lambda g: min(order[n] for n in g))
    return [[n.name or "" for n in sorted(g, key=order.__getitem__)] for g in groups]


def random_graph(rng: random.Random, size: int) -> tuple[ir.Graph, list[ir.Node]]:
    x = ir.Value(name="x")
    values, nodes = [x], []
    for i in range(size):
        reads = rng.sample(values, min(rng.randint(1, 3), len(values)))
        node = ir.Node("", "Op", reads, num_outputs=rng.choice([1, 1, 2]), name=f"n{i}")
        for j, out in enumerate(node.outputs):
            out.name = f"v{i}_{j}"
        nodes.append(node)
        values.extend(node.outputs)
    return ir.Graph([x], [values[-1]], nodes=nodes, opset_imports={"": 17}), nodes


def topological_shuffle(rng: random.Random, graph: ir.Graph) -> list[ir.Node]:
    consumers = consumers_of(graph)
    waiting = {n: sum(v.producer() is not None for v in node_reads(n)) for n in graph}
    ready = [n for n, count in waiting.items() if count == 0]
    order = []
    while ready:
        node = ready.pop(rng.randrange(len(ready)))
        order.append(node)
        for out in node.outputs:
            for user in consumers.get(out, ()):
                waiting[user] -= 1
                if waiting[user] == 0:
                    ready.append(user)
    return order


@pytest.mark.parametrize("seed", range(8))
def test_same_groups_as_the_plain_greedy_merge(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        graph, nodes = random_graph(rng, rng.randint(1, 40))
        order = topological_shuffle(rng, graph) if rng.random() < 0.5 else nodes
        free = [n for n in order if rng.random() < 0.9]
        accept = {n for n in nodes if rng.random() < rng.choice([0.5, 0.8, 1.0])}
        context = GraphContext(graph, free, {"": 17})
        claims = group_nodes(context, accept.__contains__)
        assert [[n.name for n in c.nodes] for c in claims] == greedy(context, accept)
        consumers = consumers_of(graph)
        assert not any(creates_cycle(c.nodes, consumers) for c in claims)
