"""Run the provider's CUDA kernels on the CPU: the same source, CUDA's execution model emulated.

The kernel sources (:mod:`ortcore_cuda.kernels`) are compiled with g++
against ``cuda_emu.h``, which defines what nvcc would (``threadIdx`` and
the other indices as thread-local variables, ``__shared__`` as storage the
block's threads share, ``__syncthreads()`` as a barrier, warp shuffles
through a per-warp exchange, ``__half`` with the GPU's rounding). A launch
(``cuda_emu.cpp``) runs each block with one OS thread per CUDA thread, so a
missing barrier or a race shows here as it would on the GPU, and a kernel
that reads or writes outside its buffers does so in host memory.

This is how the kernels are tested on machines without a GPU: what runs is
the kernel's own code, not a re-implementation of it. It is slow (threads
are created per block) and meant for tests of small shapes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..kernels.spec import SCALARS, Kernel, translation_unit

__all__ = ["EmulationError", "Emulator", "compiler"]

HERE = Path(__file__).resolve().parent
_CTYPES: dict[str, Any] = {
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}
_SCALARS = {c: _CTYPES[t.name] for c, t in SCALARS.items()}


class EmulationError(RuntimeError):
    """The emulation could not compile or launch a kernel."""


def compiler() -> str | None:
    """The C++ compiler the emulation uses (``$CXX``, else ``g++``), or ``None``."""
    return shutil.which(os.environ.get("CXX", "g++"))


def _trampoline(kernel: Kernel) -> str:
    """``extern "C" void emu_call_<name>(void** a)``: calls the kernel with
    each argument read from the slot ``a[i]`` points to."""
    args = ", ".join(f"*({p.ctype}*)a[{i}]" for i, p in enumerate(kernel.params))
    return f'extern "C" void emu_call_{kernel.name}(void** a) {{ {kernel.name}({args}); }}\n'


class Emulator:
    """The kernels compiled for the emulation, launched with :meth:`launch`.

    Args:
        kernels: the kernels to compile into one shared library.
        build_dir: where the library is kept (default: a folder of the
            system's temp dir); keyed by a hash of the sources, so a second
            emulator of the same kernels loads it without compiling.

    Raises:
        EmulationError: no C++ compiler, or the sources do not compile
            (the message has the compiler's output).
    """

    def __init__(self, kernels: Sequence[Kernel], build_dir: str | os.PathLike[str] | None = None):
        self.kernels = {k.name: k for k in kernels}
        source = translation_unit(list(self.kernels.values())) + "".join(
            _trampoline(k) for k in self.kernels.values()
        )
        runtime = (HERE / "cuda_emu.cpp").read_text()
        header = (HERE / "cuda_emu.h").read_text()
        digest = hashlib.sha256("\0".join((source, runtime, header)).encode()).hexdigest()[:24]
        folder = Path(build_dir or Path(tempfile.gettempdir()) / "ortcore-cuda-emu")
        folder.mkdir(parents=True, exist_ok=True)
        lib = folder / f"kernels-{digest}.so"
        if not lib.exists():
            self._compile(source, lib)
        self._lib = ctypes.CDLL(str(lib))
        self._lib.emu_launch.restype = ctypes.c_int
        self._lock = threading.Lock()

    @staticmethod
    def _compile(source: str, lib: Path) -> None:
        cxx = compiler()
        if cxx is None:
            raise EmulationError("no C++ compiler (g++ or $CXX) for the CUDA emulation")
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernels.cpp"
            src.write_text(source)
            out = Path(tmp) / lib.name
            cmd = [
                cxx,
                "-std=c++17",
                "-O1",
                "-shared",
                "-fPIC",
                "-pthread",
                "-DORTCORE_CUDA_EMU",
                f"-I{HERE}",
                str(src),
                str(HERE / "cuda_emu.cpp"),
                "-o",
                str(out),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise EmulationError(
                    f"the kernels do not compile for the emulation:\n{done.stderr}"
                )
            os.replace(out, lib)  # atomic: a concurrent reader sees all of it or nothing

    def launch(
        self,
        name: str,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        *args: Any,
    ) -> None:
        """Launch kernel ``name`` on ``grid`` x ``block`` threads, as
        ``kernel<<<grid, block>>>(args)``: numpy arrays pass as pointers to
        their data (an ``int`` for a pointer parameter is an address),
        numpy records as the struct they hold, numbers as the parameter's C
        type.

        Raises:
            EmulationError: an unknown kernel, wrong arguments, or a launch
                the emulation refuses (more than 1024 threads a block).
        """
        kernel = self.kernels.get(name)
        if kernel is None:
            raise EmulationError(f"no kernel {name!r} (have: {', '.join(sorted(self.kernels))})")
        if len(args) != len(kernel.params):
            raise EmulationError(f"{kernel.signature()} takes {len(kernel.params)} arguments")
        slots: list[Any] = []
        for p, a in zip(kernel.params, args):
            if p.is_pointer:
                if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
                    slots.append(ctypes.c_void_p(int(a)))  # an address (emulated device memory)
                    continue
                if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
                    raise EmulationError(
                        f"{name}: {p.name} must be an address or a C-contiguous numpy array"
                    )
                slots.append(ctypes.c_void_p(a.ctypes.data))
            elif kernel.struct(p.ctype) is not None:
                record = np.ascontiguousarray(a, dtype=kernel.struct(p.ctype).dtype)  # type: ignore[union-attr]
                slots.append(record)
            else:
                slots.append(_SCALARS[p.ctype](a))
        pointers = (ctypes.c_void_p * len(slots))(
            *[s.ctypes.data if isinstance(s, np.ndarray) else ctypes.addressof(s) for s in slots]
        )
        g = _dims(grid)
        b = _dims(block)
        fn = getattr(self._lib, f"emu_call_{name}")
        with self._lock:  # shared memory is one copy per kernel: one launch at a time
            status = self._lib.emu_launch(ctypes.cast(fn, ctypes.c_void_p), pointers, *g, *b)
        if status:
            raise EmulationError(f"{name}: the emulation refused the launch <<<{g}, {b}>>>")


def _dims(value: int | tuple[int, ...]) -> tuple[int, int, int]:
    v = (value,) if isinstance(value, int) else tuple(value)
    v = (*v, 1, 1, 1)[:3]
    return (int(v[0]), int(v[1]), int(v[2]))
