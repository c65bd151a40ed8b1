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
0 never touches the pool (``OPENBLAS_NUM_THREADS`` and friends keep working).
Checking the size costs one C call per run (about 0.3 µs).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["blas_threads", "limit_blas_threads"]

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
