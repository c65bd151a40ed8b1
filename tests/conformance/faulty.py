"""Deliberately faulty providers: pure numpy, each with exactly one fault.

``faulty-good`` is the healthy baseline (Add, Sub, Mul, Relu, Neg, Abs on
float tensors); each other provider is it with one thing broken. The suite
must catch every fault. Registered as one plugin: ``--plugin tests.conformance.faulty``.

``faulty-fusing`` is the healthy baseline of the compile path: it claims only
groups of two or more float32 nodes (``ep_sdk.group_nodes``) and runs each
group with the suite's oracle; the ``faulty-fused-*`` providers are it with
one thing broken.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

import ep_sdk
from ep_sdk import Capability, ExecutionProvider, KernelRegistry, SessionConfig
from ep_sdk.dtypes import DataType

FLOATS = {DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16}
Fn = Callable[..., Any]

GOOD: dict[str, Fn] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Relu": lambda x: np.maximum(x, 0).astype(x.dtype),
    "Neg": np.negative,
    "Abs": np.abs,
}


def _registry(ops: Mapping[str, Fn]) -> KernelRegistry:
    reg = KernelRegistry()
    for op, fn in ops.items():

        def build(info: ep_sdk.NodeInfo, fn: Fn = fn) -> Fn:
            return lambda *args: (fn(*args),)

        reg.kernel(op, since=1, types={"T": FLOATS})(build)
    return reg


class GoodProvider(ExecutionProvider):
    """No fault: the baseline."""

    name = "FaultyGoodExecutionProvider"
    aliases = ("faulty-good",)
    version = "1.0"
    priority = 1
    faults: ClassVar[dict[str, Fn]] = {}

    def kernel_registry(self) -> KernelRegistry:
        return _registry({**GOOD, **type(self).faults})


def _wrong_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a + b + 0.5).astype(a.dtype)


def _raise(x: np.ndarray) -> np.ndarray:
    raise RuntimeError("faulty kernel: Relu failed after it was claimed")


def _relu_in_place(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0, out=x)


class _Shared:
    scratch: Any = None
    kept: ClassVar[list[np.ndarray]] = []


def _racy_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    _Shared.scratch = a * b  # one buffer shared by every thread
    time.sleep(0.002)
    return np.array(_Shared.scratch, copy=True)


def _leaky_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = a + b
    _Shared.kept.append(out.copy())  # never released
    return out


def _crash(x: np.ndarray) -> np.ndarray:
    os.kill(os.getpid(), signal.SIGSEGV)
    return x


def _hang(x: np.ndarray) -> np.ndarray:
    time.sleep(3600)
    return x


def _fault(alias: str, **faults: Fn) -> type[GoodProvider]:
    cls_name = "".join(p.title() for p in alias.split("-")) + "Provider"
    attrs = {
        "name": cls_name.replace("Provider", "ExecutionProvider"),
        "aliases": (alias,),
        "faults": faults,
        "__doc__": f"Faulty: {', '.join(faults)}.",
    }
    return type(cls_name, (GoodProvider,), attrs)


WrongNumbers = _fault("faulty-wrong", Add=_wrong_add)
RaisesAfterClaim = _fault("faulty-raise", Relu=_raise)
WritesInputs = _fault("faulty-inplace", Relu=_relu_in_place)
WrongDtype = _fault("faulty-dtype", Add=lambda a, b: (a + b).astype(np.float64))
WrongShape = _fault("faulty-shape", Add=lambda a, b: np.expand_dims(a + b, 0))
Racy = _fault("faulty-race", Mul=_racy_mul)
Leaky = _fault("faulty-leak", Add=_leaky_add)
Crashes = _fault("faulty-crash", Relu=_crash)
Hangs = _fault("faulty-hang", Relu=_hang)


class LaxOptions(GoodProvider):
    """Faulty: accepts any option silently."""

    name = "FaultyOptionsExecutionProvider"
    aliases = ("faulty-options",)

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: SessionConfig | None = None
    ) -> None:
        super().__init__({}, config)


class Tunable(GoodProvider):
    """No fault by default; option ``add_offset`` (default 0) is added to every Add."""

    name = "FaultyTunableExecutionProvider"
    aliases = ("faulty-tunable",)
    default_options: ClassVar[Mapping[str, str]] = {"add_offset": "0"}

    def kernel_registry(self) -> KernelRegistry:
        offset = float(self.options["add_offset"])
        return _registry({**GOOD, "Add": lambda a, b: (a + b + offset).astype(a.dtype)})


class SignOnly(ExecutionProvider):
    """No fault: one op (Sign) that no probe uses; it claims nodes of cases only."""

    name = "FaultySignOnlyExecutionProvider"
    aliases = ("faulty-sign-only",)
    version = "1.0"
    priority = 1

    def kernel_registry(self) -> KernelRegistry:
        return _registry({"Sign": np.sign})


FUSABLE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp", "Erf", "Sqrt"}
    | {"MatMul", "Gemm", "Softmax", "Transpose", "Conv", "MaxPool"}
)


def _fusable(node: Any) -> bool:
    return (
        node.domain == ""
        and node.op_type in FUSABLE
        and all(v is not None and v.dtype == DataType.FLOAT for v in (*node.inputs, *node.outputs))
    )


class FusingProvider(ExecutionProvider):
    """No fault: the compile-path baseline (groups of 2+ float32 nodes of :data:`FUSABLE`)."""

    name = "FaultyFusingExecutionProvider"
    aliases = ("faulty-fusing",)
    version = "1.0"
    priority = 1

    def get_capability(self, graph: ep_sdk.GraphContext) -> Capability:
        claims = self.claims(graph)
        taken = {n for c in claims for n in c.nodes}
        declined = {
            n: "nothing to fuse it with" if _fusable(n) else "not a float32 op it fuses"
            for n in graph.nodes
            if n not in taken
        }
        return Capability(claims=claims, declined=declined)

    def claims(self, graph: ep_sdk.GraphContext) -> list[ep_sdk.Claim]:
        """The groups it fuses."""
        return ep_sdk.group_nodes(graph, _fusable, min_size=2)

    def ops(self) -> tuple[type, ...]:
        """Reference implementations that replace the oracle's (faults)."""
        return ()

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        from conformance.oracle import evaluator  # a test provider may run the oracle

        ref = evaluator(group.model, self.ops())
        names = [v.name for v in group.inputs]
        lock = threading.Lock()

        def run(*args: Any) -> list[Any]:
            with lock:
                return self.outputs(list(ref.run(None, dict(zip(names, args)))))

        return run

    def outputs(self, values: list[Any]) -> list[Any]:
        """The group's outputs as the compiled function returns them."""
        return values


class ClaimsNothing(FusingProvider):
    """Faulty: a compile-path provider whose get_capability claims no node at all."""

    name = "FaultyClaimsNothingExecutionProvider"
    aliases = ("faulty-fused-nothing",)

    def claims(self, graph: ep_sdk.GraphContext) -> list[ep_sdk.Claim]:
        return []


class FusedOutputsSwapped(FusingProvider):
    """Faulty: a fused group with several outputs returns them in reverse order."""

    name = "FaultyFusedOrderExecutionProvider"
    aliases = ("faulty-fused-order",)

    def outputs(self, values: list[Any]) -> list[Any]:
        return values[::-1]


def _flipped_conv() -> type:
    from onnx.reference.ops.op_conv import Conv

    class FlippedConv(Conv):  # type: ignore[misc]
        """Conv with the kernel flipped (a convolution, not a correlation)."""

        def _run(self, X: Any, W: Any, B: Any = None, **attrs: Any) -> Any:
            return super()._run(X, np.ascontiguousarray(W[..., ::-1, ::-1]), B, **attrs)

    FlippedConv.__name__ = "Conv"
    return FlippedConv


class FusedWrongConv(FusingProvider):
    """Faulty: only fuses groups, and computes Conv with the kernel flipped."""

    name = "FaultyFusedConvExecutionProvider"
    aliases = ("faulty-fused-conv",)

    def ops(self) -> tuple[type, ...]:
        return (_flipped_conv(),)


PROVIDERS: list[type[ExecutionProvider]] = [
    GoodProvider,
    WrongNumbers,
    RaisesAfterClaim,
    WritesInputs,
    WrongDtype,
    WrongShape,
    Racy,
    Leaky,
    Crashes,
    Hangs,
    LaxOptions,
    Tunable,
    SignOnly,
    FusingProvider,
    ClaimsNothing,
    FusedOutputsSwapped,
    FusedWrongConv,
]


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """Every faulty provider."""
    return PROVIDERS
