"""Packaging: one version per distribution, typed packages, and a test run that
imports what pip installed.

Under tox (``TOX_ENV_NAME`` set) ortcore and ortcore-cpu are installed from
wheels built from this checkout, and the tests must import those, not the
source tree beside them: ``test_tests_import_the_installed_packages`` checks it.
"""

from __future__ import annotations

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

import ortcore

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ortcore", "ep_sdk", "conformance")

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


def test_cpu_provider_bounds_its_core() -> None:
    """ortcore-cpu names the ortcore releases it works with, this one among them."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "plugins" / "cpu" / "pyproject.toml").read_text())
    (req,) = [
        r for r in map(Requirement, project["project"]["dependencies"]) if r.name == "ortcore"
    ]
    assert any(s.operator == "<" for s in req.specifier), f"{req}: no upper bound"
    assert req.specifier.contains(ortcore.__version__, prereleases=True), str(req)


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
    """SPDX licence and licence file in both distributions, py.typed in the wheel,
    and no generated C sources in the CPU provider's wheel."""
    dists = ["ortcore", "ortcore-cpu"] if _cpu_installed() else ["ortcore"]
    for dist in dists:
        meta = importlib.metadata.metadata(dist)
        assert meta["License-Expression"] == "Apache-2.0", dist
        assert "LICENSE" in (meta.get_all("License-File") or []), dist
    files = {f.as_posix() for f in importlib.metadata.files("ortcore") or []}
    assert {f"{p}/py.typed" for p in PACKAGES} <= files
    if _cpu_installed():
        cpu_files = [f.as_posix() for f in importlib.metadata.files("ortcore-cpu") or []]
        assert not [f for f in cpu_files if f.endswith(".c")]
        assert any(f.endswith(".so") or f.endswith(".pyd") for f in cpu_files)
