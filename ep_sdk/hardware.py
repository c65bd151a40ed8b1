"""The hardware a provider can run on, as onnxruntime's device model describes it.

New in SDK 1.1. A provider lists its devices with the classmethod
:meth:`ExecutionProvider.ep_devices <ep_sdk.ExecutionProvider.ep_devices>`;
each is an :class:`EpDevice`: a :class:`HardwareDevice` (type, vendor, PCI
ids, metadata) plus what the provider says about it (``ep_metadata``) and the
provider options that make it use that device (``ep_options``). The host
shows them as onnxruntime's ``OrtEpDevice`` / ``OrtHardwareDevice``
(``ortcore.get_ep_devices()``) and hands ``ep_options`` to the provider when a
session selects the device.

Helpers for the common cases: :func:`host_cpu` describes the host CPU (vendor,
PCI vendor id, ISA features), :func:`cuda_devices` the NVIDIA devices the
driver sees (through ``libcuda`` with ctypes; no toolkit, no Python package).
Both are cheap and cached.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import functools
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "EpDevice",
    "HardwareDevice",
    "HardwareDeviceType",
    "VENDOR_IDS",
    "cuda_devices",
    "host_cpu",
]


class HardwareDeviceType(enum.IntEnum):
    """Kind of hardware device (onnxruntime's ``OrtHardwareDeviceType`` numbers)."""

    CPU = 0
    GPU = 1
    NPU = 2


VENDOR_IDS: Mapping[str, int] = MappingProxyType(
    {"Intel": 0x8086, "AMD": 0x1022, "NVIDIA": 0x10DE, "Qualcomm": 0x5143, "ARM": 0x13B5}
)
"""PCI vendor ids by vendor name (AMD's CPUs are 0x1022, as onnxruntime reports them)."""


def _frozen(pairs: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType({str(k): str(v) for k, v in (pairs or {}).items()})


@dataclass(frozen=True)
class HardwareDevice:
    """One piece of hardware (onnxruntime's ``OrtHardwareDevice``).

    Attributes:
        type: CPU, GPU or NPU.
        vendor: the hardware vendor's name (``"Intel"``, ``"NVIDIA"``).
        vendor_id: its PCI vendor id (0 when unknown).
        device_id: the PCI device id (0 when unknown, and for CPUs).
        metadata: string pairs; onnxruntime's keys where they apply
            (``"Description"``, ``"Discrete"`` = ``"1"`` for a discrete GPU),
            anything else the provider knows (a CPU's ISA features).
    """

    type: HardwareDeviceType
    vendor: str = ""
    vendor_id: int = 0
    device_id: int = 0
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", HardwareDeviceType(int(self.type)))
        object.__setattr__(self, "metadata", _frozen(self.metadata))


@dataclass(frozen=True)
class EpDevice:
    """A device a provider can run on, as the provider describes it.

    Attributes:
        device: the hardware.
        ep_metadata: what the provider says about the device (its own device
            name, a capability); the host adds ``"version"`` (the provider's) if absent.
        ep_options: provider options that make the provider use this device
            (``{"device_id": "1"}``); they reach the provider's constructor
            when a session selects the device, under options the user gives.
    """

    device: HardwareDevice
    ep_metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    ep_options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ep_metadata", _frozen(self.ep_metadata))
        object.__setattr__(self, "ep_options", _frozen(self.ep_options))


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _vendor_name(raw: str) -> str:
    low = raw.lower()
    if "intel" in low:
        return "Intel"
    if "amd" in low:
        return "AMD"
    if raw.strip() == "0x41" or "arm" in low:
        return "ARM"
    if raw.strip() == "0x51" or "qualcomm" in low:
        return "Qualcomm"
    return raw.strip()


def _cpu_features() -> list[str]:
    """The ISA features numpy detected at import (its dispatch table)."""
    import importlib

    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # 2.x, 1.x
        try:
            table = importlib.import_module(module).__cpu_features__
        except (ImportError, AttributeError):
            continue
        return sorted(name for name, present in table.items() if present)
    return []


@functools.cache
def host_cpu() -> HardwareDevice:
    """The host CPU: its vendor (from ``/proc/cpuinfo``, else ``platform``),
    PCI vendor id (Intel 0x8086, AMD 0x1022), and in ``metadata`` the
    architecture (``"Architecture"``), the model name (``"Description"``)
    and the ISA features numpy detected (``"Features"``, comma-separated).
    Computed once per process."""
    info = _cpuinfo()
    raw = info.get("vendor_id") or info.get("CPU implementer") or platform.processor()
    vendor = _vendor_name(raw)
    metadata = {"Architecture": platform.machine()}
    model = info.get("model name") or platform.processor()
    if model:
        metadata["Description"] = model
    features = _cpu_features()
    if features:
        metadata["Features"] = ",".join(features)
    return HardwareDevice(HardwareDeviceType.CPU, vendor, VENDOR_IDS.get(vendor, 0), 0, metadata)


# -- NVIDIA devices through the driver ------------------------------------------------

_ATTR_CC_MAJOR, _ATTR_CC_MINOR, _ATTR_INTEGRATED = 75, 76, 18


def _libcuda() -> ctypes.CDLL:
    first: OSError | None = None
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", ctypes.util.find_library("cuda")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            first = first or exc
    raise OSError(f"libcuda.so.1 cannot be loaded ({first})")


def _pci_device_id(bus_id: str) -> int:
    """The PCI device id Linux lists for a PCI bus id (0 when unknown)."""
    try:
        text = (Path("/sys/bus/pci/devices") / bus_id.lower() / "device").read_text()
        return int(text.strip(), 16)
    except (OSError, ValueError):
        return 0


@functools.cache
def cuda_devices() -> tuple[HardwareDevice, ...] | str:
    """The NVIDIA devices the driver sees, in ordinal order, or why there are
    none (no driver, no device). Never raises; computed once per process.

    Each device's ``metadata`` has ``"Description"`` (its name),
    ``"Discrete"`` (``"0"`` for an integrated GPU), ``"ComputeCapability"``
    (``"9.0"``), ``"PciBusId"`` and ``"CudaOrdinal"``.
    """
    try:
        lib = _libcuda()
    except OSError as exc:
        return f"no NVIDIA driver: {exc}"
    out: list[HardwareDevice] = []
    try:
        if lib.cuInit(0):
            return "the NVIDIA driver failed to initialize (cuInit)"
        count = ctypes.c_int()
        if lib.cuDeviceGetCount(ctypes.byref(count)):
            return "the NVIDIA driver cannot count devices"
        for ordinal in range(count.value):
            dev = ctypes.c_int()
            if lib.cuDeviceGet(ctypes.byref(dev), ordinal):
                continue
            name = ctypes.create_string_buffer(256)
            lib.cuDeviceGetName(name, 256, dev)
            values = {}
            for key, attr in (
                ("major", _ATTR_CC_MAJOR),
                ("minor", _ATTR_CC_MINOR),
                ("integrated", _ATTR_INTEGRATED),
            ):
                v = ctypes.c_int()
                lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev)
                values[key] = v.value
            bus = ctypes.create_string_buffer(64)
            lib.cuDeviceGetPCIBusId(bus, 64, dev)
            bus_id = bus.value.decode(errors="replace")
            metadata = {
                "Description": name.value.decode(errors="replace"),
                "Discrete": "0" if values["integrated"] else "1",
                "ComputeCapability": f"{values['major']}.{values['minor']}",
                "PciBusId": bus_id,
                "CudaOrdinal": str(ordinal),
            }
            out.append(
                HardwareDevice(
                    HardwareDeviceType.GPU,
                    "NVIDIA",
                    VENDOR_IDS["NVIDIA"],
                    _pci_device_id(bus_id),
                    metadata,
                )
            )
    except Exception as exc:  # a stub or broken driver
        return f"the NVIDIA driver answers no device: {exc}"
    return tuple(out) if out else "the NVIDIA driver sees no CUDA device"
