"""``ortcore run``'s check says when the stored outputs cannot discriminate
(uniform), and checks against evidence that can: ortcore's CPU provider with
optimizations off (intermediate values too) and, for small models, onnx.reference."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from onnx import helper, numpy_helper

from ep_sdk import ExecutionProvider, KernelRegistry
from ortcore import cli, plugins, session
from ortcore.run_check import compare, is_uniform

from .conftest import fvi, make_model, manager_with
from .providers import MiniProvider

pytest.importorskip("ortcore_cpu")


class WrongNeg(ExecutionProvider):
    """Neg that forgets the sign: wrong, and invisible in a uniform output."""

    name = "WrongNegExecutionProvider"
    aliases = ("wrongneg",)
    default_options: ClassVar[Mapping[str, str]] = {}

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()
        reg.kernel("Neg", since=6)(lambda info: lambda x: (x.copy(),))
        return reg


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """y = Neg(x) * 0 + 0.5: 0.5 everywhere, whatever Neg computes; stored beside it."""
    from ortcore.plugins import default_manager

    cpu = next(e.cls for e in default_manager().entries() if e.name == "CPUExecutionProvider")
    manager = manager_with(WrongNeg, MiniProvider, cpu)
    monkeypatch.setattr(plugins, "default_manager", lambda: manager)  # what the CLI asks
    monkeypatch.setattr(session, "default_manager", lambda: manager)
    nodes = [
        helper.make_node("Neg", ["x"], ["t"], name="neg"),
        helper.make_node("Mul", ["t", "zero"], ["u"], name="mul"),
        helper.make_node("Add", ["u", "half"], ["y"], name="add"),
    ]
    inits = [
        numpy_helper.from_array(np.zeros((2, 3), np.float32), "zero"),
        numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "half"),
    ]
    path = tmp_path / "flat.onnx"
    path.write_bytes(make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])], inits))
    stored = numpy_helper.from_array(np.full((2, 3), 0.5, np.float32))
    (tmp_path / "flat_output_0.pb").write_bytes(stored.SerializeToString())
    return path


def _run(model: Path, providers: str, *more: str) -> int:
    return cli.main(["run", str(model), "--providers", providers, "--repeat", "0", *more])


def test_a_uniform_stored_output_is_called_out_and_a_wrong_answer_caught(
    model: Path, capsys: Any
) -> None:
    assert _run(model, "wrongneg,mini") == 1
    out = capsys.readouterr().out
    assert "check: output 0 OK against the stored output" in out  # fooled, and it says so
    assert (
        "check: the stored output 0 is uniform (all 0.5): this check cannot tell a right "
        "answer from many wrong ones" in out
    )
    assert "check: MISMATCH against ortcore's CPU provider with optimizations off" in out
    assert "t (max abs error" in out  # the wrong intermediate value is named
    assert (
        "check: output 0 OK against onnx.reference (max abs error 0) (its output is uniform" in out
    )


def test_a_right_answer_passes_every_check(model: Path, capsys: Any) -> None:
    assert _run(model, "mini") == 0
    out = capsys.readouterr().out
    assert (
        "OK against ortcore's CPU provider with optimizations off on 3 values (1 output(s), 2 "
        in out
    )
    assert "1 of them not uniform" in out  # t = -x varies: it can discriminate


def test_the_cpu_reference_is_not_compared_with_itself(model: Path, capsys: Any) -> None:
    assert _run(model, "cpu", "--no-optimize") == 0
    out = capsys.readouterr().out
    assert "would compare it with itself (skipped)" in out
    assert "OK against onnx.reference" in out


def test_a_big_model_skips_onnx_reference_and_says_why(
    model: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortcore import run_check

    monkeypatch.setattr(run_check, "REFERENCE_NODES", 2)
    assert _run(model, "mini") == 0
    assert "check: onnx.reference skipped: 3 nodes" in capsys.readouterr().out


def test_uniform_and_compare() -> None:
    assert is_uniform(np.full((3, 2), 0.001)) and not is_uniform(np.arange(4))
    assert not is_uniform(np.array([1.0]))  # one element: no claim either way
    assert compare(np.ones(3), np.ones(3) + 1e-7, 1e-3, 1e-5).ok
    assert not compare(np.ones(3), np.ones(4), 1e-3, 1e-5).ok
