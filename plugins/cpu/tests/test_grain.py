"""The grain of work worth a second OpenMP thread is measured once, within bounds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ortcore_cpu._ext import movement
from ortcore_cpu.kernels import _common as K


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_grain", 0)
    monkeypatch.setattr(K, "_fixed", -1)  # the environment read again
    monkeypatch.delenv(K.GRAIN_ENV, raising=False)


def test_the_measured_grain_is_bounded_and_kept() -> None:
    g = K.grain()
    assert K._BASE_GRAIN <= g <= K._MAX_GRAIN
    assert K.grain() == g and K._grain == g  # measured once
    assert K.threads_for(g - 1, 8) == 1
    assert K.threads_for(10**12, 1) == 1


def test_a_grain_from_the_environment_decides_the_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(K.GRAIN_ENV, "1000")
    monkeypatch.setattr(K, "share", lambda: 8)
    assert K.grain() == 1000
    assert K.threads_for(999, 8) == 1
    assert K.threads_for(2500, 8) == 2
    assert K.threads_for(10**9, 4) == 4
    assert K.threads_for_memory_bound(8 * 2500, 8) == 2


def test_an_unusable_environment_value_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(K.GRAIN_ENV, "lots")
    assert K._BASE_GRAIN <= K.grain() <= K._MAX_GRAIN


@pytest.mark.parametrize("n", [0, 65])
def test_parallel_region_refuses_a_bad_thread_count(n: int) -> None:
    with pytest.raises(ValueError, match="nthreads"):
        movement.parallel_region(n)


def test_the_threads_never_pass_the_runs_share_or_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(K.GRAIN_ENV, "1000")
    monkeypatch.setattr(K, "share", lambda: 3)
    assert K.threads_for(10**9, 8) == 3  # the share
    assert K.threads_for(10**9, 2) == 2  # the cap
    assert K.threads_for(5500, 8) == 3  # 5 grains, 3 cores free
    assert K.threads_for(2999, 8) == 2


def test_small_work_does_not_measure_the_grain() -> None:
    """Work below the smallest grain a measurement can give runs on one thread
    without measuring (the measurement starts an OpenMP thread: time a small
    model's first run would pay); larger work measures it then."""
    code = (
        "import os, sys, numpy as np, onnx.helper as h, ortcore\n"
        "from ortcore_cpu.kernels import _common as K\n"
        "g = h.make_graph([h.make_node('Add', ['x', 'x'], ['y'])], 'g',\n"
        "    [h.make_tensor_value_info('x', 1, ['N'])], [h.make_tensor_value_info('y', 1, ['N'])])\n"
        "m = h.make_model(g, opset_imports=[h.make_opsetid('', 17)])\n"
        "so = ortcore.SessionOptions(); so.intra_op_num_threads = 2\n"
        "s = ortcore.InferenceSession(m.SerializeToString(), so, providers=['CPUExecutionProvider'])\n"
        "s.run(None, {'x': np.ones(6, np.float32)})\n"
        "print(K._grain)\n"
        "print(K.threads_for(10 * K._MAX_GRAIN, 2) >= 1, K._grain >= K._BASE_GRAIN)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != K.GRAIN_ENV}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True", "True"]
