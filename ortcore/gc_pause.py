"""Python's cyclic garbage collector paused while a session is built.

Building a session allocates a few objects per node (onnx-ir nodes and values,
node infos, plan steps) and frees almost none of them: the collector's
young-generation passes find nothing to collect, and each of its full passes
walks every object built so far. On a 200,000-node graph that was a third of
session creation. The collector is paused for the build and restarted after
it (reference counting still frees everything without cycles meanwhile); the
cycles the build left behind are collected by the next regular pass.

Pauses nest and may overlap between threads: the collector runs again when
the last build ends, and only if it was running when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

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
