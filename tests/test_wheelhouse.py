"""The wheelhouse of ``tox -e wheels`` (``.ci/wheelhouse.py``): a wheel and an
sdist of every distribution, and an install of ortcore-ep-sdk, ortcore and
ortcore-cpu from it alone (no index, no network, no compiler) that runs a model.

The folder is named by ``ORTCORE_WHEELHOUSE``, which only the ``wheels`` tox
environment sets; elsewhere these tests skip.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

WHEELHOUSE = Path(os.environ.get("ORTCORE_WHEELHOUSE", "/nonexistent"))
DISTRIBUTIONS = (
    "ortcore-ep-sdk",
    "ortcore",
    "ortcore-cpu",
    "ortcore-cuda",
    "ortcore-openvino",
    "ortcore-tensorrt",
    "ortcore-ray",
)

pytestmark = pytest.mark.skipif(
    not WHEELHOUSE.is_dir(),
    reason="no wheelhouse: ORTCORE_WHEELHOUSE names none (tox -e wheels builds one)",
)


def _files(name: str) -> tuple[list[Path], list[Path]]:
    """The wheels and the sdists of distribution ``name`` in the wheelhouse."""
    stem = name.replace("-", "_")
    pattern = re.compile(rf"{stem}-[0-9][^-]*(-.+\.whl|\.tar\.gz)$")
    found = [p for p in WHEELHOUSE.iterdir() if pattern.match(p.name)]
    return [p for p in found if p.suffix == ".whl"], [p for p in found if p.suffix == ".gz"]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_a_wheel_and_an_sdist_of_each_distribution(name: str) -> None:
    """One wheel and one sdist, of the same version, each holding the package."""
    wheels, sdists = _files(name)
    assert len(wheels) == 1 and len(sdists) == 1, (name, wheels, sdists)
    version = wheels[0].name.split("-")[1]
    assert sdists[0].name == f"{name.replace('-', '_')}-{version}.tar.gz"
    with zipfile.ZipFile(wheels[0]) as z:
        assert any(n.endswith("/py.typed") for n in z.namelist()), name
    with tarfile.open(sdists[0]) as t:
        names = t.getnames()
    assert any(n.endswith("/pyproject.toml") for n in names), name
    assert any(n.endswith("/LICENSE") for n in names), name


def test_compiled_wheels_and_complete_sdists() -> None:
    """The CPU provider's wheel holds its built modules and no generated C; its
    sdist holds every Cython source and header setup.py compiles (and no C)."""
    (wheel,), (sdist,) = _files("ortcore-cpu")
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        built = [n for n in z.namelist() if n.endswith((".so", ".pyd"))]
        assert len(built) >= 10 and not [n for n in z.namelist() if n.endswith(".c")]
    with tarfile.open(sdist) as t:
        names = {Path(n).name for n in t.getnames()}
    ext = Path(__file__).resolve().parent.parent / "plugins/cpu/ortcore_cpu/_ext"
    if ext.is_dir():  # the checkout beside the wheelhouse
        sources = {p.name for p in ext.iterdir() if p.suffix in {".pyx", ".pxi", ".h"}}
        assert sources and sources <= names, sorted(sources - names)
    assert not [n for n in names if n.endswith(".c")]


# Run inside the fresh venv: a Conv -> Relu -> MaxPool -> Flatten -> Gemm model,
# built with onnx (a dependency installed from the wheelhouse), against numpy.
MODEL_SCRIPT = r"""
import importlib, importlib.util, pathlib, sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import ortcore as ort

rng = np.random.default_rng(0)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
g = rng.standard_normal((5, 64)).astype(np.float32)
nodes = [
    helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p"], ["f"]),
    helper.make_node("Gemm", ["f", "g"], ["y"], transB=1),
]
graph = helper.make_graph(
    nodes, "wheelhouse",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(g, "g")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
(y,) = sess.run(None, {"x": x})

xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
c = np.einsum("nchwij,kcij->nkhw", win, w)
p = np.maximum(c, 0).reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
np.testing.assert_allclose(y, p.reshape(2, -1) @ g.T, rtol=1e-4, atol=1e-4)
counts = sess.get_partition().counts()  # nodes after fusions: fewer than five
assert set(counts) == {"CPUExecutionProvider"}, counts

# The compiled parts came with the wheels: the core's step loop and every
# baseline kernel module of the CPU provider.
assert importlib.util.find_spec("ortcore._steps").origin.endswith((".so", ".pyd"))
import ortcore_cpu._ext as ext
names = {p.name.split(".")[0] for p in pathlib.Path(ext.__file__).parent.iterdir()
         if p.suffix in {".so", ".pyd"}}
mods = sorted(n for n in names if not n.endswith(("_avx2", "_avx512")))
for m in mods:
    importlib.import_module("ortcore_cpu._ext." + m)
print("ok", len(mods), "kernel modules", sys.prefix)
"""


def test_offline_install_without_a_compiler_runs_a_model(tmp_path: Path) -> None:
    """pip installs ortcore-ep-sdk, ortcore and ortcore-cpu by name from the
    wheelhouse alone into a fresh venv: no index (nor this machine's pip
    configuration), a proxy that refuses every connection, and no compiler
    (``CC`` is ``/bin/false``, and ``PATH`` holds only the venv), so that a
    source build pip might fall back to fails instead of passing unseen."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PATH=str(bindir),
        CC="/bin/false",
        CXX="/bin/false",
        LDSHARED="/bin/false",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
    )
    env.pop("VIRTUAL_ENV", None)
    python = str(bindir / "python")
    before = subprocess.run(
        [python, "-c", "import ortcore"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert "No module named 'ortcore'" in before.stderr, before.stderr
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-index", "--find-links", str(WHEELHOUSE),
         "--find-links", str(WHEELHOUSE / "deps"), "ortcore-ep-sdk", "ortcore", "ortcore-cpu"],
        env=env, cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    assert "Building wheel" not in install.stdout, install.stdout
    run = subprocess.run(
        [python, "-c", MODEL_SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("ok ") and str(venv) in run.stdout, run.stdout
