"""Build the Cython extension modules of ortcore-cpu.

Every extension is listed once in ``EXTENSIONS``; they are built in one loop
with the same flags. OpenMP (``-fopenmp``) is used when the compiler accepts
it, so ``prange`` loops run on several threads; without it they run serially.
The modules of ``ISA_BUILDS`` are builds of another module's source for
newer CPUs, with more flags; each is built only where the compiler accepts
its flags (x86-64 gcc and clang), and chosen at run time only on a CPU that
runs it (``ortcore_cpu.kernels._isa``).
The generated ``.c`` files stay out of the wheel (pyproject.toml and
``BuildPyWithoutC`` below) and out of the sdist (MANIFEST.in).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

# module name -> .pyx source, relative to this file
EXTENSIONS: dict[str, str] = {
    "ortcore_cpu._ext.conv": "ortcore_cpu/_ext/conv.pyx",
    "ortcore_cpu._ext.conv_avx2": "ortcore_cpu/_ext/conv_avx2.pyx",
    "ortcore_cpu._ext.conv_avx512": "ortcore_cpu/_ext/conv_avx512.pyx",
    "ortcore_cpu._ext.pool": "ortcore_cpu/_ext/pool.pyx",
    "ortcore_cpu._ext.pool_avx2": "ortcore_cpu/_ext/pool_avx2.pyx",
    "ortcore_cpu._ext.pool_avx512": "ortcore_cpu/_ext/pool_avx512.pyx",
    "ortcore_cpu._ext.gemm": "ortcore_cpu/_ext/gemm.pyx",
    "ortcore_cpu._ext.gemm_avx2": "ortcore_cpu/_ext/gemm_avx2.pyx",
    "ortcore_cpu._ext.gemm_avx512": "ortcore_cpu/_ext/gemm_avx512.pyx",
    "ortcore_cpu._ext.elementwise": "ortcore_cpu/_ext/elementwise.pyx",
    "ortcore_cpu._ext.activation": "ortcore_cpu/_ext/activation.pyx",
    "ortcore_cpu._ext.activation_avx2": "ortcore_cpu/_ext/activation_avx2.pyx",
    "ortcore_cpu._ext.activation_avx512": "ortcore_cpu/_ext/activation_avx512.pyx",
    "ortcore_cpu._ext.rowwise": "ortcore_cpu/_ext/rowwise.pyx",
    "ortcore_cpu._ext.movement": "ortcore_cpu/_ext/movement.pyx",
    "ortcore_cpu._ext.resize": "ortcore_cpu/_ext/resize.pyx",
    "ortcore_cpu._ext.winograd": "ortcore_cpu/_ext/winograd.pyx",
    "ortcore_cpu._ext.blas_pool": "ortcore_cpu/_ext/blas_pool.pyx",
}

NEEDS_OPENMP = {"ortcore_cpu._ext.blas_pool"}
"""Modules that call the OpenMP runtime itself: built only with OpenMP."""

# module of EXTENSIONS -> its extra compiler flags: the activation kernel is
# 3-5x faster with FMA and wider vectors than on the SSE2 baseline; the
# depthwise convolution and pooling loops 2-3x; the packed GEMM 3x and 6x.
_AVX2 = ["-mavx2", "-mfma"]
_AVX512 = ["-mavx512f", "-mavx2", "-mfma", "-mprefer-vector-width=512"]
ISA_BUILDS: dict[str, list[str]] = {
    f"ortcore_cpu._ext.{family}_{isa}": flags
    for family in ("activation", "conv", "pool", "gemm")
    for isa, flags in (("avx2", _AVX2), ("avx512", _AVX512))
}


def _compiles(flags: list[str], src: str) -> bool:
    """Whether the C compiler builds and links ``src`` with ``flags``."""
    if sys.platform == "win32":
        return False
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "t.c")
        with open(c_file, "w") as f:
            f.write(src)
        cmd = [cc, *flags, c_file, "-o", os.path.join(tmp, "t")]
        try:
            return subprocess.run(cmd, capture_output=True, check=False).returncode == 0
        except OSError:
            return False


def _openmp_flags() -> list[str]:
    """Return ``["-fopenmp"]`` if the C compiler builds and links with it."""
    if os.environ.get("ORTCORE_CPU_NO_OPENMP"):
        return []
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() < 0;}\n"
    return ["-fopenmp"] if _compiles(["-fopenmp"], src) else []


def _extensions() -> list[Extension]:
    omp = _openmp_flags()
    # -fno-trapping-math lets the compiler vectorize float selects, -fno-math-errno
    # square roots (no result changes: only errno is not set).
    compile_args = ["-O3", "-fno-trapping-math", "-fno-math-errno", *omp]
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    isa_ok = {name: _compiles(flags, "int main(void){return 0;}\n")
              for name, flags in ISA_BUILDS.items()}  # fmt: skip
    return [
        Extension(
            name,
            [source],
            include_dirs=[np.get_include()],
            define_macros=macros,
            extra_compile_args=[*compile_args, *ISA_BUILDS.get(name, [])],
            extra_link_args=omp,
        )
        for name, source in EXTENSIONS.items()
        if isa_ok.get(name, True) and (omp or name not in NEEDS_OPENMP)
    ]


class BuildPyWithoutC(build_py):
    """``build_py`` that leaves no generated ``.c`` file in the build folder.

    pyproject.toml already excludes them from the package data, but a build
    folder left by an older build may still hold copies, and the wheel ships
    whatever the build folder holds.
    """

    def run(self) -> None:
        super().run()
        for stale in Path(self.build_lib, "ortcore_cpu").rglob("*.c"):
            stale.unlink()


setup(
    cmdclass={"build_py": BuildPyWithoutC},
    ext_modules=cythonize(
        _extensions(),
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    ),
)
