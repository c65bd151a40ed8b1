"""glibc's malloc keeps freed memory once a CPU provider exists
(``ortcore_cpu.memory``): a block freed and taken again takes no page faults,
and the user's own settings and ``ORTCORE_CPU_KEEP_MEMORY=0`` leave malloc alone.
Each check runs in a fresh interpreter: the settings are process-wide."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from ortcore_cpu import memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Takes a 1.5 MiB block (less than a huge page) twice, touching every page,
# freeing it in between, after creating a CPU provider, and prints the page
# faults of the second time.
_PROGRAM = """
import resource
import numpy as np
from ortcore_cpu.provider import CPUExecutionProvider
from ortcore_cpu import memory
CPUExecutionProvider()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(384 * 1024, np.float32)
del a
before = faults()
a = np.ones(384 * 1024, np.float32)
print(faults() - before, memory.keep_freed_memory())
"""


def _second_take(**env: str) -> tuple[int, bool]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUN"))}
    clean.pop("ORTCORE_CPU_KEEP_MEMORY", None)
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM], env={**clean, **env},
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()  # fmt: skip
    return int(out[0]), out[1] == "True"


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_a_freed_block_is_taken_again_without_page_faults() -> None:
    faults, kept = _second_take()
    assert kept
    assert faults < 50  # 384 pages: none of them taken from the system again


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
@pytest.mark.parametrize(
    "env", [{"ORTCORE_CPU_KEEP_MEMORY": "0"}, {"MALLOC_TRIM_THRESHOLD_": "131072"}]
)
def test_malloc_is_left_alone_when_asked(env: dict[str, str]) -> None:
    faults, kept = _second_take(**env)
    assert not kept
    assert faults > 200  # glibc's default: the block went back and comes again


def test_the_users_settings_win() -> None:
    assert memory._wanted({})
    assert not memory._wanted({"ORTCORE_CPU_KEEP_MEMORY": "off"})
    assert not memory._wanted({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert not memory._wanted({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert memory._wanted({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"})
