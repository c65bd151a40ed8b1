"""Turn a partitioned graph into a :class:`~ortcore.executor.Plan`.

The planner orders the units (single nodes and fused groups), builds a kernel
for every node from its provider's registry, compiles fused groups, inserts a
copy step wherever a value is read on another device than the one it lives
on, and computes when each slot can be released.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import onnx_ir as ir

from ep_sdk import (
    HOST_DEVICE,
    Claim,
    Device,
    ExecutionProvider,
    FusedGroup,
    KernelMiss,
    KernelRegistry,
    NodeInfo,
    group_io,
)
from ep_sdk.dtypes import constant_array
from ep_sdk.graph import group_model, is_constant
from ep_sdk.limits import TensorTooLarge, check_tensor_size, tensor_byte_limit

from .cache import SOURCES, CompiledCache, compile_with_cache
from .epcontext import ContextGroup, load_context_group
from .errors import EPFail, InvalidGraph, OrtcoreError, StaleSavedSession
from .executor import Plan, Step, StepInfo, SubgraphPlan, attach_releases, failure_at
from .nodeinfo import (
    implicit_inputs,
    make_node_info,
    node_reads,
    outer_values,
    registry_of,
    static_shape,
)
from .param_checks import checked, checked_group, pending_checks
from .partition import NO_REASONS, PartitionResult, partition_graph

__all__ = ["GraphPlanner", "NodeRecord", "PlannedGraph"]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """Where one node runs (an entry of ``session.get_partition()``)."""

    node: str
    op_type: str
    domain: str
    provider: str
    group: str = ""
    declined: Mapping[str, str] = field(default_factory=lambda: NO_REASONS)
    graph: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for JSON."""
        return {
            "node": self.node,
            "op_type": self.op_type,
            "domain": self.domain or "ai.onnx",
            "provider": self.provider,
            "group": self.group,
            "declined": dict(self.declined),
            "graph": self.graph,
        }


@dataclass
class PlannedGraph:
    """A plan with the records that explain it."""

    plan: Plan
    records: list[NodeRecord]
    copies: list[StepInfo]


def unit_order(nodes: Sequence[ir.Node], group_of: Mapping[ir.Node, Claim]) -> list[Any]:
    """Topologically order units (nodes, or claims for fused groups), keeping
    the nodes' order where it allows (a graph without groups, in order, as it
    is: found so in one pass)."""
    if not group_of and _in_order(nodes):
        return list(nodes)
    unit_of: dict[ir.Node, Any] = {n: group_of.get(n, n) for n in nodes}
    units: list[Any] = list(dict.fromkeys(unit_of[n] for n in nodes))
    position = {u: i for i, u in enumerate(units)}
    deps: dict[Any, set[Any]] = {u: set() for u in units}
    users: dict[Any, list[Any]] = {u: [] for u in units}
    for n in nodes:
        u = unit_of[n]
        for v in node_reads(n):
            p = v.producer()
            if p is not None and p in unit_of and unit_of[p] is not u and unit_of[p] not in deps[u]:
                deps[u].add(unit_of[p])
                users[unit_of[p]].append(u)
    pending = {u: len(d) for u, d in deps.items()}
    heap = [i for i, u in enumerate(units) if pending[u] == 0]
    heapq.heapify(heap)
    order: list[Any] = []
    while heap:
        u = units[heapq.heappop(heap)]
        order.append(u)
        for w in users[u]:
            pending[w] -= 1
            if pending[w] == 0:
                heapq.heappush(heap, position[w])
    if len(order) != len(units):
        done = set(order)
        stuck = [u for u in units if u not in done]
        shown = "; ".join(_describe_unit(u, nodes) for u in stuck[:6])
        more = f"; and {len(stuck) - 6} more" if len(stuck) > 6 else ""
        raise EPFail(
            f"fused groups create a cycle in the graph: each of these waits for another "
            f"({shown}{more}). Each group is acyclic alone, but together they read each "
            "other's outputs; claim them as one group, or leave a node between them out"
        )
    return order


def _in_order(nodes: Sequence[ir.Node]) -> bool:
    """Whether each of ``nodes`` reads only values of nodes before it (or of
    none of ``nodes``)."""
    members = set(nodes)
    seen: set[ir.Node] = set()
    for n in nodes:
        # a node without attributes holds no subgraph: it reads its inputs only
        for v in node_reads(n) if n.attributes else n.inputs:
            p = v.producer() if v is not None else None
            if p is not None and p not in seen and p in members:
                return False
        seen.add(n)
    return True


def _describe_unit(unit: Any, nodes: Sequence[ir.Node]) -> str:
    """A node or a fused group, named for a message (unnamed nodes by position)."""
    position = {n: i for i, n in enumerate(nodes)}

    def label(n: ir.Node) -> str:
        return f"{n.op_type} {n.name!r}" if n.name else f"{n.op_type} #{position.get(n, '?')}"

    if isinstance(unit, ir.Node):
        return label(unit)
    members = list(unit.nodes)
    shown = ", ".join(label(n) for n in members[:4])
    more = f" and {len(members) - 4} more" if len(members) > 4 else ""
    return f"group of {len(members)} nodes [{shown}{more}]"


_ITEMSIZES: dict[Any, int] = {}


def _itemsize(dtype: Any) -> int:
    """Bytes per element of an onnx-ir data type (8 for strings and other
    types without a fixed size, as a pointer each)."""
    size = _ITEMSIZES.get(dtype)
    if size is None:
        try:
            size = int(dtype.itemsize)
        except (TypeError, ValueError, NotImplementedError):
            size = 8
        _ITEMSIZES[dtype] = size = max(size, 1)
    return size


class GraphPlanner:
    """Builds plans for a model's graphs with one list of providers.

    Args:
        providers: the session's providers, in priority order.
        opsets: the model's opset imports (domain -> version).
        cache: the on-disk cache of compiled groups (``None``: compile every time).
        max_tensor_bytes: the largest tensor a node may produce (``None``:
            ep_sdk's process default).
    """

    def __init__(
        self,
        providers: Sequence[ExecutionProvider],
        opsets: Mapping[str, int],
        *,
        cache: CompiledCache | None = None,
        max_tensor_bytes: int | None = None,
    ) -> None:
        self.providers = list(providers)
        self.opsets = dict(opsets)
        self._by_device: dict[Device, ExecutionProvider] = {}
        for p in self.providers:
            self._by_device.setdefault(p.device, p)
        self._fused_count = 0
        self.subgraph_records: list[NodeRecord] = []
        self.subgraph_copies: list[StepInfo] = []
        # Partitions, kernels and compiled groups, kept so that plan variants
        # (inputs or outputs on other devices) reuse them instead of rebuilding.
        self._partitions: dict[ir.Graph, PartitionResult] = {}
        self._kernels: dict[ir.Node, tuple[Any, Any]] = {}
        self._group_names: dict[Claim, str] = {}
        self._compiled: dict[Claim, Any] = {}
        self.cache = cache
        self.max_tensor_bytes = max_tensor_bytes
        self._output_limit: int | None = None
        self._registries: dict[int, KernelRegistry | None] = {}  # id(provider): its own
        # group name -> its compiled-artifact cache key, for groups the cache holds
        self.group_keys: dict[str, str] = {}
        # group name -> where its compiled function came from (ortcore.cache.SOURCES)
        self.group_sources: dict[str, str] = {}
        # claim -> (provider, group, compiled function): what a compiled model is written from
        self.compiled_groups: dict[Claim, tuple[ExecutionProvider, FusedGroup, Any]] = {}

    def registry(self, provider: ExecutionProvider) -> KernelRegistry | None:
        """``provider``'s kernel registry (:func:`~ortcore.nodeinfo.registry_of`),
        asked once per planner rather than once per node.

        Raises:
            EPFail: loading the kernels failed.
        """
        key = id(provider)
        if key not in self._registries:
            self._registries[key] = registry_of(provider)
        return self._registries[key]

    def output_limit(self) -> int:
        """The tensor size limit in bytes, resolved once (``max_tensor_bytes``,
        else ep_sdk's process default)."""
        if self._output_limit is None:
            limit = self.max_tensor_bytes
            self._output_limit = limit if limit is not None else tensor_byte_limit()
        return self._output_limit

    # -- entry points ----------------------------------------------------

    def plan_graph(
        self,
        graph: ir.Graph,
        inputs: Sequence[ir.Value],
        outputs: Sequence[ir.Value],
        constants: Mapping[ir.Value, Any],
        path: str = "",
        *,
        input_devices: Sequence[Device] | None = None,
        output_devices: Sequence[Device] | None = None,
    ) -> PlannedGraph:
        """Partition ``graph`` and build its plan.

        Planning the same graph again (a variant with other devices) reuses
        the partition, the kernels and the compiled groups of the first time.

        Args:
            inputs: values fed at run time, in feed order (graph inputs,
                overridable initializers, outer-scope values).
            outputs: values returned, in order.
            constants: initializer values placed in the slot template.
            input_devices: where each feed arrives (default: all on the host).
            output_devices: where each output is handed back (default: the host).
        """
        part = self._partitions.get(graph)
        if part is None:
            part = self._partitions[graph] = partition_graph(graph, self.providers, self.opsets)
        return _PlanBuilder(self, graph, part, path).build(
            inputs, outputs, constants, input_devices, output_devices
        )

    def partition_of(self, graph: ir.Graph) -> PartitionResult | None:
        """The partition of ``graph`` if it was planned."""
        return self._partitions.get(graph)

    def plan_subgraph(self, graph: ir.Graph, path: str) -> SubgraphPlan:
        """Build the runner of a control-flow body."""
        outer = outer_values(graph)
        constants = {
            v: constant_array(v.const_value)
            for v in graph.initializers.values()
            if v.const_value is not None
        }
        planned = self.plan_graph(graph, [*graph.inputs, *outer], graph.outputs, constants, path)
        self.subgraph_records.extend(planned.records)
        self.subgraph_copies.extend(planned.copies)
        return SubgraphPlan(
            planned.plan,
            [v.name or "" for v in graph.inputs],
            [v.name or "" for v in graph.outputs],
            [v.name or "" for v in outer],
        )

    def provider_for(self, device: Device) -> ExecutionProvider:
        """The provider that moves data to and from ``device``."""
        try:
            return self._by_device[device]
        except KeyError:
            raise EPFail(f"no provider of this session owns device {device}") from None

    def next_group_name(self, provider: ExecutionProvider) -> str:
        """A unique name for a fused node."""
        self._fused_count += 1
        return f"{provider.name}_fused_{self._fused_count}"

    def group_name(self, claim: Claim, provider: ExecutionProvider) -> str:
        """The fused node's name for ``claim``: its own, or a unique one (kept per claim)."""
        name = claim.name or self._group_names.get(claim)
        if not name:
            name = self._group_names[claim] = self.next_group_name(provider)
        return name

    def compile_group(self, claim: Claim, provider: ExecutionProvider, group: FusedGroup) -> Any:
        """``provider.compile(group)``, once per claim."""
        fn = self._compiled.get(claim)
        if fn is None:
            if isinstance(claim.payload, ContextGroup):  # a compiled model's EPContext node
                fn = load_context_group(self.cache, provider, group, claim.payload)
                self.group_sources[group.name] = SOURCES["context"]
            else:
                fn = compile_with_cache(
                    self.cache, provider, group, keys=self.group_keys, sources=self.group_sources
                )
            self._compiled[claim] = fn
            self.compiled_groups[claim] = (provider, group, fn)
        return fn


class _PlanBuilder:
    def __init__(
        self, planner: GraphPlanner, graph: ir.Graph, part: PartitionResult, path: str
    ) -> None:
        self.planner = planner
        self.graph = graph
        self.part = part
        self.path = path
        self.template: list[Any] = [None]  # slot 0: always None (omitted inputs)
        # device -> value -> the slot holding the value there
        self.slot: dict[Device, dict[ir.Value, int]] = {}
        self.home: dict[ir.Value, Device] = {}
        self.steps: list[Step] = []
        self.copies: list[StepInfo] = []
        self.records: list[NodeRecord] = []
        # node kind (node_kind) -> its kernel and a NodeInfo of its kind
        self.kinds: dict[tuple[Any, ...], tuple[Any, NodeInfo]] = {}
        # id(shape) -> (shape, its static dims); the shape kept so its id stays its own
        self.dims: dict[int, tuple[Any, tuple[int | None, ...] | None]] = {}

    def slots_on(self, device: Device) -> dict[ir.Value, int]:
        """Value -> slot, of the values held on ``device``."""
        on = self.slot.get(device)
        if on is None:
            on = self.slot[device] = {}
        return on

    def new_slot(self, value: ir.Value, device: Device, content: Any = None) -> int:
        idx = len(self.template)
        self.template.append(content)
        self.slots_on(device)[value] = idx
        return idx

    def read(self, value: ir.Value | None, device: Device) -> int:
        """Slot holding ``value`` on ``device``, inserting a copy if needed."""
        if value is None:
            return 0
        idx = self.slots_on(device).get(value)
        if idx is not None:
            return idx
        home = self.home.get(value)
        if home is None:
            raise InvalidGraph(
                f"value {value.name!r} is read in graph {self.graph.name!r} but never produced"
            )
        src = self.slots_on(home)[value]
        to_host = None if home.is_host else self.planner.provider_for(home).to_host
        from_host = None if device.is_host else self.planner.provider_for(device).from_host
        fn = _copy_fn(to_host, from_host)
        content = self.template[src]
        if content is not None:  # a constant: copy once, now
            return self.new_slot(value, device, fn(content)[0])
        dst = self.new_slot(value, device)
        op = "MemcpyToHost" if device.is_host else "MemcpyFromHost"
        provider = self.planner.provider_for(device if not device.is_host else home).name
        info = StepInfo("copy", op, value.name or "", provider)
        self.copies.append(info)
        self.steps.append(Step(fn, (src,), (dst,), (), False, info))
        return dst

    def build(
        self,
        inputs: Sequence[ir.Value],
        outputs: Sequence[ir.Value],
        constants: Mapping[ir.Value, Any],
        input_devices: Sequence[Device] | None = None,
        output_devices: Sequence[Device] | None = None,
    ) -> PlannedGraph:
        for v, content in constants.items():
            self.home[v] = HOST_DEVICE
            self.new_slot(v, HOST_DEVICE, content)
        input_slots = []
        for i, v in enumerate(inputs):
            where = input_devices[i] if input_devices is not None else HOST_DEVICE
            if not where.is_host:
                self.planner.provider_for(where)  # fails early if nobody owns the device
            self.home[v] = where
            idx = self.slots_on(where).get(v)
            input_slots.append(idx if idx is not None else self.new_slot(v, where))
        for unit in unit_order(list(self.graph), self.part.group_of):
            if isinstance(unit, Claim):
                self.add_group(unit)
            else:
                self.add_node(unit)
        output_slots = [
            self.read(v, output_devices[i] if output_devices is not None else HOST_DEVICE)
            for i, v in enumerate(outputs)
        ]
        steps = self.finish(set(output_slots))
        plan = Plan(self.template, input_slots, output_slots, steps)
        return PlannedGraph(plan, self.records, self.copies)

    def add_node(self, node: ir.Node) -> None:
        provider = self.planner.providers[self.part.provider_of[node]]
        # Most nodes hold no subgraph: no walk of their attributes for one.
        implicit = implicit_inputs(node) if node.attributes else []
        built = self.planner._kernels.get(node)
        found, fn = built if built is not None else self.build_kernel(node, provider, implicit)
        self.place_node(node, provider, found, fn, implicit)

    def build_kernel(
        self,
        node: ir.Node,
        provider: ExecutionProvider,
        implicit: Sequence[ir.Value] | None = None,
    ) -> tuple[Any, Any]:
        """Look up and build the node's kernel (once per node, kept in the planner).

        Args:
            implicit: the node's implicit inputs, if known already.
        """
        # A node without attributes (so without subgraphs or implicit inputs)
        # is the same to look up, describe and size-check as any other of its
        # op with the same input and output types and shapes: a large graph
        # has few such kinds, and each is worked out once.
        kind = self.node_kind(node, provider) if not node.attributes else None
        known = self.kinds.get(kind) if kind is not None else None
        if known is not None:
            found, like = known
            info = _info_like(like, node)
        else:
            found, info = self.describe_node(node, provider, implicit)
            if kind is not None:
                # a copy of the attributes: the builder may change its info's
                self.kinds[kind] = (found, _info_like(info, node))
        # Checks of its parameters that static shapes leave open run before
        # the kernel on every run; a node decided at load runs it bare.
        pending = pending_checks(node, self.planner.opsets, info.attrs)
        try:
            fn = found.builder(info)
        except OrtcoreError:
            raise
        except Exception as exc:
            raise InvalidGraph(
                f"Building the {provider.name} kernel for {info.describe()} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if pending is not None:
            step = StepInfo("node", node.op_type, node.name or "", provider.name)
            fn = checked(fn, pending, node, info.attrs, found.context, lambda: failure_at(step))
        self.planner._kernels[node] = (found, fn)
        return found, fn

    def describe_node(
        self,
        node: ir.Node,
        provider: ExecutionProvider,
        implicit: Sequence[ir.Value] | None = None,
    ) -> tuple[Any, NodeInfo]:
        """The node's kernel in its provider's registry and its NodeInfo,
        its outputs' static sizes checked.

        Raises:
            EPFail: the provider has no kernel for it.
            InvalidGraph: an output is statically too large.
        """
        registry = self.planner.registry(provider)
        found = (
            registry.lookup_node(node, self.planner.opsets)
            if registry is not None
            else KernelMiss("provider has no kernel registry")
        )
        if isinstance(found, KernelMiss):
            raise EPFail(
                f"Execution provider {provider.name!r} claimed {node.op_type} node "
                f"{node.name!r} but has no kernel for it: {found}"
            )
        if implicit is None:
            implicit = implicit_inputs(node)
        info = make_node_info(
            node,
            self.planner.opsets,
            provider,
            subgraph=lambda g: self.planner.plan_subgraph(g, f"{self.sub_path(node)}/{g.name}"),
            implicit=implicit,
        )
        self.check_output_sizes(node, info)
        return found, info

    def node_kind(self, node: ir.Node, provider: ExecutionProvider) -> tuple[Any, ...]:
        """What the lookup, the NodeInfo (bar the node) and the size check of
        a node without attributes depend on: provider, op, domain, and each
        input's and output's element type and static shape."""
        dims = self.dims
        kind: list[Any] = [id(provider), node.op_type, node.domain]
        for v in node.inputs:
            if v is None:
                kind.append(None)
                continue
            shape = v.shape
            # a pass changes no shape: each shape object's dims are read once
            known = dims.get(id(shape))
            if known is None:
                known = dims[id(shape)] = (shape, static_shape(v))
            kind += (v.dtype, known[1])
        kind.append(...)  # inputs end here
        for v in node.outputs:
            shape = v.shape
            known = dims.get(id(shape))
            if known is None:
                known = dims[id(shape)] = (shape, static_shape(v))
            kind += (v.dtype, known[1])
        return tuple(kind)

    def sub_path(self, node: ir.Node) -> str:
        """Where the subgraphs of ``node`` are, for their records."""
        return f"{self.path}/{node.name}" if self.path else node.name or node.op_type

    def check_output_sizes(self, node: ir.Node, info: NodeInfo) -> None:
        """Refuse, at session creation, a node whose statically known outputs
        exceed the tensor size limit: every run would fail, or exhaust the host.

        Raises:
            InvalidGraph: naming the node, the output and its size.
        """
        limit = self.planner.output_limit()
        for value, shape, dtype in zip(node.outputs, info.output_shapes, info.output_types):
            # A negative inferred dim is onnx's guess for a branch that may
            # never run (an If body): unknown, left to the kernel at run time.
            if shape is None or dtype is None:
                continue
            count = 1
            for d in shape:
                if d is None or d < 0:
                    break
                count *= d
            else:
                if count * _itemsize(dtype) > limit:
                    what = f"{info.describe()} output {value.name!r}"
                    try:
                        check_tensor_size(shape, _itemsize(dtype), what, limit=limit)
                    except TensorTooLarge as exc:
                        raise InvalidGraph(f"This is an invalid model. {exc}") from None

    def place_node(
        self,
        node: ir.Node,
        provider: ExecutionProvider,
        found: Any,
        fn: Any,
        implicit: Sequence[ir.Value] | None = None,
    ) -> None:
        if implicit is None:
            implicit = implicit_inputs(node)
        device = provider.device
        on_host = found.input_memory
        if on_host:
            in_slots = [
                self.read(v, HOST_DEVICE if on_host.get(i) == "host" else device)
                for i, v in enumerate(node.inputs)
            ]
        else:  # most kernels: every input on the provider's device
            # a slot is never 0 but for an omitted input, which read() gives
            on = cast("dict[ir.Value | None, int]", self.slots_on(device))
            read = self.read
            in_slots = [on.get(v) or read(v, device) for v in node.inputs]
        if implicit:
            in_slots += [self.read(v, device) for v in implicit]
        out_slots = []
        out_host = found.output_memory
        if out_host:
            for i, v in enumerate(node.outputs):
                where = HOST_DEVICE if out_host.get(i) == "host" else device
                self.home[v] = where
                out_slots.append(self.new_slot(v, where))
        else:  # most kernels: every output on the provider's device (new_slot inline)
            slots = self.slots_on(device)
            home, template = self.home, self.template
            for v in node.outputs:
                home[v] = device
                slots[v] = idx = len(template)
                template.append(None)
                out_slots.append(idx)
        step_info = StepInfo("node", node.op_type, node.name or "", provider.name)
        self.steps.append(Step(fn, tuple(in_slots), tuple(out_slots), (), found.context, step_info))
        self.records.append(
            NodeRecord(
                node.name or "",
                node.op_type,
                node.domain,
                provider.name,
                declined=self.part.declined.get(node, NO_REASONS),
                graph=self.path,
            )
        )

    def add_group(self, claim: Claim) -> None:
        provider = self.planner.providers[self.part.provider_of[claim.nodes[0]]]
        # The compiled function takes the inputs in first-use order and returns
        # the outputs in production order, as group_io lists them.
        ordered, inputs, outputs = group_io(self.graph, claim.nodes)
        name = self.planner.group_name(claim, provider)
        # Constants go into the group's model, where the engine can fold and
        # prepack them, unless the provider wants them passed on every run.
        constants = [v for v in inputs if is_constant(v)]
        baked = [] if provider.compile_receives_constants else constants
        inputs = [v for v in inputs if v not in baked]
        opsets = self.planner.opsets
        group = FusedGroup(
            name=name,
            nodes=ordered,
            inputs=inputs,
            outputs=outputs,
            opsets=opsets,
            constants=constants,
            # an EPContext node's group gives the provider no payload of its own
            payload=None if isinstance(claim.payload, ContextGroup) else claim.payload,
            # exported when the provider first reads group.model: a group
            # loaded from the compiled-artifact cache is never exported
            export=lambda: group_model(name, ordered, inputs, outputs, opsets, baked),
        )
        try:
            fn = self.planner.compile_group(claim, provider, group)
        except (OrtcoreError, StaleSavedSession):
            raise
        except Exception as exc:
            raise EPFail(
                f"{provider.name} failed to compile fused group {name!r}: {exc!r}"
            ) from exc
        info = StepInfo("fused", name, name, provider.name)
        fn = checked_group(fn, ordered, inputs, opsets, lambda: failure_at(info))
        device = provider.device
        in_slots = tuple(self.read(v, device) for v in inputs)
        out_slots = []
        for v in outputs:
            self.home[v] = device
            out_slots.append(self.new_slot(v, device))
        self.steps.append(Step(fn, in_slots, tuple(out_slots), (), False, info))
        if isinstance(claim.payload, ContextGroup):  # the nodes the compiled group held
            for node_name, op_type, domain, declined in claim.payload.members:
                self.records.append(
                    NodeRecord(
                        node_name,
                        op_type,
                        domain,
                        provider.name,
                        group=name,
                        declined=declined,
                        graph=self.path,
                    )
                )
            return
        for n in ordered:
            self.records.append(
                NodeRecord(
                    n.name or "",
                    n.op_type,
                    n.domain,
                    provider.name,
                    group=name,
                    declined=self.part.declined.get(n, NO_REASONS),
                    graph=self.path,
                )
            )

    def finish(self, keep: set[int]) -> list[Step]:
        """Attach release lists: each slot is dropped after its last reader."""
        return attach_releases(self.steps, keep)


def _info_like(like: NodeInfo, node: ir.Node) -> NodeInfo:
    """A NodeInfo of ``node`` with what ``like`` (a node of its kind) says
    about everything else, and an attribute dict of its own (a builder may
    change the one it got)."""
    return NodeInfo(
        node,
        opset=like.opset,
        attrs=like.attrs,
        input_types=like.input_types,
        input_shapes=like.input_shapes,
        output_types=like.output_types,
        output_shapes=like.output_shapes,
        implicit_inputs=like.implicit_inputs,
        provider=like.provider,
    )


def _copy_fn(
    to_host: Callable[[Any], np.ndarray] | None, from_host: Callable[[np.ndarray], Any] | None
) -> Callable[[Any], tuple[Any]]:
    if to_host is None and from_host is None:
        return lambda v: (v,)
    if to_host is None:
        assert from_host is not None
        fh = from_host
        return lambda v: (fh(v),)
    if from_host is None:
        th = to_host
        return lambda v: (th(v),)
    th2, fh2 = to_host, from_host
    return lambda v: (fh2(th2(v)),)
