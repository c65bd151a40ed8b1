"""The GPU backend's host side, with stand-ins for pycuda and cuBLAS: the
kernels compiled in chunks side by side, each launch finding its kernel's
module and packing its arguments by C type. (On a GPU the gpu-marked tests
of test_provider.py run the real thing.)"""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from typing import Any

import numpy as np
import pytest

from ortcore_cuda.kernels import all_kernels
from ortcore_cuda.kernels.spec import translation_unit


class _Module:
    def __init__(self, cubin: bytes) -> None:
        self.names = set(cubin.decode().split())
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def get_function(self, name: str) -> Any:
        assert name in self.names, f"{name} is not in this module"
        return lambda *args, **kw: self.calls.append((name, args))


def _fake_pycuda(compiled: list[tuple[str, str]]) -> dict[str, Any]:
    def compile(source: str, no_extern_c: bool, arch: str) -> bytes:
        assert no_extern_c
        time.sleep(0.05)  # as nvcc takes a while: the pool spreads the units
        compiled.append((arch, threading.current_thread().name))
        names = [
            line.split("void ")[1].split("(")[0]
            for line in source.splitlines()
            if line.startswith('extern "C" __global__ void ')
        ]
        return " ".join(names).encode()

    class _Context:
        def push(self) -> None:
            pass

    class _Device:
        def __init__(self, ordinal: int) -> None:
            self.ordinal = ordinal

        def retain_primary_context(self) -> _Context:
            return _Context()

        def compute_capability(self) -> tuple[int, int]:
            return (9, 0)

    driver = types.ModuleType("pycuda.driver")
    driver.init = lambda: None  # type: ignore[attr-defined]
    driver.Device = _Device  # type: ignore[attr-defined]
    driver.module_from_buffer = _Module  # type: ignore[attr-defined]
    compiler = types.ModuleType("pycuda.compiler")
    compiler.compile = compile  # type: ignore[attr-defined]
    package = types.ModuleType("pycuda")
    package.driver = driver  # type: ignore[attr-defined]
    package.compiler = compiler  # type: ignore[attr-defined]
    return {"pycuda": package, "pycuda.driver": driver, "pycuda.compiler": compiler}


def test_kernels_compile_in_chunks_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore_cuda import pycuda_backend

    compiled: list[tuple[str, str]] = []
    for name, module in _fake_pycuda(compiled).items():
        monkeypatch.setitem(sys.modules, name, module)
    lib = types.SimpleNamespace(
        cublasCreate_v2=lambda handle: 0, cublasGemmStridedBatchedEx=types.SimpleNamespace()
    )
    monkeypatch.setattr(pycuda_backend, "_load_cublas", lambda: lib)
    backend = pycuda_backend.PyCudaBackend(0)
    kernels = all_kernels()
    parts = pycuda_backend.chunks(kernels)
    assert len(parts) == pycuda_backend.CHUNKS
    assert [k.name for part in parts for k in part] == [k.name for k in kernels]
    assert len(compiled) == len(parts) and {a for a, _ in compiled} == {"sm_90"}
    if (os.cpu_count() or 1) > 1:
        assert len({t for _, t in compiled}) > 1  # side by side
    for part in parts:  # each unit stands alone: its kernels' helpers come with it
        assert all(f"void {k.name}(" in translation_unit(part) for k in part)
    kernel = next(k for k in kernels if k.name == "unary_relu_f64")
    backend.launch(kernel, 2, 64, (1234, 5678, 10), 0)
    module = backend.modules[backend._home[kernel.name]]
    ((name, args),) = module.calls
    assert name == "unary_relu_f64"
    assert [type(a) for a in args] == [np.uintp, np.uintp, np.int64]


def test_chunks_split_evenly() -> None:
    from ortcore_cuda.pycuda_backend import chunks

    assert [len(c) for c in chunks(list(range(10)), 4)] == [3, 3, 3, 1]  # type: ignore[arg-type]
    assert chunks([], 4) == []
