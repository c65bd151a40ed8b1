"""Partition a model among providers without compiling or running anything.

``ortcore inspect`` answers "which provider would run each node, and why do
the others decline it" with :func:`inspect_partition`: the model is loaded
and optimized as a session does it (the same passes, so the same nodes), the
providers are asked for their capability, and the answer is recorded, but no
kernel is built, no fused group compiled and no value computed except the
constant folding the optimizer does on the CPU provider.

So a provider that is installed but cannot run here (TensorRT on a machine
with no GPU: its ONNX parser works, its engines cannot run) can still be
asked what it would take: with ``unavailable=True`` it is created anyway,
and :attr:`Inspection.unavailable` says which providers were asked that way
and why they could not run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

from ep_sdk import HOST_DEVICE, Claim, Device, ExecutionProvider

from .custom_ops import session_ops
from .executor import StepInfo
from .loading import (
    apply_initializers,
    feedable_inputs,
    folding_budget,
    load_options,
    load_session_model,
    tensor_limit,
)
from .model import INVENTED_DIMS_KEY, MAP_TYPES_KEY
from .nodeinfo import node_reads, registry_of
from .optimizer import optimize
from .options import GraphOptimizationLevel, SessionOptions
from .partition import assignment_of, partition_model
from .planner import NodeRecord
from .plugins import PluginManager, default_manager
from .providers import CPU_PROVIDER, ProviderSpec, close_all, create_providers, requested_names
from .records import NodeArg, Partition, node_arg

__all__ = ["Inspection", "inspect_partition"]


@dataclass(frozen=True)
class Inspection:
    """What :func:`inspect_partition` found.

    Attributes:
        partition: where each node would run (as ``session.get_partition()``
            says it; no copies, since nothing was planned).
        unavailable: provider name -> why it cannot run here, for each
            provider that was asked although it cannot run.
        inputs, outputs: the model's inputs (those a run feeds) and outputs,
            as ``session.get_inputs()`` and ``get_outputs()`` list them.
        cache: see below.
    """

    partition: Partition
    unavailable: Mapping[str, str] = field(default_factory=dict)
    inputs: Sequence[NodeArg] = ()
    outputs: Sequence[NodeArg] = ()
    cache: Mapping[str, str] = field(default_factory=dict)
    """Fused group name -> whether the session's compiled-artifact cache
    (``ortcore.cache_dir``) holds it, so a session would load it rather than
    compile it; empty without a cache."""


def inspect_partition(
    path_or_bytes: str | os.PathLike[str] | bytes,
    sess_options: SessionOptions | None = None,
    providers: Sequence[ProviderSpec] | None = None,
    provider_options: Sequence[Mapping[str, Any]] | None = None,
    *,
    unavailable: bool = True,
    plugin_manager: PluginManager | None = None,
) -> Inspection:
    """Partition the model as a session with these arguments would, without
    compiling or running it (see the module docstring).

    Raises:
        OrtcoreError: what ``InferenceSession`` raises for a model or
            providers it cannot use (NoSuchFile, InvalidGraph,
            InvalidArgument, NotImplementedOp, ...).
    """
    options = sess_options or SessionOptions()
    manager = plugin_manager or default_manager()
    requested = requested_names(providers, options)
    manager.load(requested)
    custom_ops = session_ops(manager.custom_ops(load_all=requested is None), options.custom_ops)
    model, custom_ops = load_session_model(
        path_or_bytes,
        load_options(options, tensor_limit(options)),
        manager,
        custom_ops,
        options,
    )
    created = create_providers(
        manager,
        providers,
        provider_options,
        options,
        custom_ops,
        unavailable=unavailable,
        model=model,
    )
    try:
        why: dict[str, str] = {}
        for p in created:
            try:
                reason = type(p).unavailable_reason()
            except Exception as exc:  # the plugin's fault: say so, ask it all the same
                reason = f"unavailable_reason() raised {exc!r}"
            if reason:
                why[p.name] = reason
        apply_initializers(model, options.initializers)
        inputs, overridable = feedable_inputs(model)
        map_types = dict(model.meta.get(MAP_TYPES_KEY, {}))
        invented = model.meta.get(INVENTED_DIMS_KEY, frozenset())
        args_in = [node_arg(v, map_types, invented) for v in inputs]
        args_out = [node_arg(v, map_types, invented) for v in model.graph.outputs]
        level = GraphOptimizationLevel(options.graph_optimization_level)
        folding = next(
            (
                p
                for p in created
                if p.device.is_host and p.name == CPU_PROVIDER and p.name not in why
            ),
            None,
        )
        optimize(
            model,
            level,
            folding,
            set(overridable),
            created,
            folding_budget=folding_budget(options),
            max_tensor_bytes=tensor_limit(options),
        )
        opsets = dict(model.opset_imports)
        partition_model(model, created, opsets)  # keeps what optimize() recorded
        records = _records(model.graph, "", {})
        copies = _copies(model.graph, created, opsets)
        part = Partition(tuple(p.name for p in created), tuple(records), tuple(copies))
        cached = _in_cache(model.graph, options, opsets, records)
        return Inspection(part, why, args_in, args_out, cached)
    finally:
        close_all(created)


def _copies(
    graph: ir.Graph, providers: Sequence[ExecutionProvider], opsets: Mapping[str, int]
) -> list[StepInfo]:
    """The copies between devices the planner would insert in the main graph:
    where a node reads a value that lives on another device (inputs and
    constants live on the host, outputs go back to it), as the kernels'
    registrations place their inputs and outputs (an input or output a
    kernel declares ``"host"``); nothing is built."""
    by_device: dict[Device, ExecutionProvider] = {}
    for p in providers:
        by_device.setdefault(p.device, p)
    home: dict[ir.Value, Device] = dict.fromkeys(graph.inputs, HOST_DEVICE)
    constants = set(graph.initializers.values())
    done: set[tuple[ir.Value, Device]] = set()
    out: list[StepInfo] = []

    def read(v: ir.Value | None, device: Device) -> None:
        if v is None or v in constants or (v, device) in done:
            return
        where = home.get(v, HOST_DEVICE)
        if where == device:
            return
        done.add((v, device))
        op = "MemcpyToHost" if device.is_host else "MemcpyFromHost"
        owner = by_device.get(where if device.is_host else device)
        out.append(StepInfo("copy", op, v.name or "", owner.name if owner else ""))

    for node in graph:
        a = assignment_of(node)
        if a is None:
            continue
        device = a.provider.device
        members = set(a.claim.nodes) if a.claim is not None else set()
        found = None
        if a.claim is None and not device.is_host:
            registry = registry_of(a.provider)
            found = registry.lookup_node(node, opsets) if registry is not None else None
        host_in = getattr(found, "input_memory", {})
        host_out = getattr(found, "output_memory", {})
        for i, v in enumerate(node.inputs):
            if v is not None and v.producer() not in members:
                read(v, HOST_DEVICE if host_in.get(i) == "host" else device)
        for v in node_reads(node):
            if v not in node.inputs and v.producer() not in members:
                read(v, device)  # outer values a subgraph reads
        for i, v in enumerate(node.outputs):
            home[v] = HOST_DEVICE if host_out.get(i) == "host" else device
    for v in graph.outputs:
        read(v, HOST_DEVICE)
    return out


def _records(graph: ir.Graph, path: str, names: dict[Claim, str]) -> list[NodeRecord]:
    """A record per node, as the planner makes them; groups named as it does."""
    out: list[NodeRecord] = []
    for node in graph:
        a = assignment_of(node)
        provider: ExecutionProvider | None = a.provider if a is not None else None
        who = provider.name if provider is not None else ""
        group = ""
        if a is not None and a.claim is not None:
            group = a.claim.name or names.setdefault(a.claim, f"{who}_fused_{len(names) + 1}")
        out.append(
            NodeRecord(
                node.name or "",
                node.op_type,
                node.domain,
                who,
                group=group,
                declined=dict(a.declined) if a is not None else {},
                graph=path,
            )
        )
        if group:
            continue  # a group's bodies go with it
        sub_path = f"{path}/{node.name}" if path else node.name or node.op_type
        for attr in node.attributes.values():
            bodies = []
            if attr.type == ir.AttributeType.GRAPH:
                bodies = [attr.as_graph()]
            elif attr.type == ir.AttributeType.GRAPHS:
                bodies = list(attr.as_graphs())
            for body in bodies:
                out.extend(_records(body, f"{sub_path}/{body.name}", names))
    return out


IN_CACHE = "in the cache: a session would load it"
NOT_IN_CACHE = "not in the cache: a session would compile and store it"
NOT_CACHED = "the provider keeps nothing in the cache"


def _in_cache(
    graph: ir.Graph,
    options: SessionOptions,
    opsets: Mapping[str, int],
    records: Sequence[NodeRecord],
) -> dict[str, str]:
    """For each fused group of the main graph, whether the session's cache
    holds its compiled artifact (the group is made as the planner makes it,
    and its key computed; nothing is compiled)."""
    import functools

    from ep_sdk import FusedGroup, group_io, group_model
    from ep_sdk.graph import is_constant

    from .cache import CompiledCache, cache_dir_from_config

    folder = cache_dir_from_config(options.config_entries)
    if folder is None:
        return {}
    cache = CompiledCache(folder)
    top = [r for r in records if not r.graph]  # the main graph's, in its order
    out: dict[str, str] = {}
    for node, record in zip(graph, top):
        a = assignment_of(node)
        name = record.group
        if a is None or a.claim is None or not name or name in out:
            continue
        provider = a.provider
        if type(provider).serialize_compiled is ExecutionProvider.serialize_compiled:
            out[name] = NOT_CACHED
            continue
        ordered, inputs, outputs = group_io(graph, a.claim.nodes)
        constants = [v for v in inputs if is_constant(v)]
        baked = [] if provider.compile_receives_constants else constants
        inputs = [v for v in inputs if v not in baked]
        group = FusedGroup(
            name=name,
            nodes=ordered,
            inputs=inputs,
            outputs=outputs,
            opsets=opsets,
            constants=constants,
            payload=a.claim.payload,
            export=functools.partial(group_model, name, ordered, inputs, outputs, opsets, baked),
        )
        try:
            found = cache.load(provider, group, mapped=True) is not None
        except Exception as exc:  # the key could not be computed: a session would not cache it
            out[name] = f"no cache key ({exc!r})"
            continue
        out[name] = IN_CACHE if found else NOT_IN_CACHE
    return out
