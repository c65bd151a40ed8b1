"""Deliberately faulty providers: pure numpy, each with exactly one fault.

``faulty-good`` is the healthy baseline (Add, Sub, Mul, Relu, Neg, Abs on
float tensors); each other provider is it with one thing broken. The suite
must catch every fault. Registered as one plugin: ``--plugin tests.conformance.faulty``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

import ep_sdk
from ep_sdk import ExecutionProvider, KernelRegistry, SessionConfig
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
]


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """Every faulty provider."""
    return PROVIDERS
