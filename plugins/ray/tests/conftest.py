"""Fixtures of the scale-out tests: the CPU provider check, and ortcore-ray found.

The tests import the installed ``ortcore_ray`` (under tox: the built wheel).
In a checkout's environment without it, the source tree is used, and the
``batch`` entry point of group ``ortcore.cli`` is declared by a stand-in
``.dist-info`` folder, as an install would, so that ``ortcore batch`` finds
it; both reach the subprocesses and Ray workers the tests start through
``PYTHONPATH``.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import os
import shutil
import sys
import tempfile
from pathlib import Path

import ortcore
import pytest

HERE = Path(__file__).resolve().parent


def _on_path(folder: str) -> None:
    """``folder`` first on ``sys.path`` and on the ``PYTHONPATH`` children inherit."""
    sys.path.insert(0, folder)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = folder + (os.pathsep + old if old else "")


try:
    import ortcore_ray
except ImportError:
    _on_path(str(HERE.parent))
    import ortcore_ray

if not importlib.metadata.entry_points(group="ortcore.cli", name="batch"):
    _stand_in = tempfile.mkdtemp(prefix="ortcore-ray-metadata-")
    atexit.register(shutil.rmtree, _stand_in, ignore_errors=True)
    _info = Path(_stand_in) / f"ortcore_ray-{ortcore_ray.__version__}.dist-info"
    _info.mkdir()
    (_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: ortcore-ray\nVersion: {ortcore_ray.__version__}\n"
    )
    (_info / "entry_points.txt").write_text("[ortcore.cli]\nbatch = ortcore_ray.cli\n")
    _on_path(_stand_in)

sys.path.insert(0, str(HERE))  # ray_models


@pytest.fixture
def cpu() -> str:
    """Name of the CPU provider; skips if ortcore-cpu is not installed."""
    if "CPUExecutionProvider" not in ortcore.get_available_providers():
        pytest.skip("ortcore-cpu is not installed")
    return "CPUExecutionProvider"
