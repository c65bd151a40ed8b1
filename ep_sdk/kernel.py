"""What a kernel sees: the node it was built for, the provider that runs it,
and the run it executes in.

A kernel is built once per node when a session is created and called once per
run. Building gets a :class:`NodeInfo` (attributes with the schema's defaults
applied, static input types and shapes, the opset, prepared subgraphs) and
returns a *compute function*::

    @registry.kernel("Relu", since=6)
    def relu(info: NodeInfo) -> Compute:
        def compute(x):
            return (np.maximum(x, 0, dtype=x.dtype),)
        return compute

The compute function receives the node's inputs positionally (``None`` for an
omitted optional input; omitted trailing inputs are not passed) and returns a
tuple or list with one value per node output. A kernel registered with
``context=True`` receives a :class:`RunContext` first.

Compute functions must not keep state between calls: one session may run from
many threads at once. Nor do they write into their inputs: the core hands
values from node to node without copying them, so an input may be the
caller's feed, a constant of the model or a value other nodes read (a kernel
may return an input unchanged); a kernel that works in place does so on an
array it made itself. (A custom operator's kernel gets read-only views, or
copies once it has written into one.)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import onnx_ir as ir

from ._errors import RunTerminated
from .device import Allocator, Device, HostAllocator

if TYPE_CHECKING:
    from .artifacts import ArtifactStore
    from .host import Host

__all__ = [
    "Compute",
    "NodeInfo",
    "ProviderView",
    "RunContext",
    "RunTerminated",
    "SessionConfig",
    "SubgraphRunner",
]

Compute = Callable[..., Sequence[Any]]
"""A compute function: inputs in, one value per output out."""


@dataclass(frozen=True)
class SessionConfig:
    """The parts of the session's options a provider (and its kernels) may read.

    Attributes:
        intra_op_num_threads: ``SessionOptions.intra_op_num_threads`` (``0``:
            the provider chooses).
        config_entries: the session's configuration entries
            (``SessionOptions.add_session_config_entry``).
        cache_dir: the folder of the session's compiled-artifact cache
            (config entry ``ortcore.cache_dir``, or onnxruntime's
            ``ep.context_*`` entries), ``""`` when caching is off. A provider
            may keep artifacts of its own under ``<cache_dir>/<its name>/``
            (the bridge base keeps its engine's query answers there).
        artifact_store: the session's compiled-artifact store
            (:class:`~ep_sdk.artifacts.ArtifactStore`, in ``cache_dir``), for
            artifacts a provider keeps itself; ``None`` when caching is off.
            New in SDK 1.1.
        host: the host's services (:class:`~ep_sdk.host.Host`: artifact
            stores in other folders, another provider's device); ``None``
            when no host made this config. New in SDK 1.1.
    """

    intra_op_num_threads: int = 0
    config_entries: Mapping[str, str] = field(default_factory=dict)
    cache_dir: str = ""
    artifact_store: ArtifactStore | None = field(default=None, compare=False)
    host: Host | None = field(default=None, compare=False)


_PROVIDER_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def is_provider_folder_name(name: str) -> bool:
    """Whether a provider named ``name`` may have a folder in the cache
    (``<cache_dir>/<name>/``): letters, digits, ``_``, ``.`` and ``-``, not
    starting with ``.`` or ``-``, at most 128 characters."""
    return _PROVIDER_FOLDER.fullmatch(name) is not None


@runtime_checkable
class ProviderView(Protocol):
    """The provider as its kernels see it (``NodeInfo.provider``).

    Every :class:`~ep_sdk.ExecutionProvider` satisfies it. A kernel that
    needs more of its own provider casts ``info.provider`` to its class.
    (This protocol is what lets ``NodeInfo`` name its provider without
    importing the provider base class, which imports the kernel registry.)
    """

    @property
    def name(self) -> str:
        """The provider's name, e.g. ``"CPUExecutionProvider"``."""
        ...

    @property
    def device(self) -> Device:
        """The device the provider keeps its tensors on."""
        ...

    @property
    def options(self) -> Mapping[str, str]:
        """The provider options of this instance, defaults filled in."""
        ...

    @property
    def config(self) -> SessionConfig:
        """The session's options the provider may read (e.g. thread count)."""
        ...

    def allocator(self) -> Allocator:
        """Return the allocator of the provider's device."""
        ...


class RunContext:
    """State of one ``InferenceSession.run`` call, shared by all its kernels.

    Attributes:
        run_options: the user's ``RunOptions`` (or ``None``).
        values: free per-run storage for kernels (keyed by anything hashable).
        max_tensor_bytes: the largest tensor a kernel of this run may allocate
            (``None``: the process default; see :func:`ep_sdk.check_tensor_size`).
    """

    __slots__ = ("run_options", "values", "max_tensor_bytes", "_lock")

    def __init__(self, run_options: Any = None, *, max_tensor_bytes: int | None = None) -> None:
        self.run_options = run_options
        self.values: dict[Any, Any] = {}
        self.max_tensor_bytes = max_tensor_bytes
        self._lock = threading.Lock()

    def config(self, key: str, default: str = "") -> str:
        """Return run configuration entry ``key`` (``RunOptions.add_run_config_entry``)."""
        entries = getattr(self.run_options, "_config", None) or {}
        return str(entries.get(key, default))

    def check_terminated(self) -> None:
        """Raise :class:`RunTerminated` if the user asked this run to stop."""
        ro = self.run_options
        if ro is not None and getattr(ro, "terminate", False):
            raise RunTerminated("Exiting due to terminate flag being set to true.")


@runtime_checkable
class SubgraphRunner(Protocol):
    """A prepared subgraph (the body of If, Loop or Scan).

    The core builds one per graph attribute, partitioned across the session's
    providers, and hands it to the kernel in ``NodeInfo.attrs``.
    """

    @property
    def input_names(self) -> Sequence[str]:
        """Names of the subgraph's inputs, in the order :meth:`run` takes them."""
        ...

    @property
    def output_names(self) -> Sequence[str]:
        """Names of the subgraph's outputs, in the order :meth:`run` returns them."""
        ...

    @property
    def outer_names(self) -> Sequence[str]:
        """Names of the outer-scope values the subgraph reads, in the order
        :meth:`run` takes them."""
        ...

    def run(self, ctx: RunContext, inputs: Sequence[Any], outer: Sequence[Any]) -> list[Any]:
        """Run the subgraph.

        Args:
            ctx: the enclosing run's context.
            inputs: values for ``input_names``, in order.
            outer: values for ``outer_names`` (outer-scope values the body
                reads), in order; a control-flow kernel passes through the
                trailing arguments it received, see ``NodeInfo.implicit_inputs``.

        Returns:
            one value per ``output_names`` entry.
        """
        ...


class NodeInfo:
    """Everything known about a node when its kernel is built.

    Attributes:
        node: the onnx-ir node (read it, never mutate it).
        op_type: operator name.
        domain: operator domain (``""`` for ai.onnx).
        name: node name (may be empty).
        opset: the model's opset version for ``domain``.
        attrs: attribute values with the schema's defaults applied: ints,
            floats, ``str`` for strings, numpy arrays for tensors, lists for
            repeated attributes, and a :class:`SubgraphRunner` for graphs.
        input_types: static ONNX element type per input (``None`` if unknown
            or the input is omitted).
        input_shapes: static shape per input, each dim an ``int`` or ``None``
            (``None`` for the whole shape if the rank is unknown).
        output_types / output_shapes: the same for outputs.
        implicit_inputs: names of outer-scope values the node's subgraphs
            read. Their values are passed after the explicit inputs.
        provider: the provider instance that will run this kernel (``None``
            when a kernel is built outside a session).

    :func:`ep_sdk.make_node_info` builds one from a node the way the core
    does.
    """

    __slots__ = (
        "node",
        "op_type",
        "domain",
        "name",
        "opset",
        "attrs",
        "input_types",
        "input_shapes",
        "output_types",
        "output_shapes",
        "implicit_inputs",
        "provider",
    )

    def __init__(
        self,
        node: ir.Node,
        *,
        opset: int,
        attrs: Mapping[str, Any],
        input_types: Sequence[ir.DataType | None],
        input_shapes: Sequence[tuple[int | None, ...] | None],
        output_types: Sequence[ir.DataType | None],
        output_shapes: Sequence[tuple[int | None, ...] | None],
        implicit_inputs: Sequence[str] = (),
        provider: ProviderView | None = None,
    ) -> None:
        self.node = node
        self.op_type = node.op_type
        self.domain = node.domain
        self.name = node.name or ""
        self.opset = opset
        self.attrs = dict(attrs)
        self.input_types = tuple(input_types)
        self.input_shapes = tuple(input_shapes)
        self.output_types = tuple(output_types)
        self.output_shapes = tuple(output_shapes)
        self.implicit_inputs = tuple(implicit_inputs)
        self.provider = provider

    @property
    def num_inputs(self) -> int:
        """Number of explicit inputs (trailing omitted ones not counted)."""
        return len(self.input_types)

    @property
    def num_outputs(self) -> int:
        """Number of node outputs."""
        return len(self.output_types)

    def attr(self, name: str, default: Any = None) -> Any:
        """Return attribute ``name``, or ``default`` if absent and without schema default."""
        return self.attrs.get(name, default)

    def output_dtype(self, index: int = 0) -> Any:
        """Return the numpy dtype of output ``index`` (from static type inference).

        Raises:
            TypeError: the output's element type is unknown or has no numpy dtype.
        """
        from .dtypes import to_numpy

        t = self.output_types[index]
        if t is None:
            raise TypeError(f"{self.describe()}: the type of output {index} is unknown")
        return to_numpy(t)

    def allocate(self, index: int, shape: Sequence[int], dtype: Any = None) -> Any:
        """Return an uninitialized tensor for output ``index`` on the provider's device.

        Args:
            index: output position; its static dtype is used unless ``dtype``
                is given.
            shape: the run-time shape.
            dtype: numpy dtype to use instead.
        """
        allocator = self.provider.allocator() if self.provider is not None else HostAllocator()
        return allocator.allocate(shape, dtype if dtype is not None else self.output_dtype(index))

    def describe(self) -> str:
        """Return ``Op(domain, opset N) node 'name'`` for error messages."""
        domain = self.domain or "ai.onnx"
        return f"{self.op_type}({domain}, opset {self.opset}) node {self.name!r}"

    def __repr__(self) -> str:
        return f"NodeInfo({self.describe()})"
