"""``ExecutionMode.ORT_PARALLEL``: independent steps of a plan run on a thread pool.

The schedule is derived once per plan: for every step, how many earlier steps
it waits for and which steps wait for it; for every slot, how many steps read
it (so that it is released when its last reader finishes, whatever the order).
A run starts every step that waits for nothing; a worker that finishes a step
continues with one step it made ready and hands the others to the pool, so a
chain runs on one thread without hand-offs. Kernels release the GIL inside
numpy, BLAS and Cython, so branches overlap. Results equal sequential mode's:
each step sees exactly the same inputs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ep_sdk import RunContext, RunTerminated
from ep_sdk.terminate import bind_run, unbind_run

from .errors import OrtcoreError
from .executor import TERMINATED, Plan, _bad_result, step_error

if TYPE_CHECKING:
    from .profiling import Profiler

__all__ = ["ParallelExecutor", "Schedule"]


class Schedule:
    """Dependencies between a plan's steps (immutable, derived from the plan)."""

    __slots__ = ("waits", "users", "readers", "starts", "keep")

    def __init__(self, plan: Plan) -> None:
        producer: dict[int, int] = {}
        for i, step in enumerate(plan.steps):
            for s in step.outputs:
                producer[s] = i
        self.waits: list[int] = []
        self.users: list[list[int]] = [[] for _ in plan.steps]
        readers: dict[int, int] = {}
        for i, step in enumerate(plan.steps):
            deps = {producer[s] for s in step.inputs if s in producer}
            self.waits.append(len(deps))
            for d in deps:
                self.users[d].append(i)
            for s in set(step.inputs):
                readers[s] = readers.get(s, 0) + 1
        self.keep = frozenset(plan.output_slots) | {0}
        # slots no step reads and that are not outputs: dropped as soon as written
        self.readers = readers
        self.starts = [i for i, w in enumerate(self.waits) if w == 0]

    @classmethod
    def of(cls, plan: Plan) -> Schedule:
        """The plan's schedule, computed on first use and kept with the plan."""
        sched = plan._derived.get("schedule")
        if sched is None:
            sched = plan._derived["schedule"] = cls(plan)
        return sched


class ParallelExecutor:
    """Runs plans with up to ``num_threads`` steps at once.

    Args:
        num_threads: ``SessionOptions.inter_op_num_threads``; 0 means one
            thread per CPU core.
    """

    def __init__(self, num_threads: int = 0) -> None:
        n = int(num_threads) if num_threads and num_threads > 0 else (os.cpu_count() or 1)
        self.num_threads = n
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ortcore-inter-op")

    def shutdown(self) -> None:
        """Stop the pool's threads."""
        self._pool.shutdown(wait=False)

    def run(
        self,
        plan: Plan,
        feeds: Sequence[Any],
        ctx: RunContext,
        profiler: Profiler | None = None,
    ) -> list[Any]:
        """Run ``plan``; same contract as :meth:`Plan.run`."""
        sched = Schedule.of(plan)
        steps = plan.steps
        slots = plan.template.copy()
        for i, v in zip(plan.input_slots, feeds):
            slots[i] = v
        if not steps:
            return [slots[i] for i in plan.output_slots]
        waits = list(sched.waits)
        readers = dict(sched.readers)
        keep = sched.keep
        lock = threading.Lock()
        done = threading.Event()
        state = {"left": len(steps), "active": 0}
        failure: list[BaseException] = []
        ro = ctx.run_options
        record = profiler.record_step if profiler is not None and profiler.enabled else None
        clock = time.perf_counter_ns

        def finish_one() -> None:
            state["active"] -= 1
            if state["left"] == 0 or (failure and state["active"] == 0):
                done.set()

        def work(i: int) -> None:
            # Pool threads do not inherit the caller's context variables:
            # bind the run here so kernels' ep_sdk.check_terminate() sees it.
            token = bind_run(ctx)
            try:
                run_from(i)
            finally:
                unbind_run(token)

        def run_from(i: int) -> None:
            while True:
                fn, ins, outs, _, wants_ctx, info = steps[i]
                try:
                    if failure:
                        raise _Skipped
                    if ro is not None and ro.terminate:
                        raise RunTerminated(TERMINATED)
                    args = [slots[s] for s in ins]
                    t0 = clock()
                    res = fn(ctx, *args) if wants_ctx else fn(*args)
                    if not isinstance(res, (tuple, list)) or len(res) != len(outs):
                        raise _bad_result(res, len(outs))
                    if record is not None:
                        record(info, i, t0, clock(), args, res)
                    for o, r in zip(outs, res):
                        slots[o] = r if o in readers or o in keep else None
                except _Skipped:
                    with lock:
                        finish_one()
                    return
                except (OrtcoreError, RunTerminated) as exc:
                    with lock:
                        failure.append(exc)
                        finish_one()
                    return
                except Exception as exc:
                    err = step_error(exc, info)
                    err.__cause__ = exc
                    with lock:
                        failure.append(err)
                        finish_one()
                    return
                with lock:
                    state["left"] -= 1
                    for s in set(ins):
                        n = readers[s] - 1
                        readers[s] = n
                        if n == 0 and s not in keep:
                            slots[s] = None
                    ready = []
                    for j in sched.users[i]:
                        waits[j] -= 1
                        if waits[j] == 0:
                            ready.append(j)
                    state["active"] += len(ready) - 1 if ready else 0
                    if not ready:
                        finish_one()
                for j in ready[1:]:
                    self._pool.submit(work, j)
                if not ready:
                    return
                i = ready[0]

        run_start = clock()
        with lock:
            state["active"] = len(sched.starts)
        for i in sched.starts:
            self._pool.submit(work, i)
        done.wait()
        if profiler is not None and record is not None:
            profiler.session_event("model_run", run_start, clock())
        if failure:
            raise failure[0]
        return [slots[i] for i in plan.output_slots]


class _Skipped(Exception):
    """A step not started because another step of the run failed."""
