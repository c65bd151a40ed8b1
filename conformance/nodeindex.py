"""The names of onnx's node tests, without building them: a cached index.

onnx makes its node tests by importing ~200 modules whose classes compute
every expected output as they are defined (a few seconds of reference pooling
alone), and offers no way to learn a test's name without doing so. The index
records, once per installed onnx, each test's name, the module that makes it
and its tolerance; listing then costs a file read, and a case is built by
importing only its own module, when it is first run.

The index lives in :func:`conformance.light.cache_dir` under a key of the onnx
version, its location and the node test modules' names, sizes and times, so
an upgraded or edited onnx gets a fresh one. A cache that cannot be read or
written is rebuilt in memory: never an error.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pkgutil
import sys
import warnings
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["NodeEntry", "build_index", "load_index", "node_test"]

NodeEntry = tuple[str, str, float, float]
"""(test name, module that makes it, rtol, atol)."""

PACKAGE = "onnx.backend.test.case.node"


def _package_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "case" / "node"


def _key() -> str:
    """A fingerprint of the installed node tests (version, place, files)."""
    import onnx

    h = hashlib.sha256(f"{onnx.__version__}|{onnx.__file__}|{onnx.ONNX_ML}".encode())
    for path in sorted(_package_dir().rglob("*.py")):
        st = path.stat()
        h.update(f"{path.name}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _modules() -> list[str]:
    """The node test modules, in the order onnx's ``import_recursive`` imports them."""
    import onnx

    out: list[str] = []

    def walk(path: list[str], prefix: str) -> None:
        for _, name, ispkg in pkgutil.iter_modules(path):
            full = f"{prefix}.{name}"
            if not onnx.ONNX_ML and full.startswith(f"{PACKAGE}.ai_onnx_ml"):
                continue
            out.append(full)
            if ispkg:
                walk([str(Path(path[0]) / name)], full)

    walk([str(_package_dir())], PACKAGE)
    return out


def build_index() -> list[NodeEntry]:
    """Import every node test module, recording which tests each one makes.

    The order is ``collect_testcases``' order; tests without a model or data
    are left out, as the suite leaves them out. Where some modules were
    imported before (so what they made cannot be told apart), every test is
    collected and its module left empty: it is then built by collecting all.
    """
    node = importlib.import_module(PACKAGE)
    made: list[Any] = node._NodeTestCases
    modules = _modules()
    fresh = not any(m in sys.modules for m in modules)
    entries: list[NodeEntry] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not fresh:
            made = node.collect_testcases(None)
            modules = []
        for module in modules:
            before = len(made)
            importlib.import_module(module)
            entries += [
                (c.name, module, float(c.rtol), float(c.atol)) for c in made[before:] if _ok(c)
            ]
    if not fresh:
        entries = [(c.name, "", float(c.rtol), float(c.atol)) for c in made if _ok(c)]
    return entries


def _ok(c: Any) -> bool:
    return c.model is not None and c.data_sets is not None


def _cache_file() -> Path:
    from .light import cache_dir

    return cache_dir() / f"node-index-{_key()}.json"


@cache
def load_index() -> tuple[NodeEntry, ...]:
    """The index, read from the cache or built (and then cached)."""
    try:
        file: Path | None = _cache_file()
    except (OSError, RuntimeError):  # no home folder, unreadable onnx files
        file = None
    if file is not None:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            return tuple((str(n), str(m), float(r), float(a)) for n, m, r, a in data)
        except (OSError, ValueError, TypeError):
            pass
    entries = tuple(build_index())
    if file is not None and all(module for _, module, _, _ in entries):
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            tmp = file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(entries), encoding="utf-8")
            os.replace(tmp, file)  # atomic: workers may write it at the same time
        except OSError:
            pass
    return entries


def node_test(name: str, module: str) -> Any:
    """onnx's ``TestCase`` named ``name``, made by importing ``module`` alone
    (every node test module when ``module`` is empty).

    Raises:
        KeyError: no node test of that name (the index is stale).
    """
    node = importlib.import_module(PACKAGE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if module:
            importlib.import_module(module)
        else:
            node.collect_testcases(None)
    for c in reversed(node._NodeTestCases):
        if c.name == name:
            return c
    raise KeyError(name)
