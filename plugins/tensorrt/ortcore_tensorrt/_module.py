"""Which TensorRT is here: the module ``tensorrt`` (10.x, 11.x) or ``tensorrt_rtx``.

Both have the same Python API for what the provider uses (Builder,
OnnxParser, ``supports_model_v2``, Runtime, execution contexts); they differ
in what they build for (:func:`targets`) and in what a builder config takes
(TensorRT-RTX networks are strongly typed: no FP16/BF16 flags, and its timing
cache calls are no-ops).
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = ["MODULES", "Found", "find", "load", "logger", "targets"]

MODULES = ("tensorrt", "tensorrt_rtx")
"""The modules tried, in order, when the option ``trt_module`` is ``auto``."""

_TRT_MIN_CC = (7, 5)  # TensorRT 10 dropped everything older than Turing


@dataclass(frozen=True)
class Found:
    """A TensorRT module that imports: its name and version."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def find(preferred: str = "auto") -> Found | str:
    """The first of :data:`MODULES` (or ``preferred``) that imports, or why none
    does. Never raises; importing either module takes about 50 ms."""
    names = MODULES if preferred in ("", "auto") else (preferred,)
    problems: list[str] = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                problems.append(f"{name} is not installed")
                continue
            module = load(name)
        except Exception as exc:  # a broken install: a library it links is missing
            problems.append(f"{name} does not import ({type(exc).__name__}: {exc})")
            continue
        return Found(name, str(getattr(module, "__version__", "?")))
    return "; ".join(problems)


@cache
def load(name: str) -> Any:
    """The module (imported once)."""
    return importlib.import_module(name)


_LOGGERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def logger(module: Any) -> Any:
    """One ``Logger`` per module and process (TensorRT wants one logger shared
    by every builder and runtime); it prints errors only."""
    with _LOCK:
        found = _LOGGERS.get(module.__name__)
        if found is None:
            found = _LOGGERS[module.__name__] = module.Logger(module.Logger.ERROR)
        return found


def targets(module: Any) -> list[tuple[int, int]] | None:
    """The compute capabilities ``module`` builds for, when it says
    (TensorRT-RTX's ``ComputeCapability``: ``SM75``, ``SM80``, ...);
    ``None`` for TensorRT, which builds for the device it runs on."""
    kinds = getattr(module, "ComputeCapability", None)
    if kinds is None:
        return None
    out = []
    for name in dir(kinds):
        if name.startswith("SM") and name[2:].isdigit():
            digits = name[2:]
            out.append((int(digits[:-1]), int(digits[-1])))
    return sorted(out)


def refuses_device(found: Found, module: Any, major: int, minor: int) -> str | None:
    """Why ``module`` cannot run on a device of compute capability
    ``major.minor``, or ``None``."""
    cc = f"{major}.{minor}"
    supported = targets(module)
    if supported is not None:
        if (major, minor) not in supported:
            shown = ", ".join(f"{a}.{b}" for a, b in supported)
            return f"{found} has no target for compute capability {cc} (its targets: {shown})"
        return None
    if (major, minor) < _TRT_MIN_CC:
        return f"{found} needs compute capability 7.5 or newer, the device has {cc}"
    return None
