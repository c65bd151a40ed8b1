"""``InferenceSession``: onnxruntime's session API on ortcore's core.

The session gets its model ready (:mod:`ortcore.loading`), creates its
providers (:mod:`ortcore.providers`), optimizes the model
(:mod:`ortcore.optimizer`, saved by :mod:`ortcore.optimized_model` where asked),
plans it (:mod:`ortcore.plans`) and runs the plan (:mod:`ortcore.runner`),
checking feeds on the way in (:mod:`ortcore.feeds`) and picking outputs on the
way out (:mod:`ortcore.outputs`). The records it answers with live in
:mod:`ortcore.records`; IO binding in :mod:`ortcore.iobinding`.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ep_sdk import HOST_DEVICE, Device

from .cache import SOURCES
from .custom_ops import session_ops
from .devices import OrtMemoryInfo
from .ep_devices import SessionDeviceInfo
from .epcontext import claim_context_nodes, context_base
from .epcontext_write import write_session_context
from .errors import InvalidArgumentTypeError, ModelLoadCanceled
from .executor import Plan
from .iobinding import IOBinding, run_binding
from .loading import LOAD_CONFIG_ENV as LOAD_CONFIG_ENV  # moved; importable here
from .loading import LOAD_CONFIG_FROM_MODEL as LOAD_CONFIG_FROM_MODEL  # moved; importable here
from .loading import (
    folding_budget,
    tensor_limit,
)
from .lora import with_adapters
from .native_session import NativeSession
from .optimized_model import EXTERNAL_INITIALIZERS_FILE as EXTERNAL_INITIALIZERS_FILE  # moved
from .optimized_model import EXTERNAL_INITIALIZERS_MIN_SIZE as EXTERNAL_INITIALIZERS_MIN_SIZE
from .options import RunOptions, SessionOptions
from .ortvalue import OrtValue
from .outputs import as_output, host_ortvalue, roots_of, sparse_output
from .plugins import PluginManager, default_manager
from .profiling import Profiler
from .providers import DISABLE_CPU_FALLBACK as DISABLE_CPU_FALLBACK  # moved; importable here
from .providers import (
    ProviderSpec,
    get_all_providers,
    get_available_providers,
    requested_names,
)
from .records import ModelMetadata, NodeArg, Partition
from .runner import run_in_background
from .runner import run_log as run_log  # moved; importable here
from .saved_session import (
    StaleSavedSession,
    save_session,
)
from .session_build import SessionBuild
from .thread_pools import check_session_threads

log = logging.getLogger("ortcore.cache")

__all__ = [
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "Partition",
    "get_available_providers",
    "get_all_providers",
]


class InferenceSession(SessionBuild, SessionDeviceInfo):
    """Loads a model once and runs it (``onnxruntime.InferenceSession``).

    Args:
        path_or_bytes: model file path, or the serialized model.
        sess_options: :class:`SessionOptions`.
        providers: provider names (or ``(name, options)`` pairs) in priority
            order; ``None``: those chosen on ``sess_options``, else the CPU
            provider (:mod:`ortcore.selection`).
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
        ExternalDataChanged: a memory-mapped external data file changed while
            the session was created (see :mod:`ortcore.external_data`).
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
        self._setting_providers = False  # set_providers never falls back (onnxruntime's rule)
        if kwargs:
            raise InvalidArgumentTypeError(f"unexpected arguments: {', '.join(sorted(kwargs))}")
        self._model_path = (
            os.fspath(path_or_bytes) if isinstance(path_or_bytes, (str, os.PathLike)) else None
        )
        self._sess_options = sess_options or SessionOptions()
        check_session_threads(self._sess_options)
        if self._sess_options._load_cancelled:
            raise ModelLoadCanceled("Model loading was canceled (set_load_cancellation_flag)")
        self._max_tensor_bytes = tensor_limit(self._sess_options)
        self._folding_budget = folding_budget(self._sess_options)
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
        self._source: str | os.PathLike[str] | bytes | None = None  # kept for a saved session
        self._read_config = read_config
        cache_dir, key, saved = self._saved_session(path_or_bytes, providers, provider_options)
        if saved is not None:
            try:
                self._build(path_or_bytes, saved, providers, provider_options, read_config)
                self._source = path_or_bytes  # set_providers() builds from the model
            except Exception as exc:  # a saved session never fails a session
                how = logging.INFO if isinstance(exc, StaleSavedSession) else logging.WARNING
                log.log(how, "saved session %s not used (%s): loading the model", saved.key, exc)
                self.close()
                self._custom_ops = session_ops(
                    self._manager.custom_ops(load_all=requested is None),
                    self._sess_options.custom_ops,
                )
                saved = None
        if saved is not None:
            log.info(
                "saved session %s: %d compiled group(s) loaded from the cache",
                saved.key[:12],
                len(self._plans.planner.group_sources),
            )
            write_session_context(self, path_or_bytes)  # ep.context_enable
            return
        self._build(path_or_bytes, None, providers, provider_options, read_config)
        write_session_context(self, path_or_bytes)  # ep.context_enable
        if cache_dir is not None and key is not None:
            self._check_external_data()  # never save what changed data went into
            save_session(
                cache_dir,
                key,
                path_or_bytes,
                self._model,
                self._plans,
                self._plans.planner.group_keys,
            )
        self._check_external_data()

    # -- onnxruntime API ---------------------------------------------------

    def get_inputs(self) -> list[NodeArg]:
        """The model's inputs (initializers excluded)."""
        return list(self._inputs_meta)

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs."""
        return list(self._outputs_meta)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers a feed may replace (IR version 4 and later)."""
        return [self._node_arg(v) for v in self._overridable]

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
        return {p.name: dict(p.provider_options) for p in self._providers}

    def get_session_options(self) -> SessionOptions:
        """The options the session was created with."""
        return self._sess_options

    @property
    def _sess(self) -> NativeSession:
        """This session with the calls of onnxruntime's native layer, where
        onnxruntime keeps its C extension's session (``sess._sess.run_with_ort_values``,
        ``SessionIOBinding(sess._sess)``): see :mod:`ortcore.native_session`."""
        return NativeSession(self)

    def get_partition(self) -> Partition:
        """Where each node runs and why other providers declined it."""
        planned = self._plans.planned
        compiled = dict(self._plans.planner.group_sources)
        if self._saved is not None:  # its groups are the saved session's EPContext nodes
            compiled = {g: SOURCES["saved"] for g in compiled}
        return Partition(
            tuple(self.get_providers()), tuple(planned.records), tuple(planned.copies), compiled
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
            ExternalDataChanged: a memory-mapped external data file of the
                model changed since the session loaded it (before or during
                this run, or before an earlier run): see :mod:`ortcore.external_data`.
        """
        feeds, wanted, plan = self._prepare_run(output_names, input_feed, run_options)
        check = self._check_data
        if check is not None:
            check()
        results = self._runner.run(plan, feeds, run_options)
        guarded = (self._plans.constant_roots, roots_of(feeds))
        outputs = self._plans.ownership.distinct(
            [as_output(results[i], guarded) for i in wanted], wanted
        )
        if check is not None:  # outputs copied out of mapped constants are read by now
            check()
        if self._sparse_outputs:  # declared sparse, made dense at load: sparse again
            outputs = [sparse_output(o, i, self._sparse_outputs) for o, i in zip(outputs, wanted)]
        return outputs

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
            self._feeds.check_required(input_feed)
        run = functools.partial(self.run, output_names, input_feed, run_options)
        run_in_background(run, callback, user_data)

    def _prepare_run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None,
    ) -> tuple[list[Any], list[int], Plan]:
        """Checked feeds, the wanted output indices and the plan of one ``run``."""
        input_feed = with_adapters(self._feeds, input_feed, run_options)
        feeds = self._feeds.prepare(self._feeds.as_declared(input_feed))
        wanted = self._outputs.indices(output_names)
        plan = self._plans.planned.plan
        if run_options is not None and run_options.only_execute_path_to_fetches:
            plan = plan.pruned(wanted)
        return feeds, wanted, plan

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
        """Run with :class:`OrtValue` inputs (host or device); outputs are host
        OrtValues. Active LoRA adapters of ``run_options`` feed their parameters."""
        names = list(output_names) if output_names else [a.name for a in self._outputs_meta]
        inputs = with_adapters(self._feeds, input_dict_ort_values, run_options)
        return self.run_with_binding(inputs, [(n, HOST_DEVICE) for n in names], run_options)

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
        self._outputs.check(name)

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
            ExternalDataChanged: as :meth:`run`.
        """
        feeds, in_devices = self._feeds.prepare_ortvalues(inputs)
        wanted = self._outputs.indices([name for name, _ in outputs])
        out_devices = [HOST_DEVICE] * len(self._outputs_meta)
        for i, (_, d) in zip(wanted, outputs):
            out_devices[i] = d
        check = self._check_data
        if check is not None:  # before a new variant's kernels read the constants
            check()
        plans = self._plans
        plan = plans.variant(tuple(in_devices), tuple(out_devices))
        if run_options is not None and run_options.only_execute_path_to_fetches:
            plan = plan.pruned(wanted)
        results = self._runner.run(plan, feeds, run_options)
        guarded = (plans.constant_roots, roots_of(feeds))
        host = [i for i in wanted if out_devices[i].is_host]
        arrays = dict(
            zip(
                host, plans.ownership.distinct([as_output(results[i], guarded) for i in host], host)
            )
        )
        out = []
        for i in wanted:
            d = out_devices[i]
            if d.is_host:
                out.append(host_ortvalue(arrays[i], i, self._sparse_outputs))
            else:
                out.append(OrtValue(results[i], d, plans.planner.provider_for(d)))
        if check is not None:
            check()
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

        A listed provider that is known but unavailable is skipped with a
        warning; an unknown name is an error (onnxruntime's rules, see
        :mod:`ortcore.providers`).

        Raises:
            InvalidArgumentRuntimeError: an unknown provider name ("Unknown
                Provider Type: NAME", a ``RuntimeError`` as in onnxruntime).
        """
        with self._lock:
            old = self._providers
            self._setting_providers = True
            try:
                self._replace_providers(providers, provider_options)
            finally:
                self._setting_providers = False
            for p in old:
                p.close()

    def _replace_providers(
        self,
        providers: Sequence[ProviderSpec] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
    ) -> None:
        """:meth:`set_providers`' work, under the session's lock."""
        if self._saved is not None:
            # A saved session's context model runs only on the providers it
            # was saved with: on others, the session is built from the model.
            runner = self._runner
            assert self._source is not None
            self._build(self._source, None, providers, provider_options, self._read_config)
            self._source = None
            runner.shutdown()
        else:
            self._providers = self._create_providers(providers, provider_options)
            config = self._sess_options.config_entries  # EPContext nodes to the new ones
            base = context_base(self._model_path, config)
            claim_context_nodes(self._model, self._providers, base, config)
            self._plans = self._plan()
            self._runner.use_providers(self._providers)

    def close(self) -> None:
        """Release provider resources (``del session`` does the same)."""
        runner = getattr(self, "_runner", None)
        if runner is not None:
            runner.shutdown()
        for p in getattr(self, "_providers", ()):
            p.close()
