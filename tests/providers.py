"""Small providers used by the core tests.

``MiniProvider`` runs a handful of ops (and ``If``) on the host in pure numpy.
``FakeDeviceProvider`` keeps its tensors in :class:`FakeTensor`, which numpy
cannot read, so any missing copy step shows up as an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

import ep_sdk
from ep_sdk import Capability, Claim, Device, ExecutionProvider, KernelRegistry, NodeInfo

FLOATS = {ep_sdk.dtypes.DataType.FLOAT, ep_sdk.dtypes.DataType.DOUBLE}


def _binary(fn: Any) -> Any:
    def build(info: NodeInfo) -> Any:
        return lambda a, b: (fn(a, b),)

    return build


def _mini_registry() -> KernelRegistry:
    reg = KernelRegistry()
    reg.kernel("Add", since=7, types={"T": FLOATS})(_binary(np.add))
    reg.kernel("Mul", since=7, types={"T": FLOATS})(_binary(np.multiply))
    reg.kernel("Sub", since=7, types={"T": FLOATS})(_binary(np.subtract))
    reg.kernel("Relu", since=6)(lambda info: lambda x: (np.maximum(x, 0).astype(x.dtype),))
    reg.kernel("Neg", since=6)(lambda info: lambda x: (np.negative(x),))
    reg.kernel("If", since=1, context=True)(_if_kernel)
    return reg


def _if_kernel(info: NodeInfo) -> Any:
    """``If`` through the subgraph API: each branch gets the outer values it reads.

    The node's implicit inputs arrive after ``cond``, in ``info.implicit_inputs``
    order; each branch asks for its own ``outer_names``, matched by name.
    """
    then_branch = info.attrs["then_branch"]
    else_branch = info.attrs["else_branch"]
    names = list(info.implicit_inputs)

    def compute(ctx: ep_sdk.RunContext, cond: np.ndarray, *outer: Any) -> list[Any]:
        by_name = dict(zip(names, outer))
        branch = then_branch if bool(np.asarray(cond).reshape(-1)[0]) else else_branch
        return branch.run(ctx, [], [by_name[n] for n in branch.outer_names])

    return compute


class MiniProvider(ExecutionProvider):
    """A pure-numpy host provider with Add, Mul, Sub, Relu, Neg and If."""

    name = "MiniExecutionProvider"
    aliases = ("mini",)
    version = "1.0"
    default_options: ClassVar[Mapping[str, str]] = {"flavour": "plain"}
    priority = 50
    _registry: ClassVar[KernelRegistry | None] = None

    def kernel_registry(self) -> KernelRegistry:
        if MiniProvider._registry is None:
            MiniProvider._registry = _mini_registry()
        return MiniProvider._registry


class FakeTensor:
    """A tensor on the fake device: numpy cannot read it."""

    __slots__ = ("_data",)

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("FakeTensor lives on the fake device; copy it to the host first")


class FakeDeviceProvider(ExecutionProvider):
    """Runs Add, Mul and Relu on a pretend device; counts copies."""

    name = "FakeDeviceExecutionProvider"
    aliases = ("fake",)
    device = Device("fake", 0)
    priority = 60
    copies_to_host = 0
    copies_from_host = 0

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()

        def wrap(fn: Any) -> Any:
            def build(info: NodeInfo) -> Any:
                def compute(*args: FakeTensor) -> tuple[FakeTensor]:
                    for a in args:
                        if not isinstance(a, FakeTensor):
                            raise TypeError(f"fake kernel got a host value {type(a).__name__}")
                    return (FakeTensor(fn(*(a._data for a in args))),)

                return compute

            return build

        reg.kernel("Add", since=7)(wrap(np.add))
        reg.kernel("Mul", since=7)(wrap(np.multiply))
        reg.kernel("Relu", since=6)(wrap(lambda x: np.maximum(x, 0).astype(x.dtype)))
        return reg

    def to_host(self, value: Any) -> np.ndarray:
        assert isinstance(value, FakeTensor), type(value)
        type(self).copies_to_host += 1
        return value._data.copy()

    def from_host(self, array: np.ndarray) -> FakeTensor:
        assert isinstance(array, np.ndarray), type(array)
        type(self).copies_from_host += 1
        return FakeTensor(np.array(array, copy=True))


class ClaimingProvider(ExecutionProvider):
    """Returns whatever claims a test puts in ``claims_for``; compiles with numpy."""

    name = "ClaimingExecutionProvider"
    aliases = ("claiming",)
    priority = 70
    claims_for: ClassVar[Any] = None
    compiled: ClassVar[list[ep_sdk.FusedGroup]] = []

    def get_capability(self, graph: ep_sdk.GraphContext) -> Capability:
        claims = type(self).claims_for(graph) if type(self).claims_for else []
        return Capability(claims=list(claims))

    def kernel_registry(self) -> KernelRegistry:
        return _mini_registry()

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        type(self).compiled.append(group)
        import onnx.reference  # the test oracle, fine in a test provider

        ref = onnx.reference.ReferenceEvaluator(group.model)
        names = [v.name for v in group.inputs]

        def run(*args: Any) -> list[Any]:
            return list(ref.run(None, dict(zip(names, args))))

        return run


def group_claims(graph: ep_sdk.GraphContext, op_types: set[str]) -> list[Claim]:
    """One fused claim of every free node whose op is in ``op_types``."""
    nodes = [n for n in graph.nodes if n.op_type in op_types]
    return [Claim.group(nodes)] if nodes else []


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """The test plugin's providers."""
    return [MiniProvider, FakeDeviceProvider, ClaimingProvider]
