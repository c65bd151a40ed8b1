"""Helpers shared by the kernel modules: type sets, thread count, axis handling."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import numpy as np
import onnx_ir as ir
from ep_sdk import NodeInfo

from ..threads import share

DT = ir.DataType

FLOATS = frozenset({DT.FLOAT, DT.DOUBLE, DT.FLOAT16})
"""Float element types numpy can compute with."""
SIGNED_INTS = frozenset({DT.INT8, DT.INT16, DT.INT32, DT.INT64})
UNSIGNED_INTS = frozenset({DT.UINT8, DT.UINT16, DT.UINT32, DT.UINT64})
INTS = SIGNED_INTS | UNSIGNED_INTS
NUMERIC = FLOATS | INTS
"""Every numeric type the CPU kernels handle."""
ALL = NUMERIC | {DT.BOOL}
"""Numeric types and bool."""
ALL_STR = ALL | {DT.STRING}
"""Every tensor type the CPU kernels move around (data-movement ops)."""
INDEX = frozenset({DT.INT32, DT.INT64})
BOOL = frozenset({DT.BOOL})

KEPT_PER_NODE = 16
"""Input shapes per node whose geometry (window, path, call) a kernel keeps
(:func:`remember`): a node sees a few shapes, a fuzzer many."""

_V = TypeVar("_V")


def remember(kept: dict[Hashable, _V], key: Hashable, value: _V) -> _V:
    """Put ``value`` in a node's ``kept`` (emptied when it holds
    :data:`KEPT_PER_NODE` values) under ``key``, and return it: the miss of
    ``kept.get(key) or remember(kept, key, compute())``. Runs of one session
    may share ``kept`` (one dict operation at a time under the GIL; a value
    lost to a concurrent clear is computed again)."""
    if len(kept) >= KEPT_PER_NODE:
        kept.clear()
    kept[key] = value
    return value


def thread_count(info: NodeInfo) -> int:
    """Return the number of threads a kernel of ``info`` may use (at least 1)."""
    n = 0
    if info.provider is not None:
        n = int(info.provider.config.intra_op_num_threads)
    if n <= 0:
        try:
            n = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            n = os.cpu_count() or 1
    return max(n, 1)


def is_tail(small: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """Whether shape ``small``, less its leading 1s, is the trailing shape of
    ``full`` (a bias along the last axes: each row of ``full`` adds it whole)."""
    if len(small) > len(full):
        return False
    k = 0
    while k < len(small) and small[k] == 1:
        k += 1
    rest = small[k:]
    return rest == full[len(full) - len(rest) :]


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Return ``axis`` in ``[0, rank)``, accepting negative values.

    Raises:
        ValueError: out of range.
    """
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Iterable[int], rank: int) -> tuple[int, ...]:
    """Normalize each axis (see :func:`normalize_axis`); duplicates are an error."""
    out = tuple(normalize_axis(int(a), rank) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axes {list(axes)}")
    return out


def int_list(value: Any) -> list[int]:
    """Return a 1-D integer input or attribute as a list of Python ints."""
    if value is None:
        return []
    return [int(v) for v in np.asarray(value).reshape(-1)]


def scalar(value: Any) -> Any:
    """Return the single element of a scalar or one-element tensor."""
    return np.asarray(value).reshape(-1)[0].item()


def constant_input(info: NodeInfo, index: int) -> bool:
    """Whether input ``index`` of the node is a constant initializer: the
    same array, never written, at every run (an initializer that is also a
    graph input may be fed, so it is not). Kernels may keep what they
    derive from such an input, checking the array by identity."""
    inputs = info.node.inputs
    value = inputs[index] if index < len(inputs) else None
    return (
        value is not None
        and value.const_value is not None
        and value.is_initializer()
        and not value.is_graph_input()
    )


class FilterCache:
    """A transform of a node's weight (``fn(w)``), kept: a Conv's filters
    packed or transformed, a MatMul's B packed.

    A node whose weight is a constant initializer (:func:`constant_input`)
    gets the same array at every run, so its transform is kept: :meth:`transform` recomputes it only
    when handed another array. The array is held, so its id cannot be reused
    by another one, and it is compared by identity, so only use this for
    weights that are never written in place (constant initializers).
    """

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray]) -> None:
        self._fn = fn
        self._last: tuple[np.ndarray, np.ndarray] | None = None

    def transform(self, w: np.ndarray) -> np.ndarray:
        """``fn(w)``, cached for the last ``w``."""
        last = self._last  # one read: safe if runs of the session overlap
        if last is not None and last[0] is w:
            return last[1]
        u = self._fn(w)
        self._last = (w, u)
        return u


def f32_contiguous(x: np.ndarray) -> np.ndarray:
    """Return ``x`` as a C-contiguous float32 array (no copy if it already is)."""
    return np.ascontiguousarray(x, dtype=np.float32)


_BASE_GRAIN = 1 << 13
"""Work (elements) below which a kernel never wakes a second thread. Tuned
inside models, where the other threads are still spinning from the node
before (GOMP_SPINCOUNT) when most kernels start, so a second thread comes
for far less than the wake-up of a sleeping one that :func:`grain`
measures. Against 32768 (2-core Zen 3 VM, the same session's runs
alternating, 2 threads): ShuffleNet 0.9x the time (its depthwise Convs on
14x14 and 7x7 now on both threads), BERT 0.98x, GPT-2, ResNet-50,
DenseNet-121 and Inception v2 0.99x, SqueezeNet and Inception v1 the same;
4096 gained ShuffleNet a little more and lost SqueezeNet 1%."""
_BASE_WAKE_NS = 16_000
"""The wake-up cost :data:`_BASE_GRAIN` was tuned for (2-core VM, 2026-11)."""
_MAX_GRAIN = _BASE_GRAIN << 3
GRAIN_ENV = "ORTCORE_CPU_GRAIN"
"""Environment variable: a fixed grain (elements) instead of the measured one."""
_grain = 0  # measured at the first call that could use more than one thread
_fixed = -1  # the grain ORTCORE_CPU_GRAIN sets (0: none), read once; -1: not read yet


def _fixed_grain() -> int:
    """The grain the environment sets, 0 if none (read on the first call)."""
    global _fixed
    if _fixed < 0:
        text = os.environ.get(GRAIN_ENV, "").strip()
        _fixed = int(text) if text.isdigit() and int(text) > 0 else 0
    return _fixed


def grain() -> int:
    """Elements of work worth one more OpenMP thread in this process.

    Waking a sleeping OpenMP thread (the passive wait policy, see
    ``ortcore_cpu._ext``) costs what the machine makes it cost: a few µs on
    bare metal, 15-20 µs on a quiet 2-core VM, 50-80 µs on a busier one, where
    an empty two-thread region then took longer than many whole kernels. So
    the first time a kernel could use two threads, the cost of an empty
    two-thread region over a one-thread one is measured (7 pairs, medians,
    under a millisecond) and the grain scales with it from
    ``_BASE_GRAIN`` (8192, for 16 µs or less) up to 8 times that. The
    environment variable ``ORTCORE_CPU_GRAIN`` sets it instead.
    """
    global _grain
    if _grain:
        return _grain
    if _fixed_grain():
        _grain = _fixed_grain()
        return _grain
    import statistics  # here: it loads fractions and decimal, 3 ms of a cold start

    from .._ext import movement

    movement.parallel_region(2)  # the first region starts the thread
    one, two = [], []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        movement.parallel_region(1)
        t1 = time.perf_counter_ns()
        movement.parallel_region(2)
        t2 = time.perf_counter_ns()
        one.append(t1 - t0)
        two.append(t2 - t1)
    wake = max(statistics.median(two) - statistics.median(one), 0)
    _grain = int(min(max(_BASE_GRAIN * wake / _BASE_WAKE_NS, _BASE_GRAIN), _MAX_GRAIN))
    return _grain


def threads_for(work: int, threads: int) -> int:
    """Threads worth using for ``work`` elements: 1 below the :func:`grain`,
    where waking a thread costs more than it saves, and never more than the
    run's share of the cores (:func:`ortcore_cpu.threads.share`)."""
    if threads <= 1:
        return 1
    g = _grain
    if not g:
        if work < _BASE_GRAIN and not _fixed_grain():
            # Below any measured grain: no need to measure one yet (it starts
            # an OpenMP thread, milliseconds of a small model's first run).
            return 1
        g = grain()
    if work < g:
        return 1
    n = work // g  # at least 1
    if n > threads:
        n = threads
    cores = share()  # at least 1
    return n if n < cores else cores


MEMORY_BOUND = 8
"""How many elements of a memory-bound loop (pooling, im2col, the depthwise
convolution, a Conv's bias pass) weigh as one unit of :func:`threads_for`'s
work. These loops move an element in about 0.2-1 ns; a second thread pays
off from about 130 thousand elements when it is still spinning from the
node before (more where waking costs more, see :func:`grain`)."""


def threads_for_memory_bound(work: int, threads: int) -> int:
    """:func:`threads_for` for ``work`` elements of a memory-bound loop."""
    return threads_for(work // MEMORY_BOUND, threads)
