"""``ortcore ep new NAME --bridge``: a compile-path provider on the bridge base
that installs, is found, passes ruff and its own tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ortcore.cli import main
from ortcore.scaffold import new_provider
from ortcore.sdk_compat import sdk_requirement

from .test_scaffold import ROOT, _venv_seeing_this_one


def test_cli_writes_a_bridge_provider(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ep", "new", "acme", "--bridge", "--dir", str(tmp_path / "acme")]) == 0
    assert "AcmeExecutionProvider" in capsys.readouterr().out
    provider = (tmp_path / "acme" / "ortcore_acme" / "provider.py").read_text()
    assert "class AcmeExecutionProvider(ep_sdk.BridgeExecutionProvider):" in provider
    for method in ("supports_node", "build", "run", "serialize", "deserialize"):
        assert f"    def {method}(" in provider
    readme = (tmp_path / "acme" / "README.md").read_text()
    assert "compile-path provider on `ep_sdk.BridgeExecutionProvider`" in readme
    kernel = new_provider("acme", tmp_path / "kernel")
    assert "BridgeExecutionProvider" not in (kernel / "ortcore_acme" / "provider.py").read_text()


def test_the_bridge_package_depends_on_the_sdk_alone(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")
    root = new_provider("acme", tmp_path, bridge=True)
    project = tomllib.loads((root / "pyproject.toml").read_text())
    requirements = list(map(Requirement, project["project"]["dependencies"]))
    ours = [r for r in requirements if "ortcore" in r.name]
    assert ours == [Requirement(sdk_requirement())]
    imports = {
        line.split()[1].split(".")[0]
        for path in (root / "ortcore_acme").glob("*.py")
        for line in path.read_text().splitlines()
        if line.startswith(("import ", "from ")) and not line.startswith("from .")
    }
    # what the package imports is declared (or the standard library)
    assert imports - {"__future__", "collections", "dataclasses", "typing"} <= {
        "ep_sdk",
        "numpy",
        "onnx",
    }
    assert {r.name for r in requirements} >= {"numpy", "onnx"}


@pytest.mark.parametrize("bridge", [False, True])
def test_generated_packages_pass_ruff(tmp_path: Path, bridge: bool) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not os.path.exists(ruff):
        pytest.skip("ruff is not installed")
    root = new_provider("acme", tmp_path / "pkg", bridge=bridge)
    config = str(ROOT / "pyproject.toml")
    for args in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [ruff, *args, "--config", config, str(root)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_generated_bridge_installs_and_passes_its_tests(tmp_path: Path) -> None:
    root = new_provider("bridgetest", tmp_path / "pkg", bridge=True)
    python = _venv_seeing_this_one(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "ORTCORE_DISABLE_PLUGIN_AUTOLOAD"}
    # this checkout's ortcore and SDK, which wrote the package (the installed one may be older)
    env["PYTHONPATH"] = str(ROOT)

    def run(*args: str | Path, cwd: Path = tmp_path) -> str:
        result = subprocess.run(
            [str(python), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    run("-m", "pip", "install", "-q", "--no-deps", root)
    assert "BridgetestExecutionProvider" in run("-m", "ortcore", "providers")
    out = run("-m", "pytest", "-q", "-p", "no:cacheprovider", root / "tests", cwd=root)
    assert "4 passed" in out
