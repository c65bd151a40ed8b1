"""How a session runs its plans: the execution mode, the providers' run hooks,
run logging, a stopped run's error, runs on another thread (``run_async``).

Everything here is chosen when the session is created (or its providers
change), never per step: with profiling off, sequential mode and providers
without ``on_run_start``/``on_run_end``, a run is :meth:`Plan.run` itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ep_sdk import ExecutionProvider, RunContext, RunTerminated

from .errors import RunTerminatedError
from .executor import Plan
from .options import ExecutionMode, RunOptions, SessionOptions
from .profiling import Profiler

if TYPE_CHECKING:
    from .parallel import ParallelExecutor

__all__ = ["Execute", "PlanRunner", "run_in_background", "run_log"]

run_log = logging.getLogger("ortcore.run")
"""Run-level log records (see ``RunOptions.log_severity_level``)."""

Execute = Callable[[Plan, Sequence[Any], RunContext], list[Any]]
"""How a plan is run: ``execute(plan, feeds, ctx) -> outputs``."""


class PlanRunner:
    """Runs a session's plans in the session's execution mode.

    Args:
        options: the session's options (execution mode, inter-op threads).
        profiler: the session's profiler, or ``None`` when it is not profiling.
        max_tensor_bytes: the session's tensor size limit (``None``: the default).

    Attributes:
        base_execute: how plans run, chosen once: the plain loop unless
            profiling or ``ExecutionMode.ORT_PARALLEL`` asks otherwise.
        execute: ``base_execute`` wrapped in the providers' run hooks (see
            :meth:`use_providers`), or ``base_execute`` itself.
    """

    def __init__(
        self,
        options: SessionOptions,
        profiler: Profiler | None,
        max_tensor_bytes: int | None,
    ) -> None:
        self._profiler = profiler
        self._max_tensor_bytes = max_tensor_bytes
        self._parallel: ParallelExecutor | None = None
        if options.execution_mode == ExecutionMode.ORT_PARALLEL:
            from .parallel import ParallelExecutor  # its thread pool machinery: only here

            self._parallel = ParallelExecutor(options.inter_op_num_threads)
        self.base_execute: Execute = self._choose_execute()
        self.execute: Execute = self.base_execute
        self._starts: list[Callable[[RunOptions | None], None]] = []
        self._ends: list[Callable[[RunOptions | None], None]] = []

    def use_providers(self, providers: Sequence[ExecutionProvider]) -> None:
        """Call these providers' ``on_run_start``/``on_run_end`` around every run."""
        self._starts = [
            p.on_run_start
            for p in providers
            if type(p).on_run_start is not ExecutionProvider.on_run_start
        ]
        self._ends = [
            p.on_run_end
            for p in providers
            if type(p).on_run_end is not ExecutionProvider.on_run_end
        ]
        self.execute = self._with_run_hooks(self.base_execute)

    def run(self, plan: Plan, feeds: Sequence[Any], run_options: RunOptions | None) -> list[Any]:
        """Execute ``plan``; with ``run_options.log_severity_level`` below 2
        (warning) the run is logged on the ``ortcore.run`` logger.

        Raises:
            RunTerminatedError: ``run_options.terminate`` was set (a ``Fail``,
                as in onnxruntime, and an ``ortcore.RunTerminated``).
            AllocationError, RuntimeException: as :meth:`Plan.run`.
        """
        ctx = RunContext(run_options, max_tensor_bytes=self._max_tensor_bytes)
        with _terminated_as_fail():
            if run_options is None or run_options.log_severity_level >= 2:
                return self.execute(plan, feeds, ctx)
            return self._logged_run(plan, feeds, ctx, run_options)

    def shutdown(self) -> None:
        """Stop the inter-op thread pool, if there is one."""
        if self._parallel is not None:
            self._parallel.shutdown()

    def _choose_execute(self) -> Execute:
        profiler = self._profiler
        par = self._parallel
        if par is not None:

            def parallel(plan: Plan, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
                return par.run(plan, feeds, ctx, profiler)

            return parallel
        if profiler is None:
            return Plan.run

        def profiled(plan: Plan, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
            return plan.run_profiled(feeds, ctx, profiler)

        return profiled

    def _with_run_hooks(self, execute: Execute) -> Execute:
        """``execute`` wrapped in the providers' ``on_run_start``/``on_run_end``,
        or ``execute`` itself when no provider overrides them."""
        starts, ends = self._starts, self._ends
        if not starts and not ends:
            return execute

        def hooked(plan: Plan, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
            ro = ctx.run_options
            for start in starts:
                start(ro)
            try:
                return execute(plan, feeds, ctx)
            finally:
                for end in ends:
                    end(ro)

        return hooked

    def _logged_run(
        self, plan: Plan, feeds: Sequence[Any], ctx: RunContext, ro: RunOptions
    ) -> list[Any]:
        """A run with log records, as onnxruntime's run-level logging.

        Severity 1 (info) logs the run's start and end at INFO; severity 0
        (verbose) logs them at DEBUG and, with ``log_verbosity_level`` of 1 or
        more, one DEBUG record per executed node (op type, provider, time),
        unless the session is profiling already. Records start with
        ``[logid]`` when the run options name one.
        """
        level = logging.DEBUG if ro.log_severity_level <= 0 else logging.INFO
        tag = f"[{ro.logid}] " if ro.logid else ""
        run_log.log(level, "%srun started: %d nodes", tag, len(plan.steps))
        per_node = (
            ro.log_severity_level <= 0 and ro.log_verbosity_level >= 1 and self._profiler is None
        )
        prof = Profiler("run") if per_node else None
        execute = self.execute
        if prof is not None:
            par = self._parallel

            def traced(plan: Plan, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
                assert prof is not None
                if par is not None:
                    return par.run(plan, feeds, ctx, prof)
                return plan.run_profiled(feeds, ctx, prof)

            execute = self._with_run_hooks(traced)
        t0 = time.perf_counter()
        try:
            results = execute(plan, feeds, ctx)
        except BaseException as exc:
            ms = (time.perf_counter() - t0) * 1000
            run_log.error("%srun failed after %.3f ms: %s", tag, ms, exc)
            raise
        finally:
            if prof is not None:
                for e in prof.events():
                    if e["cat"] != "Node":
                        continue
                    a = e["args"]
                    run_log.debug(
                        "%snode %s (%s on %s): %.3f ms",
                        tag, a["node_name"], a["op_name"], a["provider"], e["dur"] / 1000,
                    )  # fmt: skip
        ms = (time.perf_counter() - t0) * 1000
        run_log.log(level, "%srun finished in %.3f ms", tag, ms)
        return results


@contextlib.contextmanager
def _terminated_as_fail() -> Iterator[None]:
    """A run stopped by ``RunOptions.terminate`` raises :class:`RunTerminatedError`
    (onnxruntime raises ``Fail``; ``except ortcore.RunTerminated`` still catches it)."""
    try:
        yield
    except RunTerminatedError:
        raise
    except RunTerminated as exc:
        raise RunTerminatedError(str(exc)) from exc


def run_in_background(
    run: Callable[[], list[Any]],
    callback: Callable[[list[Any], Any, str], Any],
    user_data: Any,
) -> None:
    """Call ``run()`` on a new daemon thread, then ``callback(outputs, user_data,
    error)``: ``error`` is ``""`` on success, else the message of what ``run``
    raised (``outputs`` is then empty). This is ``InferenceSession.run_async``."""

    def work() -> None:
        try:
            outputs = run()
        except Exception as exc:
            callback([], user_data, str(exc))
            return
        callback(outputs, user_data, "")

    threading.Thread(target=work, name="ortcore-run-async", daemon=True).start()
