"""What the fusion passes share: the base pass, which provider runs a
pattern, and small helpers to match and replace node patterns.

The fusions run after partitioning (see :func:`ortcore.optimizer.optimize`),
so every node carries its :class:`~ortcore.partition.Assignment`.
:meth:`FusionContext.can_emit` allows a fused op only where every node of
the pattern is run by the same provider with a kernel (not in a group the
provider compiles) and that provider's registry has a kernel for the fused
op; :meth:`FusionContext.replace` gives the fused node that assignment. A
compile-path provider therefore always sees, and compiles, the model's own
ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Set
from typing import ClassVar, TypeVar

import numpy as np
import onnx_ir as ir

from ep_sdk import ExecutionProvider, KernelMiss, KernelRegistry

from ..errors import EPFail
from ..fused_ops import DOMAIN, VERSION, register_fused_schemas
from ..nodeinfo import registry_of
from ..partition import Assignment, assign, assignment_of
from ._common import attr, constant
from ._pass import OptimizerPass, census, forget_graphs, graphs_of

__all__ = ["FusionContext", "FusionPass", "activation_of", "anchored", "attr", "op", "other_input"]


class FusionContext:
    """One graph of the model (the main graph or a subgraph), its
    overridable initializers and its providers' registries, for the fusions.

    Args:
        registries: a cache of provider -> registry (``None``: no kernels),
            shared by the contexts of one optimization.
    """

    def __init__(
        self,
        model: ir.Model,
        graph: ir.Graph,
        overridable: Set[ir.Value],
        registries: dict[ExecutionProvider, KernelRegistry | None] | None = None,
    ) -> None:
        register_fused_schemas()
        self.model = model
        self.graph = graph
        self.overridable = overridable
        self._registries = registries if registries is not None else {}

    # -- opsets --------------------------------------------------------------

    @property
    def opset(self) -> int:
        """The model's default-domain opset."""
        return int(self.model.opset_imports.get("", 1))

    def _opset_of(self, domain: str) -> int:
        if domain == DOMAIN:
            return VERSION
        return int(self.model.opset_imports.get(domain, 1))

    # -- the provider question -----------------------------------------------

    def can_emit(
        self,
        nodes: ir.Node | Sequence[ir.Node],
        op_type: str,
        domain: str = DOMAIN,
        *,
        input_types: Sequence[ir.DataType | None] | None = None,
        output_types: Sequence[ir.DataType | None] | None = None,
    ) -> bool:
        """Whether ``nodes`` may become one ``op_type`` node of ``domain``:
        every one is assigned to the same provider, to run with a kernel,
        and that provider has a kernel for the fused op.

        The kernel is looked up with ``input_types`` and ``output_types``
        (the fused node's element types, ``None`` for one that may be
        anything) when given; else with the last node's output type for
        its first input and output (a fused op of one type).
        """
        group = [nodes] if isinstance(nodes, ir.Node) else list(nodes)
        owner = self._owner(group)
        reg = None if owner is None else self._registry(owner.provider)
        if reg is None:
            return False
        dtype = group[-1].outputs[0].dtype
        ins = (dtype,) if input_types is None else tuple(input_types)
        outs = (dtype,) if output_types is None else tuple(output_types)
        fused = reg.lookup(op_type, domain, self._opset_of(domain), ins, outs)
        return not isinstance(fused, KernelMiss)

    def kernel_run(self, nodes: Sequence[ir.Node]) -> bool:
        """Whether ``nodes`` are all run by one provider's kernels (none in a
        group a provider compiles): a rewrite that only removes nodes or
        rewires values may touch them."""
        return self._owner(nodes) is not None

    @staticmethod
    def _owner(nodes: Sequence[ir.Node]) -> Assignment | None:
        """The assignment all of ``nodes`` share (kernel-run, one provider), else None."""
        owner: Assignment | None = None
        for node in nodes:
            a = assignment_of(node)
            if a is None or a.claim is not None:
                return None  # not partitioned, or in a group its provider compiles
            if owner is not None and a.provider is not owner.provider:
                return None
            owner = owner or a
        return owner

    def _registry(self, provider: ExecutionProvider) -> KernelRegistry | None:
        if provider not in self._registries:
            try:
                self._registries[provider] = registry_of(provider)
            except EPFail:
                self._registries[provider] = None  # the planner reports it
        return self._registries[provider]

    def assign_like(self, nodes: Iterable[ir.Node], model: ir.Node) -> None:
        """Give ``nodes`` (more nodes one fusion made) ``model``'s assignment."""
        a = assignment_of(model)
        if a is not None:
            for n in nodes:
                assign(n, a)

    def use_domain(self) -> None:
        """Declare the fused-op domain in the model's opset imports."""
        self.model.opset_imports.setdefault(DOMAIN, VERSION)

    # -- matching helpers ----------------------------------------------------

    def nodes(self, *op_types: str) -> list[ir.Node]:
        """The graph's nodes of ``op_types`` (any domain), in graph order, as
        the graph is now: what ``[n for n in graph if n.op_type in op_types]``
        gives, from the census the passes share (no walk of the whole graph).
        A fusion walks these instead of the graph; a node an earlier match
        removed has ``node.graph`` ``None``."""
        table = census(self.graph)
        found = [table[t] for t in dict.fromkeys(op_types) if t in table]
        if len(found) == 1:
            return list(found[0])
        if not found:
            return []
        position = {n: i for i, n in enumerate(self.graph)}
        return sorted((n for nodes in found for n in nodes), key=position.__getitem__)

    def const(self, v: ir.Value | None) -> np.ndarray | None:
        """The constant value of ``v`` (an initializer no feed may replace), else None."""
        return constant(v, self.overridable)

    def scalar(self, v: ir.Value | None) -> float | None:
        """The single float value of a constant ``v`` (any shape of size 1)."""
        c = self.const(v)
        if c is None or c.size != 1 or c.dtype.kind not in "fiu":
            return None
        return float(c.reshape(-1)[0])

    def sole_user(self, v: ir.Value) -> ir.Node | None:
        """The one node reading ``v`` (once), if ``v`` is read by exactly one node
        of this graph and is not a graph output."""
        if v in self.graph.outputs:
            return None
        uses = list(v.uses())
        if len(uses) != 1:
            return None
        node = uses[0].node
        return node if node.graph is self.graph else None

    def private(self, nodes: Iterable[ir.Node], keep: ir.Value | None = None) -> bool:
        """Whether every output of ``nodes`` (but ``keep``) is read only inside them."""
        group = set(nodes)
        outputs = set(self.graph.outputs)
        for n in group:
            if n.graph is not self.graph:
                return False
            for out in n.outputs:
                if out is keep:
                    continue
                if out in outputs or any(u.node not in group for u in out.uses()):
                    return False
        return True

    def replace(
        self,
        nodes: Sequence[ir.Node],
        new: ir.Node,
        outputs: Sequence[tuple[ir.Value, ir.Value]],
        *,
        at: ir.Node | None = None,
        inserted: bool = False,
    ) -> None:
        """Put ``new`` before ``at`` (default: ``nodes[-1]``, the pattern's last
        node) unless the caller ``inserted`` it already, route each
        ``(old, new)`` output pair (a graph output keeps its name), remove
        ``nodes``, and give ``new`` their assignment (see :meth:`can_emit`)."""
        graph = self.graph
        if not inserted:
            graph.insert_before(at if at is not None else nodes[-1], new)
        owner = self._owner(nodes)
        if owner is not None:
            declined: dict[str, str] = {}
            for n in nodes:
                for provider, reason in (assignment_of(n) or owner).declined.items():
                    declined.setdefault(provider, reason)
            assign(new, Assignment(owner.provider, None, declined))
        renames: list[tuple[ir.Value, str]] = []
        graph_outputs = set(graph.outputs)
        for old, fresh in outputs:
            fresh.shape, fresh.type = old.shape, old.type
            is_out = old in graph_outputs
            ir.convenience.replace_all_uses_with(old, fresh, replace_graph_outputs=is_out)
            renames.append((fresh, old.name or ""))
        removed = list(dict.fromkeys(nodes))
        for n in removed:
            for out in n.outputs:
                if out.name:
                    out.name = f"{out.name}__fused"
        graph.remove(removed, safe=True)  # as one set: no order needed
        for fresh, name in renames:
            fresh.name = name
        if new.domain == DOMAIN:
            self.use_domain()


class FusionPass(OptimizerPass):
    """Runs :attr:`fusions` over the model's graph and every subgraph.

    Only partitioned nodes are fused (see :meth:`FusionContext.can_emit`);
    a graph the partitioner never saw (a body a compiled group took) is
    skipped.
    """

    fusions: ClassVar[tuple[Callable[[FusionContext], int], ...]] = ()
    """The fusion functions, in the order they run; each returns its count."""

    rewrites_subgraphs = True

    def __init__(
        self,
        overridable: Set[ir.Value] = frozenset(),
        *,
        check_invariants: bool | None = None,
        registries: dict[ExecutionProvider, KernelRegistry | None] | None = None,
    ) -> None:
        super().__init__(overridable, check_invariants=check_invariants)
        self._registries = registries if registries is not None else {}

    def apply(self, model: ir.Model) -> int:
        """Run the fusions on each partitioned graph; return how many were done."""
        done = 0
        for graph in graphs_of(model.graph):
            if not any(assignment_of(n) is not None for n in graph):
                continue
            ctx = FusionContext(model, graph, self.overridable, self._registries)
            for fuse in self.fusions:
                if not _may_match(fuse, graph):
                    continue  # nothing for it to match: skip its walk of the graph
                count = fuse(ctx)
                if count:
                    forget_graphs()  # the fusion made new op types
                done += count
        return done


def _may_match(fuse: Callable[[FusionContext], int], graph: ir.Graph) -> bool:
    """Whether ``graph`` has what :func:`anchored` says ``fuse`` needs (the
    census of op types, shared by the passes until one changes the model)."""
    anchors: frozenset[str] | None = getattr(fuse, "anchors", None)
    if anchors is None:
        return True
    present = census(graph)
    if not any(t in present for t in anchors):
        return False
    needs: frozenset[str] = getattr(fuse, "needs", frozenset())
    return not needs or any(t in present for t in needs)


_Fusion = TypeVar("_Fusion", bound=Callable[[FusionContext], int])


def anchored(*op_types: str, needs: Iterable[str] = ()) -> Callable[[_Fusion], _Fusion]:
    """Mark a fusion as matching only patterns that contain a node of one of
    ``op_types`` (any domain) and, if ``needs`` is given, a node of one of
    ``needs`` as well (a QDQ pattern's DequantizeLinear): :class:`FusionPass`
    skips it for a graph that lacks either, so a large graph is not walked
    once per fusion for nothing."""

    def mark(fuse: _Fusion) -> _Fusion:
        fuse.anchors = frozenset(op_types)  # type: ignore[attr-defined]
        fuse.needs = frozenset(needs)  # type: ignore[attr-defined]
        return fuse

    return mark


def op(node: ir.Node | None, *op_types: str) -> bool:
    """Whether ``node`` is a default-domain node of one of ``op_types``."""
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type in op_types


def other_input(node: ir.Node, v: ir.Value) -> ir.Value | None:
    """The input of binary ``node`` that is not ``v`` (None if ``v`` is neither)."""
    a, b = node.inputs[0], node.inputs[1]
    return b if a is v else a if b is v else None


def activation_of(ctx: FusionContext, node: ir.Node) -> tuple[str, list[float]] | None:
    """``(name, params)`` if ``node`` is an activation a Fused* op can apply."""
    if not op(node, "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh"):
        return None
    t = node.op_type
    if t == "LeakyRelu":
        return t, [float(attr(node, "alpha", 0.01))]  # type: ignore[arg-type]
    if t == "HardSigmoid":
        return t, [float(attr(node, "alpha", 0.2)), float(attr(node, "beta", 0.5))]  # type: ignore[arg-type]
    if t == "Clip":
        lo, hi = -np.inf, np.inf
        if ctx.opset < 11:
            lo = float(attr(node, "min", lo))  # type: ignore[arg-type]
            hi = float(attr(node, "max", hi))  # type: ignore[arg-type]
        else:
            bounds = list(node.inputs[1:3])
            for i, v in enumerate(bounds):
                if v is None:
                    continue
                c = ctx.scalar(v)
                if c is None:
                    return None  # bounds computed at run time
                if i == 0:
                    lo = c
                else:
                    hi = c
        return t, [lo, hi]
    return t, []
