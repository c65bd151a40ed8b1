"""What ``get_capability`` answers with, and helpers for answering it.

:class:`Capability` holds a provider's :class:`Claim` objects and its
reasons for the nodes it declines; the core turns each fused claim into a
:class:`FusedGroup` for :meth:`ExecutionProvider.compile
<ep_sdk.ExecutionProvider.compile>`. These types live here, not in
``provider.py``, so that the helpers (``graph.py``, ``bridge.py``) need not
import the provider base class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

from .registry import KernelDef, KernelMiss, KernelRegistry, node_types

__all__ = [
    "Capability",
    "Claim",
    "FusedGroup",
    "GraphContext",
    "claim_registered_nodes",
    "node_types",
]


@dataclass(frozen=True)
class Claim:
    """A provider's claim on graph nodes.

    A claim of one node with ``fused=False`` means "run it with the kernel my
    registry has". A claim with ``fused=True`` asks the core to hand the nodes
    to :meth:`ExecutionProvider.compile <ep_sdk.ExecutionProvider.compile>`
    as one group.

    Attributes:
        nodes: the claimed nodes.
        fused: whether they are one group to compile.
        name: the fused node's name (``""``: the core names it).
        payload: anything the provider wants back in ``compile``
            (:attr:`FusedGroup.payload`), so that work done while answering
            ``get_capability`` (an engine's analysis, a built network) is not
            redone. The core never looks at it; it takes no part in equality.
    """

    nodes: tuple[ir.Node, ...]
    fused: bool = False
    name: str = ""
    payload: Any = field(default=None, compare=False)

    @classmethod
    def node(cls, node: ir.Node) -> Claim:
        """Claim a single node for the provider's kernel."""
        return cls((node,))

    @classmethod
    def group(cls, nodes: Sequence[ir.Node], name: str = "", *, payload: Any = None) -> Claim:
        """Claim ``nodes`` as one group to fuse and compile."""
        return cls(tuple(nodes), fused=True, name=name, payload=payload)


@dataclass
class Capability:
    """A provider's answer to ``get_capability``.

    Attributes:
        claims: what it takes.
        declined: for nodes it does not take, the reason (shown to users in
            ``session.get_partition()`` and in "no provider" errors).
    """

    claims: list[Claim] = field(default_factory=list)
    declined: dict[ir.Node, str] = field(default_factory=dict)


class FusedGroup:
    """A group of nodes a provider claimed for compilation.

    Attributes:
        name: unique name of the fused node.
        nodes: the nodes, in topological order.
        inputs: what the compiled function receives, in call order: the
            values the group reads from outside (graph inputs, overridable
            initializers, other nodes' outputs), without its constants, unless
            the provider sets :attr:`ExecutionProvider.compile_receives_constants
            <ep_sdk.ExecutionProvider.compile_receives_constants>`.
        outputs: values the group produces that are read outside it, in
            the order the compiled function must return them.
        model: the group as a standalone ONNX model (``onnx.ModelProto``),
            for providers that hand the group to another runtime. Its inputs
            are ``inputs``; its initializers are ``constants`` (when they are
            not inputs), held in memory, so the engine can fold and prepack
            them. The core exports it the first time it is read: a provider
            that loads the group from the compiled-artifact cache never pays
            for copying the weights into a model. (A model's external data is
            read into memory here for now; a group whose constants pass
            protobuf's 2 GiB limit cannot be exported this way.)
        opsets: the model's opset imports.
        constants: the initializers the group reads that no feed may replace
            (:func:`ep_sdk.graph.is_constant`), in first-use order; each one's
            ``const_value`` holds its content. The compiled-artifact cache key
            covers their bytes.
        payload: :attr:`Claim.payload` of the claim this group came from.

    Give either ``model`` or ``export`` (a function that makes the model,
    called at most once, on first read of :attr:`model`).
    """

    __slots__ = (
        "_export",
        "_model",
        "constants",
        "inputs",
        "name",
        "nodes",
        "opsets",
        "outputs",
        "payload",
    )

    def __init__(
        self,
        name: str,
        nodes: Sequence[ir.Node],
        inputs: Sequence[ir.Value],
        outputs: Sequence[ir.Value],
        model: Any = None,
        opsets: Mapping[str, int] | None = None,
        constants: Sequence[ir.Value] = (),
        payload: Any = None,
        *,
        export: Callable[[], Any] | None = None,
    ) -> None:
        if (model is None) == (export is None):
            raise TypeError("FusedGroup takes either a model or an export function")
        self.name = name
        self.nodes = tuple(nodes)
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.opsets: Mapping[str, int] = dict(opsets or {})
        self.constants = tuple(constants)
        self.payload = payload
        self._model = model
        self._export = export

    @property
    def model(self) -> Any:
        """The group as a standalone ONNX model (see the class docstring)."""
        if self._model is None:
            assert self._export is not None
            self._model = self._export()
        return self._model

    @property
    def exported_lazily(self) -> bool:
        """Whether :attr:`model` is (or will be) made from the nodes by the
        core, so it holds nothing they do not: the compiled-artifact cache then
        keys the group by its nodes and never exports it to compute a key."""
        return self._export is not None

    def __repr__(self) -> str:
        return (
            f"FusedGroup(name={self.name!r}, nodes={len(self.nodes)}, "
            f"inputs={[v.name for v in self.inputs]}, outputs={[v.name for v in self.outputs]})"
        )


class GraphContext:
    """The view of a graph a provider gets in ``get_capability``.

    Attributes:
        graph: the whole (sub)graph, for reading; never mutate it.
        nodes: the nodes still free, in topological order.
        opsets: opset version per domain.
        fallback: names of the providers after this one in the session's
            list, which are offered the nodes it leaves (empty: none). A
            provider may leave work another does better (a GPU provider
            leaves shape arithmetic to a CPU provider) only when there is one.
    """

    __slots__ = ("fallback", "graph", "nodes", "opsets")

    def __init__(
        self,
        graph: ir.Graph,
        nodes: Sequence[ir.Node],
        opsets: Mapping[str, int],
        fallback: Sequence[str] = (),
    ) -> None:
        self.graph = graph
        self.nodes = list(nodes)
        self.opsets = dict(opsets)
        self.fallback = tuple(fallback)

    def opset(self, domain: str) -> int:
        """Return the model's opset version for ``domain`` (``ai.onnx`` is ``""``)."""
        if domain == "ai.onnx":
            domain = ""
        return self.opsets.get(domain, 1)

    def lookup(self, registry: KernelRegistry, node: ir.Node) -> KernelDef | KernelMiss:
        """Look ``node`` up in ``registry`` with its static types."""
        ins, outs = node_types(node)
        return registry.lookup(node.op_type, node.domain, self.opset(node.domain), ins, outs)


def claim_registered_nodes(graph: GraphContext, registry: KernelRegistry) -> Capability:
    """Claim every free node that ``registry`` has a kernel for.

    Nodes without a kernel are declined with the registry's reason.
    """
    cap = Capability()
    claims, declined = cap.claims, cap.declined
    kind = type(graph)
    if kind.lookup is not GraphContext.lookup or kind.opset is not GraphContext.opset:
        # a view of its own (its lookup or opsets): ask it
        for node in graph.nodes:
            found = graph.lookup(registry, node)
            if isinstance(found, KernelMiss):
                declined[node] = str(found)
            else:
                claims.append(Claim.node(node))
        return cap
    # graph.lookup, spelled out: a large graph's nodes each pay its calls
    lookup, opsets = registry.lookup, graph.opsets
    for node in graph.nodes:
        domain = node.domain
        found = lookup(
            node.op_type,
            domain,
            opsets.get("" if domain == "ai.onnx" else domain, 1),
            [v.dtype if v is not None else None for v in node.inputs],
            [v.dtype for v in node.outputs],
        )
        if isinstance(found, KernelMiss):
            declined[node] = str(found)
        else:
            claims.append(Claim((node,)))
    return cap
