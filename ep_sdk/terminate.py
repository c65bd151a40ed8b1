"""``RunOptions.terminate`` inside a kernel: :func:`check_terminate`.

The executor checks the flag between nodes. A kernel that can run long on its
own (a loop over a data-dependent count, a Python loop over every element of
a large tensor) polls it as well::

    def compute(x):
        for start in range(0, n, 4096):
            ep_sdk.check_terminate()
            ...

ortcore's executors bind the run's :class:`~ep_sdk.RunContext` to the thread
(a :class:`contextvars.ContextVar`) for as long as they run a plan, also on
the worker threads of ``ExecutionMode.ORT_PARALLEL`` and inside subgraphs, so
kernels need no argument to find it. Outside a run, checking does nothing.
A check costs about 0.1 µs: poll every few thousand cheap elements, or once
per iteration of a loop whose body does real work.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token

from .kernel import RunContext

__all__ = ["bind_run", "check_terminate", "current_run", "unbind_run"]

_current: ContextVar[RunContext | None] = ContextVar("ep_sdk_current_run", default=None)


def check_terminate() -> None:
    """Raise :class:`~ep_sdk.RunTerminated` if the current run was asked to stop.

    Raises:
        RunTerminated: ``RunOptions.terminate`` of the run this thread executes
            is set (the same error, and message, the executor raises between
            nodes).
    """
    ctx = _current.get()
    if ctx is not None:
        ctx.check_terminated()


def current_run() -> RunContext | None:
    """The :class:`~ep_sdk.RunContext` of the run this thread executes, or ``None``."""
    return _current.get()


# The executors bind once per plan run (subgraph runs included), so these are
# the context variable's own methods: no Python frame, about 0.1 µs a pair.
bind_run: Callable[[RunContext], Token[RunContext | None]] = _current.set
"""``bind_run(ctx)``: make ``ctx`` this thread's current run (for executors,
not kernels). Returns the token to hand to :func:`unbind_run` when the plan is
done, so that a subgraph's run restores its enclosing run."""

unbind_run: Callable[[Token[RunContext | None]], None] = _current.reset
"""``unbind_run(token)``: undo the :func:`bind_run` that returned ``token``."""
