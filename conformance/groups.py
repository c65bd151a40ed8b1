"""Operator cases for compile-path providers: the case's nodes in a small group.

A provider that claims only groups of several nodes (a bridge to an engine
with a ``min_group_size``, a fuser) declines every single-node operator case,
so the cases alone would never run its kernels. When it declines a case and
implements ``compile()``, the case is built again with companion nodes around
its own (:data:`COMPANIONS`), tried in turn until the provider claims every
node of the case (asked of ``get_capability``, then checked in the session's
partition). The companions are exact (``Identity``, a product by one, ``Neg``
twice), so the case's expected outputs hold as they are; the session lists
the CPU provider after the provider under test, for companions it leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["COMPANIONS", "Grouped", "case_nodes", "grouped_variants", "compiles", "regroup"]

Wrap = Callable[[str, str, int, str], list[onnx.NodeProto]]
"""(value, result name, element type, prefix) -> nodes computing the result exactly."""


def _identity(x: str, y: str, elem: int, p: str) -> list[onnx.NodeProto]:
    return [helper.make_node("Identity", [x], [y], name=f"{p}_identity")]


def _times_one(x: str, y: str, elem: int, p: str) -> list[onnx.NodeProto]:
    return [helper.make_node("Mul", [x, f"{p}_one"], [y], name=f"{p}_mul1")]


def _neg_neg(x: str, y: str, elem: int, p: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Neg", [x], [f"{p}_negated"], name=f"{p}_neg1"),
        helper.make_node("Neg", [f"{p}_negated"], [y], name=f"{p}_neg2"),
    ]


COMPANIONS: tuple[tuple[str, Wrap], ...] = (
    ("Identity", _identity),
    ("Mul by 1", _times_one),
    ("Neg twice", _neg_neg),
)
"""Companion patterns, in the order they are tried; each computes its input exactly."""
_PLACES = ("after", "before", "around")
_PREFIX = "conformance_group"


@dataclass(frozen=True)
class Grouped:
    """A case's model with companions, and how it was made.

    Attributes:
        model: the model; its inputs and outputs are the case's.
        companion: which of :data:`COMPANIONS`.
        place: ``after`` its outputs, ``before`` its inputs, or ``around`` both.
        nodes: names of the case's own nodes (the ones the provider must take).
    """

    model: onnx.ModelProto
    companion: str
    place: str
    nodes: tuple[str, ...]

    @property
    def label(self) -> str:
        """How the case ran: ``as a group (Identity after)``."""
        return f"as a group ({self.companion} {self.place} the case's nodes)"


def _tensor_elem(vi: onnx.ValueInfoProto) -> int:
    return vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0


def _one(elem: int, name: str) -> onnx.TensorProto | None:
    """A scalar 1 of element type ``elem`` (``None`` for strings and bools)."""
    if elem in (onnx.TensorProto.STRING, onnx.TensorProto.BOOL):
        return None
    try:
        dtype = helper.tensor_dtype_to_np_dtype(elem)
        return numpy_helper.from_array(np.array(1).astype(dtype), name)
    except Exception:
        return None


def case_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every top-level node named (``case_node_<i>`` where it had
    no name), so that the partition can tell the case's nodes apart."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, n in enumerate(out.graph.node):
        if not n.name:
            n.name = f"case_node_{i}"
    return out


def regroup(model: onnx.ModelProto, companion: str, wrap: Wrap, place: str) -> Grouped | None:
    """``model`` (nodes named by :func:`case_nodes`) with ``wrap`` after every
    tensor output (``after``), before every tensor input (``before``) or both
    (``around``); ``None`` when there is nothing to wrap."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    outs = [vi for vi in g.output if _tensor_elem(vi)] if place != "before" else []
    ins = [vi for vi in g.input if vi.name not in inits and _tensor_elem(vi)]
    ins = ins if place != "after" else []
    if (place == "around" and not (ins and outs)) or not (ins or outs):
        return None
    if any(vi.name in {o.name for o in g.output} for vi in ins):
        return None  # an input that is also an output: nothing to put before it
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    pre: list[onnx.NodeProto] = []
    post: list[onnx.NodeProto] = []
    consts: dict[str, onnx.TensorProto | None] = {}
    rename: dict[str, str] = {}
    for k, vi in enumerate(ins):
        p = f"{_PREFIX}_in{k}"
        rename[vi.name] = f"{p}_value"
        pre += wrap(vi.name, rename[vi.name], _tensor_elem(vi), p)
        consts[f"{p}_one"] = _one(_tensor_elem(vi), f"{p}_one")
    produced: dict[str, str] = {}
    for k, vi in enumerate(outs):
        p = f"{_PREFIX}_out{k}"
        produced[vi.name] = f"{p}_value"
        post += wrap(produced[vi.name], vi.name, _tensor_elem(vi), p)
        consts[f"{p}_one"] = _one(_tensor_elem(vi), f"{p}_one")
    own = []
    for n in g.node:
        node = onnx.NodeProto()
        node.CopyFrom(n)
        node.input[:] = [rename.get(x, x) for x in n.input]
        node.output[:] = [produced.get(y, y) for y in n.output]
        own.append(node)
    del graph.node[:]
    graph.node.extend([*pre, *own, *post])
    used = {x for n in graph.node for x in n.input}
    for name, t in consts.items():
        if name in used:
            if t is None:
                return None  # no 1 of this type to multiply by
            graph.initializer.append(t)
    return Grouped(out, companion, place, tuple(n.name for n in g.node))


def grouped_variants(model: onnx.ModelProto) -> Iterator[Grouped]:
    """Every companion at every place, in the order they are tried."""
    named = case_nodes(model)
    for place in _PLACES:
        for companion, wrap in COMPANIONS:
            grouped = regroup(named, companion, wrap, place)
            if grouped is not None:
                yield grouped


def compiles(provider_cls: type | None) -> bool:
    """Whether the provider class implements ``compile()`` (claims fused groups)."""
    from ep_sdk import ExecutionProvider

    compile_ = getattr(provider_cls, "compile", None)
    return compile_ is not None and compile_ is not ExecutionProvider.compile


def claims_all(provider: Any, grouped: Grouped) -> bool:
    """Whether ``provider.get_capability`` claims every node of the case."""
    from ep_sdk import GraphContext
    from ortcore.model import load_model

    try:
        loaded = load_model(grouped.model.SerializeToString())
        ctx = GraphContext(loaded.graph, list(loaded.graph), dict(loaded.opset_imports))
        cap = provider.get_capability(ctx)
    except Exception:
        return False
    claimed = {n.name for c in cap.claims for n in c.nodes}
    return set(grouped.nodes) <= claimed


def placed_all(records: Sequence[Any], provider: str, grouped: Grouped) -> bool:
    """Whether a session's partition put every node of the case on ``provider``."""
    where = {r.node: r.provider for r in records}
    return all(where.get(name) == provider for name in grouped.nodes)
