"""The tests import the installed ``ortcore_cuda`` (under tox: the built
wheel); in a checkout's environment without it, the source tree is used."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import ortcore_cuda  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
