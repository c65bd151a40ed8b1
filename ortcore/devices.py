"""onnxruntime's device and memory descriptions: ``OrtDevice``, ``OrtMemoryInfo``,
``OrtArenaCfg`` and their enums.

They carry the same names, numbers and methods as onnxruntime's, so code that
builds or reads them runs unchanged. ortcore's own allocators are the
providers' (see ``ep_sdk``): an arena configuration is accepted and recorded,
and a memory info describes where a session's inputs and outputs live.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ep_sdk import HOST_DEVICE, Device

from ._enum import OrtIntEnum
from .errors import InvalidArgument, InvalidArgumentTypeError

__all__ = [
    "ArenaExtendStrategy",
    "OrtAllocatorType",
    "OrtArenaCfg",
    "OrtDevice",
    "OrtDeviceMemoryType",
    "OrtDeviceVendorId",
    "OrtMemType",
    "OrtMemoryInfo",
    "OrtMemoryInfoDeviceType",
    "get_ort_device_type",
]


class OrtAllocatorType(OrtIntEnum):
    """Kind of allocator (onnxruntime's numbers)."""

    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtMemType(OrtIntEnum):
    """Which memory of a device a value uses (onnxruntime's numbers)."""

    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtMemoryInfoDeviceType(OrtIntEnum):
    """Device kind of an :class:`OrtMemoryInfo` (onnxruntime's numbers)."""

    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtDeviceMemoryType(OrtIntEnum):
    """Device memory kind (onnxruntime's numbers)."""

    DEFAULT = 0
    HOST_ACCESSIBLE = 5


class OrtDeviceVendorId(OrtIntEnum):
    """PCI vendor ids onnxruntime names."""

    NONE = 0
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


class ArenaExtendStrategy(OrtIntEnum):
    """How an arena grows (accepted; ortcore's providers own their allocators)."""

    kNextPowerOfTwo = 0
    kSameAsRequested = 1


# onnxruntime's OrtDevice type numbers; names as ortvalue/iobinding device_type strings.
_DEVICE_TYPES: dict[str, int] = {"cpu": 0, "gpu": 1, "cuda": 1, "fpga": 2, "npu": 3, "cann": 3}
_DEVICE_TYPES.update({"dml": 4, "webgpu": 1})
_DEVICE_NAMES: dict[int, str] = {0: "cpu", 1: "cuda", 2: "fpga", 3: "npu", 4: "dml"}


def get_ort_device_type(device_type: str) -> int:
    """onnxruntime's device type number for a device name (``"cpu"`` is 0, ``"cuda"`` 1).

    Raises:
        InvalidArgument: an unknown name.
    """
    number = _DEVICE_TYPES.get(str(device_type).lower())
    if number is None:
        raise InvalidArgument(f"Unsupported device type: {device_type}")
    return number


class OrtDevice:
    """A device as onnxruntime describes it (``onnxruntime.OrtDevice``).

    Build one with :meth:`make` (``OrtDevice.make("cpu", 0)``) or, as
    onnxruntime's C layer does, ``OrtDevice(device_type, mem_type, device_id)``
    or ``OrtDevice(device_type, mem_type, vendor_id, device_id)``.
    """

    __slots__ = ("_type", "_mem", "_vendor", "_id", "_name")
    _type: int
    _mem: int
    _vendor: int
    _id: int
    _name: str

    def __init__(self, device_type: Any = 0, mem_type: int = 0, *ids: int) -> None:
        if isinstance(device_type, OrtDevice):  # onnxruntime's wrapper takes a C device
            self._type, self._mem = device_type._type, device_type._mem
            self._vendor, self._id, self._name = (
                device_type._vendor,
                device_type._id,
                device_type._name,
            )
            return
        if len(ids) > 2:
            raise InvalidArgumentTypeError("OrtDevice takes at most 4 arguments")
        vendor, device_id = (0, ids[0] if ids else 0) if len(ids) < 2 else ids
        if isinstance(device_type, str):
            self._name = device_type.lower()
            device_type = get_ort_device_type(device_type)
        else:
            self._name = _DEVICE_NAMES.get(int(device_type), str(int(device_type)))
        self._type, self._mem = int(device_type), int(mem_type)
        self._vendor, self._id = int(vendor), int(device_id)

    @staticmethod
    def make(
        ort_device_name: str, device_id: int, vendor_id: int | OrtDeviceVendorId = -1
    ) -> OrtDevice:
        """The device named ``ort_device_name`` (``cpu``, ``cuda``, ...) number ``device_id``."""
        name = str(ort_device_name).lower()
        vendor = int(vendor_id)
        if vendor < 0:
            vendor = int(OrtDeviceVendorId.NVIDIA) if name == "cuda" else 0
        device = OrtDevice(get_ort_device_type(name), 0, vendor, int(device_id))
        device._name = name
        return device

    @staticmethod
    def cpu() -> int:
        """Type number of the CPU."""
        return 0

    @staticmethod
    def cuda() -> int:
        """Type number of CUDA devices (onnxruntime's GPU)."""
        return 1

    @staticmethod
    def gpu() -> int:
        """Type number of GPUs."""
        return 1

    @staticmethod
    def fpga() -> int:
        """Type number of FPGAs."""
        return 2

    @staticmethod
    def npu() -> int:
        """Type number of NPUs."""
        return 3

    @staticmethod
    def cann() -> int:
        """Type number of CANN devices (an NPU)."""
        return 3

    @staticmethod
    def dml() -> int:
        """Type number of DirectML devices."""
        return 4

    @staticmethod
    def webgpu() -> int:
        """Type number of WebGPU devices (a GPU)."""
        return 1

    @staticmethod
    def default_memory() -> int:
        """The default memory type."""
        return 0

    def device_id(self) -> int:
        """The device number."""
        return self._id

    def device_type(self) -> int:
        """The device type number (:meth:`cpu`, :meth:`cuda`, ...)."""
        return self._type

    def device_vendor_id(self) -> int:
        """The vendor id (0 when none)."""
        return self._vendor

    def vendor_id(self) -> int:
        """The vendor id (onnxruntime's C-layer spelling)."""
        return self._vendor

    def device_mem_type(self) -> int:
        """The memory type number."""
        return self._mem

    def mem_type(self) -> int:
        """The memory type number (onnxruntime's C-layer spelling)."""
        return self._mem

    def to_device(self) -> Device:
        """The :class:`ep_sdk.Device` this names (``cpu`` is the host)."""
        return HOST_DEVICE if self._type == 0 else Device(self._name, self._id)

    def _key(self) -> tuple[int, int, int, int]:
        return (self._type, self._mem, self._vendor, self._id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OrtDevice) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"OrtDevice({self._name!r}, id={self._id}, mem_type={self._mem})"


class OrtMemoryInfo:
    """Where a value's memory lives (``onnxruntime.OrtMemoryInfo``).

    ``OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)``
    is the host memory every session's inputs and outputs use by default.
    """

    __slots__ = (
        "name",
        "allocator_type",
        "device_id",
        "mem_type",
        "device_mem_type",
        "device_vendor_id",
        "device_type",
    )

    def __init__(
        self,
        name: str,
        alloc_type: OrtAllocatorType | int,
        device_id: int,
        mem_type: OrtMemType | int,
    ) -> None:
        self.name: str = str(name)
        self.allocator_type = OrtAllocatorType(int(alloc_type))
        self.device_id = int(device_id)
        self.mem_type = OrtMemType(int(mem_type))
        self.device_mem_type = OrtDeviceMemoryType.DEFAULT
        self.device_vendor_id = 0
        self.device_type = (
            OrtMemoryInfoDeviceType.CPU
            if self.name.lower().startswith("cpu")
            else OrtMemoryInfoDeviceType.GPU
        )

    @staticmethod
    def create_v2(
        name: str,
        device_type: OrtMemoryInfoDeviceType | int,
        vendor_id: int,
        device_id: int,
        mem_type: OrtDeviceMemoryType | int,
        alignment: int,
        allocator_type: OrtAllocatorType | int,
    ) -> OrtMemoryInfo:
        """A memory info with the device fields given explicitly
        (onnxruntime's ``CreateMemoryInfo_V2``)."""
        info = OrtMemoryInfo(name, allocator_type, device_id, OrtMemType.DEFAULT)
        info.device_type = OrtMemoryInfoDeviceType(int(device_type))
        info.device_vendor_id = int(vendor_id)
        info.device_mem_type = OrtDeviceMemoryType(int(mem_type))
        return info

    @staticmethod
    def of(device: Device) -> OrtMemoryInfo:
        """The memory info of values on ``device`` (host: onnxruntime's ``"Cpu"`` arena)."""
        if device.is_host:
            return OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)
        name = "Cuda" if device.type == "cuda" else device.type.capitalize()
        return OrtMemoryInfo(name, OrtAllocatorType.ORT_ARENA_ALLOCATOR, device.id, 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OrtMemoryInfo) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__
        )

    def __hash__(self) -> int:
        return hash((self.name, self.device_id, int(self.mem_type)))

    def __repr__(self) -> str:
        return (
            f"OrtMemoryInfo(name={self.name!r}, device_id={self.device_id}, "
            f"mem_type={self.mem_type.name}, allocator_type={self.allocator_type.name})"
        )


class OrtArenaCfg:
    """An arena configuration (``onnxruntime.OrtArenaCfg``): recorded, not used,
    since ortcore's providers manage their own memory.

    ``OrtArenaCfg(max_mem, arena_extend_strategy, initial_chunk_size_bytes,
    max_dead_bytes_per_chunk)`` or ``OrtArenaCfg({"max_mem": ..., ...})``.
    """

    _KEYS = (
        "max_mem",
        "arena_extend_strategy",
        "initial_chunk_size_bytes",
        "max_dead_bytes_per_chunk",
        "initial_growth_chunk_size_bytes",
        "max_power_of_two_extend_bytes",
    )

    def __init__(self, *args: Any) -> None:
        self.max_mem = 0
        self.arena_extend_strategy = -1
        self.initial_chunk_size_bytes = -1
        self.max_dead_bytes_per_chunk = -1
        self.initial_growth_chunk_size_bytes = -1
        self.max_power_of_two_extend_bytes = -1
        if len(args) == 1 and isinstance(args[0], Mapping):
            for key, value in args[0].items():
                if key not in self._KEYS:
                    raise InvalidArgument(
                        f"OrtArenaCfg: unknown key {key!r}; known keys: {', '.join(self._KEYS)}"
                    )
                setattr(self, key, int(value))
        elif len(args) == 4:
            for key, value in zip(self._KEYS, args):
                setattr(self, key, int(value))
        elif args:
            raise InvalidArgumentTypeError(
                "OrtArenaCfg takes (max_mem, arena_extend_strategy, initial_chunk_size_bytes, "
                "max_dead_bytes_per_chunk) or one dict"
            )

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)}" for k in self._KEYS)
        return f"OrtArenaCfg({fields})"
