"""How a session gets its model: what its options change in loading, the
plugins the model's op domains need, the model's own ``ort_config``, the
initializers a user replaces, and which graph inputs a run may feed.

:class:`~ortcore.InferenceSession` calls these in order while it is created;
each takes what it reads as arguments, so each can be tested on its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx_ir as ir

from ep_sdk.limits import MAX_TENSOR_BYTES_CONFIG, parse_byte_limit

from .custom_ops import CustomOp
from .errors import InvalidArgument
from .external_data import read_in_limit
from .inlining import MAX_INLINED_BYTES_CONFIG, MAX_INLINED_NODES_CONFIG, parse_count_limit
from .model import LoadOptions, load_model
from .optimizer.constant_folding import FOLDING_BUDGET_CONFIG
from .options import SessionOptions
from .plugins import PluginManager
from .providers import load_plugin_ops_for

__all__ = [
    "LOAD_CONFIG_ENV",
    "LOAD_CONFIG_FROM_MODEL",
    "apply_initializers",
    "feedable_inputs",
    "folding_budget",
    "settle_constant_inputs",
    "load_options",
    "load_session_model",
    "model_session_options",
    "reads_model_config",
    "tensor_limit",
]

LOAD_CONFIG_FROM_MODEL = "session.load_config_from_model"
"""Session config entry: ``"1"`` applies the model's ``ort_config`` (as onnxruntime)."""
LOAD_CONFIG_ENV = "ORT_LOAD_CONFIG_FROM_MODEL"
"""Environment variable with the meaning of :data:`LOAD_CONFIG_FROM_MODEL`."""


def tensor_limit(options: SessionOptions) -> int | None:
    """The session's ``session.max_tensor_bytes`` entry, or ``None`` (the default).

    Raises:
        InvalidArgument: the entry is not a byte size.
    """
    text = options.config_entries.get(MAX_TENSOR_BYTES_CONFIG)
    if text is None:
        return None
    try:
        return parse_byte_limit(text, f"session config entry {MAX_TENSOR_BYTES_CONFIG!r}")
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def _entry_limit(options: SessionOptions, key: str, unit: str) -> int | None:
    """The positive count of config entry ``key``, or ``None`` when it is not set.

    Raises:
        InvalidArgument: the entry is not a positive number.
    """
    text = options.config_entries.get(key)
    if text is None:
        return None
    try:
        return parse_count_limit(text, f"session config entry {key!r}", unit)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def folding_budget(options: SessionOptions) -> int | None:
    """The session's ``session.max_folded_total_bytes`` entry, or ``None``
    (then ``$ORTCORE_MAX_FOLDED_TOTAL_BYTES``, else the default; see
    :func:`ortcore.optimizer.constant_folding.folding_budget_bytes`).

    Raises:
        InvalidArgument: the entry is not a byte size.
    """
    return _entry_limit(options, FOLDING_BUDGET_CONFIG, "bytes")


def load_options(options: SessionOptions, max_tensor_bytes: int | None) -> LoadOptions:
    """What the session options change in how the model loads.

    Raises:
        InvalidArgument: the ``session.external_data_read_in_bytes`` entry
            (or its environment variable) is not a limit, or
            ``session.max_inlined_nodes`` or ``session.max_inlined_bytes``
            is not a positive number.
    """
    by_name, by_denotation = options.free_dimension_overrides
    return LoadOptions(
        free_dims_by_name=by_name,
        free_dims_by_denotation=by_denotation,
        initializers=options.external_initializers,
        files_in_memory=options.external_files_in_memory,
        max_tensor_bytes=max_tensor_bytes,
        external_data_read_in_bytes=read_in_limit(options.config_entries),
        max_inlined_nodes=_entry_limit(options, MAX_INLINED_NODES_CONFIG, "nodes"),
        max_inlined_bytes=_entry_limit(options, MAX_INLINED_BYTES_CONFIG, "bytes"),
    )


def load_session_model(
    path_or_bytes: str | os.PathLike[str] | bytes,
    load: LoadOptions,
    manager: PluginManager,
    custom_ops: list[CustomOp],
    options: SessionOptions,
) -> tuple[ir.Model, list[CustomOp]]:
    """Load the model; if it imports an op domain that none of ``custom_ops``
    defines, import the plugins the session skipped (their custom ops may),
    and load it again when that brought the domain's schemas.

    Returns:
        the model, and the session's custom ops (see :func:`load_plugin_ops_for`).

    Raises:
        NoSuchFile, InvalidProtobuf, InvalidArgument, InvalidGraph: as
        :func:`~ortcore.model.load_model`.
    """
    model = load_model(path_or_bytes, load)
    custom_ops, reload = load_plugin_ops_for(manager, model, custom_ops, options)
    if reload:
        model = load_model(path_or_bytes, load)
    return model, custom_ops


def reads_model_config(flag: Any, options: SessionOptions) -> bool:
    """Whether the model's ``ort_config`` applies: the ``read_config_from_model``
    argument, else the config entry, else ``$ORT_LOAD_CONFIG_FROM_MODEL``."""
    if flag is not None:
        return int(flag) == 1
    entry = options.config_entries.get(LOAD_CONFIG_FROM_MODEL)
    if entry is not None:
        return entry.strip() == "1"
    return os.environ.get(LOAD_CONFIG_ENV, "").strip() == "1"


def model_session_options(model: ir.Model) -> dict[str, Any] | None:
    """The ``session_options`` of the model's ``ort_config`` metadata, or
    ``None`` when it has none (see ``SessionOptions.with_model_config``).

    Raises:
        InvalidArgument: the metadata is not JSON (onnxruntime's message).
    """
    text = model.metadata_props.get("ort_config")
    if not text:
        return None
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"Json stored in the `ort_config` key cannot be parsed. Error message: {exc}"
        ) from exc
    session = config.get("session_options") if isinstance(config, dict) else None
    return session if isinstance(session, dict) else None


def apply_initializers(model: ir.Model, values: Mapping[str, np.ndarray]) -> None:
    """Replace the model's initializers named in ``values``
    (``SessionOptions.add_initializer``).

    Raises:
        InvalidArgument: the model has no initializer of that name
            (onnxruntime ignores it; ortcore says so).
    """
    initializers = model.graph.initializers
    for name, value in values.items():
        target = initializers.get(name)
        if target is None:
            raise InvalidArgument(f"add_initializer: the model has no initializer {name!r}")
        target.const_value = ir.tensor(value)


def settle_constant_inputs(model: ir.Model) -> None:
    """Take the initializers of a model of IR version < 4 out of its graph
    inputs, where that version had to list them.

    No feed may replace them there (:func:`feedable_inputs`), so they are
    constants, and with them out of the inputs every pass and provider sees
    them as such (``ep_sdk.graph.is_constant``): a kernel keeps what it
    derives from them (a Conv's packed filters, a MatMul's packed weights)
    instead of deriving it at every run. onnxruntime treats them so too; the
    models of onnx's model zoo are of IR version 3.
    """
    if model.ir_version >= 4:
        return
    graph = model.graph
    init_values = set(graph.initializers.values())
    keep = [v for v in graph.inputs if v not in init_values]
    if len(keep) != len(graph.inputs):
        graph.inputs.clear()
        graph.inputs.extend(keep)


def feedable_inputs(model: ir.Model) -> tuple[list[ir.Value], list[ir.Value]]:
    """The graph inputs a run must feed (initializers excluded), and the
    initializers listed as graph inputs, which a run may feed from IR
    version 4 on (none before)."""
    graph = model.graph
    init_values = set(graph.initializers.values())
    inputs = [v for v in graph.inputs if v not in init_values]
    overridable = [v for v in graph.inputs if v in init_values] if model.ir_version >= 4 else []
    return inputs, overridable
