"""``ortcore ep new``: the generated package installs, is found, and its tests pass."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import ep_sdk
from ortcore.cli import main
from ortcore.scaffold import new_provider, provider_names
from ortcore.sdk_compat import sdk_requirement

ROOT = Path(__file__).resolve().parent.parent


def test_names() -> None:
    assert provider_names("my-ep") == {
        "name": "my-ep",
        "class": "MyEpExecutionProvider",
        "dist": "ortcore-my-ep",
        "package": "ortcore_my_ep",
    }
    assert provider_names("Acme")["class"] == "AcmeExecutionProvider"
    with pytest.raises(ValueError, match="letters"):
        provider_names("1bad name")


def test_cli_writes_package_and_refuses_non_empty_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ep", "new", "acme", "--dir", str(tmp_path / "acme")]) == 0
    assert "AcmeExecutionProvider" in capsys.readouterr().out
    files = sorted(str(p.relative_to(tmp_path / "acme")) for p in (tmp_path / "acme").rglob("*.*"))
    assert files == [
        "README.md",
        "ortcore_acme/__init__.py",
        "ortcore_acme/plugin.py",
        "ortcore_acme/provider.py",
        "pyproject.toml",
        "tests/test_provider.py",
    ]
    text = (tmp_path / "acme" / "pyproject.toml").read_text()
    assert '[project.entry-points."ortcore.providers"]' in text
    assert 'acme = "ortcore_acme.plugin"' in text
    assert 'requires = ["setuptools>=77"]' in text
    assert "pypi.org" not in (tmp_path / "acme" / "README.md").read_text()
    assert main(["ep", "new", "acme", "--dir", str(tmp_path / "acme")]) == 2
    assert "not empty" in capsys.readouterr().err


def test_generated_package_depends_on_the_sdk_alone(tmp_path: Path) -> None:
    """One dependency of ours: the SDK, from the installed minor to the next major;
    the tutorial shows the same range."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((new_provider("acme", tmp_path) / "pyproject.toml").read_text())
    ours = [r for r in map(Requirement, project["project"]["dependencies"]) if "ortcore" in r.name]
    assert ours == [Requirement(sdk_requirement())]
    (sdk,) = ours
    major = int(ep_sdk.__version__.split(".")[0])
    assert sdk.specifier.contains(ep_sdk.__version__)
    assert not sdk.specifier.contains(f"{major + 1}.0") and not sdk.specifier.contains("0.9")
    assert (
        f'dependencies = ["{sdk_requirement()}", "numpy"]'
        in (ROOT / "docs/tutorial.md").read_text()
    )


def _venv_seeing_this_one(where: Path) -> Path:
    """A fresh venv (no pip of its own) that also sees this interpreter's packages.

    A ``.pth`` line runs ``site.addsitedir`` on this environment's
    site-packages, so their own ``.pth`` files (editable installs) work too;
    the new venv's own site-packages comes first.
    """
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    inner = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = [p for p in site.getsitepackages() if os.path.isdir(p)]
    lines = [f"import site; site.addsitedir({p!r})" for p in outer]
    (Path(inner) / "_outer_env.pth").write_text("\n".join(lines) + "\n")
    return python


def test_generated_provider_installs_is_listed_and_passes_its_tests(tmp_path: Path) -> None:
    root = new_provider("scaffoldtest", tmp_path / "pkg")
    python = _venv_seeing_this_one(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "ORTCORE_DISABLE_PLUGIN_AUTOLOAD"}
    env.pop("PYTHONPATH", None)

    def run(*args: str | Path, cwd: Path = tmp_path) -> str:
        result = subprocess.run(
            [str(python), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    # With build isolation pip fetches the setuptools the generated pyproject.toml
    # declares, so the build does not depend on what this environment happens to have.
    run("-m", "pip", "install", "-q", "--no-deps", root)
    listed = run("-m", "ortcore", "providers")
    assert "ScaffoldtestExecutionProvider" in listed
    assert "available" in listed.split("ScaffoldtestExecutionProvider")[1].splitlines()[0]
    # Not visible to this interpreter: the install went into the new venv only.
    assert "ortcore_scaffoldtest" not in sys.modules
    out = run("-m", "pytest", "-q", "-p", "no:cacheprovider", root / "tests", cwd=root)
    assert "4 passed" in out
