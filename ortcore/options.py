"""Session and run options with onnxruntime's names and meanings."""

from __future__ import annotations

import enum
from typing import Any

from .errors import InvalidArgument

__all__ = ["ExecutionMode", "GraphOptimizationLevel", "RunOptions", "SessionOptions"]


class GraphOptimizationLevel(enum.IntEnum):
    """How much the graph is rewritten before it runs (as in onnxruntime)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """Whether independent nodes may run at the same time."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


def _config_get(entries: dict[str, str], key: str, owner: str) -> str:
    try:
        return entries[key]
    except KeyError:
        raise InvalidArgument(f"{owner} does not have configuration with key: {key}") from None


class SessionOptions:
    """Options that shape how a session is built (``onnxruntime.SessionOptions``).

    Session config entries ortcore reads:
        ``session.disable_cpu_ep_fallback``: ``"1"`` forbids the CPU fallback.
        ``session.max_tensor_bytes``: the largest tensor a kernel may allocate
        (default: ``$ORTCORE_MAX_TENSOR_BYTES``, else the machine's physical
        memory); see ``docs/security.md``.
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
        self._config: dict[str, str] = {}
        self._initializers: dict[str, Any] = {}
        self._custom_ops: list[Any] = []

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Set a session configuration entry (string key and value)."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument("session config entries take a str key and a str value")
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        """Return a session configuration entry.

        Raises:
            InvalidArgument: the key was never set.
        """
        return _config_get(self._config, key, "SessionOptions")

    def add_initializer(self, name: str, value: Any) -> None:
        """Replace initializer ``name`` of the model with ``value`` (an array)."""
        self._initializers[name] = value

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

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Set a run configuration entry."""
        self._config[key] = value

    def get_run_config_entry(self, key: str) -> str:
        """Return a run configuration entry.

        Raises:
            InvalidArgument: the key was never set.
        """
        return _config_get(self._config, key, "RunOptions")
