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

The build runs on every core this process may use (``ORTCORE_CPU_BUILD_JOBS``
sets another number): Cython translates the sources in parallel, then the C
compiler builds the extensions in parallel, the longest first, and each one
built is reported on stderr (which extension, how many of how many, the time
since the compile began). pip shows that report only with ``pip install -v``.

A generated ``.c`` file is reused when this Cython wrote it after the last
change to this package's Cython and C sources and to this file
(``_translate``); Cython itself would translate again whenever its own
``.pxd`` files (``libc``, ``openmp``) or numpy's are newer than the ``.c``,
and they are, in every fresh build environment pip creates, so each install
of the checkout (each tox environment) compiled everything again. setuptools
then skips the extensions whose built module is newer than their ``.c`` in
``build/``. Delete the ``.c`` files to translate again, ``build/`` to compile
again.
Debug information is not generated (``-g0``): the Python build's ``-g`` made
gcc a quarter slower and the modules six times larger, for the same machine
code (the ``.text`` sections are byte for byte the same).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import Cython
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
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
    "ortcore_cpu._ext.qgemm": "ortcore_cpu/_ext/qgemm.pyx",
    "ortcore_cpu._ext.qgemm_avx2": "ortcore_cpu/_ext/qgemm_avx2.pyx",
    "ortcore_cpu._ext.qgemm_avxvnni": "ortcore_cpu/_ext/qgemm_avxvnni.pyx",
    "ortcore_cpu._ext.qgemm_avx512": "ortcore_cpu/_ext/qgemm_avx512.pyx",
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
# The 8-bit GEMM: its tiles are vpdpbusd (AVX-512 VNNI, AVX-VNNI) or
# vpmaddwd (AVX2); float results must round as numpy's separate multiply
# and add do, so no build contracts them into FMAs (-ffp-contract=off).
_NO_FMA_CONTRACT = ["-ffp-contract=off"]
ISA_BUILDS.update(
    {
        "ortcore_cpu._ext.qgemm_avx2": [*_AVX2, *_NO_FMA_CONTRACT],
        "ortcore_cpu._ext.qgemm_avxvnni": [*_AVX2, "-mavxvnni", *_NO_FMA_CONTRACT],
        "ortcore_cpu._ext.qgemm_avx512": [
            *_AVX512, "-mavx512bw", "-mavx512vl", "-mavx512vnni", *_NO_FMA_CONTRACT,
        ],
    }
)
EXTRA_FLAGS: dict[str, list[str]] = {"ortcore_cpu._ext.qgemm": _NO_FMA_CONTRACT}
"""Flags of a module that is not a per-CPU build."""


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
    compile_args = ["-O3", "-fno-trapping-math", "-fno-math-errno", "-g0", *omp]
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    isa_ok = {name: _compiles(flags, "int main(void){return 0;}\n")
              for name, flags in ISA_BUILDS.items()}  # fmt: skip
    return [
        Extension(
            name,
            [source],
            include_dirs=[np.get_include()],
            define_macros=macros,
            extra_compile_args=[
                *compile_args, *ISA_BUILDS.get(name, []), *EXTRA_FLAGS.get(name, [])
            ],
            extra_link_args=omp,
        )
        for name, source in EXTENSIONS.items()
        if isa_ok.get(name, True) and (omp or name not in NEEDS_OPENMP)
    ]


def _jobs() -> int:
    """How many compilers run at once: ``ORTCORE_CPU_BUILD_JOBS``, else the
    cores this process may run on."""
    if os.environ.get("ORTCORE_CPU_BUILD_JOBS"):
        return max(1, int(os.environ["ORTCORE_CPU_BUILD_JOBS"]))
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _say(message: str) -> None:
    print(f"ortcore-cpu: {message}", file=sys.stderr, flush=True)


class ParallelBuildExt(build_ext):
    """``build_ext`` that compiles on ``_jobs()`` threads, the largest
    generated source first (so that no long compile starts last), and reports
    each extension as it is done."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:  # build_ext --parallel/-j N still wins
            self.parallel = _jobs()

    def _up_to_date(self, ext: Extension) -> bool:
        """setuptools' own test: the built module is newer than its sources."""
        built = self.get_ext_fullpath(ext.name)
        if self.force or not os.path.exists(built):
            return False
        return all(
            os.path.getmtime(s) <= os.path.getmtime(built) for s in [*ext.sources, *ext.depends]
        )

    def build_extensions(self) -> None:
        def size(ext: Extension) -> int:
            return sum(os.path.getsize(s) for s in ext.sources if os.path.exists(s))

        self.extensions.sort(key=size, reverse=True)
        self._todo = {e.name for e in self.extensions if not self._up_to_date(e)}
        self._done = 0
        self._lock = threading.Lock()
        self._start = time.monotonic()
        n, todo = len(self.extensions), len(self._todo)
        if todo:
            current = f" ({n - todo} up to date in {self.build_lib})" if todo < n else ""
            _say(f"compiling {todo} of {n} extensions{current}, {self.parallel} at a time")
        else:
            _say(f"all {n} extensions are up to date in {self.build_lib}")
        super().build_extensions()
        if todo:
            _say(f"compiled in {time.monotonic() - self._start:.0f} s")

    def build_extension(self, ext: Extension) -> None:
        begin = time.monotonic()
        super().build_extension(ext)
        if ext.name in self._todo:
            with self._lock:
                self._done += 1
                _say(
                    f"[{self._done:2d}/{len(self._todo)}] {ext.name} in "
                    f"{time.monotonic() - begin:.1f} s ({time.monotonic() - self._start:.0f} s elapsed)"
                )


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


def _current(c_file: Path, newest: float) -> bool:
    """Whether ``c_file`` was generated by this Cython after ``newest``."""
    try:
        with c_file.open() as f:
            header = f.readline().strip()
        return (
            header == f"/* Generated by Cython {Cython.__version__} */"
            and c_file.stat().st_mtime >= newest
        )
    except OSError:
        return False


def _translate(extensions: list[Extension]) -> list[Extension]:
    """Cython-translate the extensions whose generated C is not current (all of
    them, forced, as Cython's own check would); the others build from their
    existing ``.c``. Current: newer than the extension's ``.pyx``, this file,
    and every ``.pxi``, ``.pxd`` and ``.h`` of the package (shared includes)."""
    shared = [Path(__file__), *Path("ortcore_cpu/_ext").iterdir()]
    newest = max(p.stat().st_mtime for p in shared if p.suffix in {".py", ".pxi", ".pxd", ".h"})
    stale: list[Extension] = []
    reused: list[Extension] = []
    for ext in extensions:
        source = Path(ext.sources[0])
        c_file = source.with_suffix(".c")
        if _current(c_file, max(newest, source.stat().st_mtime)):
            ext.sources = [str(c_file)]
            reused.append(ext)
        else:
            stale.append(ext)
    if reused:
        _say(f"{len(reused)} of {len(extensions)} generated C files are current")
    if not stale:
        return reused
    return reused + cythonize(
        stale,
        nthreads=_jobs(),
        force=True,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    )


setup(
    cmdclass={"build_py": BuildPyWithoutC, "build_ext": ParallelBuildExt},
    ext_modules=_translate(_extensions()),
)
