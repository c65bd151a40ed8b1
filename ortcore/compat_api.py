"""onnxruntime's module-level functions that have no other home in ortcore.

Logging severity, telemetry switches, build information, global thread pools,
allocator registration: each keeps onnxruntime's name and signature. Where
ortcore has nothing to configure, the call is accepted and recorded (so code
that makes it runs unchanged); where it cannot do what onnxruntime does
(loading a native provider library), it raises :class:`~ortcore.Fail` saying so.
``docs/onnxruntime-compat.md`` lists each one.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from ep_sdk import OrtCompiledModelCompatibility  # the SDK's enum: one type for both

from ._version import __version__
from .errors import InvalidArgument, InvalidArgumentRuntimeError
from .options import SessionOptions
from .thread_pools import set_global_thread_pool_sizes

__all__ = [
    "OrtCompiledModelCompatibility",
    "create_and_register_allocator",
    "create_and_register_allocator_v2",
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_build_info",
    "get_default_session_options",
    "has_collective_ops",
    "set_default_logger_callback",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
    "set_global_thread_pool_sizes",
    "set_seed",
]

_log = logging.getLogger("ortcore")

# onnxruntime's severities: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal.
_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)

_state: dict[str, Any] = {
    "severity": 2,
    "verbosity": 0,
    "telemetry": False,
    "seed": None,
    "thread_pools": (0, 0),
}


def get_build_info() -> str:
    """A one-line description of this build (onnxruntime's ``get_build_info``)."""
    return (
        f"ortcore Build Info: version={__version__}, onnx={onnx.__version__}, "
        f"numpy={np.__version__}, python={platform.python_version()}"
    )


def set_default_logger_severity(severity: int) -> None:
    """Set the level of the ``ortcore`` logger from onnxruntime's severity
    (0 verbose, 1 info, 2 warning, 3 error, 4 fatal).

    Raises:
        InvalidArgument: a severity outside 0..4.
    """
    level = int(severity)
    if not 0 <= level <= 4:
        raise InvalidArgument(f"severity must be between 0 and 4, not {severity}")
    _state["severity"] = level
    _log.setLevel(_LEVELS[level])


def set_default_logger_verbosity(verbosity: int) -> None:
    """Record the verbosity of verbose (severity 0) logging."""
    _state["verbosity"] = int(verbosity)


class _CallbackHandler(logging.Handler):
    """Passes ``ortcore`` log records to an onnxruntime-style callback."""

    def __init__(self, callback: Callable[..., Any]) -> None:
        super().__init__()
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        severity = min(max(record.levelno // 10 - 1, 0), 4)
        where = f"{record.pathname}:{record.lineno}"
        try:
            self.callback(severity, record.name, "", where, record.getMessage())
        except Exception:  # a failing callback must not break the run that logged
            self.handleError(record)


def set_default_logger_callback(callback: Callable[..., Any] | None, severity: int = 2) -> None:
    """Send ``ortcore`` log records to ``callback(severity, category, logid,
    code_location, message)`` and set the logger's level to ``severity`` (as
    :func:`set_default_logger_severity`); ``None`` removes the callback and
    leaves the level as it is. A callback that raises does not stop the code
    that logged (the error is printed by :mod:`logging`).

    Raises:
        InvalidArgumentRuntimeError: a severity outside 0..4, or a
            ``callback`` that is neither callable nor ``None`` (onnxruntime
            raises ``RuntimeError``).
    """
    level = int(severity)
    if not 0 <= level <= 4:
        raise InvalidArgumentRuntimeError(
            "Invalid logging severity. 0:Verbose, 1:Info, 2:Warning, 3:Error, 4:Fatal"
        )
    if callback is not None and not callable(callback):
        raise InvalidArgumentRuntimeError("callback must be a callable")
    for h in [h for h in _log.handlers if isinstance(h, _CallbackHandler)]:
        _log.removeHandler(h)
    if callback is not None:
        _log.addHandler(_CallbackHandler(callback))
        set_default_logger_severity(level)


def disable_telemetry_events() -> None:
    """Accepted: ortcore sends no telemetry."""
    _state["telemetry"] = False


def enable_telemetry_events() -> None:
    """Accepted: ortcore sends no telemetry, enabled or not."""
    _state["telemetry"] = False


def set_seed(seed: int) -> None:
    """Recorded. Random operators without a ``seed`` attribute draw from fresh
    entropy in ortcore; give the node a ``seed`` for repeatable values."""
    _state["seed"] = int(seed)


def has_collective_ops() -> bool:
    """``False``: ortcore has no collective (multi-device) operators."""
    return False


def get_default_session_options() -> SessionOptions:
    """A new :class:`SessionOptions` with default values."""
    return SessionOptions()


def create_and_register_allocator(mem_info: Any, arena_cfg: Any = None) -> None:
    """Accepted: ortcore's providers own their allocators (nothing is shared)."""


def create_and_register_allocator_v2(
    provider_type: str,
    mem_info: Any,
    provider_options: Mapping[str, str] | None = None,
    arena_cfg: Any = None,
) -> None:
    """Accepted: ortcore's providers own their allocators (nothing is shared)."""
