"""Remove Cast, Reshape, Expand and Transpose nodes (and pairs) that do nothing.

- ``Cast`` to the dtype its input already has; a ``Cast`` pair A→B→A whose
  first cast is exactly lossless (a widening, see :data:`LOSSLESS_CASTS`).
- ``Reshape`` and ``Expand`` whose constant target leaves the input's static
  shape as it is; a ``Reshape`` of a ``Reshape`` with a constant target
  reads the first one's input instead (the target then says it all).
- ``Transpose`` with the identity permutation; a ``Transpose`` pair whose
  permutations compose to the identity, or else into one ``Transpose``.

Only default-domain nodes of the main graph are rewritten. As in
:func:`~ortcore.optimizer.elimination.eliminate_identities`, a node whose
output is a graph output keeps that name, and is kept when its replacement
is a graph input, an initializer or another graph output.

Static shapes are those shape inference found at load. A ``Reshape`` or
``Expand`` is only removed when its target is a constant initializer (not
one a feed may replace) and applying it to the input's static shape gives
that shape back, so the decision never rests on an inferred output shape.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

import numpy as np
import onnx_ir as ir

from ..nodeinfo import static_shape
from ._common import attr_int, constant, known_shape, reshaped
from ._pass import OptimizerPass, has_op
from .elimination import bypass
from .shape_folding import derived_from

__all__ = ["LOSSLESS_CASTS", "NoopEliminationPass", "eliminate_noops"]

_DT = ir.DataType
_SIGNED = (_DT.INT8, _DT.INT16, _DT.INT32, _DT.INT64)
_UNSIGNED = (_DT.UINT8, _DT.UINT16, _DT.UINT32, _DT.UINT64)


def _widenings() -> frozenset[tuple[ir.DataType, ir.DataType]]:
    pairs = {
        (_DT.FLOAT16, _DT.FLOAT),
        (_DT.FLOAT16, _DT.DOUBLE),
        (_DT.FLOAT, _DT.DOUBLE),
        (_DT.BFLOAT16, _DT.FLOAT),
        (_DT.BFLOAT16, _DT.DOUBLE),
    }
    for i, a in enumerate(_SIGNED):
        pairs.update((a, b) for b in _SIGNED[i + 1 :])
    for i, a in enumerate(_UNSIGNED):
        pairs.update((a, b) for b in _UNSIGNED[i + 1 :])
        pairs.update((a, b) for b in _SIGNED[i + 1 :])
    pairs.update((_DT.BOOL, b) for b in (*_SIGNED, *_UNSIGNED))
    return frozenset(pairs)


LOSSLESS_CASTS = _widenings()
"""(from, to) dtype pairs whose Cast is exact and undone exactly by the reverse Cast."""

_DEFAULT_DOMAINS = ("", "ai.onnx")


def eliminate_noops(graph: ir.Graph, overridable: Set[ir.Value] = frozenset()) -> int:
    """Bypass no-op Cast/Reshape/Expand/Transpose nodes and pairs of ``graph``.

    Subgraphs are left alone (outer-scope values they read are followed).

    Args:
        overridable: initializers a feed may replace: never taken as a
            constant target, and shapes derived from them are not trusted.

    Returns:
        the number of nodes removed.
    """
    pass_ = _NoopPass(graph, overridable)
    for node in list(graph):
        if node.graph is not graph or node.domain not in _DEFAULT_DOMAINS:
            continue  # removed by an earlier rewrite, or not ours
        rule = _RULES.get(node.op_type)
        if rule is not None:
            rule(pass_, node)
    return pass_.removed


class _NoopPass:
    """State of one run: the graph, what is not trusted, the count."""

    def __init__(self, graph: ir.Graph, overridable: Set[ir.Value]) -> None:
        self.graph = graph
        self.overridable = overridable
        self.untrusted = derived_from(graph, overridable)
        self.removed = 0

    # -- helpers ---------------------------------------------------------

    def shape_of(self, value: ir.Value) -> tuple[int, ...] | None:
        return None if value in self.untrusted else known_shape(value)

    def rank_of(self, value: ir.Value) -> int | None:
        if value in self.untrusted:
            return None
        dims = static_shape(value)
        return None if dims is None else len(dims)

    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        """The contents of a constant initializer no feed can replace."""
        return constant(value, self.overridable)

    def producer(self, value: ir.Value, op_type: str) -> ir.Node | None:
        node = value.producer()
        if (
            node is None
            or node.graph is not self.graph
            or node.domain not in _DEFAULT_DOMAINS
            or node.op_type != op_type
        ):
            return None
        return node

    def only_read_by(self, value: ir.Value, node: ir.Node) -> bool:
        """``value`` is read by ``node`` alone and is no graph output."""
        return value not in self.graph.outputs and all(use.node is node for use in value.uses())

    def bypass(self, node: ir.Node, src: ir.Value) -> bool:
        """:func:`~ortcore.optimizer.elimination.bypass`, counted."""
        if not bypass(self.graph, node, src):
            return False
        self.removed += 1
        return True

    def drop_if_unread(self, node: ir.Node) -> None:
        """Remove ``node`` once nothing reads its outputs."""
        if all(not v.uses() and v not in self.graph.outputs for v in node.outputs):
            self.graph.remove(node, safe=True)
            self.removed += 1

    # -- rules -----------------------------------------------------------

    def cast(self, node: ir.Node) -> None:
        src = node.inputs[0] if node.inputs else None
        target = _cast_to(node)
        if src is None or target is None:
            return
        if src.dtype == target:
            self.bypass(node, src)
            return
        first = self.producer(src, "Cast")
        if first is None or not first.inputs or first.inputs[0] is None:
            return
        origin, middle = first.inputs[0], _cast_to(first)
        if origin.dtype != target or (target, middle) not in LOSSLESS_CASTS:
            return
        if self.bypass(node, origin):
            self.drop_if_unread(first)

    def reshape(self, node: ir.Node) -> None:
        if len(node.inputs) < 2 or node.inputs[0] is None:
            return
        target = self.constant(node.inputs[1])
        if target is None or target.ndim != 1 or target.dtype != np.int64:
            return
        allowzero = bool(attr_int(node, "allowzero", 0))
        first = self.producer(node.inputs[0], "Reshape")
        if first is not None and first.inputs and first.inputs[0] is not None:
            if allowzero or not bool((target == 0).any()):  # a 0 would copy first's dim
                node.replace_input_with(0, first.inputs[0])
                self.drop_if_unread(first)
        src = node.inputs[0]
        assert src is not None
        shape = self.shape_of(src)
        if shape is not None and reshaped(shape, target, allowzero) == shape:
            self.bypass(node, src)

    def expand(self, node: ir.Node) -> None:
        if len(node.inputs) < 2 or node.inputs[0] is None:
            return
        src = node.inputs[0]
        target = self.constant(node.inputs[1])
        shape = self.shape_of(src)
        if target is None or shape is None or target.ndim != 1 or target.dtype != np.int64:
            return
        if bool((target < 0).any()):
            return
        try:
            out = np.broadcast_shapes(shape, tuple(int(d) for d in target))
        except ValueError:
            return  # an error for run time to report
        if tuple(out) == shape:
            self.bypass(node, src)

    def transpose(self, node: ir.Node) -> None:
        src = node.inputs[0] if node.inputs else None
        if src is None:
            return
        perm = self.perm(node, src)
        if perm is None:
            return
        if _is_identity(perm):
            self.bypass(node, src)
            return
        first = self.producer(src, "Transpose")
        if first is None or not first.inputs or first.inputs[0] is None:
            return
        origin = first.inputs[0]
        perm0 = self.perm(first, origin)
        if perm0 is None or len(perm0) != len(perm):
            return
        composed = [perm0[p] for p in perm]
        if _is_identity(composed):
            if self.bypass(node, origin):
                self.drop_if_unread(first)
        elif self.only_read_by(src, node):
            node.replace_input_with(0, origin)
            node.attributes["perm"] = ir.AttrInt64s("perm", composed)
            self.drop_if_unread(first)

    def perm(self, node: ir.Node, src: ir.Value) -> list[int] | None:
        """A Transpose's permutation, if valid for the (known) rank of ``src``."""
        rank = self.rank_of(src)
        if rank is None:
            return None
        attr = node.attributes.get("perm")
        if attr is None:
            return list(reversed(range(rank)))
        perm = [int(p) for p in attr.value]
        if sorted(perm) != list(range(rank)):
            return None  # invalid: for run time to report
        return perm


_RULES = {
    "Cast": _NoopPass.cast,
    "Reshape": _NoopPass.reshape,
    "Expand": _NoopPass.expand,
    "Transpose": _NoopPass.transpose,
}


def _cast_to(node: ir.Node) -> ir.DataType | None:
    attr = node.attributes.get("to")
    if attr is None:
        return None
    try:
        return ir.DataType(int(attr.value))
    except ValueError:
        return None


def _is_identity(perm: Sequence[int]) -> bool:
    return all(p == i for i, p in enumerate(perm))


class NoopEliminationPass(OptimizerPass):
    """Bypass no-op Cast/Reshape/Expand/Transpose nodes and pairs (:func:`eliminate_noops`).

    Args:
        after: run only if one of these passes (already run) changed the
            model; ``()``: always. No-op elimination runs again after the
            folding passes, for targets they made constant.
    """

    def __init__(
        self,
        overridable: Set[ir.Value] = frozenset(),
        *,
        after: Sequence[OptimizerPass] = (),
        check_invariants: bool | None = None,
    ) -> None:
        super().__init__(overridable, check_invariants=check_invariants)
        self.after = tuple(after)

    def apply(self, model: ir.Model) -> int:
        """Run :func:`eliminate_noops` on the main graph (if due)."""
        if self.after and not any(p.changes for p in self.after):
            return 0
        if not has_op(model.graph, _RULES):
            return 0
        return eliminate_noops(model.graph, self.overridable)
