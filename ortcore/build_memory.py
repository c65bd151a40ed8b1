"""Memory housekeeping while a session is built: the cyclic garbage collector
paused, and the C heap's freed pages given back after the model is loaded.

The collector:

Building a session allocates a few objects per node (onnx-ir nodes and values,
node infos, plan steps) and frees almost none of them: the collector's
young-generation passes find nothing to collect, and each of its full passes
walks every object built so far. On a 200,000-node graph that was a third of
session creation. The collector is paused for the build and restarted after
it (reference counting still frees everything without cycles meanwhile); the
cycles the build left behind are collected by the next regular pass.

Pauses nest and may overlap between threads: the collector runs again when
the last build ends, and only if it was running when the first began.

The heap: loading parses the model into protobuf messages (about ten times
the file's size) and shape inference makes a second, larger copy; both are
freed once the model is converted to onnx-ir, but into the C library's heap,
where Python's small-object allocator, which takes its memory elsewhere, does
not reuse them. Without :func:`trim_heap` a large model's parsed copies were
still resident when the plan was built on top of them (a 200,000-node chain:
about 190 MB of the session's peak).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "trim_heap"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the ``with`` block (see the module docstring)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    trim: Callable[[int], int] = fn
    return trim


_TRIM = _malloc_trim()


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's
    ``malloc_trim``; nothing elsewhere). See the module docstring."""
    if _TRIM is not None:
        _TRIM(0)
