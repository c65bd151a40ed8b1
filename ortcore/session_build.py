"""How an :class:`~ortcore.InferenceSession` is built: the model loaded (or a
saved session's context model), its providers created, the model checked,
optimized and planned. The session's public methods are in
:mod:`ortcore.session`; this is the part they run once, at creation and on
``set_providers``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx_ir as ir

from ep_sdk import ExecutionProvider

from .build_memory import gc_paused, trim_heap
from .cache import cache_dir_from_config
from .epcontext import claim_context_nodes, context_base
from .external_data import EXTERNAL_DATA_KEY, ExternalData
from .feeds import FeedValidator
from .loading import (
    apply_initializers,
    feedable_inputs,
    load_options,
    load_session_model,
    model_session_options,
    reads_model_config,
    settle_constant_inputs,
)
from .model import INVENTED_DIMS_KEY, MAP_TYPES_KEY, SPARSE_OUTPUTS_KEY
from .optimized_model import save_optimized
from .optimizer import optimize
from .options import GraphOptimizationLevel, SessionOptions
from .outputs import OutputNames
from .param_checks import check_model
from .plans import SessionPlans
from .plugins import PluginManager
from .profiling import Profiler
from .providers import CPU_PROVIDER, ProviderSpec, create_providers
from .records import NodeArg, node_arg
from .runner import PlanRunner
from .saved_session import SavedSession, check_saved, find_saved, saves_sessions, session_key
from .selection import selection_key

__all__ = ["SessionBuild"]

_log = logging.getLogger("ortcore.session")


class SessionBuild:
    """The building half of :class:`~ortcore.InferenceSession` (its base class):
    the state a built session holds, and the steps that make it."""

    # Set by InferenceSession.__init__ before any build.
    _manager: PluginManager
    _sess_options: SessionOptions
    _model_path: str | None
    _disabled_optimizers: frozenset[str]
    _fallback: bool
    _setting_providers: bool
    _read_config: Any
    _max_tensor_bytes: int | None
    _folding_budget: Any
    _lock: threading.Lock
    _custom_ops: Any
    _profiler: Profiler | None
    _source: str | os.PathLike[str] | bytes | None
    # Set by _build.
    _saved: SavedSession | None
    _model: ir.Model
    _check_data: Callable[[], None] | None
    _map_types: dict[str, str]
    _providers: list[ExecutionProvider]
    _input_values: list[ir.Value]
    _overridable: Any
    _invented_dims: frozenset[str]
    _inputs_meta: list[NodeArg]
    _outputs_meta: list[NodeArg]
    _sparse_outputs: frozenset[int]
    _outputs: OutputNames
    _plans: SessionPlans
    _feeds: FeedValidator
    _runner: PlanRunner

    def _saved_session(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        providers: Sequence[ProviderSpec] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
    ) -> tuple[Path | None, str | None, SavedSession | None]:
        """Where a session saves itself (``None``: it does not), its key, and
        the saved session found under that key (see :mod:`ortcore.saved_session`)."""
        config = self._sess_options.config_entries
        cache_dir = cache_dir_from_config(config) if saves_sessions(config) else None
        if cache_dir is None:
            return None, None, None
        settings = {
            "providers": list(providers) if providers is not None else None,
            "provider_options": list(provider_options) if provider_options else None,
            "disabled_optimizers": sorted(self._disabled_optimizers),
            "fallback": self._fallback,
            "read_config": self._read_config,
            "selection": selection_key(self._sess_options),
        }
        key = session_key(path_or_bytes, self._sess_options, settings, cache_dir)
        if key is None:
            return cache_dir, None, None
        return cache_dir, key, find_saved(cache_dir, key, path_or_bytes)

    @gc_paused()
    def _build(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        saved: SavedSession | None,
        providers: Sequence[ProviderSpec] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
        read_config: Any,
    ) -> None:
        """Load, optimize and plan the model, or the saved session's context model.

        Raises:
            StaleSavedSession: ``saved`` cannot be used (see :mod:`ortcore.saved_session`).
        """
        t_start = time.perf_counter_ns()
        self._saved = saved
        model, self._custom_ops = load_session_model(
            path_or_bytes if saved is None else saved.model,
            load_options(self._sess_options, self._max_tensor_bytes),
            self._manager,
            self._custom_ops,
            self._sess_options,
        )
        trim_heap()  # the parsed protos are gone: their pages go back now
        if reads_model_config(read_config, self._sess_options):
            self._apply_model_config(model)
        if self._profiler is not None:
            kind = "array" if self._model_path is None else "uri"
            self._profiler.session_event(f"model_loading_{kind}", t_start, time.perf_counter_ns())
        self._model = model
        data: ExternalData | None = model.meta.get(EXTERNAL_DATA_KEY)
        # Mapped external data is checked around every run; read-in data needs nothing.
        self._check_data: Callable[[], None] | None = (
            data.check if data is not None and data.mapped else None
        )
        self._map_types: dict[str, str] = dict(model.meta.get(MAP_TYPES_KEY, {}))
        self._providers = self._create_providers(providers, provider_options)
        apply_initializers(model, self._sess_options.initializers)
        settle_constant_inputs(model)
        self._input_values, self._overridable = feedable_inputs(model)
        check_model(model)  # before the optimizer folds a node it would hide
        if saved is not None:
            check_saved(saved, model, self._providers)
        base = context_base(self._model_path, self._sess_options.config_entries, saved)
        contexts = claim_context_nodes(
            model, self._providers, base, self._sess_options.config_entries, saved=bool(saved)
        )
        if contexts < len(model.graph):  # a compiled model's only nodes need no optimizing
            self._optimize(model)
        self._invented_dims: frozenset[str] = model.meta.get(INVENTED_DIMS_KEY, frozenset())
        self._inputs_meta = [self._node_arg(v) for v in self._input_values]
        self._outputs_meta = [self._node_arg(v) for v in model.graph.outputs]
        sparse = model.meta.get(SPARSE_OUTPUTS_KEY, frozenset())
        self._sparse_outputs = frozenset(
            i for i, v in enumerate(model.graph.outputs) if v.name in sparse
        )
        self._outputs = OutputNames([a.name for a in self._outputs_meta])
        self._plans = self._plan()
        self._feeds = FeedValidator(self._input_values, self._overridable, self._map_types)
        self._runner = PlanRunner(self._sess_options, self._profiler, self._max_tensor_bytes)
        self._runner.use_providers(self._providers)
        t_end = time.perf_counter_ns()
        if self._profiler is not None:
            self._profiler.session_event("session_initialization", t_start, t_end)
        # onnxruntime logs its session initialization at verbose severity: a
        # callback or handler set for that level sees ortcore's too.
        _log.debug(
            "session initialized in %.3f ms: %d nodes on %s",
            (t_end - t_start) / 1e6,
            len(model.graph),
            ", ".join(p.name for p in self._providers),
        )

    def _check_external_data(self) -> None:
        """Refuse a session whose mapped external data changed while it was
        created (see :mod:`ortcore.external_data`).

        Raises:
            ExternalDataChanged: naming the file and what changed.
        """
        if self._check_data is not None:
            self._check_data()

    def _apply_model_config(self, model: ir.Model) -> None:
        """Apply the ``session_options`` of the model's ``ort_config`` metadata.

        Raises:
            InvalidArgument: the metadata is not JSON, or a value is unusable.
        """
        config = model_session_options(model)
        if config is None:
            return
        self._sess_options = self._sess_options.with_model_config(config)
        if self._sess_options.enable_profiling and self._profiler is None:
            self._profiler = Profiler(self._sess_options.profile_file_prefix)
        elif not self._sess_options.enable_profiling:
            self._profiler = None

    def _create_providers(
        self,
        providers: Sequence[ProviderSpec] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
    ) -> list[ExecutionProvider]:
        """The session's providers, in priority order (see :func:`create_providers`):
        an unknown provider name falls back to the CPU provider while the
        session is created with ``enable_fallback``, as onnxruntime retries."""
        return create_providers(
            self._manager,
            providers,
            provider_options,
            self._sess_options,
            self._custom_ops,
            model=self._model,
            retry_on_cpu=self._fallback and not self._setting_providers,
        )

    def _optimize(self, model: ir.Model) -> None:
        """Optimize ``model`` at the session's level, folding constants on the
        CPU provider if the session has it, and save it where the options ask.

        From the extended level, optimize() partitions the model among the
        providers (priority order) before fusing, fuses only where a node's
        provider has the fused kernel, and records every node's provider on
        it, which the planner keeps (see :mod:`ortcore.optimizer`).
        """
        level = GraphOptimizationLevel(self._sess_options.graph_optimization_level)
        folding = next(
            (p for p in self._providers if p.device.is_host and p.name == CPU_PROVIDER), None
        )
        if "ConstantFolding" in self._disabled_optimizers:
            folding = None
        optimize(
            model,
            level,
            folding,
            set(self._overridable),
            self._providers,
            folding_budget=self._folding_budget,
            max_tensor_bytes=self._max_tensor_bytes,
        )
        if self._sess_options.optimized_model_filepath:
            save_optimized(model, self._sess_options.optimized_model_filepath, self._sess_options)

    def _plan(self) -> SessionPlans:
        """The model's plans on the session's current providers."""
        return SessionPlans(
            self._model,
            self._providers,
            self._input_values,
            self._overridable,
            cache_dir=cache_dir_from_config(self._sess_options.config_entries),
            max_tensor_bytes=self._max_tensor_bytes,
        )

    def _node_arg(self, v: ir.Value) -> NodeArg:
        return node_arg(v, self._map_types, self._invented_dims)
