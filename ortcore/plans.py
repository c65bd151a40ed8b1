"""A session's plans: the one ``run`` uses, and variants for values bound on devices.

A :class:`SessionPlans` is built when the session is created and again when
its providers change. It plans the model once for ``run`` (feeds and outputs
on the host) and keeps the planner, so that the variants IO binding asks for
(inputs arriving on a device, outputs left there) are planned on first use,
reusing the partition, kernels and compiled groups, and kept.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import onnx_ir as ir

from ep_sdk import Device, ExecutionProvider
from ep_sdk.dtypes import constant_array

from .cache import CompiledCache
from .errors import InvalidArgument
from .executor import Plan
from .outputs import OutputOwnership, roots_of
from .partition import assignment_of
from .planner import GraphPlanner, PlannedGraph

__all__ = ["SessionPlans"]


class SessionPlans:
    """The plans of one model on one list of providers.

    Args:
        model: the optimized model.
        providers: the session's providers, in priority order.
        inputs: the graph inputs a run must feed.
        overridable: the initializers a run may feed (fed after ``inputs``).
        cache_dir: the on-disk cache of compiled groups (``None``: none).
        max_tensor_bytes: the session's tensor size limit (``None``: the default).

    Attributes:
        planner: the planner; it also answers which provider owns a device.
        planned: the plan ``run`` uses, with the partition records (subgraphs
            included) and the copy steps that explain it.
        constant_roots: the memory the plan's constants own (see
            :func:`~ortcore.outputs.roots_of`): an output sharing it is copied.
        ownership: makes a run's outputs distinct arrays, knowing which
            provider and node (or fused group) made each.
    """

    __slots__ = (
        "planner",
        "planned",
        "constant_roots",
        "ownership",
        "_graph",
        "_feeds",
        "_constants",
        "_providers",
        "_variants",
        "_lock",
    )

    def __init__(
        self,
        model: ir.Model,
        providers: Sequence[ExecutionProvider],
        inputs: Sequence[ir.Value],
        overridable: Sequence[ir.Value],
        *,
        cache_dir: Path | None = None,
        max_tensor_bytes: int | None = None,
    ) -> None:
        graph = model.graph
        self._graph = graph
        self._feeds = [*inputs, *overridable]
        self._providers = list(providers)
        self.planner = GraphPlanner(
            self._providers,
            dict(model.opset_imports),
            cache=CompiledCache(cache_dir) if cache_dir is not None else None,
            max_tensor_bytes=max_tensor_bytes,
        )
        fed = set(overridable)
        self._constants = {
            v: constant_array(v.const_value)
            for v in graph.initializers.values()
            if v.const_value is not None and v not in fed
        }
        planned = self.planner.plan_graph(graph, self._feeds, list(graph.outputs), self._constants)
        planned.records.extend(self.planner.subgraph_records)
        planned.copies.extend(self.planner.subgraph_copies)
        self.planned: PlannedGraph = planned
        self.constant_roots = roots_of(planned.plan.template)
        self.ownership = OutputOwnership(_producers(graph))
        self._variants: dict[tuple[tuple[Device, ...], tuple[Device, ...]], Plan] = {}
        self._lock = threading.Lock()

    def variant(self, in_devices: tuple[Device, ...], out_devices: tuple[Device, ...]) -> Plan:
        """The plan taking feeds on ``in_devices`` and handing outputs back on
        ``out_devices`` (the plan of ``run`` when all are the host).

        Raises:
            InvalidArgument: a device no provider of the session owns.
        """
        key = (in_devices, out_devices)
        plan = self._variants.get(key)
        if plan is not None:
            return plan
        if all(d.is_host for d in in_devices) and all(d.is_host for d in out_devices):
            return self.planned.plan
        owned = {p.device for p in self._providers}
        for d in {*in_devices, *out_devices}:
            if not d.is_host and d not in owned:
                raise InvalidArgument(
                    f"a value is bound on device {d}, but no provider of this session "
                    f"({', '.join(p.name for p in self._providers)}) owns it"
                )
        with self._lock:
            plan = self._variants.get(key)
            if plan is None:
                plan = self.planner.plan_graph(
                    self._graph,
                    self._feeds,
                    list(self._graph.outputs),
                    self._constants,
                    input_devices=in_devices,
                    output_devices=out_devices,
                ).plan
                self._variants[key] = plan
        return plan


def _producers(graph: ir.Graph) -> list[tuple[str, str, int] | None]:
    """For each graph output: ``(provider, what made it, identity)``: the node
    or fused group (its claim) whose step makes it; ``None`` for an input or
    a constant."""
    out: list[tuple[str, str, int] | None] = []
    for value in graph.outputs:
        node = value.producer()
        assigned = assignment_of(node) if node is not None else None
        if node is None or assigned is None:
            out.append(None)
            continue
        provider = getattr(assigned.provider, "name", str(assigned.provider))
        if assigned.claim is not None:
            out.append((provider, "a fused group", id(assigned.claim)))
        else:
            out.append((provider, f"node {node.name!r} ({node.op_type})", id(node)))
    return out
