"""What the fusion passes share: which provider will run a pattern, and
small helpers to match and replace node patterns.

``optimize()`` runs before partitioning, so a pass cannot ask which provider
a node was assigned. :meth:`FusionContext.can_emit` answers the question the
partitioner will: the first provider, in the session's priority order, whose
registry has a kernel for the pattern's anchor node would take it; the fused
op is emitted only if that provider also has a kernel for the fused op. A
provider without a kernel registry (one that compiles the groups it claims)
may take anything, so a pattern it could see is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import onnx_ir as ir

from ep_sdk import ExecutionProvider, KernelMiss, KernelRegistry, node_types

from ..errors import EPFail
from ..fused_ops import DOMAIN, VERSION, register_fused_schemas
from ..nodeinfo import registry_of

__all__ = ["FusionContext"]


class FusionContext:
    """The model, its providers and its overridable initializers, for the passes."""

    def __init__(
        self,
        model: ir.Model,
        providers: Sequence[ExecutionProvider],
        overridable: set[ir.Value],
    ) -> None:
        register_fused_schemas()
        self.model = model
        self.graph = model.graph
        self.overridable = overridable
        self._registries: list[KernelRegistry | None] = []
        for p in providers:
            try:
                self._registries.append(registry_of(p))
            except EPFail:
                continue  # a provider that cannot load its kernels takes nothing

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
        self, nodes: ir.Node | Sequence[ir.Node], op_type: str, domain: str = DOMAIN
    ) -> bool:
        """Whether the provider that would run ``nodes`` (every one of them
        the same provider) has a kernel for ``op_type`` in ``domain``."""
        group = [nodes] if isinstance(nodes, ir.Node) else list(nodes)
        taker = None
        for node in group:
            index = self._taker(node)
            if index is None or (taker is not None and index != taker):
                return False
            taker = index
        if taker is None:
            return False
        reg = self._registries[taker]
        assert reg is not None
        dtype = group[-1].outputs[0].dtype
        fused = reg.lookup(op_type, domain, self._opset_of(domain), (dtype,), (dtype,))
        return not isinstance(fused, KernelMiss)

    def _taker(self, node: ir.Node) -> int | None:
        """Index of the first provider with a kernel for ``node``; None where a
        compiling provider (no registry) comes first, or nobody has one."""
        ins, outs = node_types(node)
        opset = self._opset_of(node.domain)
        for i, reg in enumerate(self._registries):
            if reg is None:
                return None  # it may claim the pattern as it is
            if not isinstance(reg.lookup(node.op_type, node.domain, opset, ins, outs), KernelMiss):
                return i
        return None

    def use_domain(self) -> None:
        """Declare the fused-op domain in the model's opset imports."""
        self.model.opset_imports.setdefault(DOMAIN, VERSION)

    # -- matching helpers ----------------------------------------------------

    def const(self, v: ir.Value | None) -> np.ndarray | None:
        """The constant value of ``v`` (an initializer no feed may replace), else None."""
        if v is None or v.const_value is None or v in self.overridable:
            return None
        if not v.is_initializer() and v.producer() is not None:
            return None
        return np.asarray(v.const_value.numpy())

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
        ``(old, new)`` output pair, and remove ``nodes`` (listed producers first)."""
        graph = self.graph
        if not inserted:
            graph.insert_before(at if at is not None else nodes[-1], new)
        renames: list[tuple[ir.Value, str]] = []
        graph_outputs = set(graph.outputs)
        for old, fresh in outputs:
            fresh.shape, fresh.type = old.shape, old.type
            is_out = old in graph_outputs
            ir.convenience.replace_all_uses_with(old, fresh, replace_graph_outputs=is_out)
            renames.append((fresh, old.name or ""))
        for n in reversed(_in_graph_order(graph, nodes)):
            for out in n.outputs:
                if out.name:
                    out.name = f"{out.name}__fused"
            graph.remove(n, safe=True)
        for fresh, name in renames:
            fresh.name = name
        if new.domain == DOMAIN:
            self.use_domain()


def _in_graph_order(graph: ir.Graph, nodes: Sequence[ir.Node]) -> list[ir.Node]:
    """``nodes`` deduplicated (they are removed consumers last)."""
    seen: list[ir.Node] = []
    for n in nodes:
        if n not in seen:
            seen.append(n)
    # Remove consumers before producers: a later node in the pattern list is
    # never a producer of an earlier one, so reversing the list is enough as
    # long as patterns list nodes producer-first.
    return seen


def attr(node: ir.Node, name: str, default: object = None) -> object:
    """The value of ``node``'s attribute ``name`` (``default`` if absent)."""
    a = node.attributes.get(name)
    return default if a is None else a.value


def op(node: ir.Node | None, *op_types: str) -> bool:
    """Whether ``node`` is a default-domain node of one of ``op_types``."""
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type in op_types


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
