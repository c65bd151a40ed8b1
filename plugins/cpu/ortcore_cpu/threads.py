"""``SessionOptions.intra_op_num_threads`` for the BLAS library numpy calls.

The Cython kernels size their OpenMP regions per node (see
:func:`ortcore_cpu.kernels._common.thread_count`), but GEMMs go through
numpy's BLAS (OpenBLAS in the PyPI wheels, MKL or BLIS elsewhere), whose
thread pool is one per process. A session that asks for a number of intra-op
threads makes the pool that size at the start of each of its runs
(:meth:`CPUExecutionProvider.on_run_start
<ortcore_cpu.provider.CPUExecutionProvider.on_run_start>`), through
threadpoolctl, which knows every BLAS numpy may be linked against. The pool
stays that size after the run: like onnxruntime's OpenMP builds, the setting
is process-wide, so two sessions with different settings running at the same
moment share whichever size was set last. A session that leaves the option at
0 keeps the pool's own size (``OPENBLAS_NUM_THREADS`` and friends keep
working), within the budget below. Checking the size costs one C call per
run (about 0.3 µs).

One thread budget for the process
---------------------------------
Kernels' OpenMP regions, the BLAS pool and the caller's own threads share the
cores. :func:`run_started` and :func:`run_ended` (the provider's run hooks)
keep count of the runs in flight in this process, and every run gets an equal
share of the cores that other processes leave free: with eight threads calling
``run`` at once on two cores each run computes on one thread, instead of
sixteen OpenMP threads and a contended BLAS pool fighting over two cores. The
cores other processes take are read from ``/proc/loadavg``'s count of
runnable threads (at most every 50 ms, about 10 µs a read; only on Linux),
the median of the last three reads: one read sees a single instant, and on a
quiet 2-core VM about one in twenty caught a passing system thread, which
then put the next 50 ms of runs on one thread (a 5 ms model's first Conv
took 0.45-0.58 ms instead of 0.2). Load that lasts shows in two reads of
three, within 100 ms. OpenBLAS's idle threads busy-wait for a long while
after each call and split every GEMM into equal static parts, so on a busy
machine a pool wider than the free cores waits for its slowest, descheduled
thread, and 60 ms runs took 2 s.
:func:`share` is the number of threads a kernel of the current run may use;
the BLAS pool follows it, and goes back to its own size (or the session's
``intra_op_num_threads``) when the cores are free again.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

__all__ = [
    "blas_threads",
    "cores",
    "forked",
    "limit_blas_threads",
    "share_blas_pool",
    "run_ended",
    "run_started",
    "set_load_sensing",
    "share",
]

log = logging.getLogger("ortcore_cpu")

_lock = threading.Lock()
_controllers: list[Any] | None = None


def _blas() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded (found once)."""
    global _controllers
    if _controllers is None:
        with _lock:
            if _controllers is None:
                import numpy  # noqa: F401  (threadpoolctl only sees libraries already loaded)

                try:
                    from threadpoolctl import ThreadpoolController
                except ImportError:  # pragma: no cover - a declared dependency
                    log.warning("threadpoolctl is not installed: BLAS keeps its thread count")
                    _controllers = []
                else:
                    found = ThreadpoolController().select(user_api="blas").lib_controllers
                    _controllers = list(found)
    return _controllers


def limit_blas_threads(num_threads: int) -> bool:
    """Make numpy's BLAS thread pool ``num_threads`` threads (process-wide).

    Cheap when the pool already has that size. Any thread may call it.

    Returns:
        ``True`` if a BLAS library has the size now, ``False`` if none could
        be found (or threadpoolctl is not installed).

    Raises:
        ValueError: ``num_threads`` is below 1.
    """
    if num_threads < 1:
        raise ValueError(f"intra_op_num_threads must be at least 1 here, got {num_threads}")
    libs = _blas()
    for lib in libs:
        if lib.get_num_threads() != num_threads:
            with _lock:
                # threadpoolctl lets only one Python thread ("the controlling
                # thread") resize a pthreads OpenBLAS; runs may come from any.
                clear = getattr(type(lib), "clear_controlling_thread", None)
                if clear is not None:
                    clear(force=True)
                lib.set_num_threads(num_threads)
                if clear is not None:
                    clear(force=True)
    return bool(libs)


def blas_threads() -> int | None:
    """The size of numpy's BLAS thread pool now (``None``: no BLAS found)."""
    counts = [int(lib.get_num_threads()) for lib in _blas()]
    return max(counts) if counts else None


# -- one pool: OpenBLAS's threaded calls on the kernels' OpenMP threads -------------------

_POOL_SETTER = "openblas_set_threads_callback_function"
_pool_lock = threading.Lock()
_pool_done = False
_pooled: list[str] = []
_setters: list[int] = []


def _unpool_in_child() -> None:
    """After ``fork``: give OpenBLAS its own pool back in the child. GNU
    OpenMP's threads do not survive a fork, and a child's first parallel
    region waits for them forever; OpenBLAS's pthreads pool is rebuilt."""
    from ._ext import blas_pool

    for address in _setters:
        blas_pool.uninstall(address)
    _setters.clear()
    _pooled.clear()


forked = False
"""Whether this process is a child forked from one that had loaded the
kernels' OpenMP runtime: its kernels then run on one thread."""


def _serial_in_child() -> None:
    """After ``fork``: the child's kernels run their OpenMP regions on one
    thread. GNU OpenMP's threads do not survive a fork, and the child's first
    region of two or more threads would wait for them forever (a session run
    in a ``multiprocessing`` child with the fork start method hung); numpy's
    BLAS keeps its own threads (see :func:`_unpool_in_child`)."""
    global forked
    if not any(name.startswith(__package__ + "._ext.") for name in sys.modules):
        return  # no kernel module loaded before the fork: no OpenMP threads yet
    try:
        from ._ext import blas_pool
    except ImportError:  # built without OpenMP: no threads to lose
        return
    blas_pool.serial_regions()
    forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_serial_in_child)


def _setter_address(lib: Any) -> int:
    """The address of OpenBLAS's threading-callback setter in ``lib`` (a
    threadpoolctl controller), under the symbol prefixes and suffixes of the
    builds numpy and scipy ship (``scipy_...64_``); 0 if it has none."""
    import ctypes

    try:
        dll = ctypes.CDLL(lib.filepath)
    except OSError:
        return 0
    for prefix in ("", "scipy_"):
        for suffix in ("", "64_", "_64"):
            fn = getattr(dll, f"{prefix}{_POOL_SETTER}{suffix}", None)
            if fn is not None:
                return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
    return 0


def share_blas_pool() -> list[str]:
    """Run OpenBLAS's threaded calls on the kernels' OpenMP threads (once
    per process; see :mod:`ortcore_cpu._ext.blas_pool`).

    Done for every loaded OpenBLAS with its own (pthreads) pool whose
    version takes a threading callback (0.3.27+); an OpenMP-built OpenBLAS
    already shares the kernels' pool, and MKL or BLIS keep theirs. A
    child forked later gets OpenBLAS's own pool back (:func:`_unpool_in_child`).
    ``ORTCORE_CPU_BLAS_POOL=0`` turns it off.

    Returns:
        The paths of the libraries that now use the kernels' pool.
    """
    global _pool_done
    with _pool_lock:
        if _pool_done:
            return list(_pooled)
        _pool_done = True
        if os.environ.get("ORTCORE_CPU_BLAS_POOL", "1").strip().lower() in ("0", "false", "no"):
            return []
        try:
            from ._ext import blas_pool
        except ImportError:  # built without OpenMP: nothing to share
            return []
        for lib in _blas():
            if getattr(lib, "internal_api", "") != "openblas":
                continue
            if getattr(lib, "threading_layer", "pthreads") != "pthreads":
                continue
            address = _setter_address(lib)
            if address:
                blas_pool.install(address)
                _setters.append(address)
                _pooled.append(str(lib.filepath))
                log.debug("OpenBLAS %s runs its threads on the kernels' OpenMP pool", lib.filepath)
        if _setters and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_unpool_in_child)
        return list(_pooled)


# -- the process's thread budget -------------------------------------------------------

_SENSE_EVERY_S = 0.05
_budget_lock = threading.Lock()
_active = 0  # runs in flight
_others = 0  # cores taken by other processes: the median of the recent reads
_SAMPLES = 3
_samples: list[int] = []  # the last reads of the other processes' runnable threads
_sensed_at = -1.0
_sensing = os.environ.get("ORTCORE_CPU_LOAD_SENSING", "1").strip() not in ("0", "false", "no")
_blas_default: int | None = None  # the pool's own size, before we touched it
_share = 0  # threads per run now (0: not computed yet)


def cores() -> int:
    """The cores this process may run on (its CPU affinity)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


_CORES = cores()


def set_load_sensing(enabled: bool) -> None:
    """Turn the reading of other processes' load on or off (on by default;
    ``ORTCORE_CPU_LOAD_SENSING=0`` turns it off). Off, only this process's
    own concurrent runs divide the cores."""
    global _sensing, _others
    with _budget_lock:
        _sensing = bool(enabled)
        _others = 0
        _samples.clear()


def _runnable_elsewhere(blas_now: int) -> int:
    """Runnable threads outside this process's work, from ``/proc/loadavg``.

    The count includes this process's running callers (``_active`` of them)
    and, possibly, its BLAS threads spinning since the last call; counting
    them all as ours errs toward using the cores.
    """
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(running - _active - max(blas_now - 1, 0), 0)


def _steady_load(read: int) -> int:
    """Add ``read`` to the recent reads of other processes' runnable threads
    and return their median (the lower middle of an even count): a thread
    that shows in one read only does not cost the next runs their cores."""
    _samples.append(read)
    del _samples[:-_SAMPLES]
    return sorted(_samples)[(len(_samples) - 1) // 2]


_share_listeners: list[Any] = []


def on_share_change(listener: Any) -> None:
    """Call ``listener(share)`` whenever the per-run share changes (a native
    kernel module keeps its own copy of the cap, cheaper to read than :func:`share`)."""
    _share_listeners.append(listener)
    listener(share())


def _announce() -> None:
    for listener in _share_listeners:
        listener(_share or _CORES)


def share() -> int:
    """Threads a kernel of a run in flight may use now (at least 1)."""
    return _share or _CORES


def run_started(cap: int) -> None:
    """A run begins: recount the runs in flight, size the share and the BLAS pool.

    Args:
        cap: the session's ``intra_op_num_threads`` (0: every core).
    """
    global _active, _others, _sensed_at, _share, _blas_default
    with _budget_lock:
        _active += 1
        libs = _blas()
        blas_now = int(libs[0].get_num_threads()) if libs else 1
        if _blas_default is None:
            _blas_default = blas_now
        now = time.monotonic()
        if _sensing and now - _sensed_at >= _SENSE_EVERY_S:
            _sensed_at = now
            _others = _steady_load(_runnable_elsewhere(blas_now))
        free = max(_CORES - _others, 1)
        new = max(free // _active, 1)
        if new != _share:
            _share = new
            _announce()
        want = min(cap or _blas_default, _share, _CORES)
    if libs and want != blas_now:
        limit_blas_threads(want)


def run_ended() -> None:
    """A run is over (or failed): it no longer counts against the cores."""
    global _active, _share
    with _budget_lock:
        _active = max(_active - 1, 0)
        if _active:
            new = max(max(_CORES - _others, 1) // _active, 1)
            if new != _share:
                _share = new
                _announce()
