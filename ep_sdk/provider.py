"""The execution-provider base class and the capability types it answers with.

A provider is a subclass of :class:`ExecutionProvider`. The core creates one
instance per session with the user's options, asks it which nodes it takes
(:meth:`ExecutionProvider.get_capability`), builds kernels from its registry,
hands it fused groups to compile, and moves data to and from its device with
:meth:`ExecutionProvider.to_host` / :meth:`ExecutionProvider.from_host`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import onnx_ir as ir

from .device import Allocator, HostAllocator
from .kernel import Compute
from .registry import KernelDef, KernelRegistry

if TYPE_CHECKING:
    from .capability import GraphContext

__all__ = [
    "Capability",
    "Claim",
    "Device",
    "ExecutionProvider",
    "FusedGroup",
    "ProviderOptionError",
    "SessionConfig",
]


class ProviderOptionError(ValueError):
    """A provider was given an option it does not know or a bad value."""


@dataclass(frozen=True)
class Device:
    """Where a provider keeps its tensors.

    Attributes:
        type: ``"cpu"``, ``"cuda"``, or any name a provider chooses.
        id: device ordinal.
    """

    type: str = "cpu"
    id: int = 0

    @property
    def is_host(self) -> bool:
        """True for host (CPU) memory, which numpy can read directly."""
        return self.type == "cpu"

    def __str__(self) -> str:
        return f"{self.type}:{self.id}"


HOST_DEVICE = Device("cpu", 0)


@dataclass(frozen=True)
class Claim:
    """A provider's claim on graph nodes.

    A claim of one node with ``fused=False`` means "run it with the kernel my
    registry has". A claim with ``fused=True`` asks the core to hand the nodes
    to :meth:`ExecutionProvider.compile` as one group.
    """

    nodes: tuple[ir.Node, ...]
    fused: bool = False
    name: str = ""

    @classmethod
    def node(cls, node: ir.Node) -> Claim:
        """Claim a single node for the provider's kernel."""
        return cls((node,))

    @classmethod
    def group(cls, nodes: Sequence[ir.Node], name: str = "") -> Claim:
        """Claim ``nodes`` as one group to fuse and compile."""
        return cls(tuple(nodes), fused=True, name=name)


@dataclass
class Capability:
    """A provider's answer to ``get_capability``.

    Attributes:
        claims: what it takes.
        declined: for nodes it does not take, the reason (shown to users in
            ``session.get_partition()`` and in "no provider" errors).
    """

    claims: list[Claim] = field(default_factory=list)
    declined: dict[ir.Node, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FusedGroup:
    """A group of nodes a provider claimed for compilation.

    Attributes:
        name: unique name of the fused node.
        nodes: the nodes, in topological order.
        inputs: values the group reads from outside (graph inputs,
            initializers or other nodes' outputs), in call order.
        outputs: values the group produces that are read outside it, in
            the order the compiled function must return them.
        model: the group as a standalone ONNX model (``onnx.ModelProto``)
            with those inputs and outputs, for providers that hand the group
            to another runtime.
        opsets: the model's opset imports.
    """

    name: str
    nodes: tuple[ir.Node, ...]
    inputs: tuple[ir.Value, ...]
    outputs: tuple[ir.Value, ...]
    model: Any
    opsets: Mapping[str, int]


@dataclass(frozen=True)
class SessionConfig:
    """The parts of the session's options a provider may read."""

    intra_op_num_threads: int = 0
    config_entries: Mapping[str, str] = field(default_factory=dict)


class ExecutionProvider:
    """Base class of every execution provider.

    Subclasses set the class attributes and override what they support:

    * ``name``: onnxruntime-style name, e.g. ``"CPUExecutionProvider"``.
    * ``aliases``: short names users may type instead, e.g. ``("cpu",)``.
    * ``version``: the provider's version string.
    * ``device``: the :class:`Device` its tensors live on.
    * ``default_options``: every option it accepts, with its default value;
      an option not listed is refused with :class:`ProviderOptionError`.
    * ``priority``: default order when the user lists no providers (higher
      first); the CPU provider uses 0 and is always tried last.

    Required: a kernel registry (:meth:`kernel_registry`) or a
    :meth:`get_capability` that returns fused claims plus :meth:`compile`.
    Providers whose device is not the host must implement :meth:`to_host` and
    :meth:`from_host`.
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "0"
    device: Device = HOST_DEVICE
    default_options: ClassVar[Mapping[str, str]] = {}
    priority: ClassVar[int] = 100

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        config: SessionConfig | None = None,
    ) -> None:
        opts = {k: str(v) for k, v in (options or {}).items()}
        unknown = sorted(set(opts) - set(self.default_options))
        if unknown:
            known = ", ".join(sorted(self.default_options)) or "none"
            raise ProviderOptionError(
                f"{self.name}: unknown provider option(s) {', '.join(unknown)}; "
                f"known options: {known}"
            )
        self.options: dict[str, str] = {**self.default_options, **opts}
        self.config = config or SessionConfig()

    # -- discovery -------------------------------------------------------

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Return why the provider cannot run here (no device, missing
        library), or ``None`` if it can. Must be cheap: it runs for
        ``get_available_providers()``."""
        return None

    # -- kernels and capability -----------------------------------------

    def kernel_registry(self) -> KernelRegistry | None:
        """Return the provider's kernels (import heavy modules here, lazily)."""
        return None

    def registry(self) -> KernelRegistry | None:
        """Return the kernels this instance runs: :meth:`kernel_registry`
        plus the kernels given with :meth:`add_kernels`.

        The core always asks this, never :meth:`kernel_registry` directly;
        a provider that overrides :meth:`get_capability` should look nodes
        up here too, so that a session's custom operators are found.
        """
        extra: list[KernelDef] = getattr(self, "_extra_kernels", [])
        if not extra:
            return self.kernel_registry()
        merged: KernelRegistry | None = getattr(self, "_merged_registry", None)
        if merged is None:
            base = self.kernel_registry() or KernelRegistry()
            merged = base.with_kernels(extra)
            self._merged_registry = merged
        return merged

    def add_kernels(self, kernels: Iterable[KernelDef]) -> None:
        """Give this instance extra kernels (a session's custom operators).

        Only this instance sees them: the class's registry, which every
        session shares, is not changed.

        Raises:
            ValueError: a kernel overlaps one the provider already has.
        """
        extra: list[KernelDef] = [*getattr(self, "_extra_kernels", []), *kernels]
        base = self.kernel_registry() or KernelRegistry()
        self._merged_registry = base.with_kernels(extra)  # raises on overlap
        self._extra_kernels = extra

    def get_capability(self, graph: GraphContext) -> Capability:
        """Say which free nodes of ``graph`` the provider takes.

        The default claims every node its kernel registry covers, one by one,
        and declines the others with the registry's reason.
        """
        from .capability import claim_registered_nodes

        registry = self.registry()
        if registry is None:
            return Capability(declined={n: "provider has no kernels" for n in graph.nodes})
        return claim_registered_nodes(graph, registry)

    def compile(self, group: FusedGroup) -> Compute:
        """Compile a fused group into a compute function.

        The function takes ``group.inputs`` in order and returns values for
        ``group.outputs`` in order.
        """
        raise NotImplementedError(
            f"{self.name} claimed a fused group but does not implement compile()"
        )

    # -- compiled-artifact cache (optional) --------------------------------

    def serialize_compiled(self, group: FusedGroup, compiled: Compute) -> bytes | None:
        """Return ``compiled`` (what :meth:`compile` made of ``group``) as bytes
        for ortcore's on-disk cache, or ``None`` to not cache it (the default).

        The core keys each entry by the group's model bytes, this provider's
        name, version and options, and its device; an entry whose key differs
        in any part is never handed back to :meth:`load_compiled`.
        """
        return None

    def load_compiled(self, group: FusedGroup, data: bytes) -> Compute:
        """Rebuild the compute function of ``group`` from bytes that
        :meth:`serialize_compiled` returned, instead of compiling again."""
        raise NotImplementedError(f"{self.name} does not implement load_compiled()")

    # -- data movement ---------------------------------------------------

    def to_host(self, value: Any) -> np.ndarray:
        """Copy a tensor from this provider's device to a numpy array."""
        if self.device.is_host:
            return cast(np.ndarray, value)
        raise NotImplementedError(f"{self.name} does not implement to_host()")

    def from_host(self, array: np.ndarray) -> Any:
        """Copy a numpy array onto this provider's device."""
        if self.device.is_host:
            return array
        raise NotImplementedError(f"{self.name} does not implement from_host()")

    def allocator(self) -> Allocator:
        """Return the allocator of this provider's device.

        Host providers get :class:`~ep_sdk.HostAllocator` (``numpy.empty``);
        a device provider returns its own (see :class:`~ep_sdk.Allocator`).
        Kernels reach it through :meth:`NodeInfo.allocate <ep_sdk.NodeInfo.allocate>`.
        """
        if self.device.is_host:
            return HostAllocator()
        raise NotImplementedError(f"{self.name} does not implement allocator()")

    # -- passes and lifetime ---------------------------------------------

    def graph_passes(self) -> Sequence[Any]:
        """Extra graph passes (onnx-ir passes) to run on nodes it was assigned."""
        return ()

    def on_run_start(self, run_options: Any) -> None:
        """Called on the caller's thread before each run of a session that
        uses this provider (onnxruntime's ``OnRunStart``), with the run's
        ``RunOptions`` or ``None``. The core calls it only for providers that
        override it, so the default costs nothing."""

    def on_run_end(self, run_options: Any) -> None:
        """Called after each run (also one that failed) of a session that
        uses this provider; the counterpart of :meth:`on_run_start`."""

    def close(self) -> None:
        """Release device resources; called when the session is closed."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} on {self.device}>"
