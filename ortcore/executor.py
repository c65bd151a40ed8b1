"""The executor: an immutable flat plan of steps over value slots.

A plan is built once per (sub)graph. Each step is a :class:`Step`
``(fn, inputs, outputs, release, wants_context, info)`` over slot indices.
A run copies the slot template (constants already placed), stores the feeds,
walks the steps, and drops every intermediate right after its last reader.
Nothing in a plan changes after it is built, so any number of threads may run
it at once.

The session chooses *how* a plan runs when it is created, never per step:
:meth:`Plan.run` is the plain loop, :meth:`Plan.run_profiled` the same loop
timing every step, and :mod:`ortcore.parallel` runs independent steps on a
thread pool. Profiling off therefore costs the plain loop nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ep_sdk import RunContext, RunTerminated
from ep_sdk.terminate import bind_run, unbind_run

from .errors import AllocationError, OrtcoreError, RuntimeException

if TYPE_CHECKING:
    from .profiling import Profiler

__all__ = [
    "Plan",
    "Step",
    "StepInfo",
    "SubgraphPlan",
    "attach_releases",
    "failure_at",
    "step_error",
]

TERMINATED = "Exiting due to terminate flag being set to true."


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What a step is, for errors, profiling and ``get_partition``.

    Attributes:
        kind: ``"node"``, ``"fused"`` or ``"copy"``.
        op_type: op type (``MemcpyToHost``/``MemcpyFromHost`` for copies).
        name: node name (or the copied value's name).
        provider: name of the provider that runs it.
    """

    kind: str
    op_type: str
    name: str
    provider: str


class Step(NamedTuple):
    """One step of a plan: call ``fn`` on the values in some slots, store its
    results in others, then drop the values no later step reads.

    Attributes:
        fn: the kernel (or compiled group, or copy function); returns a tuple
            or list with one value per output.
        inputs: slots of its inputs (slot 0 holds ``None``: an omitted input).
        outputs: slots its results go to.
        release: slots emptied after the step (their last reader).
        wants_context: ``fn`` takes the :class:`~ep_sdk.RunContext` first.
        info: what the step is, for errors and profiling.
    """

    fn: Callable[..., Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]
    wants_context: bool
    info: StepInfo


class Plan:
    """An immutable, thread-safe execution plan for one graph."""

    __slots__ = (
        "template",
        "input_slots",
        "output_slots",
        "steps",
        "_derived",
        "_loop",
    )

    def __init__(
        self,
        template: Sequence[Any],
        input_slots: Sequence[int],
        output_slots: Sequence[int],
        steps: Sequence[Step],
    ) -> None:
        self.template = list(template)
        self.input_slots = tuple(input_slots)
        self.output_slots = tuple(output_slots)
        self.steps = tuple(steps)
        self._loop = tuple(_loop_step(step) for step in self.steps)
        # Things computed from the plan on first use (pruned plans, the
        # parallel schedule); values depend only on the immutable plan.
        self._derived: dict[Any, Any] = {}

    def run(self, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
        """Run the plan: ``feeds`` in input-slot order, outputs in output-slot order.

        Raises:
            RunTerminated: ``ctx.run_options.terminate`` was set.
            AllocationError: a kernel ran out of memory.
            RuntimeException: a kernel raised; the message names the node.
        """
        slots = self.template.copy()
        for i, v in zip(self.input_slots, feeds):
            slots[i] = v
        # Kernels find the run through ep_sdk.check_terminate(); a subgraph's
        # plan binds the same context and restores it when done.
        token = bind_run(ctx)
        try:
            run_steps(self._loop, slots, ctx)
        finally:
            unbind_run(token)
        return [slots[i] for i in self.output_slots]

    def run_profiled(self, feeds: Sequence[Any], ctx: RunContext, profiler: Profiler) -> list[Any]:
        """:meth:`run`, recording one trace event per step in ``profiler``."""
        if not profiler.enabled:
            return self.run(feeds, ctx)
        clock = time.perf_counter_ns
        run_start = clock()
        slots = self.template.copy()
        for i, v in zip(self.input_slots, feeds):
            slots[i] = v
        ro = ctx.run_options
        info = None
        record = profiler.record_step
        token = bind_run(ctx)
        try:
            for index, (fn, ins, outs, release, wants_ctx, info) in enumerate(self.steps):
                if ro is not None and ro.terminate:
                    raise RunTerminated(TERMINATED)
                args = [slots[i] for i in ins]
                t0 = clock()
                res = fn(ctx, *args) if wants_ctx else fn(*args)
                t1 = clock()
                if not isinstance(res, (tuple, list)) or len(res) != len(outs):
                    raise _bad_result(res, len(outs))
                record(info, index, t0, t1, args, res)
                for o, r in zip(outs, res):
                    slots[o] = r
                for r in release:
                    slots[r] = None
        except (OrtcoreError, RunTerminated):
            raise
        except Exception as exc:
            raise step_error(exc, info) from exc
        finally:
            unbind_run(token)
            profiler.session_event("model_run", run_start, clock())
        return [slots[i] for i in self.output_slots]

    def pruned(self, wanted: Sequence[int]) -> Plan:
        """The plan restricted to the steps that the outputs at ``wanted`` need.

        Outputs not wanted come back as ``None``. Cached per ``wanted``.
        """
        key = ("pruned", tuple(sorted(set(wanted))))
        plan = self._derived.get(key)
        if plan is None:
            keep = {self.output_slots[i] for i in key[1]}
            needed = set(keep)
            chosen: list[Step] = []
            for step in reversed(self.steps):
                if needed.intersection(step.outputs):
                    chosen.append(step)
                    needed.update(step.inputs)
            chosen.reverse()
            outputs = [s if s in keep else 0 for s in self.output_slots]
            plan = Plan(self.template, self.input_slots, outputs, attach_releases(chosen, keep))
            self._derived[key] = plan
        return plan

    def __len__(self) -> int:
        return len(self.steps)


_WANTS_CTX = -1

_LoopStep = tuple[
    Callable[..., Any],
    int,
    int,
    int,
    tuple[int, ...],
    int,
    int,
    tuple[int, ...],
    tuple[int, ...],
    StepInfo,
]


def _loop_step(step: Step) -> _LoopStep:
    """A step laid out for :meth:`Plan.run`: ``(fn, arity, i0, i1, ins, o0,
    n_out, outs, release, info)``; ``arity`` is the number of inputs, or
    ``_WANTS_CTX`` for kernels that take the run context first, and ``i0``,
    ``i1``, ``o0`` the first input and output slots (0 where absent)."""
    fn, ins, outs, release, wants_ctx, info = step
    ins, outs, release = tuple(ins), tuple(outs), tuple(release)
    arity = _WANTS_CTX if wants_ctx else len(ins)
    i0 = ins[0] if len(ins) > 0 else 0
    i1 = ins[1] if len(ins) > 1 else 0
    o0 = outs[0] if outs else 0
    return (fn, arity, i0, i1, ins, o0, len(outs), outs, release, info)


def _run_steps_py(loop: Sequence[_LoopStep], slots: list[Any], ctx: RunContext) -> None:
    """Walk the steps of ``loop`` (laid out by :func:`_loop_step`) over ``slots``.

    The reference for ``ortcore._steps.run_steps``, the same loop compiled
    (``ortcore/_steps.pyx``), which :meth:`Plan.run` uses when it is built:
    the two must behave alike in every case (tests/test_executor.py runs its
    tests on both).
    """
    ro = ctx.run_options
    info = None
    try:
        # The common shapes of a step (one or two inputs, no context, one
        # output, nothing to release) take branches without loops or lists.
        for fn, arity, i0, i1, ins, o0, n_out, outs, release, info in loop:  # noqa: B007
            if ro is not None and ro.terminate:
                raise RunTerminated(TERMINATED)
            if arity == 2:
                res = fn(slots[i0], slots[i1])
            elif arity == 1:
                res = fn(slots[i0])
            elif arity == _WANTS_CTX:
                res = fn(ctx, *[slots[i] for i in ins])
            else:
                res = fn(*[slots[i] for i in ins])
            if type(res) is not tuple or len(res) != n_out:
                if not isinstance(res, (tuple, list)) or len(res) != n_out:
                    raise _bad_result(res, n_out)
            if n_out == 1:
                slots[o0] = res[0]
            else:
                for o, r in zip(outs, res):
                    slots[o] = r
            if release:
                for r in release:
                    slots[r] = None
    except (OrtcoreError, RunTerminated):
        raise
    except Exception as exc:
        raise step_error(exc, info) from exc


def attach_releases(steps: Sequence[Step], keep: set[int]) -> list[Step]:
    """Steps with their release lists set: each slot is dropped after its last reader.

    Slots in ``keep`` (the outputs) and slot 0 are never released.
    """
    last: dict[int, int] = {}
    for i, step in enumerate(steps):
        for s in step.inputs:
            last[s] = i
        for s in step.outputs:
            last.setdefault(s, i)  # written, never read: drop at once
    release: dict[int, list[int]] = {}
    for s, i in last.items():
        if s != 0 and s not in keep:
            release.setdefault(i, []).append(s)
    return [
        Step(fn, tuple(ins), tuple(outs), tuple(release.get(i, ())), wants_ctx, info)
        for i, (fn, ins, outs, _, wants_ctx, info) in enumerate(steps)
    ]


def _bad_result(res: Any, n_out: int) -> TypeError:
    """The error for a kernel result that is not one value per output
    (:func:`step_error` then names the step's op, node and provider)."""
    if res is None:
        got = "None"
    elif isinstance(res, (tuple, list)):
        got = f"{type(res).__name__} of length {len(res)}"
    else:
        got = f"a {type(res).__module__}.{type(res).__qualname__}, not a tuple or list,"
    return TypeError(
        f"kernel returned {got} for {n_out} output(s); "
        "a compute function must return a tuple or list with one value per output"
    )


def step_error(exc: Exception, info: StepInfo | None) -> OrtcoreError:
    """The ortcore error for ``exc`` raised by the step described by ``info``."""
    if isinstance(exc, MemoryError):
        return AllocationError(
            f"Failed to allocate memory while running {_where(info)}: {exc}. The tensor "
            "requested is too large for this machine."
        )
    return RuntimeException(f"{failure_at(info)}. Status Message: {type(exc).__name__}: {exc}")


def failure_at(info: StepInfo | None) -> str:
    """onnxruntime's opening of an error of the step ``info`` describes:
    "Non-zero status code returned while running Conv node. Name:'c' (provider ...)"."""
    return f"Non-zero status code returned while running {_where(info)}"


def _where(info: StepInfo | None) -> str:
    if info is None:
        return "the graph"
    return f"{info.op_type} node. Name:'{info.name}' (provider {info.provider})"


class SubgraphPlan:
    """A prepared subgraph, as control-flow kernels see it (``ep_sdk.SubgraphRunner``)."""

    __slots__ = ("plan", "input_names", "output_names", "outer_names", "_n_in")

    def __init__(
        self,
        plan: Plan,
        input_names: Sequence[str],
        output_names: Sequence[str],
        outer_names: Sequence[str],
    ) -> None:
        self.plan = plan
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.outer_names = list(outer_names)
        self._n_in = len(self.input_names)

    def run(self, ctx: RunContext, inputs: Sequence[Any], outer: Sequence[Any]) -> list[Any]:
        """Run the subgraph with body inputs and the outer-scope values it reads."""
        if len(inputs) != self._n_in:
            raise ValueError(
                f"subgraph takes {self._n_in} input(s) {self.input_names}, got {len(inputs)}"
            )
        return self.plan.run([*inputs, *outer], ctx)


try:  # the compiled loop (an optional extension: without a C compiler, the Python one)
    from ._steps import run_steps
except ImportError:  # pragma: no cover - exercised where the extension is not built
    run_steps = _run_steps_py

COMPILED_LOOP: bool = run_steps is not _run_steps_py
"""Whether :meth:`Plan.run` walks its steps in the compiled loop."""
