"""The executor: an immutable flat plan of steps over value slots.

A plan is built once per (sub)graph. Each step is a tuple
``(fn, input_slots, output_slots, release_slots, wants_context, info)``.
A run copies the slot template (constants already placed), stores the feeds,
walks the steps, and drops every intermediate right after its last reader.
Nothing in a plan changes after it is built, so any number of threads may run
it at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ep_sdk import RunContext, RunTerminated

from .errors import AllocationError, OrtcoreError, RuntimeException

__all__ = ["Plan", "StepInfo", "SubgraphPlan"]

Step = tuple[
    Callable[..., Any], tuple[int, ...], tuple[int, ...], tuple[int, ...], bool, "StepInfo"
]


@dataclass(frozen=True)
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


class Plan:
    """An immutable, thread-safe execution plan for one graph."""

    __slots__ = ("template", "input_slots", "output_slots", "steps", "num_slots")

    def __init__(
        self,
        template: Sequence[Any],
        input_slots: Sequence[int],
        output_slots: Sequence[int],
        steps: Sequence[Step],
    ) -> None:
        self.template = list(template)
        self.num_slots = len(self.template)
        self.input_slots = tuple(input_slots)
        self.output_slots = tuple(output_slots)
        self.steps = tuple(steps)

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
        ro = ctx.run_options
        info = None
        try:
            for fn, ins, outs, release, wants_ctx, info in self.steps:  # noqa: B007
                if ro is not None and ro.terminate:
                    raise RunTerminated("Exiting due to terminate flag being set to true.")
                args = [slots[i] for i in ins]
                res = fn(ctx, *args) if wants_ctx else fn(*args)
                if len(res) != len(outs) or not isinstance(res, (tuple, list)):
                    raise TypeError(
                        f"kernel returned {type(res).__name__} of length {len(res)} for "
                        f"{len(outs)} output(s); "
                        "a compute function must return a tuple or list with one value per output"
                    )
                for o, r in zip(outs, res):
                    slots[o] = r
                for r in release:
                    slots[r] = None
        except (OrtcoreError, RunTerminated):
            raise
        except MemoryError as exc:
            where = _where(info)
            raise AllocationError(
                f"Failed to allocate memory while running {where}: {exc}. The tensor "
                "requested is too large for this machine."
            ) from exc
        except Exception as exc:
            raise RuntimeException(
                f"Non-zero status code returned while running {_where(info)}. "
                f"Status Message: {type(exc).__name__}: {exc}"
            ) from exc
        return [slots[i] for i in self.output_slots]

    def __len__(self) -> int:
        return len(self.steps)


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
