"""The execution-provider base class.

(The capability types it answers with, :class:`Capability`, :class:`Claim`
and :class:`FusedGroup`, live in ``ep_sdk.capability``, :class:`Device` in
``ep_sdk.device`` and :class:`SessionConfig` in ``ep_sdk.kernel``; all are
names of ``ep_sdk``. Importing them from this module, their place before SDK
1.0 settled, is deprecated since SDK 1.1 and warns; it stops working in 2.0.)

A provider is a subclass of :class:`ExecutionProvider`. The core creates one
instance per session with the user's options, asks it which nodes it takes
(:meth:`ExecutionProvider.get_capability`), builds kernels from its registry,
hands it fused groups to compile, and moves data to and from its device with
:meth:`ExecutionProvider.to_host` / :meth:`ExecutionProvider.from_host`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from . import capability as _capability
from . import kernel as _kernel
from ._deprecation import deprecated_names
from ._errors import ProviderOptionError
from .capability import GraphContext
from .compiled_context import Compatibility
from .device import HOST_DEVICE, Allocator, HostAllocator
from .hardware import EpDevice, HardwareDevice, HardwareDeviceType, host_cpu
from .kernel import Compute
from .registry import KernelDef, KernelRegistry

if TYPE_CHECKING:
    from .capability import Capability, FusedGroup
    from .device import Device
    from .kernel import SessionConfig

__all__ = ["RESERVED_ATTRIBUTES", "ExecutionProvider", "ProviderOptionError"]

RESERVED_ATTRIBUTES = frozenset({"provider_options", "session_config", "_ep_options", "_ep_config"})
"""Attributes of :class:`ExecutionProvider` a subclass may not define (SDK 1.1)."""

_ALIASES = {"options": "provider_options", "config": "session_config"}


class _SessionAlias:
    """``options`` / ``config``: the names SDK 1.1 set on each instance, kept
    as properties over the same slots as ``provider_options`` /
    ``session_config``. Assigning still works, as it did in 1.1 (it replaces
    the session's value for the SDK too)."""

    def __init__(self, slot: str, doc: str) -> None:
        self.slot = slot
        self.__doc__ = doc

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return getattr(instance, self.slot)

    def __set__(self, instance: Any, value: Any) -> None:
        setattr(instance, self.slot, value)


# Re-exported here before SDK 1.0 settled where they live; each is a name of
# ep_sdk (docs/provider-contract.md, "Deprecations").
__getattr__ = deprecated_names(
    __name__,
    dict.fromkeys(("Capability", "Claim", "Device", "FusedGroup", "SessionConfig"), "ep_sdk"),
    since="1.1",
    removed_in="2.0",
)


_warned_ignored: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_ignored(provider: str, option: str, why: str) -> None:
    """Warn that ``provider`` ignores ``option``, once per process and option."""
    with _warned_lock:
        if (provider, option) in _warned_ignored:
            return
        _warned_ignored.add((provider, option))
    warnings.warn(
        f"{provider}: provider option {option!r} is accepted and ignored: {why}",
        UserWarning,
        stacklevel=3,
    )


class ExecutionProvider:
    """Base class of every execution provider.

    Subclasses set the class attributes and override what they support:

    * ``name``: onnxruntime-style name, e.g. ``"CPUExecutionProvider"``.
    * ``aliases``: short names users may type instead, e.g. ``("cpu",)``.
    * ``version``: the provider's version string.
    * ``device``: the :class:`Device` its tensors live on.
    * ``default_options``: every option it accepts, with its default value;
      an option not listed is refused with :class:`ProviderOptionError`.
    * ``ignored_options``: options accepted for compatibility (onnxruntime's
      provider of that name takes them) that mean nothing to this provider,
      each with why: given one, the provider warns once per process and
      option and leaves it out of :attr:`options` (default: none). New in
      SDK 1.1.
    * ``priority``: the order of ``get_available_providers()`` and of
      ``get_ep_devices()`` (higher first); the CPU provider uses 0 and is
      listed last. A session given no providers uses the CPU provider only.
    * ``compile_receives_constants``: see below (default ``False``).
    * ``load_compiled_mapped``: see below (default ``False``).
    * ``vendor``: who makes the provider (onnxruntime's ``ep_vendor``;
      default ``""``). New in SDK 1.1.

    What ``__init__`` gives every instance (new names in SDK 1.1):

    * :attr:`provider_options` (also ``options``): the options this session
      gave the provider, every key of ``default_options`` with its value, as
      strings;
    * :attr:`session_config` (also ``config``): the session's
      :class:`~ep_sdk.SessionConfig` (threads, cache folder, host services).

    Both are properties over private slots, so the SDK's own code (the
    bridge, the artifact store, the cache keys) reads them however a
    subclass names its attributes. A subclass may define its own ``options``
    or ``config``: that name is then its own (a warning at class creation
    says so) and ``provider_options`` / ``session_config`` still reach the
    session's; ``provider_options`` and ``session_config`` themselves are
    reserved (a subclass defining them is a ``TypeError``).

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
    ignored_options: ClassVar[Mapping[str, str]] = {}
    priority: ClassVar[int] = 100
    vendor: ClassVar[str] = ""
    compile_receives_constants: ClassVar[bool] = False
    """``False`` (the default): a fused group's constants (initializers no
    feed may replace) are initializers of :attr:`FusedGroup.model`, and the
    compiled function receives only the other inputs, so the engine can fold
    and prepack weights. ``True``: they stay inputs of the model and of the
    compiled function, passed on every run."""

    load_compiled_mapped: ClassVar[bool] = False
    """``False`` (the default): :meth:`load_compiled` receives the cached
    entry as ``bytes``. ``True``: where the platform can map files, a
    writable ``memoryview`` of a private (copy-on-write) memory map of the
    entry instead, so a large artifact is neither read nor copied before the
    engine touches it (writes never reach the file; keep a reference to the
    view, or to an array over it, as long as the engine reads it)."""

    if TYPE_CHECKING:
        options: dict[str, str]
        config: SessionConfig
    else:
        options = _SessionAlias("_ep_options", "The provider options (``provider_options``).")
        config = _SessionAlias("_ep_config", "The session config (``session_config``).")

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        config: SessionConfig | None = None,
    ) -> None:
        opts = {k: str(v) for k, v in (options or {}).items()}
        for key in [k for k in opts if k in self.ignored_options and k not in self.default_options]:
            del opts[key]
            _warn_ignored(self.name, key, self.ignored_options[key])
        unknown = sorted(set(opts) - set(self.default_options))
        if unknown:
            known = ", ".join(sorted(self.default_options)) or "none"
            raise ProviderOptionError(
                f"{self.name}: unknown provider option(s) {', '.join(unknown)}; "
                f"known options: {known}"
            )
        self._ep_options: dict[str, str] = {**self.default_options, **opts}
        self._ep_config: SessionConfig = config or _kernel.SessionConfig()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a subclass that redefines :data:`RESERVED_ATTRIBUTES`; warn
        one that defines its own ``options`` or ``config`` (see the class
        docstring): before SDK 1.1 ``__init__`` replaced it without a word."""
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        taken = sorted(n for n in RESERVED_ATTRIBUTES if n in own)
        if taken:
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} defines {', '.join(taken)}, which "
                "ExecutionProvider reserves for the session's provider options and session "
                "config (ep_sdk 1.1): rename the subclass's attribute"
            )
        for alias, real in _ALIASES.items():
            if alias in own and not isinstance(own[alias], _SessionAlias):
                warnings.warn(
                    f"{cls.__module__}.{cls.__qualname__} defines its own {alias!r}: "
                    f"self.{alias} is now the subclass's; the session's value is "
                    f"self.{real}, which the SDK uses (ep_sdk 1.1; before it, "
                    f"ExecutionProvider.__init__ replaced {alias!r} on every instance)",
                    UserWarning,
                    stacklevel=2,
                )

    @property
    def provider_options(self) -> dict[str, str]:
        """The provider options of this session: every key of
        ``default_options``, with the value the user gave or the default,
        as strings (read it; new in SDK 1.1, ``options`` before)."""
        return self._ep_options

    @property
    def session_config(self) -> SessionConfig:
        """The session's :class:`~ep_sdk.SessionConfig` (new in SDK 1.1,
        ``config`` before)."""
        return self._ep_config

    # -- discovery -------------------------------------------------------

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Return why the provider cannot run here (no device, missing
        library), or ``None`` if it can. Must be cheap: it runs for
        ``get_available_providers()``."""
        return None

    @classmethod
    def ep_devices(cls) -> Sequence[EpDevice]:
        """The devices the provider can run on here (onnxruntime's
        ``OrtEpDevice`` list, see :mod:`ep_sdk.hardware`). New in SDK 1.1.

        The default: nothing when :meth:`unavailable_reason` says the
        provider cannot run; else one device derived from :attr:`device`:
        the host CPU (:func:`~ep_sdk.hardware.host_cpu`) for a host
        provider, a GPU (an NPU when the device type names one) of unknown
        vendor otherwise. Override it to list real devices, with the
        ``ep_options`` that select each. Keep it cheap and never let it
        raise for a missing device (return ``[]``): it runs for
        ``ortcore.get_ep_devices()`` and for every session that sets a
        selection policy. Whatever it raises is logged and the provider is
        listed without devices.
        """
        if cls.unavailable_reason() is not None:
            return []
        if cls.device.is_host:
            return [EpDevice(host_cpu())]
        kind = (
            HardwareDeviceType.NPU if "npu" in cls.device.type.lower() else HardwareDeviceType.GPU
        )
        return [EpDevice(HardwareDevice(kind, metadata={"Description": str(cls.device)}))]

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
            return _capability.Capability(
                declined={n: "provider has no kernels" for n in graph.nodes}
            )
        return claim_registered_nodes(graph, registry)

    def compile(self, group: FusedGroup) -> Compute:
        """Compile a fused group into a compute function.

        The function takes ``group.inputs`` in order and returns values for
        ``group.outputs`` in order. The group's constants are in
        ``group.model`` (and ``group.constants``), not among the inputs,
        unless :attr:`compile_receives_constants` is set. What the claim
        carried in :attr:`Claim.payload` is ``group.payload``.
        """
        raise NotImplementedError(
            f"{self.name} claimed a fused group but does not implement compile()"
        )

    # -- compiled-artifact cache (optional) --------------------------------

    def serialize_compiled(self, group: FusedGroup, compiled: Compute) -> bytes | None:
        """Return ``compiled`` (what :meth:`compile` made of ``group``) as bytes
        for ortcore's on-disk cache, or ``None`` to not cache it (the default).

        The core keys each entry by the group's structure (its model without
        the constants' bytes), a hash of every constant's bytes, this
        provider's name, version, options and device, what
        :meth:`compile_cache_key_parts` adds, and ortcore's version; an entry
        whose key differs in any part is never handed back to
        :meth:`load_compiled`. If this method raises, the core logs a warning
        and keeps the compiled group uncached.
        """
        return None

    def load_compiled(self, group: FusedGroup, data: bytes) -> Compute:
        """Rebuild the compute function of ``group`` from bytes that
        :meth:`serialize_compiled` returned, instead of compiling again
        (``data`` is a ``memoryview`` when :attr:`load_compiled_mapped` is set).

        If it raises (a stale or corrupt entry, an engine that refuses an
        artifact made elsewhere), the core logs a warning, calls
        :meth:`compile` instead and replaces the entry: a bad cache entry
        costs time, never the session.

        For a compiled model's ``com.microsoft::EPContext`` node (a model
        from ``ortcore.ModelCompiler`` or ``ep.context_enable``, and a saved
        session, ``ortcore.save_session``), ``data`` is what
        :meth:`serialize_compiled` returned when the model was compiled; the
        group's name is the node's ``partition_name``, its inputs and outputs
        (names, types, shapes, order) are those the artifact was compiled
        for, its ``nodes`` are the EPContext node alone, it has no
        ``constants`` and its ``payload`` is ``None``: rebuild from ``data``
        and the inputs and outputs only. There is no graph to fall back on:
        if it raises, the session fails with an error naming the node.
        """
        raise NotImplementedError(f"{self.name} does not implement load_compiled()")

    def compile_cache_key_parts(self, group: FusedGroup) -> Mapping[str, str]:
        """What else a compiled artifact of ``group`` depends on, for the
        cache key: typically the engine's version and the target it compiled
        for (a CPU model and its instruction sets, a GPU's compute
        capability). Default: nothing more. Called only when the session
        caches compiled groups; keep it cheap. If it raises, the core logs a
        warning and compiles the group without the cache.
        """
        return {}

    # -- compiled models (optional, SDK 1.1) ------------------------------

    def compiled_model_compatibility_info(self, groups: Sequence[FusedGroup]) -> str:
        """The string a compiled model stores for this provider (metadata key
        ``ep_compatibility_info.<name>``), stating what its compiled ``groups``
        need. Default: :func:`ep_sdk.compiled_context.default_compatibility_info`
        (name, version, options, device, :meth:`compile_cache_key_parts`, the
        SDK's version). New in SDK 1.1."""
        from .compiled_context import default_compatibility_info

        return default_compatibility_info(self, groups)

    def validate_compiled_model_compatibility_info(
        self, info: str, groups: Sequence[FusedGroup]
    ) -> Compatibility:
        """Judge a string :meth:`compiled_model_compatibility_info` stated when
        a model was compiled, for this device and version: OPTIMAL,
        PREFER_RECOMPILATION (the session warns) or UNSUPPORTED (the session
        fails), with a reason naming what differs. ``groups`` are the model's
        compiled groups of this provider (EPContext nodes). Default:
        :func:`ep_sdk.compiled_context.judge_compatibility_info`. New in SDK 1.1."""
        from .compiled_context import judge_compatibility_info

        return judge_compatibility_info(self, info, groups)

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
