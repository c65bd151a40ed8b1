"""The build of the activation kernel (``_ext/activation.pyx``), and of the
convolution and pooling loops and the GEMM (``conv.pyx``, ``pool.pyx``,
``gemm.pyx``), this CPU runs fastest.

setup.py builds the kernel's source three times: portable (the x86-64
baseline, SSE2), with AVX2 and FMA, and with AVX-512, the last two where
the compiler accepts their flags. :func:`activation_module` returns the
newest build that is installed and that the CPU runs
(``activation.cpu_level()``); a build the CPU cannot run is never imported,
since its module code uses those instructions too.
``ORTCORE_CPU_ISA=baseline`` (or ``avx2``) caps the choice, to compare
builds or to rule one out.

The 8-bit GEMM (``qgemm``) has builds of its own: AVX2, AVX-VNNI (at the
``avx2`` level: 256-bit registers) and AVX-512 VNNI, each chosen only
where the CPU has its instructions (``qgemm.cpu_features()``, read by the
portable build).
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

from .._ext import activation as baseline

__all__ = [
    "BUILDS",
    "FAMILIES",
    "SUFFIXES",
    "activation_module",
    "best_build",
    "runnable_builds",
]

log = logging.getLogger("ortcore_cpu")

_LEVELS = {"baseline": 0, "avx2": 1, "avx512": 2}

FAMILIES = ("activation", "conv", "pool", "gemm", "qgemm")
"""The kernel modules of ``ortcore_cpu._ext`` built for each CPU level."""

SUFFIXES: tuple[tuple[str, int], ...] = (("", 0), ("_avx2", 1), ("_avx512", 2))
"""Each build's module-name suffix, with the ``cpu_level`` it needs; oldest first."""

_FAMILY_SUFFIXES: dict[str, tuple[tuple[str, int, str], ...]] = {
    "qgemm": (("", 0, ""), ("_avx2", 1, "avx2"), ("_avxvnni", 1, "avxvnni"),
              ("_avx512", 2, "avx512vnni")),
}  # fmt: skip
"""Families whose builds need more than a ``cpu_level``: suffix, level, and
the feature of ``qgemm.cpu_features()`` the build needs; oldest first."""


def _suffixes(family: str) -> tuple[tuple[str, int, str], ...]:
    return _FAMILY_SUFFIXES.get(family, tuple((s, lv, "") for s, lv in SUFFIXES))


BUILDS: tuple[tuple[str, int], ...] = tuple(
    (family + suffix, level) for family in FAMILIES for suffix, level, _ in _suffixes(family)
)
"""Every build of every family (a module of ``ortcore_cpu._ext``: ``conv``,
``conv_avx2``, ``conv_avx512``, ...), with the ``cpu_level`` it needs."""


def runnable_builds(family: str = "activation") -> list[ModuleType]:
    """The builds of ``family`` (one of :data:`FAMILIES`) installed here that
    this CPU runs, oldest first.

    Raises:
        ValueError: ``family`` is not one of :data:`FAMILIES`.
    """
    if family not in FAMILIES:
        raise ValueError(f"no per-CPU builds of {family!r}; there are {', '.join(FAMILIES)}")
    level = baseline.cpu_level()
    cap = os.environ.get("ORTCORE_CPU_ISA", "").strip().lower()
    if cap:
        if cap not in _LEVELS:
            log.warning("ORTCORE_CPU_ISA=%r is none of %s; ignored", cap, ", ".join(_LEVELS))
        else:
            level = min(level, _LEVELS[cap])
    found = []
    features: set[str] | None = None
    for suffix, need, feature in _suffixes(family):
        if need > level:
            continue
        if feature:
            if features is None:
                from .._ext import qgemm

                features = qgemm.cpu_features()
            if feature not in features:
                continue
        name = family + suffix
        try:
            found.append(importlib.import_module(f"{baseline.__package__}.{name}"))
        except ImportError:  # not built: another compiler or architecture
            continue
    return found


def activation_module() -> ModuleType:
    """The newest build of the activation kernel that is installed and that
    this CPU runs."""
    return best_build("activation")


def best_build(family: str) -> ModuleType:
    """The newest build of ``family`` (one of :data:`FAMILIES`) that is
    installed and that this CPU runs."""
    return runnable_builds(family)[-1]
