"""``InferenceSession``: onnxruntime's session API on ortcore's core."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import onnx_ir as ir

from ep_sdk import HOST_DEVICE, Device, ExecutionProvider, RunContext, SessionConfig, type_string
from ep_sdk.dtypes import from_numpy, from_type_string, to_numpy, type_string_of_array
from ep_sdk.limits import MAX_TENSOR_BYTES_CONFIG, parse_byte_limit

from .cache import CompiledCache, cache_dir_from_config
from .custom_ops import attach_kernels, session_ops
from .errors import EPFail, InvalidArgument, ProviderOptionError
from .executor import Plan, StepInfo
from .iobinding import IOBinding
from .model import MAP_TYPES_KEY, load_model, save_model
from .optimizer import optimize
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
from .ortvalue import OrtValue
from .parallel import ParallelExecutor
from .planner import GraphPlanner, NodeRecord, PlannedGraph
from .plugins import PluginManager, ProviderEntry, default_manager, describe_error
from .profiling import Profiler

__all__ = [
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "Partition",
    "get_available_providers",
    "get_all_providers",
]

run_log = logging.getLogger("ortcore.run")
"""Run-level log records (see ``RunOptions.log_severity_level``)."""

_plugin_log = logging.getLogger("ortcore.plugins")

CPU_PROVIDER = "CPUExecutionProvider"
DISABLE_CPU_FALLBACK = "session.disable_cpu_ep_fallback"

ProviderSpec = str | tuple[str, Mapping[str, Any]]

# Op domains onnx defines; any other one a model imports may come from a plugin.
_ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})


@dataclass(frozen=True)
class NodeArg:
    """An input or output of the model (``onnxruntime.NodeArg``).

    Attributes:
        name: value name.
        type: onnxruntime type string, e.g. ``tensor(float)``.
        shape: dims as ints, symbolic dims as strings, unknown as ``None``.
    """

    name: str
    type: str
    shape: list[int | str | None]

    def __str__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


@dataclass(frozen=True)
class ModelMetadata:
    """The model's metadata (``onnxruntime.ModelMetadata``)."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str]


@dataclass(frozen=True)
class Partition:
    """Where each node runs, and why other providers declined it.

    Attributes:
        providers: provider names in priority order.
        nodes: one record per node (top-level graph and subgraphs).
        copies: copy steps the core inserted between devices.
    """

    providers: tuple[str, ...]
    nodes: tuple[NodeRecord, ...]
    copies: tuple[StepInfo, ...]

    def counts(self) -> dict[str, int]:
        """Number of nodes per provider."""
        out: dict[str, int] = {}
        for r in self.nodes:
            out[r.provider] = out.get(r.provider, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "providers": list(self.providers),
            "counts": self.counts(),
            "nodes": [r.to_dict() for r in self.nodes],
            "copies": [
                {"op_type": c.op_type, "value": c.name, "provider": c.provider} for c in self.copies
            ],
        }


def _node_arg(v: ir.Value, map_types: Mapping[str, str]) -> NodeArg:
    shape: list[int | str | None] = []
    if v.shape is not None:
        for d in v.shape:
            if isinstance(d, int):
                shape.append(d)
            else:
                shape.append(d.value if getattr(d, "value", None) is not None else None)
    t = v.type
    name = v.name or ""
    if name in map_types:
        type_str = map_types[name]
    elif t is None or isinstance(t, ir.TensorType):
        type_str = type_string(v.dtype)
    else:
        type_str = _type_text(t)
    return NodeArg(name, type_str, shape)


def _type_text(t: Any) -> str:
    if isinstance(t, ir.TensorType):
        return type_string(t.dtype)
    if isinstance(t, ir.SequenceType):
        return f"seq({_type_text(t.elem_type)})"
    if isinstance(t, ir.OptionalType):
        return f"optional({_type_text(t.elem_type)})"
    return str(t)


def get_available_providers() -> list[str]:
    """Names of the providers that can run here, in default priority (CPU last)."""
    return [e.name for e in default_manager().available()]


def get_all_providers() -> list[str]:
    """Names of every provider installed, available or not."""
    return [e.name for e in default_manager().entries() if e.cls is not None]


class InferenceSession:
    """Loads a model once and runs it (``onnxruntime.InferenceSession``).

    Args:
        path_or_bytes: model file path, or the serialized model.
        sess_options: :class:`SessionOptions`.
        providers: provider names (or ``(name, options)`` pairs) in priority
            order; ``None`` uses every available provider, CPU last.
        provider_options: one options dict per entry of ``providers``.

    Raises:
        NoSuchFile, InvalidProtobuf, InvalidGraph: the model cannot be used.
        InvalidArgument: unknown provider or bad provider options.
        NotImplementedOp: a node no provider can run.
    """

    def __init__(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        sess_options: SessionOptions | None = None,
        providers: Sequence[ProviderSpec] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        self._manager: PluginManager = kwargs.pop("plugin_manager", None) or default_manager()
        if kwargs:
            raise InvalidArgument(f"unexpected arguments: {', '.join(sorted(kwargs))}")
        self._model_path = (
            os.fspath(path_or_bytes) if isinstance(path_or_bytes, (str, os.PathLike)) else None
        )
        self._sess_options = sess_options or SessionOptions()
        self._max_tensor_bytes = _tensor_limit(self._sess_options)
        self._lock = threading.Lock()
        # A session that names its providers imports only their plugins (a slow or
        # broken plugin it does not use costs it nothing); the others are imported
        # below only if the model uses an op domain they may define.
        requested = self._requested_names(providers)
        self._manager.load(requested)
        self._custom_ops = session_ops(
            self._manager.custom_ops(load_all=requested is None), self._sess_options.custom_ops
        )
        self._profiler: Profiler | None = None
        if self._sess_options.enable_profiling:
            self._profiler = Profiler(self._sess_options.profile_file_prefix)
        t_start = time.perf_counter_ns()
        model = load_model(path_or_bytes)
        if self._load_plugin_ops_for(model):
            model = load_model(path_or_bytes)  # again, with the plugins' op schemas
        if self._profiler is not None:
            kind = "array" if self._model_path is None else "uri"
            self._profiler.session_event(f"model_loading_{kind}", t_start, time.perf_counter_ns())
        self._model = model
        self._map_types: dict[str, str] = dict(model.meta.get(MAP_TYPES_KEY, {}))
        self._providers = self._create_providers(providers, provider_options)
        graph = model.graph
        initializers = dict(graph.initializers)
        for name, value in self._sess_options._initializers.items():
            if name not in initializers:
                raise InvalidArgument(f"add_initializer: the model has no initializer {name!r}")
            initializers[name].const_value = ir.tensor(np.asarray(value))
        graph_inputs = list(graph.inputs)
        init_values = set(initializers.values())
        self._input_values = [v for v in graph_inputs if v not in init_values]
        # From IR version 4, an initializer listed as a graph input may be fed.
        self._overridable = (
            [v for v in graph_inputs if v in init_values] if model.ir_version >= 4 else []
        )
        level = GraphOptimizationLevel(self._sess_options.graph_optimization_level)
        folding = next(
            (p for p in self._providers if p.device.is_host and p.name == CPU_PROVIDER), None
        )
        # The provider list (priority order) lets the extended-level fusions emit a
        # fused op only where the provider that will run the pattern has its kernel.
        optimize(model, level, folding, set(self._overridable), self._providers)
        if self._sess_options.optimized_model_filepath:
            out = self._sess_options.optimized_model_filepath
            try:
                save_model(model, out)
            except OSError as exc:
                # onnxruntime fails session creation here too; say what is wrong.
                parent = os.path.dirname(os.path.abspath(out))
                if os.path.isdir(out):
                    why = "is a folder; give a file path such as model.opt.onnx"
                elif not os.path.isdir(parent):
                    state = "is not a folder" if os.path.lexists(parent) else "does not exist"
                    why = f"its folder {parent} {state}; create it or choose another path"
                elif isinstance(exc, PermissionError):
                    why = "cannot be written (permission denied)"
                else:
                    why = f"cannot be written ({exc.strerror or exc})"
                raise InvalidArgument(
                    f"SessionOptions.optimized_model_filepath {out!r}: {why}"
                ) from exc
        self._inputs_meta = [_node_arg(v, self._map_types) for v in self._input_values]
        self._outputs_meta = [_node_arg(v, self._map_types) for v in graph.outputs]
        self._output_index = {a.name: i for i, a in enumerate(self._outputs_meta)}
        self._planned = self._build_plan(model)
        self._constant_roots = {
            id(_root(c)) for c in self._planned.plan.template if isinstance(c, np.ndarray)
        }
        self._feed_index = {v.name: i for i, v in enumerate(self._input_values)}
        n = len(self._input_values)
        for j, v in enumerate(self._overridable):
            self._feed_index[v.name] = n + j
        self._defaults = [
            v.const_value.numpy() if v.const_value is not None else None for v in self._overridable
        ]
        self._required = [a.name for a in self._inputs_meta]
        self._checks = [
            _FeedCheck(_node_arg(v, self._map_types), v.shape is not None)
            for v in [*self._input_values, *self._overridable]
        ]
        self._base_execute = self._choose_execute()
        self._execute = self._with_run_hooks(self._base_execute)
        if self._profiler is not None:
            self._profiler.session_event("session_initialization", t_start, time.perf_counter_ns())

    # -- construction ------------------------------------------------------

    def _choose_execute(self) -> Callable[[Plan, Sequence[Any], RunContext], list[Any]]:
        """How plans run, chosen once: the plain loop unless profiling or
        ``ExecutionMode.ORT_PARALLEL`` asks otherwise."""
        profiler = self._profiler
        self._parallel: ParallelExecutor | None = None
        if self._sess_options.execution_mode == ExecutionMode.ORT_PARALLEL:
            par = self._parallel = ParallelExecutor(self._sess_options.inter_op_num_threads)

            def parallel(plan: Plan, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
                return par.run(plan, feeds, ctx, profiler)

            return parallel
        if profiler is None:
            return Plan.run

        def profiled(plan: Plan, feeds: Sequence[Any], ctx: RunContext) -> list[Any]:
            return plan.run_profiled(feeds, ctx, profiler)

        return profiled

    def _with_run_hooks(
        self, execute: Callable[[Plan, Sequence[Any], RunContext], list[Any]]
    ) -> Callable[[Plan, Sequence[Any], RunContext], list[Any]]:
        """``execute`` wrapped in the providers' ``on_run_start``/``on_run_end``,
        or ``execute`` itself when no provider overrides them."""
        starts = [
            p.on_run_start
            for p in self._providers
            if type(p).on_run_start is not ExecutionProvider.on_run_start
        ]
        ends = [
            p.on_run_end
            for p in self._providers
            if type(p).on_run_end is not ExecutionProvider.on_run_end
        ]
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

    def _cpu_fallback(self) -> bool:
        return self._sess_options._config.get(DISABLE_CPU_FALLBACK, "0") != "1"

    def _requested_names(self, providers: Sequence[ProviderSpec] | None) -> list[str] | None:
        """The provider names a session asks for (CPU too where it may fall
        back to it), or ``None`` when it asks for every available provider."""
        if providers is None or isinstance(providers, str):
            return None
        names = [spec[0] if isinstance(spec, tuple) and spec else spec for spec in providers]
        out = [n for n in names if isinstance(n, str)]
        return [*out, CPU_PROVIDER] if self._cpu_fallback() else out

    def _load_plugin_ops_for(self, model: ir.Model) -> bool:
        """Import the plugins a session skipped if the model imports an op domain
        none of its custom ops defines (a plugin's ``ortcore_custom_ops`` may).

        Returns:
            whether that brought custom ops of such a domain, whose schemas the
            model must be loaded again with.
        """
        if self._manager.fully_loaded:
            return False
        known = _ONNX_DOMAINS | {op.domain for op in self._custom_ops}
        unknown = set(model.opset_imports) - known
        if not unknown:
            return False
        self._manager.load()
        self._custom_ops = session_ops(self._manager.custom_ops(), self._sess_options.custom_ops)
        return any(op.domain in unknown for op in self._custom_ops)

    def _create_providers(
        self,
        providers: Sequence[ProviderSpec] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
    ) -> list[ExecutionProvider]:
        """Resolve and instantiate the session's providers, in priority order.

        A provider the user named that fails to construct is an error; one the
        session chose itself (every available provider when ``providers`` is
        ``None``, and the CPU fallback) is skipped with a warning on the
        ``ortcore.plugins`` logger, and the session goes on with the others.

        Raises:
            InvalidArgument: unknown or unavailable provider, bad options.
            EPFail: a named provider failed to construct, or none could be.
        """
        # (entry, options, named by the user)
        specs: list[tuple[ProviderEntry, Mapping[str, Any], bool]] = []
        if providers is None:
            if provider_options is not None:
                raise InvalidArgument("provider_options given without providers")
            specs = [(e, {}, False) for e in self._manager.available()]
        else:
            if isinstance(providers, str):
                raise InvalidArgument("providers must be a list of names, not a string")
            if provider_options is not None and len(provider_options) != len(providers):
                raise InvalidArgument(
                    f"'providers' has {len(providers)} entries but 'provider_options' has "
                    f"{len(provider_options)}; they must have the same length"
                )
            for i, spec in enumerate(providers):
                if isinstance(spec, tuple):
                    name, opts = spec
                else:
                    name, opts = spec, {}
                if provider_options is not None:
                    opts = {**opts, **provider_options[i]}
                specs.append((self._manager.resolve(name), opts, True))
        names = [e.name for e, _, _ in specs]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"a provider is listed twice: {names}")
        if self._cpu_fallback() and CPU_PROVIDER not in names:
            try:
                specs.append((self._manager.resolve(CPU_PROVIDER), {}, False))
            except InvalidArgument:
                pass  # no CPU provider installed: nodes others decline will fail
        if not specs:
            raise InvalidArgument(
                "No execution provider is available. Install one, e.g. pip install ./plugins/cpu"
            )
        config = SessionConfig(
            intra_op_num_threads=int(self._sess_options.intra_op_num_threads),
            config_entries=self._sess_options.config_entries,
        )
        out: list[ExecutionProvider] = []
        failures: list[tuple[str, BaseException]] = []
        for entry, opts, named in specs:
            assert entry.cls is not None
            try:
                out.append(entry.cls(opts, config))
            except (KeyboardInterrupt, GeneratorExit):
                raise
            except BaseException as exc:  # SystemExit too: the plugin's fault, not the host's
                what = f"provider {entry.name!r} (plugin {entry.plugin})"
                if named:
                    _close_all(out)
                    if isinstance(exc, ProviderOptionError):
                        raise InvalidArgument(str(exc)) from exc
                    raise EPFail(
                        f"{what} failed to initialize: {describe_error(exc)}. Fix or "
                        f"uninstall the plugin, or leave {entry.name} out of providers=[...] "
                        "(`ortcore providers` lists what is installed)"
                    ) from exc
                _plugin_log.warning(
                    "skipping %s: it failed to initialize: %s", what, describe_error(exc)
                )
                failures.append((what, exc))
        if not out and failures:
            raise EPFail(
                "No execution provider could be created: "
                + "; ".join(f"{w} failed: {describe_error(e)}" for w, e in failures)
            ) from failures[0][1]
        attach_kernels(out, self._custom_ops)
        return out

    def _build_plan(self, model: ir.Model) -> PlannedGraph:
        graph = model.graph
        planner = GraphPlanner(self._providers, dict(model.opset_imports))
        cache_dir = cache_dir_from_config(self._sess_options.config_entries)
        planner.cache = CompiledCache(cache_dir) if cache_dir is not None else None
        planner.max_tensor_bytes = self._max_tensor_bytes
        overridable = set(self._overridable)
        constants = {
            v: v.const_value.numpy()
            for v in graph.initializers.values()
            if v.const_value is not None and v not in overridable
        }
        planned = planner.plan_graph(
            graph, [*self._input_values, *self._overridable], list(graph.outputs), constants
        )
        planned.records.extend(planner.subgraph_records)
        planned.copies.extend(planner.subgraph_copies)
        # Kept for plan variants (inputs/outputs bound on devices), built lazily.
        self._planner = planner
        self._constants = constants
        self._variants: dict[tuple[tuple[Device, ...], tuple[Device, ...]], Plan] = {}
        return planned

    def _variant(self, in_devices: tuple[Device, ...], out_devices: tuple[Device, ...]) -> Plan:
        """The plan taking feeds on ``in_devices`` and handing outputs back on ``out_devices``."""
        key = (in_devices, out_devices)
        plan = self._variants.get(key)
        if plan is not None:
            return plan
        if all(d.is_host for d in in_devices) and all(d.is_host for d in out_devices):
            return self._planned.plan
        owned = {p.device for p in self._providers}
        for d in {*in_devices, *out_devices}:
            if not d.is_host and d not in owned:
                raise InvalidArgument(
                    f"a value is bound on device {d}, but no provider of this session "
                    f"({', '.join(self.get_providers())}) owns it"
                )
        with self._lock:
            plan = self._variants.get(key)
            if plan is None:
                graph = self._model.graph
                plan = self._planner.plan_graph(
                    graph,
                    [*self._input_values, *self._overridable],
                    list(graph.outputs),
                    self._constants,
                    input_devices=in_devices,
                    output_devices=out_devices,
                ).plan
                self._variants[key] = plan
        return plan

    # -- onnxruntime API ---------------------------------------------------

    def get_inputs(self) -> list[NodeArg]:
        """The model's inputs (initializers excluded)."""
        return list(self._inputs_meta)

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs."""
        return list(self._outputs_meta)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers a feed may replace (IR version 4 and later)."""
        return [_node_arg(v, self._map_types) for v in self._overridable]

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata."""
        m = self._model
        return ModelMetadata(
            producer_name=m.producer_name or "",
            graph_name=m.graph.name or "",
            domain=m.domain or "",
            description=m.doc_string or "",
            graph_description=m.graph.doc_string or "",
            version=m.model_version or 0,
            custom_metadata_map=dict(m.metadata_props),
        )

    def get_providers(self) -> list[str]:
        """Providers of this session, in priority order."""
        return [p.name for p in self._providers]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """Each provider's effective options."""
        return {p.name: dict(p.options) for p in self._providers}

    def get_session_options(self) -> SessionOptions:
        """The options the session was created with."""
        return self._sess_options

    def get_partition(self) -> Partition:
        """Where each node runs and why other providers declined it."""
        return Partition(
            tuple(self.get_providers()),
            tuple(self._planned.records),
            tuple(self._planned.copies),
        )

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[Any]:
        """Run the model.

        Args:
            output_names: outputs wanted, or ``None``/empty for all.
            input_feed: input name -> numpy array.
            run_options: optional :class:`RunOptions`.

        Returns:
            one numpy array per requested output.

        Raises:
            InvalidArgument: unknown or missing inputs, wrong type, rank or
                dimension, unknown output name.
            RuntimeException: a kernel failed (the message names the node).
            RunTerminated: ``run_options.terminate`` was set.
        """
        feeds = self._prepare_feeds(input_feed)
        wanted = self._wanted(output_names)
        plan = self._planned.plan
        if run_options is not None and run_options.only_execute_path_to_fetches:
            plan = plan.pruned(wanted)
        results = self._run_plan(plan, feeds, run_options)
        guarded = (self._constant_roots, _roots_of(feeds))
        return [_as_output(results[i], guarded) for i in wanted]

    def _run_plan(
        self, plan: Plan, feeds: Sequence[Any], run_options: RunOptions | None
    ) -> list[Any]:
        """Execute ``plan``; with ``run_options.log_severity_level`` below 2
        (warning) the run is logged on the ``ortcore.run`` logger."""
        ctx = RunContext(run_options, max_tensor_bytes=self._max_tensor_bytes)
        if run_options is None or run_options.log_severity_level >= 2:
            return self._execute(plan, feeds, ctx)
        return self._logged_run(plan, feeds, ctx, run_options)

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
        execute = self._execute
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

    def io_binding(self) -> IOBinding:
        """A new :class:`IOBinding` for this session."""
        return IOBinding(self)

    def run_with_iobinding(
        self, iobinding: IOBinding, run_options: RunOptions | None = None
    ) -> None:
        """Run with the inputs and outputs bound in ``iobinding``.

        Inputs bound on a device are read there and outputs bound on a device
        are left there: nothing is copied to or from the host for them.
        Results are read with ``iobinding.get_outputs()`` or
        ``iobinding.copy_outputs_to_cpu()``.
        """
        outputs = iobinding._outputs
        if not outputs:
            raise InvalidArgument("run_with_iobinding: bind at least one output")
        names = list(outputs)
        results = self._run_ortvalues(
            names, iobinding._inputs, [outputs[n][0] for n in names], run_options
        )
        values = []
        for name, value in zip(names, results):
            bound = outputs[name][1]
            if bound is None:
                values.append(value)
            else:
                bound._store(value.value)
                values.append(bound)
        iobinding._results = values

    def run_with_ort_values(
        self,
        output_names: Sequence[str] | None,
        input_dict_ort_values: Mapping[str, OrtValue],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """Run with :class:`OrtValue` inputs (host or device); outputs are host OrtValues."""
        names = list(output_names) if output_names else [a.name for a in self._outputs_meta]
        return self._run_ortvalues(
            names, input_dict_ort_values, [HOST_DEVICE] * len(names), run_options
        )

    def _run_ortvalues(
        self,
        output_names: Sequence[str],
        inputs: Mapping[str, Any],
        devices: Sequence[Device],
        run_options: RunOptions | None,
    ) -> list[OrtValue]:
        feeds, in_devices = self._ortvalue_feeds(inputs)
        wanted = self._wanted(output_names)
        out_devices = [HOST_DEVICE] * len(self._outputs_meta)
        for i, d in zip(wanted, devices):
            out_devices[i] = d
        plan = self._variant(tuple(in_devices), tuple(out_devices))
        if run_options is not None and run_options.only_execute_path_to_fetches:
            plan = plan.pruned(wanted)
        results = self._run_plan(plan, feeds, run_options)
        guarded = (self._constant_roots, _roots_of(feeds))
        out = []
        for i in wanted:
            d = out_devices[i]
            if d.is_host:
                out.append(OrtValue(_as_output(results[i], guarded)))
            else:
                out.append(OrtValue(results[i], d, self._planner.provider_for(d)))
        return out

    def _ortvalue_feeds(self, inputs: Mapping[str, Any]) -> tuple[list[Any], list[Device]]:
        """Feeds and their devices from OrtValues (or arrays), validated like ``run``'s."""
        host = {k: v for k, v in inputs.items() if not _on_device(v)}
        feeds = self._prepare_feeds_partial(host, skip=[k for k in inputs if k not in host])
        devices = [HOST_DEVICE] * len(feeds)
        for name, ov in inputs.items():
            if name in host:
                continue
            i = self._feed_index.get(name)
            if i is None:
                raise InvalidArgument(f"Invalid input name: {name}. Model inputs: {self._required}")
            if ov._shape is not None and ov._dtype is not None:
                # a device tensor that hides its shape is not copied to check it
                self._checks[i].check_meta(ov._dtype, ov._shape)
            feeds[i] = ov.value
            devices[i] = ov.device
        return feeds, devices

    def _prepare_feeds_partial(self, host: Mapping[str, Any], skip: Sequence[str]) -> list[Any]:
        """``_prepare_feeds`` for the host values, with the names in ``skip`` fed later."""
        present = {**host, **{k: None for k in skip}}
        missing = [name for name in self._required if name not in present]
        if missing:
            raise InvalidArgument(
                f"Required inputs ({missing}) are missing from input feed ({list(present)})."
            )
        return self._prepare_feeds(dict(host), required=[n for n in self._required if n in host])

    def _check_input_name(self, name: str) -> None:
        if name not in self._feed_index:
            raise InvalidArgument(f"Invalid input name: {name}. Model inputs: {self._required}")

    def _check_output_name(self, name: str) -> None:
        if name not in self._output_index:
            raise InvalidArgument(f"Invalid output name:{name}")

    def _wanted(self, output_names: Sequence[str] | None) -> list[int]:
        if not output_names:
            return list(range(len(self._outputs_meta)))
        out = []
        for name in output_names:
            i = self._output_index.get(name)
            if i is None:
                raise InvalidArgument(f"Invalid output name:{name}")
            out.append(i)
        return out

    def _prepare_feeds(
        self, input_feed: Mapping[str, Any], required: Sequence[str] | None = None
    ) -> list[Any]:
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument(
                f"input_feed must be a dict of input name to array, not {type(input_feed).__name__}"
            )
        n = len(self._input_values)
        feeds: list[Any] = [None] * n + list(self._defaults)
        missing = [
            name
            for name in (self._required if required is None else required)
            if name not in input_feed
        ]
        if missing:
            raise InvalidArgument(
                f"Required inputs ({missing}) are missing from input feed ({list(input_feed)})."
            )
        for name, value in input_feed.items():
            i = self._feed_index.get(name)
            if i is None:
                raise InvalidArgument(f"Invalid input name: {name}. Model inputs: {self._required}")
            feeds[i] = self._checks[i](value)
        return feeds

    def end_profiling(self) -> str:
        """Stop profiling and write the trace.

        Returns:
            the path of the JSON trace (onnxruntime's Chrome trace format),
            or ``""`` if profiling was not enabled or has already ended.
        """
        if self._profiler is None:
            return ""
        return self._profiler.end()

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the epoch (0 if it is off)."""
        return self._profiler.start_time_ns if self._profiler is not None else 0

    def set_providers(
        self,
        providers: Sequence[ProviderSpec] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Re-create the session's providers and plan."""
        with self._lock:
            old = self._providers
            self._providers = self._create_providers(providers, provider_options)
            self._planned = self._build_plan(self._model)
            self._execute = self._with_run_hooks(self._base_execute)
            self._constant_roots = {
                id(_root(c)) for c in self._planned.plan.template if isinstance(c, np.ndarray)
            }
            for p in old:
                p.close()

    def close(self) -> None:
        """Release provider resources (``del session`` does the same)."""
        if getattr(self, "_parallel", None) is not None:
            assert self._parallel is not None
            self._parallel.shutdown()
        for p in self._providers:
            p.close()


def _close_all(providers: Sequence[ExecutionProvider]) -> None:
    """Close providers a failed session creation leaves behind, ignoring their errors
    (the error being raised is the one the user needs)."""
    for p in providers:
        try:
            p.close()
        except Exception as exc:
            _plugin_log.warning("closing provider %r failed: %s", p.name, describe_error(exc))


class _FeedCheck:
    """Validates one feed against the model's declared type and shape."""

    __slots__ = ("name", "type", "dims", "elem", "is_tensor", "np_dtype")

    def __init__(self, arg: NodeArg, rank_known: bool) -> None:
        self.name = arg.name
        self.type = arg.type
        self.is_tensor = arg.type.startswith("tensor(")
        self.dims: list[int | str | None] | None = arg.shape if rank_known else None
        self.np_dtype: np.dtype | None = None
        elem = from_type_string(arg.type)
        if elem is not None:
            try:
                self.np_dtype = to_numpy(elem)
            except TypeError:
                self.np_dtype = None

    def __call__(self, value: Any) -> Any:
        if not self.is_tensor:
            return value
        if not isinstance(value, np.ndarray):
            if hasattr(value, "numpy") and callable(value.numpy):
                value = value.numpy()  # OrtValue-like
            else:
                value = np.asarray(value)
        if value.dtype.kind in ("U", "S") and self.type == "tensor(string)":
            value = value.astype(object)
        if self.np_dtype is not None and value.dtype != self.np_dtype:
            try:
                same = from_numpy(value.dtype) == from_numpy(self.np_dtype)
            except TypeError:
                same = False
            if not same:
                raise InvalidArgument(
                    f"Unexpected input data type. Actual: ({type_string_of_array(value)}) , "
                    f"expected: ({self.type}) for input {self.name!r}"
                )
        if self.dims is not None:
            self._check_shape(value)
        return value

    def check_meta(self, dtype: np.dtype, shape: Sequence[int]) -> None:
        """Validate a value known only by dtype and shape (a tensor on a device)."""
        if not self.is_tensor:
            return
        if self.np_dtype is not None and from_numpy(dtype) != from_numpy(self.np_dtype):
            raise InvalidArgument(
                f"Unexpected input data type. Actual: ({type_string(from_numpy(dtype))}) , "
                f"expected: ({self.type}) for input {self.name!r}"
            )
        if self.dims is not None:
            self._check_shape(cast(np.ndarray, _Shaped(tuple(shape))))

    def _check_shape(self, value: np.ndarray) -> None:
        dims = self.dims
        assert dims is not None
        if value.ndim != len(dims):
            raise InvalidArgument(
                f"Invalid rank for input: {self.name} Got: {value.ndim} Expected: {len(dims)} "
                "Please fix either the inputs/outputs or the model."
            )
        bad = [
            (i, got, want)
            for i, (got, want) in enumerate(zip(value.shape, dims))
            if isinstance(want, int) and got != want
        ]
        if bad:
            lines = "\n".join(f" index: {i} Got: {g} Expected: {w}" for i, g, w in bad)
            raise InvalidArgument(
                f"Got invalid dimensions for input: {self.name} for the following indices\n"
                f"{lines}\n Please fix either the inputs/outputs or the model."
            )


class _Shaped:
    """Stands in for an array where only ``shape`` and ``ndim`` are read."""

    __slots__ = ("shape", "ndim")

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.ndim = len(shape)


def _on_device(value: Any) -> bool:
    return isinstance(value, OrtValue) and not value.device.is_host


def _root(array: np.ndarray) -> Any:
    """The array that owns the memory ``array`` views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _roots_of(feeds: Sequence[Any]) -> set[int]:
    """Ids of the arrays owning the memory of the array feeds."""
    return {id(_root(f)) for f in feeds if isinstance(f, np.ndarray)}


def _as_output(value: Any, guarded: tuple[set[int], set[int]]) -> Any:
    """An output as the user gets it: never sharing memory with a feed or a constant.

    Kernels may return views (Reshape, Identity); handing the user a view of
    their own input, or of one of the model's initializers, would let a write
    into the output corrupt the input or the session. ``guarded`` holds the
    root ids of the constants and of this run's feeds.
    """
    if isinstance(value, np.ndarray):
        root = id(_root(value))
        if root in guarded[0] or root in guarded[1]:
            return value.copy()
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _tensor_limit(options: SessionOptions) -> int | None:
    """The session's ``session.max_tensor_bytes`` entry, or ``None`` (the default)."""
    text = options.config_entries.get(MAX_TENSOR_BYTES_CONFIG)
    if text is None:
        return None
    try:
        return parse_byte_limit(text, f"session config entry {MAX_TENSOR_BYTES_CONFIG!r}")
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
