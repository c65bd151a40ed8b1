"""Inline a model's local functions, after bounding what inlining would create.

Inlining copies a function's body at every call, and the bodies' own calls
inside it, so a few kilobytes of functions that each call the next twice
expand to 2**40 nodes; a graph attribute passed down a chain of single
calls can double at each level just as well (a node of the body uses it
twice), and so can a tensor attribute. onnx's inliner builds whatever it is
given, recursively, and the process dies allocating.

:func:`measure_expansion` (:mod:`ortcore._expansion`) computes, before
anything is copied, how many nodes and how many bytes of attribute values and
subgraph initializers inlining would create, and how deep its calls nest. It
visits each function body and each graph once (no recursion: a deep chain
cannot overflow any stack) and counts by memo over the call graph: a
function's cost is its body's, each call in it counting its callee's cost,
and each of the function's own attributes a number of copies (the cost of
the value a caller passes, or of the default, is multiplied by it). Calls
inside If/Loop/Scan bodies, inside graphs passed as attributes and inside
attribute defaults all count; calls match functions as onnx's inliner
matches them (domain, ``ai.onnx`` meaning the default one, name and
overload). Functions onnx's inliner keeps (their opsets differ from the
model's) count too: shape inference expands them the same way. Recursion is
refused.

The limits bound how much inlining *grows* the model: what it creates less
what the function bodies already hold (a model wrapped whole in a function
called once grows by nothing). :func:`inline_functions` refuses a model past
them (an ``InvalidGraph`` naming the call, the function whose one expansion
crosses the limit, the limit and how to raise it), gives calls the attribute
defaults they leave out (:func:`bind_defaults`), then runs onnx's inliner.

Limits, in order: the session config entries ``session.max_inlined_nodes`` and
``session.max_inlined_bytes`` (passed in), the environment variables
``ORTCORE_MAX_INLINED_NODES`` and ``ORTCORE_MAX_INLINED_BYTES``, the
defaults. Loading costs about 3 kB and 0.1 ms a node once inlined (measured:
fan-out 2, 131,072 nodes, 410 MB, 14 s), so the default of 1,000,000 nodes
allows about 3 GB and two minutes of loading; real exports with functions
(torch dynamo's among them) grow by some hundred thousand nodes at most. Each
byte copied costs about five of peak memory (the inliner's serialized round
trips: 256 MiB copied, 1.28 GB), so the default of 1 GiB allows about 5 GB.
The call depth is capped at :data:`MAX_CALL_DEPTH`, as onnx's checker caps
it: the inliner and shape inference recurse once per level.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import onnx
import onnx.inliner

from ep_sdk.limits import parse_byte_limit

from ._expansion import (
    CAP,
    Call,
    Callee,
    Cost,
    Expansion,
    Key,
    Scan,
    domains_of,
    function_costs,
    graphs_of,
    key_of,
    label,
    measure_expansion,
)
from .errors import InvalidArgument, InvalidGraph

__all__ = [
    "DEFAULT_MAX_INLINED_BYTES",
    "DEFAULT_MAX_INLINED_NODES",
    "MAX_CALL_DEPTH",
    "MAX_INLINED_BYTES_CONFIG",
    "MAX_INLINED_BYTES_ENV",
    "MAX_INLINED_NODES_CONFIG",
    "MAX_INLINED_NODES_ENV",
    "Expansion",
    "bind_defaults",
    "check_expansion",
    "inline_functions",
    "inlined_byte_limit",
    "inlined_node_limit",
    "measure_expansion",
    "parse_count_limit",
]

MAX_INLINED_NODES_CONFIG = "session.max_inlined_nodes"
"""Session config entry: the most nodes inlining model-local functions may create."""
MAX_INLINED_NODES_ENV = "ORTCORE_MAX_INLINED_NODES"
"""Environment variable with the meaning of :data:`MAX_INLINED_NODES_CONFIG`."""
DEFAULT_MAX_INLINED_NODES = 1_000_000
"""The node limit when neither the config entry nor the variable sets one."""

MAX_INLINED_BYTES_CONFIG = "session.max_inlined_bytes"
"""Session config entry: the most bytes of attribute values and subgraph
initializers inlining may copy."""
MAX_INLINED_BYTES_ENV = "ORTCORE_MAX_INLINED_BYTES"
"""Environment variable with the meaning of :data:`MAX_INLINED_BYTES_CONFIG`."""
DEFAULT_MAX_INLINED_BYTES = 1 << 30
"""The byte limit when neither the config entry nor the variable sets one."""

MAX_CALL_DEPTH = 100
"""Deepest nesting of function calls (onnx's checker refuses deeper chains)."""


def parse_count_limit(text: str, where: str, unit: str) -> int:
    """A positive count from ``text`` (an integer; ``1e7`` forms allowed).

    Raises:
        ValueError: naming ``where``, the text and ``unit``.
    """
    try:
        return parse_byte_limit(text, where)
    except ValueError:
        raise ValueError(f"{where} must be a positive number of {unit}, not {text!r}") from None


def _limit(configured: int | None, env: str, default: int, unit: str) -> int:
    if configured is not None:
        return configured
    text = os.environ.get(env, "").strip()
    if text:
        try:
            return parse_count_limit(text, f"${env}", unit)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    return default


def inlined_node_limit(configured: int | None = None) -> int:
    """The node limit: ``configured`` (the session's entry), else
    ``$ORTCORE_MAX_INLINED_NODES``, else :data:`DEFAULT_MAX_INLINED_NODES`."""
    return _limit(configured, MAX_INLINED_NODES_ENV, DEFAULT_MAX_INLINED_NODES, "nodes")


def inlined_byte_limit(configured: int | None = None) -> int:
    """The byte limit: ``configured``, else ``$ORTCORE_MAX_INLINED_BYTES``,
    else :data:`DEFAULT_MAX_INLINED_BYTES`."""
    return _limit(configured, MAX_INLINED_BYTES_ENV, DEFAULT_MAX_INLINED_BYTES, "bytes")


def check_expansion(
    proto: onnx.ModelProto, max_nodes: int | None = None, max_bytes: int | None = None
) -> Expansion:
    """Refuse a model whose functions would inline past the limits.

    Args:
        max_nodes, max_bytes: the session's limits (``None``: the environment
            variable, else the default; see :func:`inlined_node_limit`).

    Returns:
        the expansion, within the limits.

    Raises:
        InvalidGraph: a function is recursive; the calls nest deeper than
            :data:`MAX_CALL_DEPTH`; or inlining would create more nodes or
            bytes than the limit. The message names the call and the function
            whose one expansion crosses the limit, the limit and how to raise it.
    """
    return _checked(proto, max_nodes, max_bytes)[0]


def _checked(
    proto: onnx.ModelProto, max_nodes: int | None, max_bytes: int | None
) -> tuple[Expansion, dict[Key, Callee]]:
    """:func:`check_expansion`, and the functions' costs."""
    if not proto.functions:
        return Expansion(0, 0, 0), {}
    node_limit, byte_limit = inlined_node_limit(max_nodes), inlined_byte_limit(max_bytes)
    callees, held = function_costs(proto.functions)
    calls: list[Call] = []
    cost = Scan(callees, calls).nodes(proto.graph.node, copied=False, where="the main graph")
    found = Expansion(cost.nodes, cost.bytes, cost.depth, *held)
    if found.depth > MAX_CALL_DEPTH:
        raise InvalidGraph(_depth_message(proto, callees, calls, found.depth))
    if found.added_nodes > node_limit:
        raise InvalidGraph(
            _size_message(proto, callees, calls, "nodes", found, node_limit)
            + f"; or raise the limit with the session config entry "
            f"{MAX_INLINED_NODES_CONFIG!r} or ${MAX_INLINED_NODES_ENV}."
        )
    if found.added_bytes > byte_limit:
        raise InvalidGraph(
            _size_message(proto, callees, calls, "bytes", found, byte_limit)
            + f"; or raise the limit with the session config entry "
            f"{MAX_INLINED_BYTES_CONFIG!r} or ${MAX_INLINED_BYTES_ENV}."
        )
    return found, callees


def _path(
    proto: onnx.ModelProto,
    callees: dict[Key, Callee],
    top: Call,
    measure: Callable[[Call], int],
    go_on: Callable[[Call], bool],
) -> list[Key]:
    """The functions from ``top``'s callee down, each time to the call of the
    body that ``measure`` finds largest, while ``go_on`` accepts it."""
    bodies = {key_of(f.domain, f.name, f.overload): f for f in proto.functions}
    domains = domains_of(callees)
    path, on_path = [top.key], {top.key}
    while True:
        inner: list[Call] = []
        Scan(callees, inner, domains).nodes(bodies[path[-1]].node, copied=True)
        worst = max(inner, key=measure, default=None)
        if worst is None or worst.key in on_path or not go_on(worst):
            return path
        path.append(worst.key)
        on_path.add(worst.key)


def _shown(path: list[Key]) -> str:
    names = [label(k) for k in path]
    return " -> ".join(names if len(names) <= 8 else [*names[:4], "...", *names[-3:]])


def _where(call: Call) -> str:
    node = f"node {call.node.name!r}" if call.node.name else "a node without a name"
    return f"{node} in {call.where}"


def _depth_message(
    proto: onnx.ModelProto, callees: dict[Key, Callee], calls: list[Call], depth: int
) -> str:
    top = max(calls, key=lambda c: c.depth)
    path = _path(proto, callees, top, lambda c: c.depth, lambda c: True)
    return (
        f"This is an invalid model. Its model-local functions call each other {depth:,} "
        f"levels deep, deeper than the limit of {MAX_CALL_DEPTH} (onnx's checker has the "
        f"same limit): {_where(top)} calls function {label(path[0])} ({_shown(path)}). "
        "Refuse the model: inlining and shape inference recurse once per level."
    )


def _amount(value: int) -> str:
    return f"more than {CAP:,}" if value >= CAP else f"{value:,}"


def _size_message(
    proto: onnx.ModelProto,
    callees: dict[Key, Callee],
    calls: list[Call],
    unit: str,
    found: Expansion,
    limit: int,
) -> str:
    """Name the call that costs most, and the chain down to the deepest function
    whose one expansion is over the limit on its own."""

    def size(c: Call | Cost | Expansion) -> int:
        return c.nodes if unit == "nodes" else c.bytes

    held = found.held_nodes if unit == "nodes" else found.held_bytes
    what = "nodes" if unit == "nodes" else "bytes of attribute values and subgraph initializers"
    head = (
        f"This is an invalid model. Inlining its model-local functions would grow it by "
        f"{_amount(size(found) - held if size(found) < CAP else CAP)} {what} "
        f"(its functions hold {held:,}, their "
        f"expansion {_amount(size(found))}), more than the limit of {limit:,}"
    )
    if not calls:
        return head + ". Refuse the model if you do not trust it"
    top = max(calls, key=size)
    path = _path(proto, callees, top, size, lambda c: size(callees[c.key].cost) > limit)
    text = f"{head}: {_where(top)} calls function {label(path[0])}"
    last = callees[path[-1]].cost
    if size(last) > limit:
        text += (
            f", which expands to {_amount(size(top))} {unit}; function {label(path[-1])} "
            f"alone expands to {_amount(size(last))} {unit} (call path {_shown(path)})"
        )
    else:
        text += (
            f", which expands to {_amount(size(top))} {unit} or more with the attribute "
            "values passed to it, copied at every call that uses them"
        )
    return text + ". Refuse the model if you do not trust it"


def inline_functions(
    proto: onnx.ModelProto, max_nodes: int | None = None, max_bytes: int | None = None
) -> onnx.ModelProto:
    """Inline ``proto``'s model-local functions, within the limits.

    Calls that leave out an attribute the function has a default for get
    the default first, in place (onnx's inliner drops an attribute a call
    does not give, where onnxruntime and the ONNX spec use the default).

    Raises:
        InvalidGraph: see :func:`check_expansion`; or the inliner failed.
    """
    if not proto.functions:
        return proto
    _, callees = _checked(proto, max_nodes, max_bytes)
    bind_defaults(proto, callees)
    try:
        return onnx.inliner.inline_local_functions(proto)
    except Exception as exc:
        raise InvalidGraph(f"inlining model-local functions failed: {exc}") from exc


def bind_defaults(proto: onnx.ModelProto, callees: dict[Key, Callee] | None = None) -> int:
    """Give every call that inlining expands the defaults of the attributes
    its function uses and the call leaves out; return how many it got.

    Only calls inlining reaches are visited (the main graph, the bodies of the
    functions called, the graphs passed to an attribute a function uses), each
    body once: every default added is copied at least once by inlining, so
    the bytes added stay within what :func:`check_expansion` counted.

    Not covered: a call passing a reference to an attribute its own caller
    leaves out (``ref_attr_name`` to an absent attribute); the inliner drops it.
    """
    defaults: dict[Key, dict[str, onnx.AttributeProto]] = {}
    bodies: dict[Key, onnx.FunctionProto] = {}
    for f in proto.functions:  # the last of one key wins, as in the inliner's map
        key = key_of(f.domain, f.name, f.overload)
        bodies[key] = f
        defaults[key] = {a.name: a for a in f.attribute_proto}
    if not any(defaults.values()):
        return 0
    if callees is None:
        callees = function_costs(proto.functions)[0]
    added = 0
    seen: set[Key] = set()
    stack: list[Sequence[onnx.NodeProto]] = [proto.graph.node]
    while stack:
        for node in stack.pop():
            key = key_of(node.domain, node.op_type, node.overload)
            callee = callees.get(key)
            if callee is None:
                for attr in node.attribute:
                    stack.extend(g.node for g in graphs_of(attr))
                continue
            uses = callee.cost.uses
            given = {a.name for a in node.attribute}
            for name, default in defaults.get(key, {}).items():
                if name not in given and uses.get(name):
                    node.attribute.append(default)
                    added += 1
            for attr in node.attribute:
                if uses.get(attr.name):
                    stack.extend(g.node for g in graphs_of(attr))
            if key not in seen:
                seen.add(key)
                stack.append(bodies[key].node)
    return added
