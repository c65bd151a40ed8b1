"""Runs compatibility snippets in a fresh interpreter and pickles what they give.

``python _runner.py ortcore|onnxruntime SNIPPETS.pkl RESULTS.pkl WORKDIR``:
with ``ortcore``, :func:`ortcore.install_as_onnxruntime` is called first, so
``import onnxruntime`` in a snippet gives ortcore; with ``onnxruntime`` the
real package answers. Each snippet runs in its own namespace and folder
(``WORK``) and leaves its answer in ``result``; an exception is recorded as
the built-in and onnxruntime exception classes that catch it.
"""

from __future__ import annotations

import builtins
import os
import pickle
import sys
import warnings
from typing import Any

BUILTIN_CATCHERS = (
    "ValueError",
    "RuntimeError",
    "TypeError",
    "FileNotFoundError",
    "OSError",
    "KeyError",
    "LookupError",
    "AttributeError",
    "NotImplementedError",
    "MemoryError",
)
ORT_CATCHERS = (
    "Fail",
    "InvalidArgument",
    "NoSuchFile",
    "NoModel",
    "EngineError",
    "RuntimeException",
    "InvalidProtobuf",
    "ModelLoaded",
    "NotImplemented",
    "InvalidGraph",
    "EPFail",
)


def catchers(exc: BaseException) -> list[str]:
    """The ``except`` classes (built-in, and onnxruntime's by ``capi.`` name) that catch ``exc``."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    out = [n for n in BUILTIN_CATCHERS if isinstance(exc, getattr(builtins, n))]
    out += [f"capi.{n}" for n in ORT_CATCHERS if isinstance(exc, getattr(C, n))]
    return out


def main(argv: list[str]) -> None:
    which, snippets_path, results_path, work = argv
    if which == "ortcore":
        import ortcore

        ortcore.install_as_onnxruntime()
    with open(snippets_path, "rb") as f:
        snippets: dict[str, str] = pickle.load(f)
    results: dict[str, tuple[str, Any, list[str]]] = {}
    for name, code in snippets.items():
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        os.chdir(folder)
        ns: dict[str, Any] = {"__name__": "__snippet__", "WORK": folder}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                exec(compile(code, f"<snippet {name}>", "exec"), ns)
                outcome: tuple[str, Any] = ("ok", ns.get("result"))
            except Exception as exc:
                outcome = ("raised", (type(exc).__name__, str(exc), catchers(exc)))
        messages = [str(w.message) for w in caught]
        try:
            pickle.dumps(outcome)
        except Exception as exc:  # a result that cannot travel is a test bug
            outcome = ("unpicklable", repr(exc))
        results[name] = (outcome[0], outcome[1], messages)
    with open(results_path, "wb") as f:
        pickle.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1:])
