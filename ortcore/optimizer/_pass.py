"""The base of every optimizer pass, and the invariants it proves.

Each pass is an onnx-ir :class:`~onnx_ir.passes.InPlacePass` whose
``requires`` and ``ensures`` check, around its run, what no pass may break:

- the input and output names, in order, of the model's graph and, for a
  pass that rewrites subgraphs, of every subgraph still in it (a session's
  feeds and fetches are looked up by those names), and the main graph's
  input values themselves (the session's plan reads them);
- every overridable initializer (a graph input that also has an
  initializer, which a feed may replace) is still a graph input, still the
  initializer of its name, with the same tensor;
- no overridable initializer's contents were read: while the pass runs,
  each such tensor is watched, and a read of its contents (``numpy()``,
  ``np.asarray``, ``tobytes()``, ``raw``) fails the pass's ``ensures``.
  A pass must ask :func:`~ortcore.optimizer._common.constant` instead.

The checks run when :data:`CHECK_INVARIANTS` is true (the default: on light
ResNet-50 they cost under 2 ms per session, all passes together) or a pass
is made with ``check_invariants=True``; a failure raises
:class:`onnx_ir.passes.PostconditionError` (``PreconditionError`` when the
model breaks the rules before the pass) naming the pass.
"""

from __future__ import annotations

import abc
import contextvars
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import PostconditionError, PreconditionError

from ep_sdk.graph import subgraphs

__all__ = [
    "CHECK_INVARIANTS",
    "OptimizerPass",
    "census",
    "forget_graphs",
    "graphs_of",
    "graphs_remembered",
    "has_op",
    "knows",
]

CHECK_INVARIANTS = True
"""Whether passes made without ``check_invariants`` check their invariants."""

_Signature = dict[ir.Graph, tuple[tuple[str, ...], tuple[str, ...]]]


class OptimizerPass(ir.passes.InPlacePass):
    """An in-place pass that keeps the model's signature and never reads an
    overridable initializer as a constant (see the module docstring).

    Subclasses implement :meth:`apply`, and set :attr:`rewrites_subgraphs`
    if they rewrite more than the main graph.

    Args:
        overridable: the initializers a feed may replace.
        check_invariants: check the invariants around every run (``None``:
            as :data:`CHECK_INVARIANTS` says at run time).

    Attributes:
        changes: what the last run changed (nodes removed, folded or fused),
            as :meth:`apply` counted it.
    """

    rewrites_subgraphs: ClassVar[bool] = False
    """Whether the pass may rewrite subgraphs: their signatures are then
    checked too (the main graph's always is)."""

    def __init__(
        self, overridable: Set[ir.Value] = frozenset(), *, check_invariants: bool | None = None
    ) -> None:
        self.overridable = overridable
        self.check_invariants = check_invariants
        self.changes = 0
        self._signature: _Signature | None = None
        self._inputs: Sequence[ir.Value] = ()
        self._tensors: dict[ir.Value, Any] = {}
        self._misread: list[str] = []

    def __repr__(self) -> str:
        return type(self).__name__

    @property
    def checking(self) -> bool:
        """Whether this pass checks its invariants."""
        return CHECK_INVARIANTS if self.check_invariants is None else self.check_invariants

    @abc.abstractmethod
    def apply(self, model: ir.Model) -> int:
        """Rewrite ``model`` in place; return the number of changes made."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Run :meth:`apply`, watching overridable initializers when checking."""
        if not self.checking:
            self.changes = self.apply(model)
            if self.changes:
                forget_graphs()
            self._establish(model)
            return ir.passes.PassResult(model, modified=self.changes > 0)
        reads: list[str] = []
        watched = {v: _Watched(t, v.name or "", reads) for v, t in self._tensors.items()}
        for v, w in watched.items():
            v.const_value = w  # type: ignore[assignment]
        changed = True  # until apply() says otherwise: a failed pass may have changed things
        try:
            self.changes = self.apply(model)
            changed = self.changes > 0
        finally:
            if changed:
                forget_graphs()
            for v, w in watched.items():
                if v.const_value is w:
                    v.const_value = self._tensors[v]
        self._misread = sorted(set(reads))
        self._establish(model)
        return ir.passes.PassResult(model, modified=self.changes > 0)

    def establishes(self, model: ir.Model) -> Hashable | None:
        """A fact that holds once this pass ran, until another pass changes
        the model (``None``: none); :func:`knows` answers it for the passes
        after. E.g. dead-code removal leaves no dead code: the next one
        returns at once if nothing changed in between."""
        return None

    def _establish(self, model: ir.Model) -> None:
        fact = self.establishes(model)
        memo = _MEMO.get()
        if fact is not None and memo is not None:
            memo.facts.add(fact)

    def requires(self, model: ir.Model) -> None:
        """Record the signature; the overridable initializers must be intact.

        Raises:
            PreconditionError: an overridable initializer is not a graph
                input with its initializer.
        """
        self._signature = None
        self._tensors = {}
        self._misread = []
        if not self.checking:
            return
        problem = _overridable_problem(model.graph, self.overridable)
        if problem:
            raise PreconditionError(f"before {type(self).__name__}: {problem}")
        self._signature = _signature(model, self.rewrites_subgraphs)
        self._inputs = model.graph.inputs[:]
        self._tensors = {v: v.const_value for v in self.overridable}

    def ensures(self, model: ir.Model) -> None:
        """Check the invariants of the module docstring.

        Raises:
            PostconditionError: naming the pass and what it broke.
        """
        if not self.checking or self._signature is None:
            return
        who = type(self).__name__
        if self._misread:
            names = ", ".join(repr(n) for n in self._misread)
            raise PostconditionError(
                f"{who} read the overridable initializer(s) {names} as constants; "
                "a feed may replace them (use optimizer._common.constant)"
            )
        # The graphs of before: one a pass removed has nothing to check, one
        # it made has no signature to keep.
        for graph, was in self._signature.items():
            now_io = _io(graph)
            for what, old, new in (("inputs", was[0], now_io[0]), ("outputs", was[1], now_io[1])):
                if old != new:
                    raise PostconditionError(
                        f"{who} changed the {what} of graph {graph.name!r} "
                        f"from {list(old)} to {list(new)}"
                    )
        now = model.graph.inputs[:]
        replaced = [a.name for a, b in zip(self._inputs, now) if a is not b]
        if replaced:
            raise PostconditionError(f"{who} replaced the graph input value(s) {replaced}")
        problem = _overridable_problem(model.graph, self.overridable)
        if not problem:
            changed = [v.name for v, t in self._tensors.items() if v.const_value is not t]
            if changed:
                problem = f"the tensor of overridable initializer(s) {changed} was replaced"
        if problem:
            raise PostconditionError(f"{who}: {problem}")


def _signature(model: ir.Model, nested: bool) -> _Signature:
    """Input and output names of the main graph (and its subgraphs if ``nested``)."""
    graphs = graphs_of(model.graph) if nested else [model.graph]
    return {g: _io(g) for g in graphs}


def _io(graph: ir.Graph) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``graph``'s input and output names (``[:]``: a plain list, much
    faster to walk than the onnx-ir container)."""
    return (
        tuple([v.name or "" for v in graph.inputs[:]]),
        tuple([v.name or "" for v in graph.outputs[:]]),
    )


# The ONNX ops with graph attributes; nodes of other domains may have them too.
_HOLDS_GRAPHS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


class _Memo:
    """What the passes of one run know about the model, kept until a pass
    changes it: each graph's subgraphs, each graph's op types, and facts a
    pass established (e.g. "no dead code")."""

    __slots__ = ("census", "facts", "graphs")

    def __init__(self) -> None:
        self.graphs: dict[ir.Graph, list[ir.Graph]] = {}
        self.census: dict[ir.Graph, dict[str, list[ir.Node]]] = {}
        self.facts: set[Hashable] = set()

    def clear(self) -> None:
        self.graphs.clear()
        self.census.clear()
        self.facts.clear()


_MEMO: contextvars.ContextVar[_Memo | None] = contextvars.ContextVar(
    "ortcore_optimizer_memo", default=None
)


@contextmanager
def graphs_remembered() -> Iterator[None]:
    """Let :func:`graphs_of`, :func:`census` and :func:`knows` keep their
    answers for the ``with`` block (a run of passes): a pass that changes the
    model forgets them (:meth:`OptimizerPass.call`), so the passes after one
    that changed nothing do not walk the graph again. Nested blocks share the
    outer block's memory (what the outer block knows still holds: only
    passes change the model)."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set(_Memo())
    try:
        yield
    finally:
        _MEMO.reset(token)


def forget_graphs() -> None:
    """Drop what :func:`graphs_of`, :func:`census` and :func:`knows` keep
    (the model changed)."""
    memo = _MEMO.get()
    if memo is not None:
        memo.clear()


def graphs_of(graph: ir.Graph) -> list[ir.Graph]:
    """``graph`` and its subgraphs, in turn (cheaper than ``Model.graphs()``,
    which looks at every attribute of every node)."""
    memo = _MEMO.get()
    if memo is not None:
        known = memo.graphs.get(graph)
        if known is not None:
            return list(known)
    out = [graph]
    for node in graph:
        if node.domain in ("", "ai.onnx") and node.op_type not in _HOLDS_GRAPHS:
            continue
        for sub in subgraphs(node):
            out.extend(graphs_of(sub))
    if memo is not None:
        memo.graphs[graph] = out
        return list(out)
    return out


def census(graph: ir.Graph) -> Mapping[str, Sequence[ir.Node]]:
    """``graph``'s nodes (not its subgraphs') by op type (any domain), each
    list in graph order: one walk of the graph, kept while no pass changes
    the model, for the passes that only look at some op types. Read only:
    a pass that removes nodes sees them with ``node.graph`` gone."""
    memo = _MEMO.get()
    if memo is not None:
        known = memo.census.get(graph)
        if known is not None:
            return known
    table: dict[str, list[ir.Node]] = {}
    for node in graph:
        nodes = table.get(node.op_type)
        if nodes is None:
            table[node.op_type] = [node]
        else:
            nodes.append(node)
    if memo is not None:
        memo.census[graph] = table
    return table


def has_op(graph: ir.Graph, op_types: Iterable[str]) -> bool:
    """Whether ``graph`` (not its subgraphs) has a node of one of ``op_types``
    (any domain): a pass that rewrites only those returns early without one."""
    table = census(graph)
    return any(t in table for t in op_types)


def knows(fact: Hashable) -> bool:
    """Whether a pass of this run established ``fact`` (:meth:`OptimizerPass.establishes`)
    and no pass changed the model since."""
    memo = _MEMO.get()
    return memo is not None and fact in memo.facts


def _overridable_problem(graph: ir.Graph, overridable: Set[ir.Value]) -> str:
    """What is wrong with ``overridable`` in ``graph`` (``""``: nothing)."""
    if not overridable:
        return ""
    inputs = set(graph.inputs[:])
    for v in overridable:
        if v not in inputs:
            return f"overridable initializer {v.name!r} is not a graph input"
        if graph.initializers.get(v.name or "") is not v or v.const_value is None:
            return f"overridable initializer {v.name!r} is not an initializer of the graph"
    return ""


class _Watched:
    """Stands in for an overridable initializer's tensor while a checked pass
    runs: forwards everything, and notes every read of the contents."""

    __slots__ = ("_name", "_reads", "_tensor")

    def __init__(self, tensor: Any, name: str, reads: list[str]) -> None:
        self._tensor = tensor
        self._name = name
        self._reads = reads

    def numpy(self) -> np.ndarray:
        self._reads.append(self._name)
        return self._tensor.numpy()  # type: ignore[no-any-return]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self._reads.append(self._name)
        return np.asarray(self._tensor.numpy(), dtype=dtype)

    def tobytes(self) -> bytes:
        self._reads.append(self._name)
        return self._tensor.tobytes()  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name in ("raw", "tofile", "__dlpack__"):
            self._reads.append(self._name)
        return getattr(self._tensor, name)
