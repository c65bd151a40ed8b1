"""The import contract of pyproject.toml's ``[tool.importlinter]`` catches what it
forbids: run on a small tree of stand-in packages (the SDK, the host, the
conformance suite, the four providers and the scale-out application), it passes as it is and fails,
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

# Each module of the CUDA plugin's layers (pyproject's `cuda-layers`) and one
# it may import, the layer below.
CUDA_LAYERS = (
    ("plugin", "provider"),
    ("ops", "registry"),
    *((f, "ops_common") for f in ("ops_attention", "ops_cast", "ops_elementwise", "ops_image")),
    *((f, "ops_common") for f in ("ops_flex_attention", "ops_linear_attention")),
    *((f, "ops_window") for f in ("ops_losses", "ops_misc", "ops_nn", "ops_norm", "ops_quant")),
    *((f, "ops_common") for f in ("ops_recurrent", "ops_reduce", "ops_shape")),
    ("registry", "ops_shape"),
    ("ops_common", "device"),
    ("ops_window", "tensor"),
    ("device", "tensor"),
    ("tensor", "runtime"),
    ("runtime", "backend"),
    ("allocator", "kernels"),
    ("backend", "emulator"),
    ("pycuda_backend", "kernels"),
)

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
    # The CUDA plugin's layers, each importing the one below it.
    **{f"ortcore_cuda/{m}.py": f"from . import {below}\n" for m, below in CUDA_LAYERS},
    "ortcore_cuda/kernels/__init__.py": "",
    "ortcore_cuda/emulator/__init__.py": "from ..kernels import spec\n",
    "ortcore_cuda/kernels/spec.py": "",
    # The scale-out application sits on the host; the host's deprecated aliases
    # of its modules import them by name (importlib), not statically.
    "ortcore_ray/__init__.py": "import ortcore\nfrom ortcore import plugins\n",
    "ortcore_ray/run.py": "import numpy\nfrom ortcore.cache import x\n",
    "ortcore/ray.py": "import importlib\n\nimportlib.import_module('ortcore_ray.run')\n",
}


def _write_tree(root: Path, planted: dict[str, str]) -> None:
    for rel in {**TREE, **planted}:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TREE.get(rel, "") + planted.get(rel, ""))
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
    assert "BROKEN" not in result.stdout and "7 kept, 0 broken" in result.stdout


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
        # Nothing below the scale-out application imports it; it imports no provider.
        ({"ortcore/cache.py": "import ortcore_ray\n"}, "ortcore.cache -> ortcore_ray"),
        ({"ep_sdk/provider.py": "from ortcore_ray import run\n"}, "ep_sdk.provider -> ortcore_ray"),
        (
            {"ortcore_openvino/provider.py": "import ortcore_ray.run\n"},
            "ortcore_openvino.provider -> ortcore_ray.run",
        ),
        ({"ortcore_ray/run.py": "import ortcore_cpu\n"}, "ortcore_ray.run -> ortcore_cpu"),
        ({"ortcore_ray/run.py": "import conformance\n"}, "ortcore_ray.run -> conformance"),
        # The CUDA plugin's layers: a kernel reaching up for the provider, one
        # op family importing another, the runtime importing a tensor.
        (
            {"ortcore_cuda/ops_norm.py": "from .provider import CUDAExecutionProvider\n"},
            "ortcore_cuda.ops_norm -> ortcore_cuda.provider",
        ),
        (
            {"ortcore_cuda/ops_quant.py": "from .ops_nn import COLS_BYTES\n"},
            "ortcore_cuda.ops_quant -> ortcore_cuda.ops_nn",
        ),
        (
            {"ortcore_cuda/runtime.py": "from .tensor import CudaTensor\n"},
            "ortcore_cuda.runtime -> ortcore_cuda.tensor",
        ),
        # A circle, one side of it a lazy import inside a function.
        (
            {
                "ortcore/cache.py": "def f():\n    from .plugins import x\n",
                "ortcore/plugins.py": "from . import cache\n",
            },
            "No cycles are allowed in ortcore.",
        ),
        (
            {
                "ortcore_cpu/kernels.py": "from .provider import x\n",
                "ortcore_cpu/provider.py": "from . import kernels\n",
            },
            "No cycles are allowed in ortcore_cpu.",
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
