"""onnxruntime's global thread pools, by its rules.

``set_global_thread_pool_sizes(intra, inter)`` creates the process's global
pools, once: a second call is a :class:`~ortcore.Fail`. After it, every
session must set ``SessionOptions.use_per_session_threads = False`` and uses
the global sizes (its own ``intra_op_num_threads`` is then ignored, as in
onnxruntime); a session that asks for the global pools when none were
created is refused. Both refusals are ``RuntimeError``\\s with onnxruntime's
words.

ortcore's providers size their own work from the session's thread count
(the CPU provider shares one budget among all sessions already), so the
global pools change the number a session passes its providers, nothing more.
"""

from __future__ import annotations

import threading
from typing import Any

from .errors import Fail, InvalidArgumentRuntimeError

__all__ = ["check_session_threads", "session_intra_threads", "set_global_thread_pool_sizes"]

_lock = threading.Lock()
_sizes: tuple[int, int] | None = None


def set_global_thread_pool_sizes(
    intra_op_num_threads: int = 0, inter_op_num_threads: int = 0
) -> None:
    """Create the process's global thread pools (0: onnxruntime's default size).

    Raises:
        Fail: they were created already (onnxruntime cannot replace them either).
    """
    global _sizes
    with _lock:
        if _sizes is not None:
            raise Fail("Global thread pools have already been created, cannot replace them")
        _sizes = (int(intra_op_num_threads), int(inter_op_num_threads))


def check_session_threads(options: Any) -> None:
    """Refuse a session whose ``use_per_session_threads`` contradicts the
    global pools, as onnxruntime does.

    Raises:
        InvalidArgumentRuntimeError: per-session threads with global pools, or
            global threads without them.
    """
    per_session = bool(options.use_per_session_threads)
    if _sizes is not None and per_session:
        raise InvalidArgumentRuntimeError(
            "use_per_session_threads must be false when using a global thread pool "
            "(set_global_thread_pool_sizes was called: set "
            "SessionOptions.use_per_session_threads = False)"
        )
    if _sizes is None and not per_session:
        raise InvalidArgumentRuntimeError(
            "session_env.EnvCreatedWithGlobalThreadPools() was false. When the session is not "
            "configured to use per session threadpools, the env must be created with the the "
            "CreateEnvWithGlobalThreadPools API (call set_global_thread_pool_sizes first)."
        )


def session_intra_threads(options: Any) -> int:
    """The intra-op thread count a session's providers get: the global pool's
    size for a session on the global pools, else its own option."""
    if _sizes is not None and not options.use_per_session_threads:
        return _sizes[0]
    return int(options.intra_op_num_threads)
