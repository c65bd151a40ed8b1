"""The ids of the ``explore`` cases, cached on disk: a fast ``--list``.

``ortcore conformance --list`` needs case ids only, but the exploration makes
its ids by building its cases (schema mutations checked for validity, the
``dynamic`` variants checked against the oracle): about 20 seconds at full
depth. The ids depend only on the installed onnx and numpy, the depth and the
suite's own code, so they are kept per depth in the suite's cache folder
(:func:`conformance.light.cache_dir`), keyed by those: the node index's key
(:mod:`conformance.nodeindex`: onnx's version, place and node test files),
numpy's version and every source file of the suite (name, size, time). A
file that cannot be read or written: the ids are made again; never an error.
Running cases never reads this cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["CACHED_KINDS", "kind_ids"]

CACHED_KINDS = frozenset({"explore"})
"""The kinds whose ids are cached (the others list in well under a second)."""


def _file(kind: str, depth: str) -> Path:
    import numpy as np

    from . import nodeindex
    from .light import cache_dir

    h = hashlib.sha256(f"{kind}|{depth}|{np.__version__}|{nodeindex._key()}".encode())
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}".encode())
    return cache_dir() / f"ids-{kind}-{depth}-{h.hexdigest()[:16]}.json"


def kind_ids(kind: str) -> list[str]:
    """The ids of ``kind``'s cases at the current depth, from the cache when
    it has them (see the module docstring)."""
    from .cases import depth, load_kind

    if kind not in CACHED_KINDS:
        return [c.id for c in load_kind(kind)]
    try:
        file: Path | None = _file(kind, depth())
    except (OSError, RuntimeError):
        file = None
    if file is not None:
        try:
            ids = json.loads(file.read_text(encoding="utf-8"))
            if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
                return ids
        except (OSError, ValueError):
            pass
    ids = [c.id for c in load_kind(kind)]
    if file is not None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            tmp = file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(ids), encoding="utf-8")
            os.replace(tmp, file)
        except OSError:
            pass
    return ids
