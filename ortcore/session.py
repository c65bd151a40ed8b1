"""``InferenceSession``: onnxruntime's session API on ortcore's core.

The session loads and optimizes the model, creates its providers
(:mod:`ortcore.providers`), plans it (:mod:`ortcore.planner`) and runs the plan
(:mod:`ortcore.runner`), checking feeds on the way in (:mod:`ortcore.feeds`) and
outputs on the way out (:mod:`ortcore.outputs`).
The records it answers with live in :mod:`ortcore.records`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ep_sdk import HOST_DEVICE, Device, ExecutionProvider, RunTerminated
from ep_sdk.dtypes import from_type_string, to_numpy
from ep_sdk.limits import MAX_TENSOR_BYTES_CONFIG, parse_byte_limit

from .cache import CompiledCache, cache_dir_from_config
from .custom_ops import session_ops
from .devices import OrtMemoryInfo
from .errors import (
    InvalidArgument,
    InvalidArgumentTypeError,
    ModelLoadCanceled,
    RunTerminatedError,
)
from .executor import Plan
from .feeds import FeedValidator
from .iobinding import IOBinding, run_binding
from .model import MAP_TYPES_KEY, LoadOptions, load_model, save_model
from .optimizer import optimize
from .options import GraphOptimizationLevel, RunOptions, SessionOptions
from .ortvalue import OrtValue
from .outputs import as_output, roots_of
from .planner import GraphPlanner, PlannedGraph
from .plugins import PluginManager, default_manager
from .profiling import Profiler
from .providers import (
    CPU_PROVIDER,
    ProviderSpec,
    create_providers,
    get_all_providers,
    get_available_providers,
    load_plugin_ops_for,
    requested_names,
)
from .providers import DISABLE_CPU_FALLBACK as DISABLE_CPU_FALLBACK  # moved; importable here
from .records import ModelMetadata, NodeArg, Partition, node_arg
from .runner import PlanRunner
from .runner import run_log as run_log  # moved; importable here

__all__ = [
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "Partition",
    "get_available_providers",
    "get_all_providers",
]


class InferenceSession:
    """Loads a model once and runs it (``onnxruntime.InferenceSession``).

    Args:
        path_or_bytes: model file path, or the serialized model.
        sess_options: :class:`SessionOptions`.
        providers: provider names (or ``(name, options)`` pairs) in priority
            order; ``None`` uses every available provider, CPU last.
        provider_options: one options dict per entry of ``providers``.

    Keyword arguments onnxruntime takes are accepted: ``read_config_from_model``
    (``1`` applies the ``session_options`` of the model's ``ort_config``
    metadata, as ``ORT_LOAD_CONFIG_FROM_MODEL=1`` and the config entry
    ``session.load_config_from_model`` do), ``disabled_optimizers``
    (``"ConstantFolding"`` turns folding off; ortcore's other passes have
    their own names and stay on) and ``enable_fallback``.

    Raises:
        NoSuchFile, InvalidProtobuf, InvalidGraph: the model cannot be used.
        InvalidArgument: no listed provider is available, or bad provider options.
        InvalidArgumentTypeError: a model that is neither a path nor bytes, or
            an unknown keyword argument.
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
        read_config = kwargs.pop("read_config_from_model", None)
        self._disabled_optimizers = frozenset(kwargs.pop("disabled_optimizers", None) or ())
        self._fallback = int(kwargs.pop("enable_fallback", 1)) == 1
        if kwargs:
            raise InvalidArgumentTypeError(f"unexpected arguments: {', '.join(sorted(kwargs))}")
        self._model_path = (
            os.fspath(path_or_bytes) if isinstance(path_or_bytes, (str, os.PathLike)) else None
        )
        self._sess_options = sess_options or SessionOptions()
        if self._sess_options._load_cancelled:
            raise ModelLoadCanceled("Model loading was canceled (set_load_cancellation_flag)")
        self._max_tensor_bytes = _tensor_limit(self._sess_options)
        self._lock = threading.Lock()
        # A session that names its providers imports only their plugins (a slow or
        # broken plugin it does not use costs it nothing); the others are imported
        # below only if the model uses an op domain they may define.
        requested = requested_names(providers, self._sess_options)
        self._manager.load(requested)
        self._custom_ops = session_ops(
            self._manager.custom_ops(load_all=requested is None), self._sess_options.custom_ops
        )
        self._profiler: Profiler | None = None
        if self._sess_options.enable_profiling:
            self._profiler = Profiler(self._sess_options.profile_file_prefix)
        t_start = time.perf_counter_ns()
        load_options = self._load_options()
        model = load_model(path_or_bytes, load_options)
        self._custom_ops, reload = load_plugin_ops_for(
            self._manager, model, self._custom_ops, self._sess_options
        )
        if reload:
            model = load_model(path_or_bytes, load_options)  # again, with the plugins' op schemas
        if _reads_model_config(read_config, self._sess_options):
            self._apply_model_config(model)
        if self._profiler is not None:
            kind = "array" if self._model_path is None else "uri"
            self._profiler.session_event(f"model_loading_{kind}", t_start, time.perf_counter_ns())
        self._model = model
        self._map_types: dict[str, str] = dict(model.meta.get(MAP_TYPES_KEY, {}))
        self._providers = self._create_providers(providers, provider_options)
        graph = model.graph
        initializers = dict(graph.initializers)
        for name, value in self._sess_options.initializers.items():
            target = initializers.get(name)
            if target is None:  # onnxruntime ignores it; ortcore says so (tests/test_session.py)
                raise InvalidArgument(f"add_initializer: the model has no initializer {name!r}")
            target.const_value = ir.tensor(value)
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
        if "ConstantFolding" in self._disabled_optimizers:
            folding = None
        # From the extended level, optimize() partitions the model among the
        # providers (priority order) before fusing, fuses only where a node's
        # provider has the fused kernel, and records every node's provider on
        # it, which the planner keeps (see ortcore.optimizer).
        optimize(model, level, folding, set(self._overridable), self._providers)
        if self._sess_options.optimized_model_filepath:
            _save_optimized(model, self._sess_options.optimized_model_filepath, self._sess_options)
        self._inputs_meta = [node_arg(v, self._map_types) for v in self._input_values]
        self._outputs_meta = [node_arg(v, self._map_types) for v in graph.outputs]
        self._output_index = {a.name: i for i, a in enumerate(self._outputs_meta)}
        self._planned = self._build_plan(model)
        self._constant_roots = roots_of(self._planned.plan.template)
        self._feeds = FeedValidator(self._input_values, self._overridable, self._map_types)
        self._declared = _declared_dtypes(
            [*self._inputs_meta, *self.get_overridable_initializers()]
        )
        self._runner = PlanRunner(self._sess_options, self._profiler, self._max_tensor_bytes)
        self._runner.use_providers(self._providers)
        if self._profiler is not None:
            self._profiler.session_event("session_initialization", t_start, time.perf_counter_ns())

    # -- construction ------------------------------------------------------

    def _load_options(self) -> LoadOptions:
        """What the session options change in how the model loads."""
        opts = self._sess_options
        by_name, by_denotation = opts.free_dimension_overrides
        return LoadOptions(
            free_dims_by_name=by_name,
            free_dims_by_denotation=by_denotation,
            initializers=opts.external_initializers,
            files_in_memory=opts.external_files_in_memory,
            max_tensor_bytes=self._max_tensor_bytes,
        )

    def _apply_model_config(self, model: ir.Model) -> None:
        """Apply the ``session_options`` of the model's ``ort_config`` metadata.

        Raises:
            InvalidArgument: the metadata is not JSON, or a value is unusable.
        """
        text = model.metadata_props.get("ort_config")
        if not text:
            return
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument(
                f"Json stored in the `ort_config` key cannot be parsed. Error message: {exc}"
            ) from exc
        session = config.get("session_options") if isinstance(config, dict) else None
        if not isinstance(session, dict):
            return
        self._sess_options = self._sess_options.with_model_config(session)
        if self._sess_options.enable_profiling and self._profiler is None:
            self._profiler = Profiler(self._sess_options.profile_file_prefix)
        elif not self._sess_options.enable_profiling:
            self._profiler = None

    def _create_providers(
        self,
        providers: Sequence[ProviderSpec] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
    ) -> list[ExecutionProvider]:
        """The session's providers, in priority order (see :func:`create_providers`)."""
        return create_providers(
            self._manager, providers, provider_options, self._sess_options, self._custom_ops
        )

    def _build_plan(self, model: ir.Model) -> PlannedGraph:
        graph = model.graph
        cache_dir = cache_dir_from_config(self._sess_options.config_entries)
        planner = GraphPlanner(
            self._providers,
            dict(model.opset_imports),
            cache=CompiledCache(cache_dir) if cache_dir is not None else None,
            max_tensor_bytes=self._max_tensor_bytes,
        )
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
        return [node_arg(v, self._map_types) for v in self._overridable]

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata."""
        return ModelMetadata.of(self._model)

    def get_input_memory_infos(self) -> list[OrtMemoryInfo]:
        """Where each input is expected (host memory: feeds arrive as numpy arrays)."""
        return [OrtMemoryInfo.of(HOST_DEVICE) for _ in self._inputs_meta]

    def get_output_memory_infos(self) -> list[OrtMemoryInfo]:
        """Where each output is produced for ``run`` (host memory)."""
        return [OrtMemoryInfo.of(HOST_DEVICE) for _ in self._outputs_meta]

    def disable_fallback(self) -> None:
        """Recorded (onnxruntime's retry on CPU after a provider error); ortcore
        falls back per node at partitioning, never by re-running."""
        self._fallback = False

    def enable_fallback(self) -> None:
        """Recorded; see :meth:`disable_fallback`."""
        self._fallback = True

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

        A list, tuple or Python number fed for a tensor input becomes an
        array of the input's declared element type, as onnxruntime converts it.

        Raises:
            InvalidArgument: unknown or missing inputs, wrong type, rank or
                dimension, unknown output name.
            RuntimeException: a kernel failed (the message names the node).
            RunTerminatedError: ``run_options.terminate`` was set (a ``Fail``,
                as in onnxruntime, and an ``ortcore.RunTerminated``).
        """
        feeds, wanted, plan = self._prepare_run(output_names, input_feed, run_options)
        with _terminated_as_fail():
            results = self._runner.run(plan, feeds, run_options)
        guarded = (self._constant_roots, roots_of(feeds))
        return [as_output(results[i], guarded) for i in wanted]

    def run_async(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        callback: Callable[[list[Any], Any, str], Any],
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """Run the model on another thread, then call
        ``callback(outputs, user_data, error)``: ``error`` is ``""`` on
        success, else the message (``outputs`` is then empty).

        Raises:
            InvalidArgument: required inputs are missing (checked before the
                run starts, as onnxruntime does; other faults reach ``callback``).
        """
        if isinstance(input_feed, Mapping):
            missing = [n for n in self._feeds.required if n not in input_feed]
            if missing:
                raise InvalidArgument(
                    f"Required inputs ({missing}) are missing from input feed ({list(input_feed)})."
                )

        def work() -> None:
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as exc:
                callback([], user_data, str(exc))
                return
            callback(outputs, user_data, "")

        threading.Thread(target=work, name="ortcore-run-async", daemon=True).start()

    def _prepare_run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None,
    ) -> tuple[list[Any], list[int], Plan]:
        """Checked feeds, the wanted output indices and the plan of one ``run``."""
        feeds = self._feeds.prepare(self._as_declared(input_feed))
        wanted = self._wanted(output_names)
        plan = self._planned.plan
        if run_options is not None and run_options.only_execute_path_to_fetches:
            plan = plan.pruned(wanted)
        return feeds, wanted, plan

    def _as_declared(self, input_feed: Mapping[str, Any]) -> Mapping[str, Any]:
        """``input_feed`` with lists, tuples and Python numbers made arrays of
        their input's declared element type (other values as they are)."""
        if not isinstance(input_feed, Mapping):
            return input_feed
        if not any(isinstance(v, _PYTHON_VALUES) for v in input_feed.values()):
            return input_feed
        out = dict(input_feed)
        for name, value in input_feed.items():
            dtype = self._declared.get(name)
            if dtype is not None and isinstance(value, _PYTHON_VALUES):
                try:
                    out[name] = np.asarray(value, dtype=dtype)
                except (TypeError, ValueError) as exc:
                    raise InvalidArgument(
                        f"input {name!r}: cannot convert the {type(value).__name__} given "
                        f"to {dtype}: {exc}"
                    ) from exc
        return out

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
        run_binding(self, iobinding, run_options)

    def run_with_ort_values(
        self,
        output_names: Sequence[str] | None,
        input_dict_ort_values: Mapping[str, OrtValue],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """Run with :class:`OrtValue` inputs (host or device); outputs are host OrtValues."""
        names = list(output_names) if output_names else [a.name for a in self._outputs_meta]
        return self.run_with_binding(
            input_dict_ort_values, [(n, HOST_DEVICE) for n in names], run_options
        )

    # -- what IOBinding uses (ortcore.iobinding.BindingSession) --------------

    def check_input_name(self, name: str) -> None:
        """Raise unless ``name`` is an input a feed may set (an overridable
        initializer included).

        Raises:
            InvalidArgument: onnxruntime's "Invalid input name" message.
        """
        self._feeds.check_name(name)

    def check_output_name(self, name: str) -> None:
        """Raise unless ``name`` is one of the model's outputs.

        Raises:
            InvalidArgument: onnxruntime's "Invalid output name" message.
        """
        if name not in self._output_index:
            raise InvalidArgument(f"Invalid output name:{name}")

    def run_with_binding(
        self,
        inputs: Mapping[str, Any],
        outputs: Sequence[tuple[str, Device]],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """Run with inputs that may already be on a device, and outputs handed
        back on the device each asks for.

        Args:
            inputs: input name -> :class:`OrtValue` (host or device) or array;
                a device value is read where it is, without a copy.
            outputs: ``(output name, device)`` pairs, in the order wanted.
            run_options: optional :class:`RunOptions`.

        Returns:
            one :class:`OrtValue` per entry of ``outputs``, on its device.

        Raises:
            InvalidArgument: as :meth:`run`, or a device no provider owns.
        """
        feeds, in_devices = self._feeds.prepare_ortvalues(inputs)
        wanted = self._wanted([name for name, _ in outputs])
        out_devices = [HOST_DEVICE] * len(self._outputs_meta)
        for i, (_, d) in zip(wanted, outputs):
            out_devices[i] = d
        plan = self._variant(tuple(in_devices), tuple(out_devices))
        if run_options is not None and run_options.only_execute_path_to_fetches:
            plan = plan.pruned(wanted)
        with _terminated_as_fail():
            results = self._runner.run(plan, feeds, run_options)
        guarded = (self._constant_roots, roots_of(feeds))
        out = []
        for i in wanted:
            d = out_devices[i]
            if d.is_host:
                out.append(OrtValue(as_output(results[i], guarded)))
            else:
                out.append(OrtValue(results[i], d, self._planner.provider_for(d)))
        return out

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

    # -- profiling, providers, lifetime --------------------------------------

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
        """Re-create the session's providers and plan.

        Raises:
            InvalidArgumentRuntimeError: no listed provider is available (a
                ``RuntimeError``, as onnxruntime raises for an unknown one).
        """
        with self._lock:
            old = self._providers
            self._providers = self._create_providers(providers, provider_options)
            self._planned = self._build_plan(self._model)
            self._runner.use_providers(self._providers)
            self._constant_roots = roots_of(self._planned.plan.template)
            for p in old:
                p.close()

    def close(self) -> None:
        """Release provider resources (``del session`` does the same)."""
        runner = getattr(self, "_runner", None)
        if runner is not None:
            runner.shutdown()
        for p in self._providers:
            p.close()


_PYTHON_VALUES = (list, tuple, int, float, bool, complex)
"""Feed values converted to the input's declared type (numpy scalars and arrays are not)."""

EXTERNAL_INITIALIZERS_FILE = "session.optimized_model_external_initializers_file_name"
EXTERNAL_INITIALIZERS_MIN_SIZE = "session.optimized_model_external_initializers_min_size_in_bytes"
LOAD_CONFIG_FROM_MODEL = "session.load_config_from_model"
LOAD_CONFIG_ENV = "ORT_LOAD_CONFIG_FROM_MODEL"


def _reads_model_config(flag: Any, options: SessionOptions) -> bool:
    """Whether the model's ``ort_config`` applies: the ``read_config_from_model``
    argument, else the config entry, else ``$ORT_LOAD_CONFIG_FROM_MODEL``."""
    if flag is not None:
        return int(flag) == 1
    entry = options.config_entries.get(LOAD_CONFIG_FROM_MODEL)
    if entry is not None:
        return entry.strip() == "1"
    return os.environ.get(LOAD_CONFIG_ENV, "").strip() == "1"


def _declared_dtypes(args: Sequence[NodeArg]) -> dict[str, np.dtype]:
    """Input name -> numpy dtype of its declared tensor type (where there is one)."""
    out: dict[str, np.dtype] = {}
    for a in args:
        elem = from_type_string(a.type)
        if elem is None:
            continue
        try:
            out[a.name] = to_numpy(elem)
        except TypeError:
            continue
    return out


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


def _save_optimized(model: ir.Model, out: str, options: SessionOptions | None = None) -> None:
    """Write the optimized model to ``SessionOptions.optimized_model_filepath``,
    its initializers to the data file the options name
    (``session.optimized_model_external_initializers_file_name`` and
    ``..._min_size_in_bytes``) if they name one.

    Raises:
        InvalidArgument: the path cannot be written; the message says why.
    """
    config = options.config_entries if options is not None else {}
    data_file = config.get(EXTERNAL_INITIALIZERS_FILE) or None
    min_text = config.get(EXTERNAL_INITIALIZERS_MIN_SIZE)
    try:
        min_size = int(min_text) if min_text is not None else None
    except ValueError:
        raise InvalidArgument(
            f"session config entry {EXTERNAL_INITIALIZERS_MIN_SIZE!r} must be an integer, "
            f"not {min_text!r}"
        ) from None
    try:
        save_model(model, out, data_file=data_file, min_size=min_size)
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
        raise InvalidArgument(f"SessionOptions.optimized_model_filepath {out!r}: {why}") from exc


def _tensor_limit(options: SessionOptions) -> int | None:
    """The session's ``session.max_tensor_bytes`` entry, or ``None`` (the default)."""
    text = options.config_entries.get(MAX_TENSOR_BYTES_CONFIG)
    if text is None:
        return None
    try:
        return parse_byte_limit(text, f"session config entry {MAX_TENSOR_BYTES_CONFIG!r}")
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
