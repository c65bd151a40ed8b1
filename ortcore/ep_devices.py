"""onnxruntime's device model: ``OrtEpDevice``, ``OrtHardwareDevice`` and
``get_ep_devices()``, and what a session reports of its assignment
(``OrtEpAssignedSubgraph``, ``OrtEpAssignedNode``).

Each available provider lists the devices it can run on through its
``ep_devices()`` classmethod (``ep_sdk.hardware``); this module wraps them
in onnxruntime's read-only classes, once per provider class, so that
``get_ep_devices()`` hands back the same objects on every call (as
onnxruntime does) and a device picked from the list can be passed to
``SessionOptions.add_provider_for_devices`` or returned by a selection
delegate. A provider whose ``ep_devices()`` raises or returns something else
is logged on ``ortcore.plugins`` and listed without devices
(:func:`device_errors` says why); listing never fails.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from ep_sdk import Device, EpDevice, ExecutionProvider
from ep_sdk.hardware import HardwareDevice

from ._enum import OrtIntEnum
from .devices import OrtDeviceMemoryType, OrtMemoryInfo
from .errors import Fail, InvalidArgument
from .plugins import PluginManager, ProviderEntry, default_manager, describe_error

__all__ = [
    "OrtEpAssignedNode",
    "OrtEpAssignedSubgraph",
    "OrtDeviceEpIncompatibilityReason",
    "OrtEpDevice",
    "OrtExecutionProviderDevicePolicy",
    "OrtHardwareDevice",
    "OrtHardwareDeviceType",
    "RECORD_ASSIGNMENT",
    "assignment_info",
    "device_errors",
    "devices_of",
    "get_ep_devices",
    "get_hardware_device_ep_incompatibility_details",
    "get_hardware_devices",
]

log = logging.getLogger("ortcore.plugins")

RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"
"""The session config entry that must be ``"1"`` for :func:`assignment_info`."""


class OrtHardwareDeviceType(OrtIntEnum):
    """Kind of hardware device (onnxruntime's numbers)."""

    CPU = 0
    GPU = 1
    NPU = 2


class OrtExecutionProviderDevicePolicy(OrtIntEnum):
    """How a session picks providers by device (onnxruntime's numbers;
    ``docs/devices.md`` says what each one selects)."""

    DEFAULT = 0
    PREFER_CPU = 1
    PREFER_NPU = 2
    PREFER_GPU = 3
    MAX_PERFORMANCE = 4
    MAX_EFFICIENCY = 5
    MIN_OVERALL_POWER = 6


class OrtDeviceEpIncompatibilityReason(OrtIntEnum):
    """Why a provider cannot use a hardware device: bits of the
    ``reasons_bitmask`` :func:`get_hardware_device_ep_incompatibility_details`
    answers (onnxruntime's numbers)."""

    NONE = 0
    DRIVER_INCOMPATIBLE = 1
    DEVICE_INCOMPATIBLE = 2
    MISSING_DEPENDENCY = 4
    UNKNOWN = -2147483648


def _no_constructor(cls: type) -> NoReturn:
    raise TypeError(f"ortcore.{cls.__name__}: No constructor defined!")


class OrtHardwareDevice:
    """A hardware device (``onnxruntime.OrtHardwareDevice``): read-only;
    obtained from :attr:`OrtEpDevice.device`."""

    __slots__ = ("_hw",)
    _hw: HardwareDevice

    def __init__(self) -> None:
        _no_constructor(type(self))

    @classmethod
    def _of(cls, hw: HardwareDevice) -> OrtHardwareDevice:
        self = object.__new__(cls)
        self._hw = hw
        return self

    @property
    def type(self) -> OrtHardwareDeviceType:
        """CPU, GPU or NPU."""
        return OrtHardwareDeviceType(int(self._hw.type))

    @property
    def vendor(self) -> str:
        """The hardware vendor's name."""
        return self._hw.vendor

    @property
    def vendor_id(self) -> int:
        """The PCI vendor id (0 when unknown)."""
        return self._hw.vendor_id

    @property
    def device_id(self) -> int:
        """The PCI device id (0 when unknown)."""
        return self._hw.device_id

    @property
    def metadata(self) -> dict[str, str]:
        """String pairs describing the device (a new dict on each call)."""
        return dict(self._hw.metadata)

    def __repr__(self) -> str:
        return (
            f"<OrtHardwareDevice {self.type.name} vendor={self.vendor!r} "
            f"vendor_id={self.vendor_id:#06x} device_id={self.device_id:#06x}>"
        )


class OrtEpDevice:
    """A device a provider can run on (``onnxruntime.OrtEpDevice``): read-only;
    listed by :func:`get_ep_devices`."""

    __slots__ = ("_name", "_vendor", "_ep", "_device", "_cls")
    _name: str
    _vendor: str
    _ep: EpDevice
    _device: OrtHardwareDevice
    _cls: type[ExecutionProvider]

    def __init__(self) -> None:
        _no_constructor(type(self))

    @classmethod
    def _of(cls, provider: type[ExecutionProvider], ep: EpDevice) -> OrtEpDevice:
        self = object.__new__(cls)
        self._name = str(provider.name)
        self._vendor = str(getattr(provider, "vendor", "") or "")
        metadata = dict(ep.ep_metadata)
        metadata.setdefault("version", str(provider.version))
        self._ep = EpDevice(ep.device, metadata, ep.ep_options)
        self._device = OrtHardwareDevice._of(ep.device)
        self._cls = provider
        return self

    @property
    def ep_name(self) -> str:
        """The provider's name (``"CPUExecutionProvider"``)."""
        return self._name

    @property
    def ep_vendor(self) -> str:
        """Who makes the provider (its ``vendor`` attribute)."""
        return self._vendor

    @property
    def ep_metadata(self) -> dict[str, str]:
        """What the provider says about the device (``"version"`` at least)."""
        return dict(self._ep.ep_metadata)

    @property
    def ep_options(self) -> dict[str, str]:
        """The provider options that make it use this device."""
        return dict(self._ep.ep_options)

    @property
    def device(self) -> OrtHardwareDevice:
        """The hardware device."""
        return self._device

    def memory_info(self, mem_type: OrtDeviceMemoryType | int) -> OrtMemoryInfo | None:
        """The memory info of the provider's device memory of kind ``mem_type``:
        for a provider whose tensors live off the host, its ``DEFAULT``
        memory; ``None`` otherwise (as onnxruntime answers for its CPU provider)."""
        kind = OrtDeviceMemoryType(int(mem_type))
        device = self._cls.device
        if device.is_host or kind != OrtDeviceMemoryType.DEFAULT:
            return None
        ordinal = self._ep.ep_options.get("device_id", "")
        if ordinal.isdigit():  # the device this entry selects, not the class's default
            device = Device(device.type, int(ordinal))
        return OrtMemoryInfo.of(device)

    def __repr__(self) -> str:
        return f"<OrtEpDevice {self._name} on {self._device!r}>"


# Wrapped devices by provider class, so every listing hands back the same objects.
_cache: dict[type[ExecutionProvider], tuple[OrtEpDevice, ...]] = {}
_errors: dict[str, str] = {}
_lock = threading.Lock()


def devices_of(entry: ProviderEntry) -> tuple[OrtEpDevice, ...]:
    """The devices of one installed provider (none for an unavailable one),
    computed once per provider class. Never raises: a provider whose
    ``ep_devices()`` fails is logged and has none."""
    cls = entry.cls
    if cls is None or not entry.available:
        return ()
    with _lock:
        found = _cache.get(cls)
        if found is not None:
            return found
        try:
            listed = list(cls.ep_devices())
            bad = [d for d in listed if not isinstance(d, EpDevice)]
            if bad:
                raise TypeError(
                    f"ep_devices() must return ep_sdk.EpDevice objects, got {type(bad[0]).__name__}"
                )
            found = tuple(OrtEpDevice._of(cls, d) for d in listed)
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:  # the plugin's fault: listed without devices
            reason = f"ep_devices() failed: {describe_error(exc)}"
            log.warning("ortcore provider %s (plugin %s): %s", entry.name, entry.plugin, reason)
            _errors[entry.name] = reason
            found = ()
        _cache[cls] = found
        return found


def device_errors() -> dict[str, str]:
    """Providers whose ``ep_devices()`` failed, with the reason."""
    with _lock:
        return dict(_errors)


def get_ep_devices(manager: PluginManager | None = None) -> list[OrtEpDevice]:
    """Every device of every available provider (onnxruntime's
    ``get_ep_devices``), providers in default priority order (the CPU
    provider's last). Imports every plugin."""
    out: list[OrtEpDevice] = []
    for entry in (manager or default_manager()).available():
        out.extend(devices_of(entry))
    return out


def _hw_key(hw: HardwareDevice) -> tuple[int, str, int, int]:
    # The metadata is left out: two providers describing one CPU may list
    # different details of it.
    return (int(hw.type), hw.vendor, hw.vendor_id, hw.device_id)


def get_hardware_devices(manager: PluginManager | None = None) -> list[OrtHardwareDevice]:
    """The hardware the available providers run on, each device once
    (onnxruntime's ``get_hardware_devices``): the :attr:`OrtEpDevice.device`
    objects of :func:`get_ep_devices`, in its order, without repeats."""
    seen: set[tuple[int, str, int, int]] = set()
    out: list[OrtHardwareDevice] = []
    for ep_device in get_ep_devices(manager):
        key = _hw_key(ep_device.device._hw)
        if key not in seen:
            seen.add(key)
            out.append(ep_device.device)
    return out


def get_hardware_device_ep_incompatibility_details(
    ep_name: str, device: OrtHardwareDevice, manager: PluginManager | None = None
) -> dict[str, Any]:
    """Whether provider ``ep_name`` can use ``device`` (onnxruntime's
    ``get_hardware_device_ep_incompatibility_details``): a dict with
    ``reasons_bitmask`` (:class:`OrtDeviceEpIncompatibilityReason` bits, 0
    when it can), ``notes`` (a sentence, or ``None``) and ``error_code``
    (always 0: ortcore's providers have no codes of their own).

    A provider that lists the device among its :func:`get_ep_devices` can
    use it; an installed provider that is unavailable on this machine
    answers ``MISSING_DEPENDENCY`` with its reason; any other device is
    ``DEVICE_INCOMPATIBLE``.

    Raises:
        TypeError: ``device`` is not an :class:`OrtHardwareDevice`.
        InvalidArgument: no provider is installed under ``ep_name``
            (onnxruntime's words).
    """
    if not isinstance(device, OrtHardwareDevice):
        raise TypeError(
            "get_hardware_device_ep_incompatibility_details: device must be an "
            f"OrtHardwareDevice, got {type(device).__name__}"
        )
    manager = manager or default_manager()
    name = str(ep_name)
    try:
        entry = manager.resolve(name, available=False) if name else None
    except InvalidArgument:
        entry = None
    if entry is None:
        raise InvalidArgument(f"No valid factory found for execution provider '{name}'.")
    if not entry.available:
        return {
            "reasons_bitmask": int(OrtDeviceEpIncompatibilityReason.MISSING_DEPENDENCY),
            "notes": f"{entry.name} is unavailable on this machine: {entry.reason}",
            "error_code": 0,
        }
    key = _hw_key(device._hw)
    if any(_hw_key(d.device._hw) == key for d in devices_of(entry)):
        return {"reasons_bitmask": 0, "notes": None, "error_code": 0}
    return {
        "reasons_bitmask": int(OrtDeviceEpIncompatibilityReason.DEVICE_INCOMPATIBLE),
        "notes": f"{entry.name} does not run on this {device.type.name} device",
        "error_code": 0,
    }


class OrtEpAssignedNode:
    """A node as :meth:`InferenceSession.get_provider_graph_assignment_info` lists it."""

    __slots__ = ("name", "domain", "op_type")

    def __init__(self, name: str, domain: str, op_type: str) -> None:
        self.name = name
        self.domain = domain
        self.op_type = op_type

    def __repr__(self) -> str:
        return (
            f"OrtEpAssignedNode(name={self.name!r}, domain={self.domain!r}, "
            f"op_type={self.op_type!r})"
        )


class OrtEpAssignedSubgraph:
    """Nodes one provider runs together: a fused group, or one node a
    provider runs with its own kernel (as onnxruntime lists its CPU provider's)."""

    __slots__ = ("ep_name", "_nodes")

    def __init__(self, ep_name: str, nodes: Sequence[OrtEpAssignedNode]) -> None:
        self.ep_name = ep_name
        self._nodes = list(nodes)

    def get_nodes(self) -> list[OrtEpAssignedNode]:
        """The subgraph's nodes."""
        return list(self._nodes)

    def __repr__(self) -> str:
        return f"OrtEpAssignedSubgraph(ep_name={self.ep_name!r}, nodes={len(self._nodes)})"


def assignment_info(
    records: Sequence[Any], config: Mapping[str, str]
) -> list[OrtEpAssignedSubgraph]:
    """The subgraphs of a session's partition (its node records, in order):
    one per fused group, one per node run by a kernel.

    Raises:
        Fail: the session was not created with ``session.record_ep_graph_assignment_info``
            = ``"1"`` (onnxruntime's message).
    """
    if config.get(RECORD_ASSIGNMENT) != "1":
        raise Fail(
            f"Session configuration entry '{RECORD_ASSIGNMENT}' must be set to \"1\" to "
            "retrieve EP graph assignment information."
        )
    # (provider, nodes) in the order of each subgraph's first node; a group's list fills up.
    out: list[tuple[str, list[OrtEpAssignedNode]]] = []
    groups: dict[tuple[str, str, str], list[OrtEpAssignedNode]] = {}
    for r in records:
        node = OrtEpAssignedNode(r.node, r.domain, r.op_type)
        if not r.group:
            out.append((r.provider, [node]))
            continue
        key = (r.graph, r.provider, r.group)
        if key not in groups:
            groups[key] = []
            out.append((r.provider, groups[key]))
        groups[key].append(node)
    return [OrtEpAssignedSubgraph(name, nodes) for name, nodes in out]


class SessionDeviceInfo:
    """The device methods of :class:`~ortcore.InferenceSession`."""

    def get_provider_graph_assignment_info(self) -> list[OrtEpAssignedSubgraph]:
        """The subgraphs each provider was assigned and their nodes: one
        subgraph per fused group, one per node a provider runs with a kernel.

        Raises:
            Fail: the session was created without the config entry
                ``session.record_ep_graph_assignment_info`` = ``"1"``.
        """
        session: Any = self
        config = session.get_session_options().config_entries
        return assignment_info(session.get_partition().nodes, config)

    def get_input_epdevices(self) -> list[OrtEpDevice | None]:
        """Per input, the device it is read from: the host, so the CPU
        provider's device (``None`` where no CPU provider is installed)."""
        session: Any = self
        try:  # only the CPU provider's plugin: no other is imported for this
            entry = session._manager.resolve("CPUExecutionProvider")
        except InvalidArgument:
            return [None for _ in session.get_inputs()]
        host = next(iter(devices_of(entry)), None)
        return [host for _ in session.get_inputs()]
