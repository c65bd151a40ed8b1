"""Build the Cython extension modules of ortcore-cpu.

Every extension is listed once in ``EXTENSIONS``; they are built in one loop
with the same flags. OpenMP (``-fopenmp``) is used when the compiler accepts
it, so ``prange`` loops run on several threads; without it they run serially.
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
    "ortcore_cpu._ext.pool": "ortcore_cpu/_ext/pool.pyx",
    "ortcore_cpu._ext.elementwise": "ortcore_cpu/_ext/elementwise.pyx",
    "ortcore_cpu._ext.rowwise": "ortcore_cpu/_ext/rowwise.pyx",
    "ortcore_cpu._ext.movement": "ortcore_cpu/_ext/movement.pyx",
    "ortcore_cpu._ext.resize": "ortcore_cpu/_ext/resize.pyx",
    "ortcore_cpu._ext.winograd": "ortcore_cpu/_ext/winograd.pyx",
}


def _openmp_flags() -> list[str]:
    """Return ``["-fopenmp"]`` if the C compiler builds and links with it."""
    if os.environ.get("ORTCORE_CPU_NO_OPENMP") or sys.platform == "win32":
        return []
    cc = os.environ.get("CC", "cc")
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() < 0;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "t.c")
        with open(c_file, "w") as f:
            f.write(src)
        cmd = [cc, "-fopenmp", c_file, "-o", os.path.join(tmp, "t")]
        try:
            ok = subprocess.run(cmd, capture_output=True, check=False).returncode == 0
        except OSError:
            ok = False
    return ["-fopenmp"] if ok else []


def _extensions() -> list[Extension]:
    omp = _openmp_flags()
    # -fno-trapping-math lets the compiler vectorize float selects (no result changes).
    compile_args = ["-O3", "-fno-trapping-math", *omp]
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    return [
        Extension(
            name,
            [source],
            include_dirs=[np.get_include()],
            define_macros=macros,
            extra_compile_args=compile_args,
            extra_link_args=omp,
        )
        for name, source in EXTENSIONS.items()
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
    )
)
