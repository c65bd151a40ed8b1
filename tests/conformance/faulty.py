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
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

import ep_sdk
from ep_sdk import Capability, ExecutionProvider, KernelRegistry, SessionConfig
from ep_sdk.dtypes import DataType

FLOATS = {DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16}
INTS = {
    DataType.INT8,
    DataType.UINT8,
    DataType.INT16,
    DataType.UINT16,
    DataType.INT32,
    DataType.UINT32,
    DataType.INT64,
    DataType.UINT64,
}
Fn = Callable[..., Any]


class Built:
    """A kernel that needs its node: ``build(info)`` returns the compute function."""

    def __init__(self, build: Callable[[ep_sdk.NodeInfo], Fn], types: set[DataType] = FLOATS):
        self.build = build
        self.types = types


GOOD: dict[str, Fn] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Relu": lambda x: np.maximum(x, 0).astype(x.dtype),
    "Neg": np.negative,
    "Abs": np.abs,
}


def _registry(ops: Mapping[str, Fn | Built]) -> KernelRegistry:
    reg = KernelRegistry()
    for op, fn in ops.items():
        if isinstance(fn, Built):

            def build(info: ep_sdk.NodeInfo, made: Built = fn) -> Fn:
                compute = made.build(info)
                return lambda *args: (compute(*args),)

            reg.kernel(op, since=1, types={"T": fn.types})(build)
            continue

        def build_plain(info: ep_sdk.NodeInfo, fn: Fn = fn) -> Fn:
            return lambda *args: (fn(*args),)

        reg.kernel(op, since=1, types={"T": FLOATS})(build_plain)
    return reg


class GoodProvider(ExecutionProvider):
    """No fault: the baseline."""

    name = "FaultyGoodExecutionProvider"
    aliases = ("faulty-good",)
    version = "1.0"
    priority = 1
    faults: ClassVar[dict[str, Fn | Built]] = {}

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


_SCRATCH: dict[tuple[Any, ...], np.ndarray] = {}


def _scratch_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mul into one module-level scratch buffer per shape, then a copy: no sleep,
    the race window is numpy's own (it releases the GIL on large arrays)."""
    key = (a.shape, a.dtype)
    if key not in _SCRATCH:
        _SCRATCH[key] = np.empty_like(a)
    np.multiply(a, b, out=_SCRATCH[key])
    return _SCRATCH[key].copy()


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


def _fault(alias: str, **faults: Fn | Built) -> type[GoodProvider]:
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
RacyScratch = _fault("faulty-race-scratch", Mul=_scratch_mul)
Leaky = _fault("faulty-leak", Add=_leaky_add)
Crashes = _fault("faulty-crash", Relu=_crash)
Hangs = _fault("faulty-hang", Relu=_hang)


# -- state across runs ------------------------------------------------------


def _reused_output(info: ep_sdk.NodeInfo) -> Fn:
    """Relu into one buffer per kernel, returned every run (a result the caller
    kept from run 1 changes at run 2)."""
    buffers: dict[tuple[Any, ...], np.ndarray] = {}

    def relu(x: np.ndarray) -> np.ndarray:
        key = (x.shape, x.dtype)
        if key not in buffers:
            buffers[key] = np.empty_like(x)
        return np.maximum(x, 0, out=buffers[key])

    return relu


def _prepacked_matmul(info: ep_sdk.NodeInfo) -> Fn:
    """MatMul that packs B on the first run and keys the pack by B's shape."""
    packed: dict[tuple[int, ...], np.ndarray] = {}

    def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if b.shape not in packed:
            packed[b.shape] = np.ascontiguousarray(b.T)
        return a @ packed[b.shape].T

    return matmul


_PACKS: dict[tuple[int, ...], np.ndarray] = {}


def _shared_pack_matmul(info: ep_sdk.NodeInfo) -> Fn:
    """MatMul that packs a constant B once for the process, keyed by its shape:
    a second session whose weights have the same shape gets the first one's."""
    constant = info.node.inputs[1] is not None and info.node.inputs[1].const_value is not None

    def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not constant:
            return a @ b
        if b.shape not in _PACKS:
            _PACKS[b.shape] = np.ascontiguousarray(b.T)
        return a @ _PACKS[b.shape].T

    return matmul


# -- inputs the old generator never made -------------------------------------


def _same_size_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Adds element by element whenever the sizes match, whatever the shapes."""
    if a.size == b.size:
        return (a.reshape(-1) + b.reshape(-1)).reshape(a.shape)
    return a + b


def _clamped_sigmoid(x: np.ndarray) -> np.ndarray:
    z = np.clip(x, -8, 8)
    return (1.0 / (1.0 + np.exp(-z))).astype(x.dtype)


def _nan_to_zero_relu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, 0).astype(x.dtype)


def _zero_for_zero_divisor(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape), a.dtype)
    return np.divide(a, b, out=out, where=b != 0)


def _saturating_add(info: ep_sdk.NodeInfo) -> Fn:
    def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind not in "iu" or a.dtype.itemsize == 8:
            return a + b
        lim = np.iinfo(a.dtype)
        return np.clip(a.astype(np.int64) + b, lim.min, lim.max).astype(a.dtype)

    return add


def _int32_add(info: ep_sdk.NodeInfo) -> Fn:
    def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype != np.int64:
            return a + b
        return (a.astype(np.int32) + b.astype(np.int32)).astype(np.int64)

    return add


def _memory_order_abs(x: np.ndarray) -> np.ndarray:
    """Reads the elements in the order they lie in memory (strides ignored)."""
    return np.abs(np.ravel(x, order="K")).reshape(x.shape)


def _buffer_start_neg(x: np.ndarray) -> np.ndarray:
    """Reads a view's values from the start of the buffer it lives in."""
    if x.base is None:
        return np.negative(x)
    start = np.asarray(x.base).reshape(-1)[: x.size]
    return np.negative(start.reshape(x.shape))


def _guessing_gemm(info: ep_sdk.NodeInfo) -> Fn:
    """Gemm that ignores transA/transB and transposes B when the shapes say so."""
    alpha, beta = info.attrs.get("alpha", 1.0), info.attrs.get("beta", 1.0)

    def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
        if b.shape[0] != a.shape[1]:
            b = b.T
        y = alpha * (a @ b)
        if c is not None:
            y = y + beta * c
        return y.astype(a.dtype)

    return gemm


def _float32_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mul computed in float32 whatever the dtype."""
    return (a.astype(np.float32) * b.astype(np.float32)).astype(a.dtype)


# -- graph-level faults -------------------------------------------------------


def _overwriting_relu(info: ep_sdk.NodeInfo) -> Fn:
    """Relu that reuses its input's buffer when another node made the input
    (not the user's array, so "it must be ours"), even if it is read again."""
    made_by_node = info.node.inputs[0] is not None and info.node.inputs[0].producer() is not None

    def relu(x: np.ndarray) -> np.ndarray:
        if made_by_node:
            return np.maximum(x, 0, out=x)
        return np.maximum(x, 0)

    return relu


def _declining_builder(info: ep_sdk.NodeInfo) -> Fn:
    """A builder that gives up with the runtime's "not implemented" error after
    get_capability claimed the node."""
    import ortcore

    raise ortcore.NotImplementedOp(f"{info.op_type}: this build has no kernel for it")


BuilderDeclines = _fault("faulty-build", Relu=Built(_declining_builder))
ReusesOutput = _fault("faulty-reuse", Relu=Built(_reused_output))
PrepacksByShape = _fault("faulty-prepack", MatMul=Built(_prepacked_matmul))
SharedPack = _fault("faulty-shared-pack", MatMul=Built(_shared_pack_matmul))
SameSizeBroadcast = _fault("faulty-bcast", Add=_same_size_add)
ClampedSigmoid = _fault("faulty-sigmoid-clamp", Sigmoid=_clamped_sigmoid)
ReluDropsNan = _fault("faulty-relu-nan", Relu=_nan_to_zero_relu)
DivByZeroIsZero = _fault("faulty-div-zero", Div=_zero_for_zero_divisor)
SaturatingAdd = _fault("faulty-saturate", Add=Built(_saturating_add, FLOATS | INTS))
Int64In32 = _fault("faulty-int32", Add=Built(_int32_add, FLOATS | INTS))
IgnoresStrides = _fault("faulty-strides", Abs=_memory_order_abs)
ReadsBufferStart = _fault("faulty-base", Neg=_buffer_start_neg)
GuessesTranspose = _fault("faulty-gemm-guess", Gemm=Built(_guessing_gemm))
Float64In32 = _fault("faulty-f64", Mul=_float32_mul)
OverwritesIntermediate = _fault("faulty-overwrite", Relu=Built(_overwriting_relu))


# -- resources -----------------------------------------------------------------


class _Kept:
    threads: ClassVar[list[threading.Thread]] = []
    files: ClassVar[list[Any]] = []


class ThreadPerSession(GoodProvider):
    """Faulty: starts a worker thread per session that close() never stops."""

    name = "FaultyThreadsExecutionProvider"
    aliases = ("faulty-threads",)

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait, name="faulty-worker", daemon=True)
        worker.start()
        _Kept.threads.append(worker)


class FilePerSession(GoodProvider):
    """Faulty: opens a log file per session that close() never closes."""

    name = "FaultyFilesExecutionProvider"
    aliases = ("faulty-files",)

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        _Kept.files.append(tempfile.TemporaryFile())  # kept by a "log handler"


class HealthyResources(GoodProvider):
    """No fault: a thread and a file per session, both released by close()."""

    name = "FaultyTidyExecutionProvider"
    aliases = ("faulty-tidy",)

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._stop.wait, daemon=True)
        self._worker.start()
        self._log = tempfile.TemporaryFile()

    def close(self) -> None:
        self._stop.set()
        self._worker.join()
        self._log.close()
        super().close()


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


class FusedOutputsByName(FusingProvider):
    """Faulty: a fused group returns its outputs sorted by name (as a dict of
    an engine's results might come back), not in the group's order."""

    name = "FaultyFusedByNameExecutionProvider"
    aliases = ("faulty-fused-by-name",)

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        run = super().compile(group)
        names = [v.name for v in group.outputs]
        order = sorted(range(len(names)), key=lambda i: names[i])

        def by_name(*args: Any) -> list[Any]:
            values = run(*args)
            return [values[i] for i in order]

        return by_name


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
    RacyScratch,
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
    FusedOutputsByName,
    BuilderDeclines,
    ReusesOutput,
    PrepacksByShape,
    SharedPack,
    SameSizeBroadcast,
    ClampedSigmoid,
    ReluDropsNan,
    DivByZeroIsZero,
    SaturatingAdd,
    Int64In32,
    IgnoresStrides,
    ReadsBufferStart,
    GuessesTranspose,
    Float64In32,
    OverwritesIntermediate,
    ThreadPerSession,
    FilePerSession,
    HealthyResources,
]


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """Every faulty provider."""
    return PROVIDERS
