"""Run a program written for onnxruntime on ortcore, unchanged.

::

    python -m ortcore.as_onnxruntime program.py [args...]
    python -m ortcore.as_onnxruntime -m package.module [args...]

installs the ``onnxruntime`` alias (:func:`ortcore.install_as_onnxruntime`)
and runs the program as ``python program.py`` would: ``sys.argv`` is the
program's, ``__name__`` is ``"__main__"``.
"""

from __future__ import annotations

import os
import runpy
import sys

from .compat import install_as_onnxruntime

__all__ = ["main"]

_USAGE = "usage: python -m ortcore.as_onnxruntime (program.py | -m module) [args...]"


def main(argv: list[str] | None = None) -> int:
    """Install the alias and run the program named by ``argv``; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    install_as_onnxruntime()
    if args[0] == "-m":
        if len(args) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
