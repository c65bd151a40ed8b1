"""Session and run options with onnxruntime's names and meanings."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._enum import OrtIntEnum
from .errors import Fail, InvalidArgument, InvalidArgumentRuntimeError, InvalidArgumentTypeError
from .selection import ProviderSelectionOptions

if TYPE_CHECKING:
    from .lora import LoraAdapter

__all__ = [
    "ExecutionMode",
    "ExecutionOrder",
    "GraphOptimizationLevel",
    "RunOptions",
    "SessionOptions",
]


class GraphOptimizationLevel(OrtIntEnum):
    """How much the graph is rewritten before it runs (as in onnxruntime)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(OrtIntEnum):
    """Whether independent nodes may run at the same time."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(OrtIntEnum):
    """onnxruntime's node ordering policy; ortcore accepts it and always runs
    nodes in its planner's topological order."""

    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


def _config_get(entries: dict[str, str], key: str, owner: str) -> str:
    try:
        return entries[key]
    except KeyError:
        # onnxruntime raises a plain RuntimeError here.
        raise InvalidArgumentRuntimeError(
            f"{owner} does not have configuration with key: {key}"
        ) from None


def _check_entry(key: Any, value: Any, what: str) -> None:
    if not isinstance(key, str) or not isinstance(value, str):
        raise InvalidArgumentTypeError(
            f"{what} entries take a str key and a str value, not "
            f"{type(key).__name__} and {type(value).__name__}"
        )


def as_host_array(value: Any, what: str) -> np.ndarray:
    """A numpy array from an :class:`~ortcore.OrtValue` (copied to the host if
    it lives on a device) or anything ``np.asarray`` takes.

    Raises:
        InvalidArgumentTypeError: ``value`` is not array-like (numpy made an
            object array of something that is not strings).
    """
    numpy = getattr(value, "numpy", None)
    arr = numpy() if callable(numpy) and not isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype == object and not all(isinstance(v, (str, bytes)) for v in arr.flat):
        raise InvalidArgumentTypeError(
            f"{what}: expected an OrtValue or a numpy array, not {type(value).__name__}"
        )
    return arr


class SessionOptions(ProviderSelectionOptions):
    """Options that shape how a session is built (``onnxruntime.SessionOptions``).

    Providers may be chosen here (``add_provider``, ``add_provider_for_devices``,
    ``set_provider_selection_policy``, ``set_provider_selection_policy_delegate``:
    see :class:`~ortcore.selection.ProviderSelectionOptions`).

    Session config entries ortcore reads:
        ``session.disable_cpu_ep_fallback``: ``"1"`` forbids the CPU fallback.
        ``session.max_tensor_bytes``: the largest tensor a kernel may allocate
        (default: ``$ORTCORE_MAX_TENSOR_BYTES``, else the machine's physical
        memory); see ``docs/security.md``.
        ``session.max_inlined_nodes`` and ``session.max_inlined_bytes``: how
        much inlining the model's local functions may grow it, in nodes and
        in bytes of attribute values (default: ``$ORTCORE_MAX_INLINED_NODES``
        and ``$ORTCORE_MAX_INLINED_BYTES``, else 1,000,000 and 1 GiB).
        ``session.max_folded_total_bytes``: the most bytes constant folding
        may create in all (default: ``$ORTCORE_MAX_FOLDED_TOTAL_BYTES``, else
        4 GiB); past it, nodes stay unfolded.
        ``session.optimized_model_external_initializers_file_name`` and
        ``session.optimized_model_external_initializers_min_size_in_bytes``:
        where ``optimized_model_filepath`` puts its initializers (a data file
        beside it) and from which size.
        ``session.load_config_from_model``: ``"1"`` reads the model's
        ``ort_config`` metadata as ``read_config_from_model=1`` does.
        ``session.external_data_read_in_bytes``: at most this many bytes of
        external data are read into memory at load (whole files, smallest
        first), the rest is memory-mapped and checked around every run
        (``0``: all mapped; ``all``: none; default 512 MiB); see
        ``docs/security.md``.
    """

    def __init__(self) -> None:
        self.graph_optimization_level: GraphOptimizationLevel = (
            GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        self.intra_op_num_threads: int = 0
        self.inter_op_num_threads: int = 0
        self.execution_mode: ExecutionMode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level: int = 2
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.optimized_model_filepath: str = ""
        self.enable_profiling: bool = False
        self.profile_file_prefix: str = "onnxruntime_profile_"
        self.enable_cpu_mem_arena: bool = True
        self.enable_mem_pattern: bool = True
        self.enable_mem_reuse: bool = True
        self.use_deterministic_compute: bool = False
        self.use_per_session_threads: bool = True
        self.execution_order: ExecutionOrder = ExecutionOrder.DEFAULT
        self._config: dict[str, str] = {}
        self._initializers: dict[str, Any] = {}
        self._custom_ops: list[Any] = []
        self._free_dims_by_name: dict[str, int] = {}
        self._free_dims_by_denotation: dict[str, int] = {}
        self._external_initializers: dict[str, np.ndarray] = {}
        self._external_files: dict[str, memoryview] = {}
        self._load_cancelled = False

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Set a session configuration entry (string key and value).

        Raises:
            InvalidArgumentTypeError: the key or value is not a ``str``.
        """
        _check_entry(key, value, "session config")
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        """Return a session configuration entry.

        Raises:
            InvalidArgumentRuntimeError: the key was never set (onnxruntime
                raises ``RuntimeError``).
        """
        return _config_get(self._config, key, "SessionOptions")

    def add_initializer(self, name: str, value: Any) -> None:
        """Replace initializer ``name`` of the model with ``value``.

        Args:
            name: an initializer of the model (other names are ignored, as
                onnxruntime ignores them).
            value: an :class:`~ortcore.OrtValue` (onnxruntime's only kind)
                or a numpy array; a host value's memory is shared.

        Raises:
            InvalidArgumentTypeError: ``value`` is not an OrtValue or array.
        """
        self._initializers[str(name)] = as_host_array(value, f"add_initializer({name!r})")

    def add_external_initializers(self, names: Sequence[str], values: Sequence[Any]) -> None:
        """Give the data of initializers the model stores in external files:
        those tensors are taken from ``values`` and their files are not read
        (they need not exist).

        Args:
            names: initializer names.
            values: one :class:`~ortcore.OrtValue` (or array) per name.

        Raises:
            InvalidArgument: the two lists differ in length.
        """
        names, values = list(names), list(values)
        if len(names) != len(values):
            raise InvalidArgument(
                f"add_external_initializers: {len(names)} names but {len(values)} values"
            )
        for name, value in zip(names, values):
            what = f"add_external_initializers({name!r})"
            self._external_initializers[str(name)] = as_host_array(value, what)

    def add_external_initializers_from_files_in_memory(
        self, names: Sequence[str], buffers: Sequence[Any], lengths: Sequence[int]
    ) -> None:
        """Serve external data files from memory: a tensor whose external data
        ``location`` is one of ``names`` is read from the matching buffer.

        Args:
            names: file names as the model's ``location`` fields spell them.
            buffers: one buffer (numpy array, bytes, memoryview) per name.
            lengths: the number of bytes of each buffer to use.

        Raises:
            InvalidArgument: the lists differ in length, or a length exceeds
                its buffer.
        """
        names, buffers, lengths = list(names), list(buffers), list(lengths)
        if not len(names) == len(buffers) == len(lengths):
            raise InvalidArgument(
                "add_external_initializers_from_files_in_memory: names, buffers and "
                f"lengths differ in length ({len(names)}, {len(buffers)}, {len(lengths)})"
            )
        for name, buf, n in zip(names, buffers, lengths):
            data: Any = np.ascontiguousarray(buf) if isinstance(buf, np.ndarray) else buf
            view = memoryview(data).cast("B")
            if int(n) > view.nbytes or int(n) < 0:
                raise InvalidArgument(
                    f"add_external_initializers_from_files_in_memory: length {n} of "
                    f"{name!r} exceeds its buffer of {view.nbytes} bytes"
                )
            self._external_files[str(name)] = view[: int(n)]

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix every symbolic dimension named ``dim_name`` of the model's
        inputs to ``dim_value`` (feeds are then checked against it)."""
        self._free_dims_by_name[str(dim_name)] = _dim(dim_value)

    def add_free_dimension_override_by_denotation(
        self, dim_denotation: str, dim_value: int
    ) -> None:
        """Fix every symbolic dimension of the model's inputs whose denotation is
        ``dim_denotation`` (e.g. ``DATA_BATCH``) to ``dim_value``."""
        self._free_dims_by_denotation[str(dim_denotation)] = _dim(dim_value)

    def register_custom_ops_library(self, library_path: str) -> None:
        """onnxruntime loads custom operators from a shared library here;
        ortcore cannot run such native kernels.

        Raises:
            Fail: always; write the operator with :func:`ortcore.custom_op`
                and :meth:`register_custom_ops` instead.
        """
        raise Fail(
            f"register_custom_ops_library({library_path!r}): ortcore cannot load "
            "onnxruntime custom-op libraries; write the operator in Python with "
            "ortcore.custom_op and pass it to SessionOptions.register_custom_ops"
        )

    def set_load_cancellation_flag(self, value: bool) -> None:
        """Cancel a model load in progress (ortcore loads in one step: a
        session created with the flag set refuses to start)."""
        self._load_cancelled = bool(value)

    @property
    def initializers(self) -> dict[str, np.ndarray]:
        """The initializers given with :meth:`add_initializer`, by name."""
        return dict(self._initializers)

    @property
    def external_initializers(self) -> dict[str, np.ndarray]:
        """The tensors given with :meth:`add_external_initializers`, by name."""
        return dict(self._external_initializers)

    @property
    def external_files_in_memory(self) -> dict[str, memoryview]:
        """The files given with :meth:`add_external_initializers_from_files_in_memory`."""
        return dict(self._external_files)

    @property
    def free_dimension_overrides(self) -> tuple[dict[str, int], dict[str, int]]:
        """The dimension overrides, by name and by denotation."""
        return dict(self._free_dims_by_name), dict(self._free_dims_by_denotation)

    def with_model_config(self, config: Mapping[str, Any]) -> SessionOptions:
        """A copy of these options with the ``session_options`` of a model's
        ``ort_config`` metadata applied (the keys onnxruntime reads:
        ``intra_op_num_threads``, ``inter_op_num_threads``, ``execution_mode``,
        ``graph_optimization_level``, ``enable_profiling``; others are ignored).

        Raises:
            InvalidArgument: a value is not an integer or out of range.
        """
        out = copy.copy(self)
        for name in ("_config", "_initializers", "_custom_ops", "_external_initializers"):
            setattr(out, name, copy.copy(getattr(self, name)))
        for key, value in config.items():
            if key not in _MODEL_CONFIG_KEYS:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidArgument(f"{key} option in the model file must be an integer")
            try:
                setattr(out, key, _MODEL_CONFIG_KEYS[key](value))
            except ValueError:
                raise InvalidArgument(f"Unsupported value for {key}: {value}") from None
        return out

    def register_custom_ops(self, *ops: Any) -> None:
        """Make custom operators (``ortcore.custom_op``) known to sessions
        created with these options: their schemas are registered with onnx
        and their kernels given to this session's providers only."""
        self._custom_ops.extend(ops)

    @property
    def custom_ops(self) -> list[Any]:
        """The custom operators registered with :meth:`register_custom_ops`."""
        return list(self._custom_ops)

    @property
    def config_entries(self) -> dict[str, str]:
        """A copy of all session configuration entries."""
        return dict(self._config)


class RunOptions:
    """Options of one ``run`` call (``onnxruntime.RunOptions``).

    Setting ``terminate = True`` from another thread stops a running ``run``
    with :class:`ortcore.RunTerminated`: between two nodes, and inside kernels
    that loop for long (Loop/Scan bodies, string and recurrent kernels poll
    :func:`ep_sdk.check_terminate`).
    ``only_execute_path_to_fetches`` skips nodes the requested outputs do not
    need. ``log_severity_level`` (onnxruntime's scale: 0 verbose, 1 info,
    2 warning, 3 error, 4 fatal) below 2 logs the run on the ``ortcore.run``
    logger: its start and end (INFO at 1, DEBUG at 0) and, at 0 with
    ``log_verbosity_level`` 1 or more, one DEBUG record per node; records
    start with ``[logid]`` when ``logid`` is set. A failed run is logged at
    ERROR.
    """

    def __init__(self) -> None:
        self.log_severity_level: int = 2
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.terminate: bool = False
        self.only_execute_path_to_fetches: bool = False
        self._config: dict[str, str] = {}
        self._active_adapters: list[LoraAdapter] = []

    def add_active_adapter(self, adapter: LoraAdapter) -> None:
        """Make runs with these options feed ``adapter``'s parameters (see
        :mod:`ortcore.lora`: the first adapter added wins a shared name).

        Raises:
            InvalidArgumentTypeError: ``adapter`` is not a :class:`~ortcore.LoraAdapter`.
        """
        from .lora import LoraAdapter

        if not isinstance(adapter, LoraAdapter):
            raise InvalidArgumentTypeError(
                f"add_active_adapter takes a LoraAdapter, not {type(adapter).__name__}"
            )
        self._active_adapters.append(adapter)

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Set a run configuration entry.

        Raises:
            InvalidArgumentTypeError: the key or value is not a ``str``.
        """
        _check_entry(key, value, "run config")
        self._config[key] = value

    def get_run_config_entry(self, key: str) -> str:
        """Return a run configuration entry.

        Raises:
            InvalidArgumentRuntimeError: the key was never set (onnxruntime
                raises ``RuntimeError``).
        """
        return _config_get(self._config, key, "RunOptions")


def _dim(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentTypeError(f"a dimension override takes an int, not {value!r}")
    if value < 0:
        raise InvalidArgument(f"a dimension override must be >= 0, not {value}")
    return int(value)


def _positive_threads(value: int) -> int:
    if value < 0:
        raise ValueError(value)
    return value


_MODEL_CONFIG_KEYS: dict[str, Any] = {
    "intra_op_num_threads": _positive_threads,
    "inter_op_num_threads": _positive_threads,
    "execution_mode": ExecutionMode,
    "graph_optimization_level": GraphOptimizationLevel,
    "enable_profiling": bool,
}
