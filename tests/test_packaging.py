"""Packaging: one version per distribution, typed packages, providers that
depend on the SDK alone, and a test run that imports what pip installed.

Under tox (``TOX_ENV_NAME`` set) ortcore-ep-sdk, ortcore and ortcore-cpu are
installed from wheels built from this checkout, and the tests must import those, not the
source tree beside them: ``test_tests_import_the_installed_packages`` checks it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.resources
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import ep_sdk
import ortcore

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ortcore", "ep_sdk", "conformance")
PROVIDERS = ("cpu", "cuda", "openvino", "tensorrt")
OURS = {"ortcore", "ortcore-ep-sdk", *(f"ortcore-{p}" for p in PROVIDERS)}

under_tox = pytest.mark.skipif(
    "TOX_ENV_NAME" not in os.environ,
    reason="checks the wheel tox installs; outside tox the packages may be editable",
)


def _cpu_installed() -> bool:
    try:
        importlib.metadata.distribution("ortcore-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_version_is_written_once() -> None:
    """pyproject.toml reads the version from ``ortcore.__version__``."""
    assert importlib.metadata.version("ortcore") == ortcore.__version__
    assert ortcore.get_version_string() == ortcore.__version__


def _dependencies(folder: Path) -> list[Requirement]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_sdk_version_is_written_once() -> None:
    """ep_sdk/pyproject.toml reads the version from ``ep_sdk._version``."""
    try:
        assert importlib.metadata.version("ortcore-ep-sdk") == ep_sdk.__version__
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("ortcore-ep-sdk is not installed (ep_sdk runs from the source tree)")


@pytest.mark.parametrize("folder", ["", *(f"plugins/{p}" for p in PROVIDERS)])
def test_host_and_providers_depend_on_an_sdk_range(folder: str) -> None:
    """ortcore and every provider name the SDK releases they work with, this one
    among them, with an upper bound (the next major); a provider depends on
    nothing else of ours."""
    reqs = _dependencies(ROOT / folder)
    (sdk,) = [r for r in reqs if r.name == "ortcore-ep-sdk"]
    assert any(s.operator == "<" for s in sdk.specifier), f"{sdk}: no upper bound"
    assert sdk.specifier.contains(ep_sdk.__version__, prereleases=True), str(sdk)
    if folder:
        assert [r.name for r in reqs if r.name in OURS] == ["ortcore-ep-sdk"], folder


@pytest.mark.parametrize("folder", ["ep_sdk", *(f"plugins/{p}" for p in (*PROVIDERS, "ray"))])
def test_every_package_folder_is_distributed(folder: str) -> None:
    """A distribution that lists its packages by hand lists every folder of
    them that holds an ``__init__.py``: one left out is missing from the wheel,
    and a session fails with ModuleNotFoundError only once it needs it."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = config.get("packages")
    if not isinstance(listed, list):
        pytest.skip(f"{folder} finds its packages")
    base = ROOT / folder if folder != "ep_sdk" else ROOT
    found = {
        ".".join(p.parent.relative_to(base).parts)
        for top in listed
        if "." not in top
        for p in (base / top).rglob("__init__.py")
        if "tests" not in p.parts and "build" not in p.parts
    }
    assert found <= set(listed), sorted(found - set(listed))


def test_scale_out_is_an_application_the_ray_extra_pulls() -> None:
    """ortcore-ray (plugins/ray) depends on ortcore, not on the SDK alone as a
    provider does, and ortcore's ``ray`` extra is that distribution."""
    tomllib = pytest.importorskip("tomllib")
    reqs = _dependencies(ROOT / "plugins/ray")
    assert "ortcore" in {r.name for r in reqs}
    assert ortcore.__version__ in next(r for r in reqs if r.name == "ortcore").specifier
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [Requirement(r).name for r in extras["ray"]] == ["ortcore-ray"]
    # it declares what it imports (Serve's starlette: its `serve` extra, ray[serve])
    imported = _third_party_imports(ROOT / "plugins/ray/ortcore_ray", skip=set())
    assert imported - {"starlette"} <= {r.name for r in reqs}, imported
    assert "ortcore-ep-sdk" in {r.name for r in reqs}


def _third_party_imports(folder: Path, skip: set[str]) -> set[str]:
    names: set[str] = set()
    for path in folder.glob("*.py"):
        if path.stem in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"__future__", "ep_sdk"}


def test_sdk_depends_on_what_it_imports() -> None:
    """ortcore-ep-sdk's dependencies are the libraries ep_sdk imports, and only
    ep_sdk.testing (its ``testing`` extra) imports the host."""
    declared = {r.name for r in _dependencies(ROOT / "ep_sdk")}
    to_dist = {"onnx_ir": "onnx-ir"}
    imported = _third_party_imports(ROOT / "ep_sdk", skip={"testing"})
    assert {to_dist.get(m, m) for m in imported} == declared
    testing = _third_party_imports(ROOT / "ep_sdk", skip=set()) - imported
    assert testing <= {"ortcore", "onnxruntime"}, testing  # onnxruntime: an optional oracle


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_are_typed(package: str) -> None:
    """A ``py.typed`` marker: mypy checks provider code against ortcore's hints."""
    assert (importlib.resources.files(package) / "py.typed").is_file()


@under_tox
def test_tests_import_the_installed_packages() -> None:
    """This process and a ``python -c`` started in the checkout import site-packages."""
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    names = [*PACKAGES, "ortcore_cpu"] if _cpu_installed() else list(PACKAGES)
    for name in names:
        where = Path(str(importlib.import_module(name).__file__)).resolve()
        assert any(where.is_relative_to(s) for s in site), f"{name} imported from {where}"
    if sys.version_info < (3, 11):
        pytest.skip("PYTHONSAFEPATH needs Python 3.11")
    code = "; ".join(f"import {n}; print({n}.__file__)" for n in names)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for name, line in zip(names, out.splitlines(), strict=True):
        where = Path(line).resolve()
        assert any(where.is_relative_to(s) for s in site), f"{name} imported from {where}"


@under_tox
def test_installed_metadata() -> None:
    """SPDX licence and licence file in every distribution, py.typed in the wheels
    (ep_sdk's in its own), and no generated C sources in the CPU provider's wheel."""
    dists = ["ortcore-ep-sdk", "ortcore", *(["ortcore-cpu"] if _cpu_installed() else [])]
    for dist in dists:
        meta = importlib.metadata.metadata(dist)
        assert meta["License-Expression"] == "Apache-2.0", dist
        assert "LICENSE" in (meta.get_all("License-File") or []), dist
    files = {f.as_posix() for f in importlib.metadata.files("ortcore") or []}
    assert {"ortcore/py.typed", "conformance/py.typed"} <= files
    assert not [f for f in files if f.startswith("ep_sdk/")]
    sdk_files = {f.as_posix() for f in importlib.metadata.files("ortcore-ep-sdk") or []}
    assert "ep_sdk/py.typed" in sdk_files and "ep_sdk/_version.py" in sdk_files
    assert not [f for f in sdk_files if f.endswith(("pyproject.toml", ".md"))]
    if _cpu_installed():
        cpu_files = [f.as_posix() for f in importlib.metadata.files("ortcore-cpu") or []]
        assert not [f for f in cpu_files if f.endswith(".c")]
        assert any(f.endswith(".so") or f.endswith(".pyd") for f in cpu_files)
