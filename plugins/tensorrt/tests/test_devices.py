"""The TensorRT provider's devices: the NVIDIA devices the driver lists that the
TensorRT module builds for, found without the CUDA provider; none (with the
provider's reason) where it cannot run. Runs without TensorRT or a GPU."""

from __future__ import annotations

import types

import pytest
from ep_sdk.hardware import HardwareDevice, HardwareDeviceType

from ortcore_tensorrt import _module
from ortcore_tensorrt import provider as trt_provider
from ortcore_tensorrt.provider import TensorrtExecutionProvider as P


def _gpu(ordinal: int, cc: str) -> HardwareDevice:
    meta = {"ComputeCapability": cc, "CudaOrdinal": str(ordinal), "Discrete": "1"}
    return HardwareDevice(HardwareDeviceType.GPU, "NVIDIA", 0x10DE, 0x2330 + ordinal, meta)


def test_devices_the_module_builds_for(monkeypatch: pytest.MonkeyPatch) -> None:
    rtx = types.SimpleNamespace(ComputeCapability=types.SimpleNamespace(SM80=1, SM90=2))
    monkeypatch.setattr(P, "unavailable_reason", classmethod(lambda cls: None))
    monkeypatch.setattr(_module, "find", lambda *a: _module.Found("tensorrt_rtx", "1.2"))
    monkeypatch.setattr(_module, "load", lambda name: rtx)
    monkeypatch.setattr(trt_provider, "cuda_devices", lambda: (_gpu(0, "7.0"), _gpu(1, "9.0")))
    (d,) = P.ep_devices()
    assert d.device.device_id == 0x2331 and d.ep_options == {"device_id": "1"}
    assert d.ep_metadata["trt_module"] == "tensorrt_rtx"


def test_nothing_where_tensorrt_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "unavailable_reason", classmethod(lambda cls: "no TensorRT module"))
    monkeypatch.setattr(trt_provider, "cuda_devices", lambda: (_gpu(0, "9.0"),))
    assert P.ep_devices() == []


def test_no_driver_lists_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "unavailable_reason", classmethod(lambda cls: None))
    monkeypatch.setattr(_module, "find", lambda *a: _module.Found("tensorrt", "10.0"))
    monkeypatch.setattr(_module, "load", lambda name: types.SimpleNamespace())
    monkeypatch.setattr(trt_provider, "cuda_devices", lambda: "no NVIDIA driver: libcuda")
    assert P.ep_devices() == []
