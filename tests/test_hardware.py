"""ep_sdk.hardware: the host CPU's description, NVIDIA devices through the driver,
the device descriptions a provider returns."""

from __future__ import annotations

import dataclasses
import platform

import pytest

import ep_sdk
from ep_sdk import hardware
from ep_sdk.hardware import EpDevice, HardwareDevice, HardwareDeviceType, host_cpu


def test_host_cpu_names_vendor_and_features() -> None:
    cpu = host_cpu()
    assert cpu.type == HardwareDeviceType.CPU and cpu.device_id == 0
    assert cpu.metadata["Architecture"] == platform.machine()
    if cpu.vendor in hardware.VENDOR_IDS:
        assert cpu.vendor_id == hardware.VENDOR_IDS[cpu.vendor]
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as table
    except ImportError:
        pytest.skip("numpy without its CPU feature table")
    assert cpu.metadata["Features"].split(",") == sorted(k for k, v in table.items() if v)
    assert host_cpu() is cpu  # computed once


@pytest.mark.parametrize(
    ("raw", "vendor"),
    [("GenuineIntel", "Intel"), ("AuthenticAMD", "AMD"), ("0x41", "ARM"), ("Odd", "Odd")],
)
def test_cpu_vendor_names(raw: str, vendor: str) -> None:
    assert hardware._vendor_name(raw) == vendor


def test_descriptions_are_frozen_and_typed() -> None:
    hw = HardwareDevice(1, "NVIDIA", 0x10DE, 7, {"Discrete": "1"})  # type: ignore[arg-type]
    assert hw.type is HardwareDeviceType.GPU
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.vendor = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        hw.metadata["Discrete"] = "0"  # type: ignore[index]
    d = EpDevice(hw, ep_options={"device_id": 3})  # type: ignore[dict-item]
    assert d.ep_options == {"device_id": "3"} and ep_sdk.EpDevice is EpDevice


def test_cuda_devices_without_a_driver_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    hardware.cuda_devices.cache_clear()
    monkeypatch.setattr(hardware, "_libcuda", lambda: (_ for _ in ()).throw(OSError("absent")))
    try:
        assert hardware.cuda_devices() == "no NVIDIA driver: absent"
    finally:
        hardware.cuda_devices.cache_clear()
