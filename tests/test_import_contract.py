"""The import contract of pyproject.toml's ``[tool.importlinter]`` catches what it
forbids: run on a small tree of stand-in packages (the SDK, the host, the
conformance suite and the four providers), it passes as it is and fails,
naming the import, once a violation is planted.

``tox -e lint`` runs the same contract on the real tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is not installed")
pytest.importorskip("tomllib", reason="import-linter reads pyproject.toml with tomllib")

ROOT = Path(__file__).resolve().parent.parent
PROVIDERS = ("ortcore_cpu", "ortcore_cuda", "ortcore_openvino", "ortcore_tensorrt")

# The allowed shape: providers import ep_sdk and third-party libraries; the SDK
# imports the host only in ep_sdk.testing (the declared exception).
TREE = {
    "ep_sdk/__init__.py": "import numpy\nfrom . import provider\n",
    "ep_sdk/provider.py": "import onnx\n",
    "ep_sdk/testing.py": (
        "from . import provider\n\n\ndef session():\n    import ortcore\n"
        "    from ortcore.plugins import PluginManager\n"
    ),
    "ortcore/__init__.py": "import ep_sdk\nfrom . import plugins\n",
    "ortcore/plugins.py": "from ep_sdk import provider\n",
    "ortcore/cache.py": "",
    "conformance/__init__.py": "import ortcore\nimport ep_sdk.testing\n",
    **{f"{p}/__init__.py": "import ep_sdk\nimport numpy\n" for p in PROVIDERS},
    **{f"{p}/provider.py": "from ep_sdk import provider\n" for p in PROVIDERS},
}


def _write_tree(root: Path, planted: dict[str, str]) -> None:
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + planted.get(rel, ""))
    # The repository's own configuration: [tool.importlinter] of pyproject.toml.
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        f"sys.exit(lint_imports(config_filename={str(root / 'pyproject.toml')!r}, no_cache=True))"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True
    )


def test_the_allowed_imports_keep_the_contract(tmp_path: Path) -> None:
    _write_tree(tmp_path, {})
    result = _lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("planted", "named"),
    [
        (
            {"ortcore_openvino/provider.py": "import ortcore\n"},
            "ortcore_openvino.provider -> ortcore",
        ),
        (
            {"ortcore_tensorrt/provider.py": "from ortcore.cache import x\n"},
            "ortcore_tensorrt.provider -> ortcore.cache",
        ),
        (
            {"ortcore_cpu/provider.py": "import conformance\n"},
            "ortcore_cpu.provider -> conformance",
        ),
        (
            {"ortcore_tensorrt/provider.py": "from ortcore_cuda import provider\n"},
            "ortcore_tensorrt.provider -> ortcore_cuda.provider",
        ),
        ({"ep_sdk/provider.py": "import ortcore\n"}, "ep_sdk.provider -> ortcore"),
        # The test kit is the SDK's one exception, and no provider may reach the
        # host through it.
        (
            {"ortcore_cuda/provider.py": "import ep_sdk.testing\n"},
            "ortcore_cuda.provider -> ep_sdk.testing",
        ),
    ],
)
def test_a_planted_violation_fails_naming_it(
    tmp_path: Path, planted: dict[str, str], named: str
) -> None:
    _write_tree(tmp_path, planted)
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout and named in result.stdout, result.stdout
