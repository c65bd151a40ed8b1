"""Count what inlining model-local functions would create, without copying.

The cost of a function is that of its body: its nodes (subgraphs included),
the bytes of its attribute values and subgraph initializers, the depth of
its calls, and for each of its own attributes how many times, and how deep,
its value is copied; each call in it counts its callee's cost, a value
passed to an attribute the callee uses counting once per use. Functions are
costed callees first (recursion is refused), each body and graph visited
once with an explicit stack, so the count takes time linear in the model and
no deep chain can overflow a stack. See :mod:`ortcore.inlining`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import onnx

from .errors import InvalidGraph

__all__ = [
    "CAP",
    "Call",
    "Callee",
    "Cost",
    "Expansion",
    "Key",
    "Scan",
    "function_costs",
    "domains_of",
    "graphs_of",
    "key_of",
    "label",
    "measure_expansion",
    "sat",
]

CAP = 1 << 62  # counts saturate here: a 2**100000 bomb stays a small integer

Key = tuple[str, str, str]


def sat(value: int) -> int:
    return value if value < CAP else CAP


def key_of(domain: str, name: str, overload: str) -> Key:
    return ("" if domain == "ai.onnx" else domain, name, overload)


def label(key: Key) -> str:
    domain, name, overload = key
    return f"{domain or 'ai.onnx'}:{name}" + (f" (overload {overload!r})" if overload else "")


@dataclass(frozen=True)
class Expansion:
    """What inlining a model's functions creates (counts saturate at 2**62).

    Attributes:
        nodes: nodes created (subgraph nodes included; the call nodes
            replaced and the main graph's own nodes are not counted).
        bytes: bytes of attribute values and subgraph initializers copied.
        depth: deepest nesting of calls (0: the model calls no function).
        held_nodes, held_bytes: what the function bodies hold, each once
            (the model has them in memory already; inlining drops them).
    """

    nodes: int
    bytes: int
    depth: int
    held_nodes: int = 0
    held_bytes: int = 0

    @property
    def added_nodes(self) -> int:
        """Nodes past what the function bodies hold: how much inlining grows the model."""
        return max(0, self.nodes - self.held_nodes)

    @property
    def added_bytes(self) -> int:
        """Bytes past what the function bodies hold."""
        return max(0, self.bytes - self.held_bytes)


class Cost:
    """One expansion of a body: what it creates, how deep its calls go, and
    for each attribute of the function, how often and at which call depth
    its value is copied (a caller's value, or the default, costs that much
    again each time)."""

    __slots__ = ("nodes", "bytes", "depth", "uses", "use_depth")

    def __init__(self) -> None:
        self.nodes = 0
        self.bytes = 0
        self.depth = 0
        self.uses: dict[str, int] = {}
        self.use_depth: dict[str, int] = {}

    def use(self, name: str, times: int, depth: int) -> None:
        self.uses[name] = sat(self.uses.get(name, 0) + times)
        self.use_depth[name] = max(self.use_depth.get(name, 0), depth)

    def widen(self, other: Cost) -> None:
        """Make this the larger of both (two functions with one key: either may be used)."""
        self.nodes = max(self.nodes, other.nodes)
        self.bytes = max(self.bytes, other.bytes)
        self.depth = max(self.depth, other.depth)
        for name, times in other.uses.items():
            self.uses[name] = max(self.uses.get(name, 0), times)
            self.use_depth[name] = max(self.use_depth.get(name, 0), other.use_depth[name])


@dataclass
class Callee:
    cost: Cost
    defaults: dict[str, Cost]


@dataclass(frozen=True)
class Call:
    """A call a scan met, for the error message."""

    node: onnx.NodeProto
    key: Key
    where: str
    nodes: int
    bytes: int
    depth: int


def domains_of(keys: Iterable[Key]) -> frozenset[str]:
    """The node domains that may name one of the functions of ``keys``."""
    found = {k[0] for k in keys}
    if "" in found:
        found.add("ai.onnx")
    return frozenset(found)


def graphs_of(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    graphs = list(attr.graphs)
    if attr.HasField("g"):
        graphs.append(attr.g)
    return graphs


def _graph_bytes(graph: onnx.GraphProto) -> int:
    return sum(t.ByteSize() for t in graph.initializer) + sum(
        t.ByteSize() for t in graph.sparse_initializer
    )


class Scan:
    """Add up one body (or the main graph, or an attribute value) with an
    explicit stack of (nodes, copies, call depth, copied?, where)."""

    def __init__(
        self,
        callees: dict[Key, Callee],
        calls: list[Call] | None = None,
        domains: frozenset[str] | None = None,
    ) -> None:
        self.callees = callees
        self.calls = calls
        self.domains = domains_of(callees) if domains is None else domains
        self.total = Cost()
        self.stack: list[tuple[Sequence[onnx.NodeProto], int, int, bool, str]] = []

    def nodes(self, nodes: Sequence[onnx.NodeProto], copied: bool, where: str = "") -> Cost:
        self.stack.append((nodes, 1, 0, copied, where))
        return self.run()

    def value(self, attr: onnx.AttributeProto, times: int, depth: int, where: str = "") -> int:
        """A concrete attribute value copied ``times`` times at call depth
        ``depth``; return the bytes added now (a graph's nodes come later)."""
        graphs = graphs_of(attr)
        if graphs:
            added = 0
            for g in graphs:
                added = sat(added + times * _graph_bytes(g))
                self.stack.append((g.node, times, depth, True, where or f"graph {g.name!r}"))
        else:
            added = sat(times * attr.ByteSize())
        self.total.bytes = sat(self.total.bytes + added)
        return added

    def run(self) -> Cost:
        total, callees, stack, domains = self.total, self.callees, self.stack, self.domains
        while stack:
            body, times, depth, copied, where = stack.pop()
            plain = 0
            for node in body:
                domain = node.domain  # most nodes' domain has no function: one read
                callee = (
                    callees.get(key_of(domain, node.op_type, node.overload))
                    if domain in domains
                    else None
                )
                if callee is not None:
                    self._call(node, callee, times, depth, where)
                    continue
                plain += 1
                if len(node.attribute):
                    self._attributes(node, times, depth, copied)
            if copied:
                total.nodes = sat(total.nodes + plain * times)
        return total

    def _attributes(self, node: onnx.NodeProto, times: int, depth: int, copied: bool) -> None:
        """The attributes of a node that is not a call."""
        for attr in node.attribute:
            if attr.ref_attr_name:
                self.total.use(attr.ref_attr_name, times, depth)
            elif copied:
                self.value(attr, times, depth)
            else:  # the main graph's own subgraphs: only the calls in them create nodes
                for g in graphs_of(attr):
                    self.stack.append((g.node, times, depth, False, f"graph {g.name!r}"))

    def _call(
        self, node: onnx.NodeProto, callee: Callee, times: int, depth: int, where: str
    ) -> None:
        total, cost = self.total, callee.cost
        inside = depth + 1  # the call depth of the callee's body
        nodes, nbytes = sat(times * cost.nodes), sat(times * cost.bytes)
        given = set()
        for attr in node.attribute:
            uses = cost.uses.get(attr.name, 0)
            given.add(attr.name)
            if not uses:
                continue  # the inliner drops it
            at = inside + cost.use_depth[attr.name]
            if attr.ref_attr_name:
                total.use(attr.ref_attr_name, sat(times * uses), at)
            else:  # adds to the total itself
                nbytes = sat(nbytes + self.value(attr, sat(times * uses), at))
        for name, uses in cost.uses.items():
            default = callee.defaults.get(name)
            if name in given or default is None:
                continue
            copies = sat(times * uses)
            nodes = sat(nodes + copies * default.nodes)
            total.bytes = sat(total.bytes + copies * default.bytes)
            nbytes = sat(nbytes + copies * default.bytes)
            total.depth = max(total.depth, inside + cost.use_depth[name] + default.depth)
        total.nodes = sat(total.nodes + nodes)
        total.bytes = sat(total.bytes + times * cost.bytes)
        total.depth = max(total.depth, inside + cost.depth)
        if self.calls is not None:
            key = key_of(node.domain, node.op_type, node.overload)
            self.calls.append(Call(node, key, where, nodes, nbytes, cost.depth + 1))


def _called(
    roots: list[Sequence[onnx.NodeProto]], by_key: dict[Key, list[int]], domains: frozenset[str]
) -> tuple[set[int], int, int]:
    """The functions the nodes of ``roots`` and of their nested graphs call,
    and the nodes and bytes (attribute values, subgraph initializers) they hold."""
    found: set[int] = set()
    nodes = nbytes = 0
    stack = list(roots)
    while stack:
        body = stack.pop()
        nodes += len(body)
        for node in body:
            domain = node.domain
            if domain in domains:
                found.update(by_key.get(key_of(domain, node.op_type, node.overload), ()))
            if len(node.attribute):
                for attr in node.attribute:
                    graphs = graphs_of(attr)
                    for g in graphs:
                        nbytes += _graph_bytes(g)
                        stack.append(g.node)
                    if not graphs:
                        nbytes += attr.ByteSize()
    return found, nodes, nbytes


def _function_roots(f: onnx.FunctionProto) -> list[Sequence[onnx.NodeProto]]:
    roots: list[Sequence[onnx.NodeProto]] = [f.node]
    for attr in f.attribute_proto:
        roots.extend(g.node for g in graphs_of(attr))
    return roots


def _order(functions: Sequence[onnx.FunctionProto]) -> tuple[list[int], int, int]:
    """Function indices, callees before callers; and the nodes and bytes all
    the bodies hold, each once.

    Raises:
        InvalidGraph: a function calls itself, directly or through others.
    """
    by_key: dict[Key, list[int]] = {}
    for i, f in enumerate(functions):
        by_key.setdefault(key_of(f.domain, f.name, f.overload), []).append(i)
    domains = domains_of(by_key)
    deps: list[set[int]] = []
    held_nodes = held_bytes = 0
    for f in functions:
        found, nodes, nbytes = _called(_function_roots(f), by_key, domains)
        deps.append(found)
        for attr in f.attribute_proto:  # the defaults' values (their graphs' nodes are roots)
            graphs = graphs_of(attr)
            nbytes += sum(_graph_bytes(g) for g in graphs) if graphs else attr.ByteSize()
        held_nodes, held_bytes = held_nodes + nodes, held_bytes + nbytes
    callers: list[list[int]] = [[] for _ in functions]
    for i, found in enumerate(deps):
        for j in found:
            callers[j].append(i)
    waiting = [len(d) for d in deps]
    ready = [i for i, w in enumerate(waiting) if w == 0]
    order: list[int] = []
    while ready:
        j = ready.pop()
        order.append(j)
        for i in callers[j]:
            waiting[i] -= 1
            if waiting[i] == 0:
                ready.append(i)
    if len(order) < len(functions):
        raise InvalidGraph(_cycle_message(functions, deps, waiting))
    return order, held_nodes, held_bytes


def _cycle_message(
    functions: Sequence[onnx.FunctionProto], deps: list[set[int]], waiting: list[int]
) -> str:
    # Every function left waits for another one left: walking those edges must loop.
    start = next(i for i, w in enumerate(waiting) if w > 0)
    path, seen = [start], {start: 0}
    while True:
        nxt = min(j for j in deps[path[-1]] if waiting[j] > 0)
        if nxt in seen:
            cycle = [*path[seen[nxt] :], nxt]
            break
        seen[nxt] = len(path)
        path.append(nxt)
    names = [
        label(key_of(functions[i].domain, functions[i].name, functions[i].overload)) for i in cycle
    ]
    shown = " -> ".join(names if len(names) <= 8 else [*names[:4], "...", *names[-3:]])
    return (
        f"This is an invalid model. Model-local function {names[0]} calls itself "
        f"({shown}); functions must not be recursive (inlining them would never end)."
    )


def function_costs(
    functions: Sequence[onnx.FunctionProto],
) -> tuple[dict[Key, Callee], tuple[int, int]]:
    """Every function's cost, callees first (see the module docstring); and
    the nodes and bytes the bodies hold, each once."""
    callees: dict[Key, Callee] = {}
    # Callees come first, so every function a body calls is costed by then.
    domains = domains_of(key_of(f.domain, f.name, f.overload) for f in functions)
    order, held_nodes, held_bytes = _order(functions)
    for i in order:
        f = functions[i]
        cost = Scan(callees, domains=domains).nodes(f.node, copied=True)
        defaults = {}
        for attr in f.attribute_proto:
            scan = Scan(callees, domains=domains)
            scan.value(attr, 1, 0)
            defaults[attr.name] = scan.run()
        key = key_of(f.domain, f.name, f.overload)
        known = callees.get(key)
        if known is None:
            callees[key] = Callee(cost, defaults)
        else:
            known.cost.widen(cost)
            for name, d in defaults.items():
                if name in known.defaults:
                    known.defaults[name].widen(d)
                else:
                    known.defaults[name] = d
    return callees, (held_nodes, held_bytes)


def measure_expansion(proto: onnx.ModelProto) -> Expansion:
    """What inlining ``proto``'s model-local functions would create (nothing is copied).

    Raises:
        InvalidGraph: a function is recursive.
    """
    if not proto.functions:
        return Expansion(0, 0, 0)
    callees, held = function_costs(proto.functions)
    cost = Scan(callees).nodes(proto.graph.node, copied=False)
    return Expansion(cost.nodes, cost.bytes, cost.depth, *held)
