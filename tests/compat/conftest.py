"""Compatibility tests: snippets written for onnxruntime, run through the
``onnxruntime`` name on ortcore and on the real onnxruntime, compared.

Each test module defines ``SNIPPETS`` (name -> code). A snippet imports
``onnxruntime`` as a program would and leaves its answer in ``result``
(plain data and numpy arrays). The module's snippets run once in a
subprocess where :func:`ortcore.install_as_onnxruntime` was called (so the
real onnxruntime is never imported there) and once in a subprocess with the
real onnxruntime, side by side; tests then compare the two answers with
:func:`same`. Without onnxruntime installed, the comparisons are skipped and
the tests' own assertions on ortcore's answers still run.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ortcore

RUNNER = Path(__file__).with_name("_runner.py")

PRELUDE = textwrap.dedent(
    """
    import os
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def save(model, name="m.onnx", **kw):
        path = os.path.join(WORK, name)
        onnx.save(model, path, **kw)
        return path

    def graph_model(nodes, inputs, outputs, initializers=(), ir_version=8, opset=17, **kw):
        graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers), **kw)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = ir_version
        return model

    def fvi(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, shape)

    def relu_model(shape=(2, 3)):
        return graph_model(
            [helper.make_node("Relu", ["X"], ["Y"])], [fvi("X", shape)], [fvi("Y", shape)]
        )
    """
)

Outcome = tuple[str, Any, list[str]]

_SNIPPET_BUGS = frozenset({"SyntaxError", "IndentationError", "NameError"})


def _run(which: str, snippets: Mapping[str, str], folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "snippets.pkl", "wb") as f:
        pickle.dump({k: PRELUDE + textwrap.dedent(v) for k, v in snippets.items()}, f)
    env = dict(os.environ, XDG_CACHE_HOME=str(folder / "cache"), PYTHONWARNINGS="ignore")
    env.pop("ORT_LOAD_CONFIG_FROM_MODEL", None)
    return subprocess.Popen(
        [
            sys.executable,
            str(RUNNER),
            which,
            str(folder / "snippets.pkl"),
            str(folder / "results.pkl"),
            str(folder / "work"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _collect(proc: subprocess.Popen[bytes], folder: Path) -> dict[str, Outcome]:
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise AssertionError(f"snippet runner failed ({proc.returncode}):\n{out.decode()}")
    with open(folder / "results.pkl", "rb") as f:
        results: dict[str, Outcome] = pickle.load(f)
    return results


class Results:
    """The answers of one module's snippets: ``ours[name]`` and ``theirs[name]``."""

    def __init__(self, ours: dict[str, Outcome], theirs: dict[str, Outcome] | None) -> None:
        self.ours = ours
        self._theirs = theirs

    def theirs(self, name: str) -> Outcome:
        """onnxruntime's answer (skips the test when onnxruntime is not installed)."""
        if self._theirs is None:
            pytest.skip("onnxruntime is not installed: nothing to compare with")
        return self._theirs[name]

    def ok(self, name: str) -> Any:
        """ortcore's ``result`` of snippet ``name``; fails if it raised."""
        status, value, _ = self.ours[name]
        assert status == "ok", f"snippet {name!r} raised on ortcore: {value}"
        return value

    def raised(self, name: str) -> tuple[str, str, list[str]]:
        """``(class name, message, catchers)`` of what snippet ``name`` raised on ortcore."""
        status, value, _ = self.ours[name]
        assert status == "raised", f"snippet {name!r} did not raise on ortcore: {value!r}"
        assert value[0] not in _SNIPPET_BUGS, f"snippet {name!r} is broken: {value}"
        return value  # type: ignore[no-any-return]

    def warnings(self, name: str) -> list[str]:
        """The warnings snippet ``name`` gave on ortcore."""
        return self.ours[name][2]


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Run the module's ``SNIPPETS`` on ortcore and on onnxruntime (in parallel)."""
    if "CPUExecutionProvider" not in ortcore.get_available_providers():
        pytest.skip("ortcore-cpu is not installed")
    snippets: dict[str, str] = request.module.SNIPPETS
    base = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    ours = _run("ortcore", snippets, base / "ortcore")
    real = importlib.util.find_spec("onnxruntime") is not None
    theirs = _run("onnxruntime", snippets, base / "onnxruntime") if real else None
    return Results(
        _collect(ours, base / "ortcore"),
        _collect(theirs, base / "onnxruntime") if theirs is not None else None,
    )


def same(ours: Outcome, theirs: Outcome, *, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Assert that ortcore answered as onnxruntime did: equal results (arrays
    within tolerance), or an exception every ``except`` class of onnxruntime's
    catches too (ortcore's may also be caught by more)."""
    (s1, v1, _), (s2, v2, _) = ours, theirs
    for status, value in ((s1, v1), (s2, v2)):
        assert status != "raised" or value[0] not in _SNIPPET_BUGS, f"broken snippet: {value}"
    if s2 == "raised":
        assert s1 == "raised", f"onnxruntime raised {v2}, ortcore answered {v1!r}"
        missing = set(v2[2]) - set(v1[2])
        assert not missing, (
            f"onnxruntime's {v2[0]} ({v2[1]!r}) is caught by {missing}, ortcore's {v1[0]} "
            f"({v1[1]!r}) is not"
        )
        return
    assert s1 == "ok", f"ortcore raised {v1}, onnxruntime answered {v2!r}"
    _equal(v1, v2, rtol, atol, "result")


def _equal(a: Any, b: Any, rtol: float, atol: float, where: str) -> None:
    if isinstance(b, np.ndarray) or isinstance(a, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{where}: shape {a.shape} != {b.shape}"
        if b.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} != {b.dtype}"
    elif isinstance(b, Mapping):
        assert isinstance(a, Mapping) and set(a) == set(b), f"{where}: keys {a!r} != {b!r}"
        for k in b:
            _equal(a[k], b[k], rtol, atol, f"{where}[{k!r}]")
    elif isinstance(b, (list, tuple)):
        assert isinstance(a, (list, tuple)) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _equal(x, y, rtol, atol, f"{where}[{i}]")
    elif isinstance(b, float) and isinstance(a, float):
        assert a == pytest.approx(b, rel=rtol, abs=atol), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
