"""Compile-path providers of :mod:`tests.conformance.faulty_unseen`: an engine
that runs each claimed group through the healthy numpy kernels, node after
node, and the same engine with one bug each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

import ep_sdk
from ep_sdk import Capability, ExecutionProvider, FusedGroup, KernelRegistry

from .unseen_kernels import KERNELS, registry, supported

__all__ = ["FUSED", "UnseenFused"]


class Engine:
    """One compiled group: the kernels of its nodes, run in order."""

    def __init__(self, provider: UnseenFused, group: FusedGroup) -> None:
        reg = provider.kernels()
        self.group = group
        self.steps: list[tuple[Any, Any, list[Any], list[Any]]] = []
        for node in group.nodes:
            found = reg.lookup_node(node, group.opsets)
            assert isinstance(found, ep_sdk.KernelDef), found
            info = ep_sdk.make_node_info(node, group.opsets, provider)
            self.steps.append((node, found.builder(info), list(node.inputs), list(node.outputs)))
        self.constants = {v: v.const_value.numpy() for v in group.constants if v.const_value}

    def feeds(self, args: Sequence[Any]) -> dict[Any, Any]:
        """The group's values before its first node: feeds and constants."""
        return {**self.constants, **dict(zip(self.group.inputs, args))}

    def __call__(self, *args: Any) -> list[Any]:
        env = self.feeds(args)
        for node, compute, ins, outs in self.steps:
            if self.fold(node, env, ins, outs):
                continue
            values = [env[v] if v is not None else None for v in ins]
            while values and values[-1] is None:
                values.pop()  # omitted trailing inputs are not passed
            for v, value in zip(outs, compute(*values)):
                env[v] = value
        return [env[v] for v in self.group.outputs]

    def fold(self, node: Any, env: dict[Any, Any], ins: list[Any], outs: list[Any]) -> bool:
        """Whether the engine's optimizer removed ``node`` (it set its outputs)."""
        return False


class UnseenFused(ExecutionProvider):
    """No bug: the compile-path healthy counterpart (every group of the ops of
    :data:`~tests.conformance.unseen_kernels.KERNELS`, single nodes included)."""

    name = "UnseenFusedExecutionProvider"
    aliases = ("unseen-fused",)
    version = "1.0"
    priority = 1
    engine: ClassVar[type[Engine]] = Engine
    bug: ClassVar[str] = ""
    ops: ClassVar[tuple[str, ...]] = ()

    def kernels(self) -> KernelRegistry:
        """The engine's kernels (not a kernel registry of the provider: it only fuses)."""
        reg: KernelRegistry | None = self.__dict__.get("_kernels")
        if reg is None:
            reg = self.__dict__["_kernels"] = registry(dict(KERNELS))
        return reg

    def get_capability(self, graph: ep_sdk.GraphContext) -> Capability:
        reg = self.kernels()
        claims = ep_sdk.group_nodes(graph, lambda n: supported(reg, n, graph.opsets))
        taken = {n for c in claims for n in c.nodes}
        declined = {
            n: f"{self.name}: {reg.lookup_node(n, graph.opsets)}"
            for n in graph.nodes
            if n not in taken
        }
        return Capability(claims=claims, declined=declined)

    def compile(self, group: FusedGroup) -> Any:
        return type(self).engine(self, group)


class BakedInitializers(Engine):
    """Folds every value that has a value in the model, initializers that
    are also graph inputs included: a feed that overrides one is ignored."""

    def feeds(self, args: Sequence[Any]) -> dict[Any, Any]:
        env = super().feeds(args)
        for v in self.group.inputs:
            if v.const_value is not None:
                env[v] = v.const_value.numpy()
        return env


class FirstShapes(Engine):
    """Specialized to the shapes of its first run, as an engine built without
    dynamic-shape profiles: a later run's outputs are cut to the first
    run's shapes."""

    def __init__(self, provider: UnseenFused, group: FusedGroup) -> None:
        super().__init__(provider, group)
        self.shapes: list[tuple[int, ...]] | None = None

    def __call__(self, *args: Any) -> list[Any]:
        outs = super().__call__(*args)
        if self.shapes is None:
            self.shapes = [np.shape(o) for o in outs]
        return [
            np.asarray(o)[tuple(slice(0, d) for d in s)].copy() for o, s in zip(outs, self.shapes)
        ]


class FoldsIdentity(Engine):
    """Removes Identity nodes by letting the output name the input's buffer:
    when both are outputs of the group, the caller gets one array twice."""

    def fold(self, node: Any, env: dict[Any, Any], ins: list[Any], outs: list[Any]) -> bool:
        if node.op_type != "Identity":
            return False
        env[outs[0]] = env[ins[0]]
        return True


def _fused(alias: str, engine: type[Engine], bug: str, ops: tuple[str, ...]) -> type[UnseenFused]:
    cls_name = "".join(p.title() for p in alias.split("-"))
    attrs = {
        "name": f"{cls_name}ExecutionProvider",
        "aliases": (alias,),
        "engine": engine,
        "bug": bug,
        "ops": ops,
        "__doc__": f"Bug (compile path): {engine.__doc__}",
    }
    return type(cls_name, (UnseenFused,), attrs)


FUSED: list[type[UnseenFused]] = [
    UnseenFused,
    _fused(
        "unseen-fused-baked-init",
        BakedInitializers,
        "overridable initializer: a fused group ignores its feed",
        ("MatMul", "Gemm", "Add", "Mul"),
    ),
    _fused(
        "unseen-fused-first-shapes",
        FirstShapes,
        "symbolic dims: an engine specialized to its first run's shapes",
        ("Add", "Mul", "Relu", "Softmax", "MatMul"),  # any group shows it
    ),
    _fused(
        "unseen-fused-identity-alias",
        FoldsIdentity,
        "ownership: two outputs that are one array",
        ("Identity",),
    ),
]
"""The compile-path providers: the healthy one first."""
