"""glibc's malloc told to keep freed memory for the next run.

Every kernel allocates its outputs with numpy, and numpy takes large blocks
from the C library's ``malloc``. glibc hands blocks over a threshold straight
to ``mmap`` and returns them to the system when freed, and it returns the
free top of its heap once that passes another threshold. Both thresholds
move with the sizes it has seen, so a model whose intermediates come in many
sizes keeps giving memory back and taking it again: each page taken again is
a page fault. The light zoo's AlexNet took about 1900 faults and 4.4 ms of
system time per 20 ms run, Inception v1 3400 and 8.6 ms of 26 ms.

onnxruntime keeps freed blocks in an arena of its own. Here
:func:`keep_freed_memory` sets glibc's thresholds once, when the first CPU
provider is created: blocks up to 32 MiB (glibc's largest threshold) come
from the heap, and up to 256 MiB of free heap top stays with the process.
Those runs then take no page faults (AlexNet 20 -> 13.5 ms, Inception v1
26 -> 18 ms). A process keeps, after its peak, up to that much memory it no
longer uses, as with an arena; the settings are process-wide.

Nothing is changed where the C library is not glibc, where the user set
glibc's own knobs (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_`` or ``GLIBC_TUNABLES``), or with
``ORTCORE_CPU_KEEP_MEMORY=0``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import threading

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

log = logging.getLogger("ortcore_cpu")

MMAP_THRESHOLD = 32 * 1024 * 1024
"""Bytes from which glibc maps a block on its own (its largest setting)."""

TRIM_THRESHOLD = 256 * 1024 * 1024
"""Bytes of free heap top glibc keeps before it gives them back."""

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_USER_KNOBS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_lock = threading.Lock()
_done: bool | None = None


def _wanted(env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether the user left malloc to us (see the module docstring)."""
    if env.get("ORTCORE_CPU_KEEP_MEMORY", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if any(k in env for k in _USER_KNOBS):
        return False
    return "glibc.malloc" not in env.get("GLIBC_TUNABLES", "")


def keep_freed_memory() -> bool:
    """Set glibc's malloc thresholds once per process (see the module docstring).

    Returns:
        ``True`` if they are set (now or before), ``False`` if left alone.
    """
    global _done
    with _lock:
        if _done is None:
            _done = _wanted(os.environ) and _set_thresholds()
        return _done


def _set_thresholds() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    log.debug("glibc malloc keeps freed memory: %s", ok)
    return ok
